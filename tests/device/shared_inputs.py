"""Inputs for validating the shared MLPerf Tiny models on a device, as each model takes them.

Each function writes an .npz (`kiln validate --inputs` and `kiln profile --data` read it) in a
folder the caller owns, from the real samples in ../shared/models/inputs; where fewer real
samples exist than asked for, seeded random ones fill the rest and the case's note says so.
The float models are quantized by Kiln itself (`kiln profile`, then `kiln quantize`).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.conftest import SHARED_MODELS

INPUTS = SHARED_MODELS / "inputs"
TFLITE = SHARED_MODELS / "tflite"
ONNX = SHARED_MODELS / "onnx"
RESNET_HELD_OUT_STEP = 7  # every 7th natural image validates (all six photos); the rest calibrate


@dataclass(frozen=True)
class Case:
    """One model to validate: its file, the .npz of inputs, and what those inputs are."""

    name: str
    model: Path
    data: Path
    note: str


def input_qparams(model: Path) -> tuple[float, int]:
    """The model input's scale and zero point, as Kiln's front end reads them."""
    from compiler.frontends.load import load_model

    quant = load_model(model).inputs[0].type.quant
    return float(quant.scale[0]), int(quant.zero_point[0])


def quantize(values: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """TFLite's float -> int8: round half away from zero, add the zero point, saturate."""
    scaled = np.asarray(values, np.float32) / np.float32(scale)
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    return np.clip(rounded + zero_point, -128, 127).astype(np.int8)


def _save(folder: Path, name: str, samples: np.ndarray) -> Path:
    path = folder / f"{name}.npz"
    np.savez(path, x=samples)
    return path


def held_out_rows(count: int) -> np.ndarray:
    """Which of the 72 natural 32x32 images validate ResNet-8: spread over the six photos."""
    return np.arange(count) * RESNET_HELD_OUT_STEP


def resnet_int8(folder: Path, count: int) -> Case:
    """ResNet-8 int8 takes the natural images' 0..255 values minus 128 (scale 1, zp -128)."""
    images = np.load(INPUTS / "natural_rgb_uint8_Nx32x32x3.npy")[held_out_rows(count)]
    x = (images.astype(np.int16) - 128).astype(np.int8)
    return Case("ResNet-8 int8", TFLITE / "pretrainedResnet_quant.tflite",
                _save(folder, "resnet_int8", x), f"{count} natural images minus 128")


def vww_int8(folder: Path, count: int) -> Case:
    """VWW int8: the natural 96x96 images as x/127.5-1, quantized with the input's qparams.

    The input's scale 1/255 and zero point -128 cover [0, 1], so the negative half of the
    float model's [-1, 1] saturates at -128; on these photos that still separates people
    better than x/255 does.
    """
    model = TFLITE / "vww_96_int8.tflite"
    images = np.load(INPUTS / "natural_rgb_uint8_Nx96x96x3.npy")[:count].astype(np.float32)
    x = quantize(images / np.float32(127.5) - 1, *input_qparams(model))
    return Case("VWW int8", model, _save(folder, "vww_int8", x),
                f"{count} natural 96x96 images, x/127.5-1 quantized with the input's qparams")


def ad_int8(folder: Path, count: int) -> Case:
    """AD int8: the first windows of ad_input_float32.npy quantized with the input's qparams."""
    model = TFLITE / "ad01_int8.tflite"
    windows = np.load(INPUTS / "ad_input_float32.npy").reshape(-1, 640)[:count]
    x = quantize(windows, *input_qparams(model))
    return Case("AD int8", model, _save(folder, "ad_int8", x),
                f"{count} of the 40 real windows, quantized with the input's qparams")


def kws_int8(folder: Path, count: int, seed: int = 0) -> Case:
    """KWS int8: the one real MFCC input, then seeded random int8 inputs."""
    real = np.load(INPUTS / "kws_input_int8_1x49x10x1.npy").reshape(1, 49, 10, 1)
    fill = np.random.default_rng(seed).integers(-128, 128, (count - 1, 49, 10, 1))
    x = np.concatenate([real, fill.astype(np.int8)])[:count]
    return Case("KWS int8", TFLITE / "kws_ref_model.tflite", _save(folder, "kws_int8", x),
                f"1 real MFCC input + {count - 1} seeded random (seed {seed})")


