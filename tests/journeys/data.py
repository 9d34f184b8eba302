"""The journeys' models and their data: what each is calibrated on and run with.

Profiles are measured once per model and process (`profile_of`), so the schema, rule and
target cases of one model share them, as a user's calibration is shared by every export.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.ir.graph import Graph
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.profile import Profile
from compiler.quant.profiler import profile_model
from tests.conftest import SAMPLE_MODEL, shared_models
from tests.journeys.built import KEPT_FLOAT, operator_zoo, zoo_samples

# Models the project builds or ships (a fresh clone walks these) and the shared float models.
OWN = ("digits_cnn", "operator_zoo", "operator_zoo_kept_float")
SHARED = ("ad01_fp32", "kws_ref_model_float32", "pretrainedResnet", "vww_96_float", "mnist-8")
MODELS = OWN + SHARED
SCHEMAS = ("tflite", "uint8", "symmetric")
RULES = ("onnx", "tflite")
TARGETS = ("host", "cortex-m7", "cortex-m55")


def keep_float(name: str) -> tuple[str, ...]:
    """Tensors the journey keeps in float32 (a float layer between int8 layers)."""
    return (KEPT_FLOAT,) if name == "operator_zoo_kept_float" else ()


def model_path(name: str, folder: Path) -> Path:
    """Where the journey's model file is (written into `folder` for a built graph)."""
    if name == "digits_cnn":
        return SAMPLE_MODEL
    if name.startswith("operator_zoo"):
        import onnx

        path = folder / "operator_zoo.onnx"
        if not path.exists():
            onnx.save(operator_zoo(), path)
        return path
    return shared_models() / "onnx" / f"{name}.onnx"


@cache
def graph_of(name: str) -> Graph:
    """The loaded float graph (skips, or fails under CI, without the shared models)."""
    if name.startswith("operator_zoo"):
        return load_onnx(operator_zoo())
    return load_model(model_path(name, Path(".")))


def _mnist(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """The two MNIST digits shipped with the shared models, shifted and lightly noised."""
    from PIL import Image

    rng = np.random.default_rng(0)
    digits = [np.asarray(Image.open(shared_models() / "inputs" / f"digit-{d}.jpg").convert("L")
                         .resize((28, 28)), np.float32) / 255.0 for d in (2, 9)]

    def variant(i: int) -> np.ndarray:
        moved = np.roll(digits[i % 2], (int(rng.integers(-3, 4)), int(rng.integers(-3, 4))),
                        axis=(0, 1))
        return (moved + rng.normal(0, 0.05, moved.shape)).astype(np.float32)[None]

    return np.stack([variant(i) for i in range(16)]), np.stack([variant(i) for i in range(4)])


@cache
def data_of(name: str) -> tuple[CalibrationData, CalibrationData]:
    """(calibration, held-out) samples of the journey's model."""
    from tests.bench.bench_quantizer import _data

    graph = graph_of(name)
    x = graph.inputs[0]
    if name.startswith("operator_zoo"):
        calib, held = zoo_samples(32, 1), zoo_samples(6, 2)
    elif name == "mnist-8":
        calib, held = _mnist(graph)
    else:
        return _data(name, graph)
    return (CalibrationData(x.name, calib, f"{name} calibration"),
            CalibrationData(x.name, held, f"{name} held out"))


@cache
def profile_of(name: str) -> Profile:
    """The model's profile on its calibration samples (64 bins: ranges are what matter)."""
    calib, _ = data_of(name)
    return profile_model(graph_of(name), calib, f"{name}.onnx", bins=64)
