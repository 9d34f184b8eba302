"""The layered layout: a pure function whose boxes never overlap and whose edges flow down."""

import subprocess
import sys

import numpy as np
import pytest

from compiler.frontends.onnx import load_onnx
from compiler.ir.dump import dump
from compiler.ir.graph import Graph
from compiler.ir.types import TensorType
from tests.views.graphs import DENSENET, INCEPTION, ROOT, SAMPLE, diamond, synthetic
from views.layout import Box, Edge, GraphLayout, assign_layers, compute_layout, node_label

# Stated bounds on edge crossings. Measured when the layout was written: sample 0, diamond 0,
# inception_v1 36, densenet121 183, synthetic 0; the headroom absorbs small changes (another
# igraph version) while a change that makes layouts markedly worse fails.
MAX_CROSSINGS = {"inception": 60, "densenet": 260}


@pytest.fixture(scope="module")
def sample():
    return load_onnx(SAMPLE)


@pytest.fixture(scope="module")
def inception():
    return load_onnx(INCEPTION)


def _assert_no_overlap(layout: GraphLayout):
    boxes = sorted(layout.boxes.items(), key=lambda kv: kv[1].x)
    for i, (ka, a) in enumerate(boxes):  # sweep by x so big graphs stay fast
        for kb, b in boxes[i + 1:]:
            if b.x >= a.right:
                break
            assert not a.overlaps(b), (ka, kb)


def _assert_downward(layout: GraphLayout):
    for edge in layout.edges:
        src, dst = layout.boxes[edge.src], layout.boxes[edge.dst]
        assert src.bottom < dst.y, edge
        assert edge.points[0] == (edge.points[0][0], src.bottom)
        assert edge.points[-1] == (edge.points[-1][0], dst.y)
        assert src.x <= edge.points[0][0] <= src.right
        assert dst.x <= edge.points[-1][0] <= dst.right
        ys = [y for _, y in edge.points]
        assert ys == sorted(ys), edge


def _segment_hits_box(p, q, box: Box) -> bool:
    """True when segment pq passes through the interior of `box` (strictly inside)."""
    (x0, y0), (x1, y1) = p, q
    lo, hi = 0.0, 1.0
    for d, a, b_lo, b_hi in ((x1 - x0, x0, box.x, box.right), (y1 - y0, y0, box.y, box.bottom)):
        if d == 0:
            if not b_lo < a < b_hi:
                return False
            continue
        t0, t1 = (b_lo - a) / d, (b_hi - a) / d
        lo, hi = max(lo, min(t0, t1)), min(hi, max(t0, t1))
    return hi - lo > 1e-6


def _assert_edges_avoid_boxes(layout: GraphLayout):
    for edge in layout.edges:
        for p, q in zip(edge.points, edge.points[1:]):
            for key, box in layout.boxes.items():
                if box.y > max(p[1], q[1]) or box.bottom < min(p[1], q[1]):
                    continue
                assert not _segment_hits_box(p, q, box), (edge.value, key)


def test_sample_layout_is_clean(sample):
    layout = compute_layout(sample)
    _assert_no_overlap(layout)
    _assert_downward(layout)
    _assert_edges_avoid_boxes(layout)
    assert layout.crossings() == 0
    assert layout.width >= max(b.right for b in layout.boxes.values())
    assert layout.height >= max(b.bottom for b in layout.boxes.values())


def test_keys_name_nodes_inputs_and_outputs(sample):
    layout = compute_layout(sample)
    assert set(layout.boxes) == {n.id for n in sample.nodes} | {"in:image", "out:logits"}
    assert {(e.src, e.dst, e.value) for e in layout.edges} >= {
        ("in:image", 0, "image"), (0, 1, "conv1_out"), (8, "out:logits", "logits")}
    assert len(layout.edges) == 10


def test_constants_are_lines_by_default_and_boxes_on_request(sample):
    inline = compute_layout(sample)
    assert "W float32[8,1,3,3]" in inline.labels[0].lines
    assert not any(str(k).startswith("const:") for k in inline.boxes)
    shown = compute_layout(sample, show_constants=True)
    consts = {k for k in shown.boxes if str(k).startswith("const:")}
    assert consts == {f"const:{c.name}" for c in sample.constants.values()}
    assert ("const:conv1.weight", 0, "conv1.weight") in {(e.src, e.dst, e.value)
                                                          for e in shown.edges}
    assert not any(line.startswith("W ") for line in shown.labels[0].lines)
    _assert_no_overlap(shown)
    _assert_downward(shown)
    assert shown.crossings() == 0
    # Weights sit beside the data flow: the chain of nodes stays in one column.
    column = {round(shown.boxes[n.id].center[0]) for n in sample.nodes}
    assert max(column) - min(column) < 20