def kws_float_real() -> np.ndarray:
    """The one real MFCC input, dequantized with the int8 model's input scale and zero point."""
    scale, zero_point = input_qparams(TFLITE / "kws_ref_model.tflite")
    q = np.load(INPUTS / "kws_input_int8_1x49x10x1.npy").reshape(1, 49, 10, 1)
    return ((q.astype(np.float32) - zero_point) * np.float32(scale)).astype(np.float32)


def kws_float_shifted(shifts: range) -> np.ndarray:
    """The real MFCC input shifted in time by each of `shifts` frames (edge frames repeated).

    One utterance is all the real data there is; a keyword said a little earlier or later is
    the most honest variation of it (no new audio is invented).
    """
    real = kws_float_real()[0]
    out = []
    for shift in shifts:
        index = np.clip(np.arange(49) - shift, 0, 48)
        out.append(real[index])
    return np.stack(out).astype(np.float32)


def _kiln(*args: str) -> None:
    from app import cli

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main([*args, "--quiet"])
    if code != 0:
        raise AssertionError(f"kiln {' '.join(args)} exited {code}: {err.getvalue()[-500:]}")


def kiln_quantized(model: Path, calibration: Path, folder: Path, name: str) -> Path:
    """`model` quantized by Kiln: `kiln profile --data`, then `kiln quantize --profile`."""
    profile, out = folder / f"{name}.profile.json", folder / f"{name}.qdq.onnx"
    _kiln("profile", str(model), "--data", str(calibration), "-o", str(profile))
    _kiln("quantize", str(model), "--profile", str(profile), "-o", str(out))
    return out


def resnet_float_quantized(folder: Path, count: int) -> Case:
    """Float ResNet-8 quantized on the natural images it does not validate on (raw 0..255)."""
    images = np.load(INPUTS / "natural_rgb_uint8_Nx32x32x3.npy").astype(np.float32)
    rows = held_out_rows(count)
    calibration = _save(folder, "resnet_calibration", np.delete(images, rows, axis=0))
    model = kiln_quantized(ONNX / "pretrainedResnet.onnx", calibration, folder, "resnet")
    return Case("ResNet-8 float, Kiln int8", model,
                _save(folder, "resnet_float", images[rows]),
                f"calibrated on {72 - count} natural images (raw 0..255), validated on "
                f"{count} others")


def kws_float_quantized(folder: Path, count: int, seed: int = 0) -> Case:
    """Float KWS quantized on the real MFCC input and its time shifts; validated on those too.

    Inputs: the real one, its shifts by -4..4 frames but 0, then seeded random MFCC-like
    inputs (normal, with the real input's mean and spread) to make up `count`.
    """
    shifts = [s for s in range(-4, 5) if s != 0]
    calibration = _save(folder, "kws_calibration", kws_float_shifted(range(-4, 5)))
    model = kiln_quantized(ONNX / "kws_ref_model_float32.onnx", calibration, folder, "kws")
    real = kws_float_real()
    inputs = [real, kws_float_shifted(shifts)]
    fill = count - 1 - len(shifts)
    if fill > 0:
        rng = np.random.default_rng(seed)
        inputs.append(rng.normal(real.mean(), real.std(), (fill, 49, 10, 1)).astype(np.float32))
    x = np.concatenate(inputs)[:count]
    random = f" + {fill} seeded random (seed {seed})" if fill > 0 else ""
    return Case("KWS float, Kiln int8", model, _save(folder, "kws_float", x),
                f"calibrated on the real MFCC input (dequantized) and 8 time shifts of it; "
                f"validated on the real one and its shifts{random}")


INT8 = (resnet_int8, kws_int8, vww_int8, ad_int8)
QUANTIZED_BY_KILN = (resnet_float_quantized, kws_float_quantized)
