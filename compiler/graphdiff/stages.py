"""Comparisons of compiled stages: each side a graph at a stage, planned for a target."""

from __future__ import annotations

from dataclasses import dataclass

from compiler.driver import Options, compilation
from compiler.graphdiff.diff import GraphDiff, Metrics, arena_by_node, diff_graphs
from compiler.graphdiff.match import Side
from compiler.ir.graph import Graph
from compiler.passes.pipeline import Pipeline


@dataclass(frozen=True)
class Operand:
    """One side of a comparison before it is computed.

    Attributes:
        graph: The loaded graph (a file's, the document's, a quantization of it).
        stage: "loaded", "final" or any stage `Compilation.stage` takes (a pass name, a count).
        options: The target to plan memory for (arena bytes per layer); None: no plan.
        label: How reports call it.
        pipeline: The pass pipeline; None: the default one.
        extra: More per-node metrics (metric -> node id of the stage -> value).
    """

    graph: Graph
    stage: str = "final"
    options: Options | None = Options()
    label: str = ""
    pipeline: Pipeline | None = None
    extra: Metrics | None = None


def side_of(operand: Operand) -> tuple[Side, dict[int, int] | None, int | None]:
    """The side's graph at its stage (origin: the loaded graph), its arena bytes by node.

    And its plan's whole arena; both None without a target.
    """
    compiled = compilation(operand.graph, operand.pipeline)
    shown = operand.graph if operand.stage in ("loaded", "0") else compiled.stage(operand.stage)
    arena = size = None
    if operand.options is not None:
        plan = compiled.plan(operand.options)
        arena, size = arena_by_node(shown, compiled.prepared, plan), plan.arena.size
    origin = None if shown is operand.graph else operand.graph
    return Side(shown, origin, operand.label), arena, size


def compare(a: Operand, b: Operand, same_origin: bool | None = None) -> GraphDiff:
    """Compare two operands; graphs of one origin (by default: the same graph) match by ids.

    A model and a quantization of it made by `compiler.quant.quantize`, or one model at two
    stages or for two targets, share an origin; two files do not.
    """
    if same_origin is None:
        same_origin = a.graph is b.graph
    side_a, arena_a, size_a = side_of(a)
    side_b, arena_b, size_b = side_of(b)
    stage = a.stage if a.stage == b.stage else f"{a.stage} / {b.stage}"
    return diff_graphs(side_a, side_b, same_origin=same_origin, stage=stage,
                       arena=(arena_a, arena_b), extra=(a.extra, b.extra),
                       arena_sizes=(size_a, size_b))
