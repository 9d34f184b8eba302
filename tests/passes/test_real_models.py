"""The default pipeline on real models: every pass verified and numerically checked (acceptance
1), and the structure it leaves (acceptance 2).

The shared models skip without ../shared/models (fail under CI); the eight light models ship in
the onnx wheel and always run. Verify mode runs the interpreter on every snapshot that a pass
changed (an unchanged snapshot is the previous one), at rtol 1e-4 for float outputs and exactly
for integer ones; on the light models (VGG-19, DenseNet-121, ResNet-50, ...) it runs it after
the passes that change the numerics and on the final graph, and verifies every graph.
"""

from __future__ import annotations

from collections import Counter

import pytest

from compiler.frontends.onnx import load_onnx
from compiler.passes import run_pipeline
from tests.conftest import SAMPLE_MODEL, shared_models
from tests.test_real_models import LIGHT, LIGHT_DIR, SHARED_ONNX

# tf2onnx models: NHWC at the boundary, so the pipeline must leave no Transpose at all.
NHWC_MODELS = [n for n in SHARED_ONNX if n != "mnist-8"]
NHWC_FLOAT = ["vww_96_float", "pretrainedResnet", "kws_ref_model_float32", "ad01_fp32"]
_FUSED_PRODUCERS = ("Conv", "FullyConnected", "Add")


def _run_verified(graph, verify: bool | str = True):
    """The pipeline in verify mode: every record run matches the loaded model.

    "numerics" (the big light models) runs the interpreter after the passes that change the
    arithmetic on purpose and after the last one; the graph verifier still checks every pass.
    """
    result = run_pipeline(graph, verify=verify)
    checked = [r for r in result.records if r.matches is not None]
    assert checked and checked[-1] is result.records[-1]
    for record in checked:
        assert record.matches, (f"after {record.name}: max abs error {record.max_abs_err:.3g}, "
                                f"relative {record.max_rel_err:.3g}")
    if verify is True:
        assert len(checked) == len(result.records)
    return result


def _check_structure(loaded, result, transposes_allowed: int) -> None:
    final = result.graph
    ops = Counter(n.op for n in final.nodes)
    assert ops["Transpose"] <= transposes_allowed, ops
    assert not {"BatchNormalization", "Dropout", "Identity"} & set(ops), ops
    readers = Counter(id(v) for n in final.nodes for v in n.inputs if v is not None)
    outputs = {id(v) for v in final.outputs}
    for node in final.nodes:
        producer = node.inputs[0].producer if node.op in ("Relu", "Clip") else None
        if producer is not None and producer.op in _FUSED_PRODUCERS:
            value = node.inputs[0]
            assert readers[id(value)] > 1 or id(value) in outputs, f"{node.name} not fused"
    sources = {n.id for n in loaded.nodes}
    for node in final.nodes:
        assert node.provenance and set(node.provenance) <= sources, node
    # The pipeline reaches a fixed point: run again, no pass finds anything to do.
    again = run_pipeline(final, snapshots=False)
    assert not [r.name for r in again.records if r.changed]


@pytest.mark.parametrize("name", SHARED_ONNX)
def test_default_pipeline_on_shared_model(name):
    path = shared_models() / "onnx" / f"{name}.onnx"
    loaded = load_onnx(path)
    result = _run_verified(loaded)
    boundary = len(loaded.inputs) + len(loaded.outputs)
    _check_structure(loaded, result, 0 if name in NHWC_MODELS else boundary)
    if name in NHWC_FLOAT:
        assert "Transpose" not in Counter(n.op for n in result.graph.nodes)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT)
def test_default_pipeline_on_light_model(name):
    loaded = load_onnx(LIGHT_DIR / f"{name}.onnx")
    result = _run_verified(loaded, "numerics")
    # At most one Transpose per graph input and output (ShuffleNet's channel shuffles become
    # Gathers).
    _check_structure(loaded, result, len(loaded.inputs) + len(loaded.outputs))


def test_default_pipeline_on_sample_model():
    loaded = load_onnx(SAMPLE_MODEL)
    result = _run_verified(loaded)
    _check_structure(loaded, result, 0)  # its one-channel input needs only a Reshape
