"""Tests that the shipped sample model is valid ONNX and as accurate as its record claims.

The model is not retrained here: these tests pin the committed ``digits_cnn.onnx`` and
``digits_cnn.json`` to each other and to the training script's held-out split.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import onnxruntime as ort
import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MODELS_DIR = PROJECT_ROOT / "app" / "resources" / "models"
SCRIPT_PATH = PROJECT_ROOT / "tools" / "train_digits_cnn.py"
ONNX_PATH = MODELS_DIR / "digits_cnn.onnx"
JSON_PATH = MODELS_DIR / "digits_cnn.json"
MIN_ACCURACY = 0.95


def _load_training_script() -> ModuleType:
    """Import the training script by path so the test reuses its exact held-out split."""
    spec = importlib.util.spec_from_file_location("train_digits_cnn", SCRIPT_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def record() -> dict:
    """The accuracy record written next to the model by the training script."""
    return json.loads(JSON_PATH.read_text())


@pytest.fixture(scope="module")
def measured_accuracy() -> tuple[float, int]:
    """Held-out accuracy of the shipped file under onnxruntime, batch 1 as on a device.

    Returns:
        ``(accuracy, number_of_test_samples)``.
    """
    _, x_test, _, y_test = _load_training_script().digits_split()
    session = ort.InferenceSession(str(ONNX_PATH), providers=["CPUExecutionProvider"])
    correct = 0
    for image, label in zip(x_test, y_test, strict=True):
        (logits,) = session.run(["logits"], {"image": image[None]})
        correct += int(np.argmax(logits[0]) == label)
    return correct / len(y_test), len(y_test)


def test_model_passes_onnx_checker() -> None:
    model = onnx.load(str(ONNX_PATH))
    onnx.checker.check_model(model, full_check=True)
    assert model.producer_name == "kiln-train-digits"
    assert [i.name for i in model.graph.input] == ["image"]
    assert [o.name for o in model.graph.output] == ["logits"]


def test_accuracy_meets_bar(measured_accuracy: tuple[float, int]) -> None:
    accuracy, _ = measured_accuracy
    assert accuracy >= MIN_ACCURACY


def test_accuracy_matches_record(measured_accuracy: tuple[float, int], record: dict) -> None:
    accuracy, test_size = measured_accuracy
    # The record stores the accuracy rounded to 4 places, so compare like with like.
    assert round(accuracy, 4) == pytest.approx(record["accuracy"], abs=1e-9)
    assert record["test_size"] == test_size
    assert record["input"] == "image"
    assert record["output"] == "logits"


def test_kiln_reference_interpreter_reaches_the_same_accuracy(
        measured_accuracy: tuple[float, int]) -> None:
    from compiler.frontends.onnx import load_onnx
    from compiler.interpreter import run

    graph = load_onnx(ONNX_PATH)
    _, x_test, _, y_test = _load_training_script().digits_split()
    correct = sum(int(np.argmax(run(graph, {"image": image[None]})["logits"]) == label)
                  for image, label in zip(x_test, y_test, strict=True))
    assert correct / len(y_test) == measured_accuracy[0]
