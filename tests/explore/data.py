"""Labelled data sets for exploring the MLPerf Tiny float models, written as .npz (x, y).

The models come without their data sets, so the labels are the float model's own top-1 on
held-out inputs drawn like the calibration ones (as the quantizer bench draws them): a point's
accuracy is then its top-1 agreement with float on inputs it was not calibrated on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from compiler.frontends.load import load_model
from compiler.quant.accuracy import answers
from compiler.quant.calibration_data import CalibrationData

HELD_OUT = 64


def _kws(shared: Path, rng, count: int) -> np.ndarray:
    quant = load_model(shared / "tflite" / "kws_ref_model.tflite").inputs[0].type.quant
    q = np.load(shared / "inputs" / "kws_input_int8_1x49x10x1.npy").astype(np.float32)
    real = (q - quant.zero_point[0]) * np.float32(quant.scale[0])
    return np.stack([(np.roll(real, int(rng.integers(-6, 7)), axis=1)
                      + rng.standard_normal(real.shape) * 0.3 * quant.scale[0])[0]
                     for _ in range(count)]).astype(np.float32)


def _resnet(rng, count: int) -> np.ndarray:
    coarse = rng.uniform(0, 255, (count, 4, 4, 3))
    return np.repeat(np.repeat(coarse, 8, axis=1), 8, axis=2).astype(np.float32)


def labelled_sets(name: str, shared: Path, folder: Path) -> tuple[Path, Path, Path]:
    """(model, calibration .npz, held-out .npz with the float model's top-1 as labels)."""
    model = shared / "onnx" / f"{name}.onnx"
    graph = load_model(model)
    draw = {"kws_ref_model_float32": lambda rng, n: _kws(shared, rng, n),
            "pretrainedResnet": _resnet}[name]
    calib = draw(np.random.default_rng(0), 32)
    held = draw(np.random.default_rng(1), HELD_OUT)
    labels = answers(graph, CalibrationData(graph.inputs[0].name, held, "held out")).classes
    calib_path, held_path = folder / f"{name}_calib.npz", folder / f"{name}_eval.npz"
    np.savez(calib_path, x=calib)
    np.savez(held_path, x=held, y=labels)
    return model, calib_path, held_path
