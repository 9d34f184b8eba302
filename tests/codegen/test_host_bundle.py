"""HostNet.from_bundle runs a written bundle from its files alone and matches onnxruntime."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest

from compiler.codegen.bundle import write_bundle
from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL
from tests.helpers import assert_close, ort_run


@pytest.fixture(scope="module")
def sample():
    model = onnx.load(SAMPLE_MODEL)
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    feeds = {v.name: np.random.default_rng(7).standard_normal(v.type.shape).astype(np.float32)
             for v in graph.inputs}
    return model, graph, feeds, ort_run(model, feeds)


def _run(host: HostNet, feeds) -> list[np.ndarray]:
    got = host.run(feeds)
    host.close()
    return [got[t.name] for t in host.outputs]


@pytest.mark.parametrize("weights,io_in_arena", [
    ("embedded", False), ("external", False), ("external", True)])
def test_round_trip(sample, tmp_path, weights, io_in_arena):
    _, graph, feeds, want = sample
    net = compile_graph(graph, get_target("host"), name="digits", weights=weights,
                        io_in_arena=io_in_arena)
    write_bundle(net, tmp_path / "out")
    host = HostNet.from_bundle(tmp_path / "out")
    assert host.net is None and host.name == "digits"
    assert ("constant" in host.regions) == (weights == "external")
    got = _run(host, feeds)
    direct = _run(HostNet(net), feeds)
    for g, d, w in zip(got, direct, want):
        np.testing.assert_array_equal(g, d)
        assert_close(g, w, what="bundle vs onnxruntime")


def _minimal_bundle(net, folder):
    """A bundle with only what the report schema promises (independent of the bundle writer)."""
    folder.mkdir()
    (folder / f"{net.name}.o").write_bytes(net.object)
    tensor = lambda t: {"name": t.name, "dtype": t.dtype, "shape": list(t.shape),  # noqa: E731
                        "offset": t.offset, "bytes": int(np.prod(t.shape)) * 4,
                        "region": t.region}
    report = {"name": net.name, "target": net.target.name, "weights": net.weights,
              "io_in_arena": False,
              "regions": {"constant": len(net.constant), "mutable": net.plan.mutable,
                          "activations": net.plan.arena.size, "alignment": net.plan.alignment},
              "inputs": [tensor(t) for t in net.inputs],
              "outputs": [tensor(t) for t in net.outputs]}
    (folder / f"{net.name}.report.json").write_text(json.dumps(report))
    if net.weights == "external":
        (folder / f"{net.name}.weights.bin").write_bytes(net.constant)
    return folder


@pytest.fixture(scope="module")
def external_net(sample):
    return compile_graph(sample[1], get_target("host"), name="digits", weights="external")


def test_minimal_report_is_enough(sample, external_net, tmp_path):
    _, _, feeds, want = sample
    folder = _minimal_bundle(external_net, tmp_path / "b")
    for g, w in zip(_run(HostNet.from_bundle(folder, "digits"), feeds), want):
        assert_close(g, w, what="minimal bundle vs onnxruntime")


def test_weights_come_from_the_bin_file(sample, external_net, tmp_path):
    """Zeroed weights change the outputs: the runner really reads NET.weights.bin."""
    _, _, feeds, want = sample
    folder = _minimal_bundle(external_net, tmp_path / "b")
    (folder / "digits.weights.bin").write_bytes(bytes(len(external_net.constant)))
    got = _run(HostNet.from_bundle(folder), feeds)
    assert not np.allclose(got[0], want[0])


def test_missing_weights_file(external_net, tmp_path):
    folder = _minimal_bundle(external_net, tmp_path / "b")
    (folder / "digits.weights.bin").unlink()
    with pytest.raises(KilnError, match="digits.weights.bin is missing"):
        HostNet.from_bundle(folder)


def test_truncated_weights_file(external_net, tmp_path):
    folder = _minimal_bundle(external_net, tmp_path / "b")
    (folder / "digits.weights.bin").write_bytes(external_net.constant[:100])
    with pytest.raises(KilnError, match="holds 100 bytes"):
        HostNet.from_bundle(folder)


def test_broken_report(external_net, tmp_path):
    folder = _minimal_bundle(external_net, tmp_path / "b")
    report = json.loads((folder / "digits.report.json").read_text())
    del report["regions"]
    (folder / "digits.report.json").write_text(json.dumps(report))
    with pytest.raises(KilnError, match="not a Kiln bundle report"):
        HostNet.from_bundle(folder)
    (folder / "digits.report.json").write_text("{")
    with pytest.raises(KilnError, match="not a Kiln bundle report"):
        HostNet.from_bundle(folder)


def test_folder_without_bundle(tmp_path):
    with pytest.raises(KilnError, match="holds 0 bundle reports"):
        HostNet.from_bundle(tmp_path)
    with pytest.raises(KilnError, match="cannot read"):
        HostNet.from_bundle(tmp_path, "net")


def test_missing_object(external_net, tmp_path):
    folder = _minimal_bundle(external_net, tmp_path / "b")
    (folder / "digits.o").unlink()
    with pytest.raises(KilnError, match="digits.o is missing"):
        HostNet.from_bundle(folder)


def test_bundle_moved_after_writing(sample, external_net, tmp_path):
    """Nothing in the bundle points back to where it was written."""
    _, _, feeds, want = sample
    write_bundle(external_net, tmp_path / "first")
    shutil.move(tmp_path / "first", tmp_path / "second")
    for g, w in zip(_run(HostNet.from_bundle(tmp_path / "second"), feeds), want):
        assert_close(g, w)


def test_report_placing_a_tensor_outside_its_region(external_net, tmp_path):
    folder = _minimal_bundle(external_net, tmp_path / "b")
    report = json.loads((folder / "digits.report.json").read_text())
    report["outputs"][0]["offset"] = report["regions"]["mutable"]
    (folder / "digits.report.json").write_text(json.dumps(report))
    with pytest.raises(KilnError, match="outside the mutable region"):
        HostNet.from_bundle(folder)


def test_report_with_unknown_dtype(external_net, tmp_path):
    folder = _minimal_bundle(external_net, tmp_path / "b")
    report = json.loads((folder / "digits.report.json").read_text())
    report["inputs"][0]["dtype"] = "complex-ish"
    (folder / "digits.report.json").write_text(json.dumps(report))
    with pytest.raises(KilnError, match="not a Kiln bundle report"):
        HostNet.from_bundle(folder)
