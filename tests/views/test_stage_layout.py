"""Stage placement: survivors keep their place, new nodes start at their sources, no overlap."""

import subprocess
import sys

import pytest

from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.conftest import shared_models
from tests.views.graphs import ROOT
from views.layout import compute_layout
from views.stage_layout import place_stages


@pytest.fixture(scope="module")
def resnet_stages():
    graph = load_onnx(shared_models() / "onnx" / "pretrainedResnet.onnx")
    result = run_pipeline(graph, snapshots=True)
    base = compute_layout(result.initial)
    graphs = [result.initial] + [r.snapshot for r in result.records]
    return result, base, graphs, place_stages(graphs, base)


def _overlaps(layout):
    boxes = list(layout.boxes.items())
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
            if ba.overlaps(bb)]


def test_the_loaded_stage_is_the_loaded_layout(resnet_stages):
    _, base, _, stages = resnet_stages
    first = stages[0].layout
    assert set(first.boxes) == set(base.boxes)
    for key, box in base.boxes.items():
        assert first.boxes[key].x == pytest.approx(box.x, abs=0.2)
        assert first.boxes[key].y == pytest.approx(box.y, abs=0.2)


def test_every_stage_places_every_node_without_overlap(resnet_stages):
    result, _, graphs, stages = resnet_stages
    assert len(stages) == len(result.records) + 1
    for graph, stage in zip(graphs, stages):
        assert {n.id for n in graph.nodes} <= set(stage.layout.boxes)
        assert _overlaps(stage.layout) == []
        assert all(b.x >= 0 and b.y >= 0 for b in stage.layout.boxes.values())


def test_survivors_keep_their_place(resnet_stages):
    result, _, _, stages = resnet_stages
    for record, before, after in zip(result.records, stages, stages[1:]):
        if record.added:
            continue  # new nodes may push their neighbours aside
        for key, x in after.world_x.items():
            assert x == pytest.approx(before.world_x[key]), (record.name, key)


def test_new_nodes_start_where_their_sources_were(resnet_stages):
    result, _, _, stages = resnet_stages
    index = next(i for i, r in enumerate(result.records, 1) if r.name == "fuse_activations")
    record, stage, before = result.records[index - 1], stages[index], stages[index - 1]
    assert record.added
    for new in record.added:
        sources = [before.world_x[s] for s in record.provenance[new] if s in before.world_x]
        centre = sum(sources) / len(sources)
        width = stage.layout.boxes[new].w
        assert abs(stage.world_x[new] - centre) < 3 * width, new


def test_removed_nodes_become_ghosts_at_their_previous_place(resnet_stages):
    result, _, _, stages = resnet_stages
    index = len(result.records)  # the final dce drops what fusion replaced
    record = result.records[-1]
    assert record.name == "dce" and record.removed
    stage, before = stages[index], stages[index - 1]
    assert set(stage.ghosts) == set(record.removed)
    for key, ghost in stage.ghosts.items():
        old = before.layout.boxes[key]
        assert ghost.box.x - stage.shift == pytest.approx(old.x - before.shift)
        assert ghost.box.y == old.y


def test_unchanged_passes_share_the_layout(resnet_stages):
    result, _, _, stages = resnet_stages
    for record, before, after in zip(result.records, stages, stages[1:]):
        if not record.changed:
            assert after.layout is before.layout and not after.ghosts


def test_stage_layout_stays_free_of_qt():
    code = ("import sys, views.stage_layout; "
            "sys.exit(any(m.startswith('PySide6') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_long_edges_run_between_boxes(resnet_stages):
    _, _, _, stages = resnet_stages
    for stage in stages:
        layout = stage.layout
        for edge in layout.edges:
            for (x0, y0), (x1, y1) in zip(edge.points[1:-1], edge.points[2:-1]):
                if x0 != x1:
                    continue  # a diagonal between rows
                for key, box in layout.boxes.items():
                    crosses = box.x < x0 < box.right and y0 < box.bottom and box.y < y1
                    assert not crosses, (edge.src, edge.dst, key)


def test_dead_nodes_are_what_the_next_dce_removes(resnet_stages):
    result, _, _, stages = resnet_stages
    for index, record in enumerate(result.records, 1):
        if record.name == "dce" and record.changed:
            assert stages[index - 1].dead == set(record.removed)
            assert stages[index].dead == set()
    assert stages[0].dead == set()
