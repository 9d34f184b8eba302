"""The pipeline runner: what it records per pass, verify mode, stopping, and wrapped failures."""

import json

import numpy as np
import pytest

from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.passes import PassConfig, Pipeline, run_pipeline
from compiler.passes import base as passes_base
from compiler.passes.base import Pass
from tests.conftest import SAMPLE_MODEL
from tests.passes.util import Builder


def _small():
    b = Builder()
    x = b.input("x", (1, 3, 6, 6))
    y = b.node("Conv", [x, b.weights(4, 3, 3, 3)], pads=(1, 1, 1, 1))
    y = b.node("Identity", [b.node("Relu", [y])])
    return b.build(y)


def test_records_say_what_each_pass_did():
    graph = _small()
    result = run_pipeline(graph, Pipeline([PassConfig("remove_identity"), PassConfig("dce"),
                                           PassConfig("fuse_activations"), PassConfig("dce"),
                                           PassConfig("cse")]))
    identity, dce, fuse, dce2, cse = result.records
    assert (identity.changed, identity.added, identity.removed) == (True, [], [])
    assert (dce.removed, dce.nodes_before, dce.nodes_after) == ([2], 3, 2)
    (new_id,) = fuse.added
    assert fuse.provenance == {new_id: (0, 1)}  # the Conv and the Relu it replaces
    assert sorted(dce2.removed) == [0, 1]
    assert not cse.changed and cse.snapshot is dce2.snapshot  # unchanged: shared, not copied
    assert [n.op for n in result.graph.nodes] == ["Conv"]
    assert len(graph.nodes) == 3  # the given graph is untouched
    assert [n.op for n in identity.snapshot.nodes] == ["Conv", "Relu", "Identity"]
    document = result.to_json()
    assert json.loads(json.dumps(document)) == document
    assert document["final"] == {"nodes": 1, "ops": {"Conv": 1}}


def test_a_pass_that_modifies_in_place_is_recorded_as_modified():
    result = run_pipeline(_small(), Pipeline([PassConfig("to_nhwc")]))
    (record,) = result.records
    # The Conv changed layout, the Relu now reads the Transpose back to NCHW.
    assert record.modified == [0, 1] and len(record.added) == 2


def test_verify_mode_checks_changed_passes_and_carries_errors_over():
    result = run_pipeline(load_onnx(SAMPLE_MODEL), verify=True)
    assert all(r.matches for r in result.records)
    assert all(r.verified == r.changed for r in result.records)
    assert max(r.max_rel_err for r in result.records) < 1e-4
    unchanged = [i for i, r in enumerate(result.records) if not r.changed and i > 0]
    for i in unchanged:
        assert result.records[i].max_abs_err == result.records[i - 1].max_abs_err


def test_stop_after_and_fixpoint_iterations():
    pipeline = Pipeline([PassConfig("remove_identity"),
                         PassConfig("sink_transposes", mode="fixpoint", max_iterations=5),
                         PassConfig("dce")])
    result = run_pipeline(_small(), pipeline, stop_after="sink_transposes")
    assert [r.name for r in result.records] == ["remove_identity", "sink_transposes"]
    assert result.records[1].iterations == 1  # nothing to sink: it settles at once
    assert result.records[1].settled
    assert len(run_pipeline(_small(), pipeline, stop_after=1).records) == 1


def _with_pass(monkeypatch, name, fn):
    monkeypatch.setitem(passes_base._PASSES, name, Pass(name, "simplify", fn))


def test_a_failing_pass_is_named_with_the_passes_before_it(monkeypatch):
    def boom(graph):
        raise ValueError("bad weights")
    _with_pass(monkeypatch, "boom", boom)
    with pytest.raises(KilnError, match="pass boom failed \\(ValueError: bad weights\\); passes "
                                        "run before it: remove_identity"):
        run_pipeline(_small(), Pipeline([PassConfig("remove_identity"), PassConfig("boom")]))


def test_a_pass_that_lies_about_changing_nothing_is_caught(monkeypatch):
    def sneaky(graph):
        graph.nodes[0].attrs["strides"] = (1, 1)
        return False
    _with_pass(monkeypatch, "sneaky", sneaky)
    with pytest.raises(KilnError, match="reported no change"):
        run_pipeline(_small(), Pipeline([PassConfig("sneaky")]))


def test_verify_mode_reports_a_pass_that_breaks_numerics(monkeypatch):
    def wrong(graph):
        conv = graph.nodes[0]
        conv.inputs[1] = graph.add_constant("zeros", np.zeros((4, 3, 3, 3), np.float32))
        return True
    _with_pass(monkeypatch, "wrong", wrong)
    result = run_pipeline(_small(), Pipeline([PassConfig("wrong")]), verify=True)
    assert result.records[0].matches is False and result.records[0].max_abs_err > 0


def test_a_fixpoint_that_never_settles_is_flagged(monkeypatch):
    def flip(graph):
        conv = graph.nodes[0]
        conv.attrs["strides"] = None if conv.attrs["strides"] else (1, 1)
        return True
    _with_pass(monkeypatch, "flip", flip)
    result = run_pipeline(_small(), Pipeline([PassConfig("flip", mode="fixpoint",
                                                         max_iterations=3)]))
    (record,) = result.records
    assert (record.iterations, record.settled) == (3, False)


def test_numerics_mode_runs_rebasing_passes_and_the_last_one_and_catches_a_break(monkeypatch):
    """verify="numerics" (big models) runs the interpreter after passes that rebase the
    numerics and after the last pass; a break earlier still shows in the last record."""
    def wrong(graph):
        conv = graph.nodes[0]
        conv.inputs[1] = graph.add_constant("zeros", np.zeros((4, 3, 3, 3), np.float32))
        return True

    def rebase(graph):
        graph.nodes[0].attrs["strides"] = (1, 1)
        return passes_base.PassResult(True, ["said"], rebases_numerics=True)
    _with_pass(monkeypatch, "wrong", wrong)
    _with_pass(monkeypatch, "rebase", rebase)
    pipeline = Pipeline([PassConfig("rebase"), PassConfig("wrong"), PassConfig("dce"),
                         PassConfig("remove_identity")])
    result = run_pipeline(_small(), pipeline, verify="numerics")
    checked = [(r.name, r.verified, r.matches) for r in result.records]
    assert checked == [("rebase", True, True), ("wrong", False, None), ("dce", False, None),
                       ("remove_identity", True, False)]
    assert result.records[0].notes == ["said"] and result.records[0].rebases_numerics
    assert run_pipeline(_small(), pipeline, verify=True).records[1].matches is False
