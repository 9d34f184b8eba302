"""`kiln validate --port qemu` on real models: every integer output equals Kiln's interpreter.

The normal suite runs a short form (ResNet-8 int8 on Cortex-M7, the digits sample quantized by
Kiln on Cortex-M55); KILN_DEVICE_CAMPAIGN=1 runs the four MLPerf Tiny int8 models and the float
ResNet-8 and KWS quantized by Kiln on Cortex-M7, M33 and M55, ten inputs each, and prints the
table (about a quarter of an hour).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from dataclasses import dataclass

import pytest

from tests.conftest import SAMPLE_MODEL, require_tools, shared_models
from tests.device import shared_inputs

CAMPAIGN = os.environ.get("KILN_DEVICE_CAMPAIGN") == "1"
CORES = ("cortex-m7", "cortex-m33", "cortex-m55")
NUMBER = r"(-?[0-9.]+(?:e[-+]?[0-9]+)?|nan)"


@dataclass(frozen=True)
class Row:
    """What one `kiln validate` printed, read back from its report."""

    exit_code: int
    equal: int
    elements: int
    kind: str  # "integers" or "floats"
    interpreter_rmse: float
    reference: str
    xcross_rmse: float
    xcross_cos: float
    latency_ms: float
    seconds: float
    text: str


def _validate(model, target: str, inputs: str, count: int) -> Row:
    """`kiln validate MODEL --target T --port qemu --inputs DATA -n N`, its report parsed."""
    from app import cli

    require_tools("qemu-system-arm", "arm-none-eabi-gcc")
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["validate", str(model), "--target", target, "--port", "qemu",
                         "--inputs", inputs, "-n", str(count)])
    seconds = time.monotonic() - start
    text = out.getvalue()
    assert code == 0, text + err.getvalue()
    counts = re.search(r"^  (integers|floats) +([0-9,]+) of ([0-9,]+) output elements", text,
                       re.M)
    interp = re.search(rf"^  interpreter +\S+ +{NUMBER} ", text, re.M)
    xcross = re.search(rf"^  X-cross +\S+ +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} +"
                       r"\(against ([^)]+)\)", text, re.M)
    latency = re.search(r"^  latency +median ([0-9.]+) ms", text, re.M)
    assert counts and interp and xcross and latency, text
    assert len(re.findall(r"^  X-cross ", text, re.M)) == 1, text  # measured, not also "not"
    return Row(code, int(counts[2].replace(",", "")), int(counts[3].replace(",", "")),
               counts[1], float(interp[1]), xcross[5],
               float(xcross[1]), float(xcross[4]), float(latency[1]), seconds, text)


def _check(row: Row, count: int, reference: str, exact_reference: bool) -> None:
    """Every output element equal to the interpreter; the X-cross row against `reference`."""
    assert row.equal == row.elements > 0, row.text
    assert row.interpreter_rmse == 0, row.text  # float outputs (dequantized) bit-equal too
    assert f"{count} inputs" in row.text and "  passed" in row.text
    assert row.reference == reference, row.text
    if exact_reference:  # Kiln's int8 arithmetic is TFLite Micro's: bit-exact
        assert row.xcross_rmse == 0 and row.xcross_cos == pytest.approx(1.0), row.text
    else:  # Kiln's TFLite rounding against onnxruntime's float requantization
        assert row.xcross_cos > 0.99, row.text
    assert row.latency_ms > 0


def test_resnet8_int8_on_cortex_m7(tmp_path):
    shared_models()
    case = shared_inputs.resnet_int8(tmp_path, 3)
    row = _validate(case.model, "cortex-m7", str(case.data), 3)
    _check(row, 3, "tflite-micro", True)
    assert row.kind == "integers" and row.elements == 30
    assert "QEMU counted" in row.text and "RowChain" in row.text  # per-layer rows printed


def test_digits_quantized_by_kiln_on_cortex_m55(tmp_path):
    model = shared_inputs.kiln_quantized(SAMPLE_MODEL, "digits:train", tmp_path, "digits")
    row = _validate(model, "cortex-m55", "digits:test", 4)
    _check(row, 4, "onnxruntime", False)
    assert row.kind == "floats" and row.elements == 40
    assert "QLinearConv" in row.text and "4 of 450 samples of digits:test" in row.text


def test_the_shared_inputs_are_what_the_models_take(tmp_path):
    import numpy as np

    shared_models()
    vww = shared_inputs.vww_int8(tmp_path, 2)
    x = np.load(vww.data)["x"]
    assert x.dtype == np.int8 and x.shape == (2, 96, 96, 3)
    assert shared_inputs.input_qparams(vww.model) == (pytest.approx(1 / 255), -128)
    ad = np.load(shared_inputs.ad_int8(tmp_path, 10).data)["x"]
    assert ad.shape == (10, 640) and len(np.unique(ad)) > 50  # quantized, not saturated
    kws = np.load(shared_inputs.kws_int8(tmp_path, 10).data)["x"]
    real = np.load(shared_inputs.INPUTS / "kws_input_int8_1x49x10x1.npy").reshape(49, 10, 1)
    assert np.array_equal(kws[0], real) and not np.array_equal(kws[1], real)
    # The float KWS's real sample quantizes back to the int8 one: the dequantizing is right.
    qparams = shared_inputs.input_qparams(shared_inputs.TFLITE / "kws_ref_model.tflite")
    back = shared_inputs.quantize(shared_inputs.kws_float_real(), *qparams)
    assert np.array_equal(back.reshape(49, 10, 1), real)


CAMPAIGN_MODELS = [*shared_inputs.INT8, *shared_inputs.QUANTIZED_BY_KILN]


@pytest.mark.skipif(not CAMPAIGN, reason="the 6 models x 3 cores campaign runs with "
                                         "KILN_DEVICE_CAMPAIGN=1 (about 15 minutes)")
def test_campaign_six_models_three_cores(tmp_path, capsys):
    shared_models()
    cases = [make(tmp_path, 10) for make in CAMPAIGN_MODELS]
    lines, failures, start = [], [], time.monotonic()
    header = (f"{'model':<28}{'core':<12}{'equal':>13}{'X-cross rmse':>14}{'cos':>10}"
              f"{'against':>14}{'median ms':>11}{'wall s':>8}")
    for case in cases:
        for core in CORES:
            try:
                row = _validate(case.model, core, str(case.data), 10)
                _check(row, 10, "tflite-micro" if case.model.suffix == ".tflite"
                       else "onnxruntime", case.model.suffix == ".tflite")
                lines.append(f"{case.name:<28}{core:<12}{row.equal:>6}/{row.elements:<6}"
                             f"{row.xcross_rmse:>14.3g}{row.xcross_cos:>10.6f}"
                             f"{row.reference:>14}{row.latency_ms:>11.3f}{row.seconds:>8.1f}")
            except Exception as exc:  # every case runs; all failures said
                failures.append(f"{case.name} on {core}: {str(exc)[:1500]}")
                lines.append(f"{case.name:<28}{core:<12}FAILED")
    with capsys.disabled():
        print("\n" + header, *lines, sep="\n")
        print(f"total wall time {time.monotonic() - start:.0f} s; inputs:")
        for case in cases:
            print(f"  {case.name}: {case.note}")
    assert not failures, "\n".join(failures)
