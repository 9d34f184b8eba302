"""Weight statistics for the properties panel."""

import math

import numpy as np

from compiler.stats import tensor_stats


def test_basic_statistics():
    data = np.array([[0.0, 1.0], [2.0, 0.0], [-3.0, 0.0]], np.float32)
    s = tensor_stats(data, bins=4)
    assert s.shape == (3, 2) and s.dtype == "float32" and s.size == 6
    assert (s.min, s.max) == (-3.0, 2.0)
    assert math.isclose(s.mean, 0.0) and math.isclose(s.std, math.sqrt(14 / 6))
    assert s.sparsity == 0.5
    assert s.counts.sum() == 6 and len(s.edges) == 5
    assert s.edges[0] == -3.0 and s.edges[-1] == 2.0
    assert s.nonfinite == 0


def test_constant_tensor_gets_one_centred_bin():
    s = tensor_stats(np.full((4,), 7, np.int64), bins=3)
    assert s.min == s.max == 7.0 and s.std == 0.0 and s.sparsity == 0.0
    assert s.counts.sum() == 4 and s.edges[0] < 7 < s.edges[-1]


def test_nonfinite_values_are_counted_not_averaged():
    s = tensor_stats(np.array([1.0, np.nan, np.inf, 3.0]))
    assert s.nonfinite == 2 and s.mean == 2.0 and s.counts.sum() == 2


def test_empty_and_all_nan():
    for data in (np.zeros((0, 3), np.float32), np.array([np.nan])):
        s = tensor_stats(data)
        assert math.isnan(s.min) and len(s.counts) == 0


def test_bool_tensor():
    s = tensor_stats(np.array([True, False, False, False]))
    assert s.sparsity == 0.75 and s.max == 1.0


def test_stats_of_an_edited_graph_with_an_invalid_node():
    from compiler import edit
    from compiler.frontends.onnx import load_onnx
    from compiler.stats import compute_stats, node_macs
    from tests.conftest import SAMPLE_MODEL

    graph = load_onnx(SAMPLE_MODEL)
    broken = edit.set_input_shape(graph, "image", (1, 1, 16, 16))
    fc = next(n for n in broken.nodes if n.op == "Gemm")
    macs = node_macs(broken)
    assert macs[fc.id] is None and all(m is not None for k, m in macs.items() if k != fc.id)
    stats = compute_stats(broken)
    assert stats.macs == sum(m for m in macs.values() if m is not None)
    assert stats.params == compute_stats(graph).params and stats.nodes == 9
