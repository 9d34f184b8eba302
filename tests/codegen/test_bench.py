"""`kiln bench` times the compiled bundle and onnxruntime on the same inputs and says so plainly."""

from __future__ import annotations

import json
import sys

import pytest

from app.cli import main
from compiler.errors import KilnError
from compiler.harness.host_bench import bench_model
from tests.conftest import SAMPLE_MODEL, require_module, shared_models


def test_bench_json_has_both_medians_and_their_ratio(capsys):
    assert main(["bench", str(SAMPLE_MODEL), "--json", "--runs", "5", "--repeats", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == "digits_cnn.onnx" and doc["target"] == "host"
    assert (doc["runs"], doc["repeats"]) == (5, 3)
    assert len(doc["kiln_repeats_ms"]) == len(doc["ort_repeats_ms"]) == 3
    assert doc["kiln_ms"] > 0 and doc["ort_ms"] > 0 and doc["compile_s"] > 0
    assert doc["ratio"] == pytest.approx(doc["kiln_ms"] / doc["ort_ms"])
    assert sorted(doc["kiln_repeats_ms"])[1] == doc["kiln_ms"]  # median of the repeat medians
    assert doc["max_abs_diff"]["onnxruntime"] < 1e-3  # both engines computed the same thing
    assert set(doc["engines"]) == {"kiln", "onnxruntime"} and doc["tflite"] == ""


def test_a_tflite_twin_adds_litert(capsys):
    require_module("ai_edge_litert", "the test extra installs it on x86-64 Linux only")
    twin = shared_models() / "tflite" / "kws_ref_model_float32.tflite"
    onnx_model = shared_models() / "onnx" / "kws_ref_model_float32.onnx"
    assert main(["bench", str(onnx_model), "--json", "--runs", "5", "--repeats", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tflite"] == twin.name and set(doc["engines"]) == {"kiln", "onnxruntime",
                                                                    "litert"}
    assert doc["ratios"]["litert"] == pytest.approx(doc["engines"]["kiln"]["ms"]
                                                    / doc["engines"]["litert"]["ms"])
    # LiteRT quantizes this hybrid model's activations on the fly: close, not equal.
    assert doc["max_abs_diff"]["litert"] < 0.05


def test_a_tflite_model_is_timed_against_litert_alone(capsys, tmp_path):
    """An int8 .tflite written here: LiteRT runs the file itself, onnxruntime cannot."""
    require_module("ai_edge_litert", "the test extra installs it on x86-64 Linux only")
    from tests.codegen.test_int8_kernels import _conv_tflite

    model = tmp_path / "conv.tflite"
    model.write_bytes(_conv_tflite(False, 1, 0, 3))
    assert main(["bench", str(model), "--json", "--runs", "5", "--repeats", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["engines"]) == {"kiln", "litert"} and doc["tflite"] == "conv.tflite"
    assert "ort_ms" not in doc and doc["kiln_ms"] > 0
    assert doc["ratios"]["litert"] == pytest.approx(doc["kiln_ms"]
                                                    / doc["engines"]["litert"]["ms"])
    assert doc["max_abs_diff"]["litert"] <= 1  # int8: LiteRT rounds as TFLite Micro, or 1 off
    assert main(["bench", str(model), "--tflite", str(model), "--runs", "1"]) == 2
    err = capsys.readouterr().err
    assert "is a TFLite model, which LiteRT runs itself" in err and err.count("\n") == 1


def test_a_twin_of_another_shape_is_refused(capsys, tmp_path):
    require_module("ai_edge_litert", "the test extra installs it on x86-64 Linux only")
    twin = shared_models() / "tflite" / "kws_ref_model_float32.tflite"
    assert main(["bench", str(SAMPLE_MODEL), "--tflite", str(twin), "--runs", "1"]) == 2
    err = capsys.readouterr().err
    assert "kws_ref_model_float32.tflite: input" in err and err.count("\n") == 1


def test_bench_text(capsys):
    assert main(["bench", str(SAMPLE_MODEL), "--runs", "3", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "kiln/ort" in out and "onnxruntime" in out and "1 repeats x 3 runs" in out


def test_bench_refuses_bad_counts(capsys):
    assert main(["bench", str(SAMPLE_MODEL), "--runs", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "at least 1" in err


def test_bench_without_onnxruntime_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import now raises ImportError
    with pytest.raises(KilnError, match="needs onnxruntime"):
        bench_model(SAMPLE_MODEL, runs=1, repeats=1)
    assert main(["bench", str(SAMPLE_MODEL), "--runs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs onnxruntime" in err


def test_bench_names_the_cpu_and_the_kernels_level(capsys):
    """Figures from different machines are never compared blindly: the text and the JSON
    name this CPU and the instruction-set level the kernels were built for."""
    import llvmlite.binding as llvm

    assert main(["bench", str(SAMPLE_MODEL), "--runs", "3", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    cpu = next(line for line in out.splitlines() if line.strip().startswith("CPU"))
    assert llvm.get_host_cpu_name() in cpu
    level = next(line for line in out.splitlines() if line.strip().startswith("kernels"))
    assert "int8" in level and "-bit vectors" in level
    from compiler.codegen.targets import get_target, missing_on_this_cpu

    code = main(["bench", str(SAMPLE_MODEL), "--json", "--runs", "3", "--repeats", "1",
                 "--target", "x86-64-v3"])
    if missing_on_this_cpu(get_target("x86-64-v3")) or "x86_64" not in llvm.get_process_triple():
        assert code == 2 and "cannot time x86-64-v3 code" in capsys.readouterr().err
        return
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "x86-64-v3" and doc["level"].startswith("AVX2 (256-bit")
    assert "VPMADDWD" in doc["level"] and doc["cpu"] == cpu.split(None, 1)[1]


def test_bench_refuses_code_this_cpu_cannot_time(capsys):
    """Code of the other architecture than this machine's is refused in one sentence."""
    import llvmlite.binding as llvm

    other = "x86-64-v3" if llvm.get_process_triple().startswith(("aarch64", "arm64")) \
        else "aarch64"
    assert main(["bench", str(SAMPLE_MODEL), "--runs", "1", "--target", other]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot time {other} code on this machine" in err


def test_an_int8_model_is_rated_against_the_int8_peak(capsys, tmp_path):
    """The throughput line compares int8 work with the int8 dot instruction's measured peak
    (a float peak would read as "139 % of this core's peak"), a float model with FMAs'."""
    from compiler.codegen.peak import peak_flops, peak_int8_ops
    from compiler.codegen.targets import get_target

    host = get_target("host")
    int8_peak, float_peak = peak_int8_ops(host), peak_flops(host)
    assert int8_peak > 0 and float_peak > 0
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:train", "-o",
                 str(tmp_path / "p.json"), "-q"]) == 0
    assert main(["quantize", str(SAMPLE_MODEL), "--profile", str(tmp_path / "p.json"),
                 "-o", str(tmp_path / "q.onnx"), "-q"]) == 0
    capsys.readouterr()
    for model, arithmetic in ((tmp_path / "q.onnx", "int8"), (SAMPLE_MODEL, "float32")):
        assert main(["bench", str(model), "--json", "--runs", "3", "--repeats", "1"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["arithmetic"] == arithmetic
        assert doc["peak_gflops"] > 0
        assert doc["peak_fraction"] == pytest.approx(doc["kiln_gflops"] / doc["peak_gflops"])
        assert 0 < doc["peak_fraction"] < 1
    assert main(["bench", str(tmp_path / "q.onnx"), "--runs", "3", "--repeats", "1"]) == 0
    assert "of this core's measured int8 peak" in capsys.readouterr().out