def test_a_shared_constant_gets_a_box_per_consumer():
    t = TensorType((2,))
    g = Graph()
    x = g.add_input("x", t)
    k = g.add_constant("k", np.ones(2, np.float32))
    a = g.add_node("Add", [x, k], [t]).output
    b = g.add_node("Mul", [a, k], [t]).output
    g.outputs = [b]
    layout = compute_layout(g, show_constants=True)
    assert {k for k in layout.boxes if str(k).startswith("const:")} == {"const:k", "const:k@1"}
    assert layout.layers["const:k@1"] == layout.layers[1] - 1


def test_diamond_has_no_crossings_and_a_clean_skip_edge():
    layout = compute_layout(diamond())
    _assert_no_overlap(layout)
    _assert_downward(layout)
    _assert_edges_avoid_boxes(layout)
    assert layout.crossings() == 0
    # The skip edge from x to the final Mul is routed through the layers in between.
    skip = next(e for e in layout.edges if e.src == "in:x" and e.dst == 5)
    assert len(skip.points) > 4


def test_inception_crossings_are_few(inception):
    layout = compute_layout(inception)
    _assert_no_overlap(layout)
    _assert_downward(layout)
    _assert_edges_avoid_boxes(layout)
    assert layout.crossings() <= MAX_CROSSINGS["inception"]


def test_densenet_is_clean_and_has_few_crossings():
    graph = load_onnx(DENSENET)
    layout = compute_layout(graph)
    assert len(layout.boxes) == len(graph.nodes) + 2
    _assert_no_overlap(layout)
    _assert_downward(layout)
    assert layout.crossings() <= MAX_CROSSINGS["densenet"]


def test_weight_computations_sit_right_above_their_consumer():
    # ConstantOfShape nodes (DenseNet's weights) have no graph inputs: they must not all pile
    # up at the top of the graph with edges spanning it.
    graph = load_onnx(DENSENET)
    layout = compute_layout(graph)
    for node in graph.nodes:
        if node.op == "ConstantOfShape":
            users = [u for u, _ in graph.users(node.output)]
            assert min(layout.layers[u.id] for u in users) == layout.layers[node.id] + 1


def test_layout_is_pure_and_deterministic(sample):
    before = dump(sample)
    first, second = compute_layout(sample), compute_layout(sample)
    assert dump(sample) == before
    assert first.boxes == second.boxes
    assert [e.points for e in first.edges] == [e.points for e in second.edges]


def test_big_synthetic_graph_is_clean():
    layout = compute_layout(synthetic(600))
    _assert_no_overlap(layout)
    _assert_downward(layout)
    assert layout.crossings() <= 5


def test_empty_graph_and_progress():
    seen = []
    layout = compute_layout(Graph(), progress=seen.append)
    assert layout.boxes == {} and layout.edges == [] and layout.crossings() == 0
    assert seen[-1] == 1.0


def test_crossings_counts_inversions_but_not_shared_ends():
    def edge(*points):
        return Edge(0, 1, "v", list(points))

    crossing = GraphLayout({}, [edge((0, 0), (10, 10)), edge((10, 0), (0, 10))], 10, 10)
    assert crossing.crossings() == 1
    fan = GraphLayout({}, [edge((5, 0), (0, 10)), edge((5, 0), (10, 10))], 10, 10)
    assert fan.crossings() == 0
    parallel = GraphLayout({}, [edge((0, 0), (0, 10)), edge((10, 0), (10, 10))], 10, 10)
    assert parallel.crossings() == 0


def test_assign_layers_keeps_edges_short():
    # 0 -> 1 -> 2 -> 3 and a source 4 feeding only 3: it belongs right above 3, not at the top.
    layers = assign_layers(5, [(0, 1), (1, 2), (2, 3), (4, 3)], [False, False, False, False, True])
    assert layers == [0, 1, 2, 3, 2]


def test_node_label_shows_op_key_attributes_constants_and_type(sample):
    label = node_label(sample.nodes[0])
    assert label.title == "Conv"
    assert label.lines == ("kernel 3×3", "pads 1", "W float32[8,1,3,3]", "B float32[8]",
                           "float32[1,8,8,8]")
    assert label.kinds == ("attr", "attr", "const", "const", "shape")
    assert node_label(sample.nodes[1]).lines == ("float32[1,8,8,8]",)  # Relu: nothing else
    w, h = label.size()
    assert w >= len("W float32[8,1,3,3]") * 6 and h > 5 * 14


def test_layout_module_does_not_import_qt():
    code = ("import sys, views.layout, views.labels; "
            "assert not any(m.split('.')[0] in ('PySide6', 'shiboken6') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
