"""Benchmark: Kiln's post-training quantizer against onnxruntime's `quantize_static`.

Each model is calibrated on the same samples by both (onnxruntime: MinMax and Entropy,
per-channel int8 QDQ; Kiln: every calibration method), then run on held-out samples; the
figure is the output's SQNR against the float model (dB, higher is better). Kiln's outputs come
from its integer operators (bit-exact with the runtimes), onnxruntime's from its own session.
Then, with the method that did best, the two options beyond the peers: bias correction (+BC,
measured on the calibration samples), cross-layer equalization (+CLE, profiled again on the
equalized graph) and both. Goal: Kiln's best at or above onnxruntime's best on every model.

Data, all deterministic:
- digits CNN: scikit-learn's digits, the training split to calibrate, the held-out split.
- ad01_fp32: the 40 real windows, the first 20 to calibrate, the last 20 held out.
- vww_96_float: both images and 22 augmentations of them (flips, shifts, brightness) to
  calibrate, 8 other augmentations held out.
- kws_ref_model_float32: the real MFCC sample (dequantized from its int8 file with the int8
  model's input parameters) and augmentations (time shifts, Gaussian noise of 0.3 of a step).
- pretrainedResnet: the shipped CIFAR-10 sample is all zeros, so smooth random images
  (upsampled 4x4 noise in 0..255, seeded): 48 to calibrate, 16 held out.
Run `python tests/bench/bench_quantizer.py` from the project root.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for compiler.* when run as a script

from compiler.frontends.load import load_model  # noqa: E402
from compiler.quant.bias_correction import bias_corrections  # noqa: E402
from compiler.quant.calibrate import METHODS, choose_range  # noqa: E402
from compiler.quant.calibration_data import CalibrationData, load_calibration  # noqa: E402
from compiler.quant.evaluate import evaluate, sqnr_db  # noqa: E402
from compiler.quant.profiler import profile_model  # noqa: E402
from compiler.quant.quantize import Options, quantize  # noqa: E402

SHARED = ROOT.parent / "shared" / "models"
SAMPLE = ROOT / "app" / "resources" / "models" / "digits_cnn.onnx"
BINS = 2048  # TensorRT's: entropy sees rounding only where a level spans several bins


def _augment_image(image: np.ndarray, rng) -> np.ndarray:
    out = image[:, ::-1] if rng.random() < 0.5 else image
    out = np.roll(out, (int(rng.integers(-8, 9)), int(rng.integers(-8, 9))), axis=(0, 1))
    return np.clip(out * rng.uniform(0.8, 1.2), -1.0, 1.0).astype(np.float32)


def _data(name: str, graph, held_out: int | None = None
          ) -> tuple[CalibrationData, CalibrationData]:
    """(calibration, held-out) samples for the model `name`.

    `held_out` asks KWS and ResNet-8 for more held-out samples than this bench's (drawn after
    the same calibration samples).
    """
    x = graph.inputs[0]
    rng = np.random.default_rng(0)
    if name == "digits_cnn":
        return load_calibration("digits:train", graph), load_calibration("digits:test", graph)
    if name == "ad01_fp32":
        windows = np.load(SHARED / "inputs" / "ad_input_float32.npy").reshape(40, 640)
        calib, held = windows[:20], windows[20:]
    elif name == "vww_96_float":
        images = np.load(SHARED / "inputs" / "vww_inputs_float_Nx96x96x3.npy")
        calib = np.stack([*images] + [_augment_image(images[i % 2], rng) for i in range(22)])
        held = np.stack([_augment_image(images[i % 2], rng) for i in range(8)])
    elif name == "kws_ref_model_float32":
        quant = load_model(SHARED / "tflite" / "kws_ref_model.tflite").inputs[0].type.quant
        q = np.load(SHARED / "inputs" / "kws_input_int8_1x49x10x1.npy").astype(np.float32)
        real = (q - quant.zero_point[0]) * np.float32(quant.scale[0])

        def variant():
            shifted = np.roll(real, int(rng.integers(-6, 7)), axis=1)
            noise = rng.standard_normal(real.shape) * 0.3 * quant.scale[0]
            return (shifted + noise).astype(np.float32)[0]
        calib = np.stack([real[0]] + [variant() for _ in range(31)])
        held = np.stack([variant() for _ in range(held_out or 16)])
    else:  # pretrainedResnet: smooth random images in 0..255
        coarse = rng.uniform(0, 255, (48 + (held_out or 16), 4, 4, 3))
        images = np.repeat(np.repeat(coarse, 8, axis=1), 8, axis=2).astype(np.float32)
        calib, held = images[:48], images[48:]
    return (CalibrationData(x.name, calib.astype(np.float32), f"{name} calibration"),
            CalibrationData(x.name, held.astype(np.float32), f"{name} held out"))


def _ort(path: Path, calib: CalibrationData, held: CalibrationData, method) -> float:
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(calib.feeds(0, len(calib)))

        def get_next(self):
            return next(self.feeds, None)

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process, once per model
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
        out = Path(folder) / "q.onnx"
        quantize_static(str(path), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8, calibrate_method=method)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        quantized = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
        floating = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        want, got = [], []
        for feeds in held.feeds(0, len(held)):
            want.append(floating.run(None, feeds)[0].reshape(-1))
            got.append(quantized.run(None, feeds)[0].reshape(-1))
    return sqnr_db(np.concatenate(want), np.concatenate(got))


def _clipping(profile) -> str:
    """How far each search method moved the ranges off min-max: tensors clipped, median width."""
    parts = []
    for method in ("percentile", "entropy", "mse"):
        widths = []
        for entry in profile.tensors.values():
            if entry.max > entry.min:
                low, high = choose_range(entry, method)
                widths.append((high - low) / (entry.max - entry.min))
        clipped = [w for w in widths if w < 1 - 1e-9]
        median = float(np.median(clipped)) if clipped else 1.0
        parts.append(f"{method} {len(clipped)}/{len(widths)} at {median:.2f}")
    return "  ranges narrower than min-max (tensors, median width): " + ", ".join(parts)


def main() -> int:
    """Print the SQNR table; exit 1 when Kiln's best is below onnxruntime's best somewhere."""
    from onnxruntime.quantization import CalibrationMethod

    models = [("digits_cnn", SAMPLE)] + [
        (m, SHARED / "onnx" / f"{m}.onnx")
        for m in ("ad01_fp32", "kws_ref_model_float32", "pretrainedResnet", "vww_96_float")
        if (SHARED / "onnx" / f"{m}.onnx").exists()]
    header = "".join(f"{m:>11}" for m in METHODS)
    print(f"{'model':24}{header}{'+BC':>8}{'+CLE':>8}{'+CLE+BC':>9}{'ort minmax':>12}"
          f"{'ort entropy':>12}  output SQNR, dB")
    met = True
    for name, path in models:
        graph = load_model(path)
        calib, held = _data(name, graph)

        def sqnr(profile, options, corrections=None, graph=graph, held=held):
            qdq = quantize(graph, profile, options, corrections)
            return min(evaluate(graph, qdq, held).output_sqnr.values())

        profile = profile_model(graph, calib, path.name, bins=BINS)
        ours = {m: sqnr(profile, Options(method=m)) for m in METHODS}
        best = Options(method=max(ours, key=ours.get))
        equalized = profile_model(graph, calib, path.name, bins=BINS, equalized=True)
        extra = {"+BC": sqnr(profile, best, bias_corrections(graph, profile, calib, best)),
                 "+CLE": sqnr(equalized, best),
                 "+CLE+BC": sqnr(equalized, best,
                                 bias_corrections(graph, equalized, calib, best))}
        theirs = {label: _ort(path, calib, held, method) for label, method in
                  (("minmax", CalibrationMethod.MinMax), ("entropy", CalibrationMethod.Entropy))}
        met &= max(*ours.values(), *extra.values()) >= max(theirs.values())
        print(f"{name:24}" + "".join(f"{ours[m]:>11.2f}" for m in METHODS)
              + f"{extra['+BC']:>8.2f}{extra['+CLE']:>8.2f}{extra['+CLE+BC']:>9.2f}"
              + f"{theirs['minmax']:>12.2f}{theirs['entropy']:>12.2f}")
        print(_clipping(profile))
    print("goal (Kiln's best at or above onnxruntime's best on every model):",
          "met" if met else "MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
