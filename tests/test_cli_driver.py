"""The CLI through the compile driver: one alignment truth, bundle names, stages, file formats."""

import json

import numpy as np
import pytest

from app import cli
from compiler.driver import Options, compilation
from compiler.frontends.onnx import load_onnx
from tests.conftest import SAMPLE_MODEL


def _json(capsys, *args):
    assert cli.main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_memory_help_states_the_alignment_bundles_use(capsys):
    with pytest.raises(SystemExit):
        cli.main(["memory", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "64 on hosted CPUs and 16 on microcontrollers" in text
    assert "16 on Cortex-M" not in text


@pytest.mark.parametrize("target,alignment", [("host", 64), ("cortex-m7", 16),
                                              ("stm32f746g-disco", 16)])
def test_memory_and_compile_use_the_same_alignment(capsys, tmp_path, target, alignment):
    memory = _json(capsys, "memory", str(SAMPLE_MODEL), "--target", target, "--json")
    report = _json(capsys, "compile", str(SAMPLE_MODEL), "--target", target, "-o",
                   str(tmp_path / "b"), "--json")
    assert memory["alignment"] == report["regions"]["alignment"] == alignment
    assert memory["buffers"] == report["memory"]["buffers"]
    assert memory["activations"] == report["regions"]["activations"]


def test_compile_takes_an_alignment(capsys, tmp_path):
    report = _json(capsys, "compile", str(SAMPLE_MODEL), "--alignment", "32", "-o",
                   str(tmp_path / "b"), "--json")
    assert report["regions"]["alignment"] == 32
    assert all(b["offset"] % 32 == 0 for b in report["memory"]["buffers"])
    header = (tmp_path / "b" / "net.h").read_text()
    assert "#define NET_ALIGNMENT 32" in header


def test_a_bad_alignment_is_one_line(capsys, tmp_path):
    assert cli.main(["compile", str(SAMPLE_MODEL), "--alignment", "24", "-o",
                     str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "--alignment 24 must be a power of two" in err and err.count("\n") == 1


@pytest.mark.parametrize("name,why", [("main", "C keyword or main"), ("int", "C keyword"),
                                      ("__net", "reserved"), ("_Net", "reserved"),
                                      ("9lives", "not a C identifier"),
                                      ("réseau", "not a C identifier")])
def test_bundle_names_that_would_not_build_are_refused(capsys, tmp_path, name, why):
    out = tmp_path / "b"
    assert cli.main(["compile", str(SAMPLE_MODEL), "--name", name, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert why in err and err.startswith("kiln: error: --name") and not out.exists()


def test_a_tflite_file_is_recognised(capsys, tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(64))  # an empty flatbuffer
    assert cli.main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "model.tflite: the TFLite model has 0 subgraphs" in err and "ONNX" not in err


def test_the_prepare_stage_is_recorded_and_runnable(capsys):
    doc = _json(capsys, "passes", str(SAMPLE_MODEL), "--json")
    assert doc["passes"][-1]["name"] == "prepare_for_codegen"
    assert cli.main(["run", str(SAMPLE_MODEL), "--stage", "prepare_for_codegen"]) == 0
    assert "argmax" in capsys.readouterr().out


def test_one_compilation_serves_every_stage():
    graph = load_onnx(SAMPLE_MODEL)
    compiled = compilation(graph)
    assert compilation(graph) is compiled
    assert compiled.plan() is compiled.plan(Options())
    assert compiled.kernels().plan is compiled.plan()
    net = compiled.net()
    assert net.plan is compiled.plan() and compiled.net() is net
    assert compiled.plan(Options("cortex-m7")).alignment == 16
    # A result with snapshots serves a request without; the final graph stays the same object.
    final = compiled.final
    records = compiled.passes(snapshots=True).records
    assert all(r.snapshot is not None for r in records)
    assert compiled.final is final and compiled.passes() is compiled.passes(snapshots=True)
    assert np.array_equal(compiled.stage("final").nodes[0].id, final.nodes[0].id)


def test_a_graph_nobody_holds_is_freed_with_its_stages():
    import gc
    import weakref

    graph = load_onnx(SAMPLE_MODEL)
    compiled = compilation(graph)
    compiled.plan()
    alive = weakref.ref(graph)
    del graph, compiled
    gc.collect()
    assert alive() is None
