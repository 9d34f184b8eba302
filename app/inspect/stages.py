"""The stages of a pass pipeline run: each snapshot placed for the canvas, and the job making them.

The Passes panel (`app.inspect.stepping`) steps through them; this module holds no widget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from app.window.workers import Progress
from compiler.driver import Compilation
from compiler.ir.graph import Graph
from compiler.passes.pipeline import Pipeline
from compiler.passes.runner import PassRecord, PipelineResult
from compiler.stats import node_macs
from views.labels import elide
from views.layout import compute_layout
from views.passes import StageRow
from views.stage_layout import StageLayout, place_stages


@dataclass
class Stage:
    """The loaded graph (record None) or the graph after one pass, placed for the canvas."""

    name: str
    graph: Graph
    placed: StageLayout
    record: PassRecord | None
    clean: object = None  # the clean layout of the final stage, made when first shown
    macs_by_id: dict[int, int | None] | None = None  # made when a node is first inspected

    def macs(self) -> dict[int, int | None]:
        """MACs per node id of this stage's graph (counted once, on first use)."""
        if self.macs_by_id is None:
            self.macs_by_id = node_macs(self.graph)
        return self.macs_by_id


@dataclass
class Run:
    """A pipeline run with every stage placed (the worker's result)."""

    result: PipelineResult
    stages: list[Stage]
    pipeline: Pipeline
    verify: bool
    seconds: float


def run_stages(compiled: Compilation, verify: bool) -> Callable[[Progress], Run]:
    """The function of a job that runs the driver's passes and places every stage.

    The records come with snapshots, the prepare-for-codegen stage last.
    """
    pipeline = compiled.pipeline

    def work(progress: Progress) -> Run:
        start = time.perf_counter()
        total = max(1, len(pipeline.enabled()) + 1)
        done: list[PassRecord] = []

        def on_record(record: PassRecord) -> None:
            done.append(record)
            progress.report(0.8 * len(done) / total, f"Pass {record.name}")

        progress.report(0.0, "Running the pipeline")
        result = compiled.passes(snapshots=True, verify=verify, on_record=on_record)
        progress.report(0.85, "Placing the stages")
        graphs = [result.initial] + [r.snapshot for r in result.records]
        placed = place_stages(graphs, compute_layout(result.initial))
        stages = [Stage("loaded", result.initial, placed[0], None)]
        stages += [Stage(r.name, r.snapshot, p, r) for r, p in zip(result.records, placed[1:])]
        return Run(result, stages, pipeline, verify, time.perf_counter() - start)

    return work


def row(stage: Stage, verify: bool) -> StageRow:
    """The Passes panel's line of a stage.

    A run not asked to verify shows no checks (a result the driver kept may still hold some).
    """
    r = stage.record
    if r is None:
        return StageRow("loaded", nodes=len(stage.graph.nodes))
    return StageRow(r.name, r.changed, len(r.added), len(r.removed), len(r.modified), r.ms,
                    r.verified and verify, r.matches if verify else None,
                    r.max_abs_err if verify else None, r.nodes_after)


def names_html(graph: Graph, ids, limit: int = 6) -> str:
    """Names of nodes (elided: exporters' names can be paragraphs), at most `limit` of them."""
    nodes = {n.id: n for n in graph.nodes}
    ids = list(ids)
    names = [escape(elide(nodes[i].name, 32)) if i in nodes else f"#{i}" for i in ids[:limit]]
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return (", ".join(names) or "none") + more
