"""Run a pipeline and record, per pass, what it did to the graph and, if asked, its numerics.

The record is plain data (JSON-serializable) that the CLI prints and the GUI draws; snapshots
share weights with each other, so keeping one per pass is cheap.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from compiler.errors import KilnError, VerifyError
from compiler.inputs import random_inputs
from compiler.interpreter import run
from compiler.ir.graph import Graph, Node
from compiler.passes.base import PassContext, PassResult, get_pass
from compiler.passes.pipeline import Pipeline, default_pipeline
from compiler.qmath.requant import MODES, REQUANT_KEY
from compiler.verify import verify as verify_graph

# Tolerance of the per-pass numerical check against the loaded model (float outputs; integer
# outputs must be equal).
RTOL, ATOL = 1e-4, 1e-5


@dataclass
class PassRecord:
    """What one pipeline entry did.

    Attributes:
        name: The pass.
        category: Its category.
        changed: Whether it changed the graph (in any iteration).
        iterations: Runs of the pass (more than one in fixpoint mode).
        nodes_before: Node count before it ran.
        nodes_after: Node count after it ran.
        added: Ids of nodes it created.
        removed: Ids of nodes it deleted.
        modified: Ids of nodes present before and after whose operator, attributes, inputs or
            output types changed.
        provenance: For each added node, the source-model node ids it came from.
        ms: Time the pass took (snapshots and checks excluded).
        settled: False when a fixpoint entry still changed the graph at its last allowed
            iteration (a pass that never settles is a bug worth showing).
        snapshot: The graph after the pass (None unless snapshots were asked for); an unchanged
            pass shares its predecessor's snapshot.
        verified: True when the interpreter ran this snapshot. In verify mode only changed
            passes run it: an unchanged graph is identical to the previous snapshot, whose
            errors the record repeats.
        max_abs_err: Largest absolute difference from the loaded model's outputs (verify mode).
        max_rel_err: max_abs_err relative to the largest output magnitude (verify mode).
        matches: Whether every output is within RTOL/ATOL of the loaded model's (verify mode).
        notes: What the pass said about this run (e.g. which units stayed float and why).
        rebases_numerics: The pass changed the arithmetic on purpose; later stages are
            compared to its outputs.
    """

    name: str
    category: str
    changed: bool
    iterations: int
    nodes_before: int
    nodes_after: int
    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    modified: list[int] = field(default_factory=list)
    provenance: dict[int, tuple[int, ...]] = field(default_factory=dict)
    ms: float = 0.0
    settled: bool = True
    snapshot: Graph | None = None
    verified: bool = False
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    matches: bool | None = None
    notes: list[str] = field(default_factory=list)
    rebases_numerics: bool = False

    def to_json(self) -> dict:
        """Everything but the snapshot, as JSON-ready values."""
        return {"name": self.name, "category": self.category, "changed": self.changed,
                "iterations": self.iterations, "nodes_before": self.nodes_before,
                "nodes_after": self.nodes_after, "added": self.added, "removed": self.removed,
                "modified": self.modified,
                "provenance": {str(k): list(v) for k, v in self.provenance.items()},
                "ms": round(self.ms, 3), "settled": self.settled, "verified": self.verified,
                "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err,
                "matches": self.matches, "notes": self.notes,
                "rebases_numerics": self.rebases_numerics}


@dataclass
class PipelineResult:
    """The loaded graph, one record per pass run, and the graph after the last one."""

    initial: Graph
    records: list[PassRecord]
    graph: Graph
    diffs: bool = True  # records hold added/removed/modified ids
    kept: Graph | None = None  # the graph after `keep_after` entries, when asked for

    def op_counts(self) -> dict[str, int]:
        """Operators of the final graph and their counts, sorted by name."""
        return dict(sorted(Counter(n.op for n in self.graph.nodes).items()))

    def to_json(self) -> dict:
        """Every record plus a summary of the final graph."""
        return {"passes": [r.to_json() for r in self.records],
                "final": {"nodes": len(self.graph.nodes), "ops": self.op_counts()}}


def _signature(node: Node) -> tuple:
    """What makes a node the same node: operator, attributes, inputs and output types.

    Arrays in attributes count by identity (passes replace them, never write into them).
    """
    attrs = node.attrs
    return (node.op,
            [(k, ("array", id(v)) if isinstance(v, np.ndarray) else v)
             for k, v in sorted(attrs.items())] if attrs else None,
            [v.name if v is not None else None for v in node.inputs],
            [out.type for out in node.outputs])


# A pass that rebases the numerics (PassResult.rebases_numerics: to_integer computes in integers
# what the loaded QDQ model computes in float) may differ from the loaded model's outputs by
# rounding, up to REQUANT_STEPS steps of an 8-bit output; every later stage must then equal its
# outputs exactly.
REQUANT_STEPS = 2


def _compare(got: dict, want: dict, graph: Graph, initial: Graph, steps: int = 0
             ) -> tuple[float, float, bool]:
    """(max abs error, max relative error, within tolerance) of outputs matched by position.

    Integer outputs must be equal, or within `steps` of each other when the pass rebases.
    """
    worst_abs = worst_rel = 0.0
    matches = True
    for new, old in zip(graph.outputs, initial.outputs):
        a, b = got[new.name], want[old.name]
        if a.shape != b.shape or a.dtype != b.dtype:
            return float("inf"), float("inf"), False
        if a.size == 0:
            continue
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        scale = float(np.abs(b.astype(np.float64)).max())
        worst_abs = max(worst_abs, float(diff.max()))
        worst_rel = max(worst_rel, float(diff.max()) / scale if scale else float(diff.max()))
        if np.issubdtype(b.dtype, np.floating):
            matches &= bool(np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True))
        else:
            matches &= bool(diff.max() <= steps)
    return worst_abs, worst_rel, matches


def run_pipeline(graph: Graph, pipeline: Pipeline | None = None, *, verify: bool | str = False,
                 seed: int = 0, snapshots: bool = True, diffs: bool = True,
                 stop_after: str | int | None = None,
                 on_record: Callable[[PassRecord], None] | None = None,
                 keep_after: int | None = None) -> PipelineResult:
    """Run `pipeline` (the default one when None) on a copy of `graph`, recording every pass.

    Args:
        graph: The loaded model; it is not modified.
        pipeline: Pass configurations; disabled entries are skipped. Its `requant`, else the
            model's own rule, is the context every pass is given.
        verify: After every pass, run the graph verifier, and run the reference interpreter on
            the new snapshot with seeded random inputs, comparing with the loaded model.
            "numerics" runs the interpreter only after passes that rebase the numerics and
            after the last one (big models: the verifier still checks every pass).
        seed: Seed of those inputs.
        snapshots: Keep a snapshot of the graph after every pass in its record.
        diffs: Record the ids each pass added, removed and modified (and check that a pass
            reporting no change changed nothing). Off, records hold only counts and times:
            a compile that wants the final graph alone skips the per-node comparison.
        stop_after: Stop after this stage: a pass name (its first run), `name#k` (its k-th run)
            or a count of entries.
        on_record: Called with each record as soon as it exists (progress for a GUI; raising
            from it stops the run).
        keep_after: Keep the graph after this many entries as the result's `kept` (the driver
            keeps the final graph before the prepare stage).

    Raises:
        KilnError: A pass failed (the message names it and the passes before it), or in verify
            mode broke the graph.
    """
    pipeline = pipeline or default_pipeline()
    entries = _entries(pipeline, stop_after)
    # The loaded graph is never modified, so without snapshots or checks it serves as itself.
    initial = graph.snapshot() if snapshots or verify else graph
    work = graph.snapshot()
    context = run_context(pipeline, graph)
    work.metadata[REQUANT_KEY] = context.requant  # the rule the result's integer operators follow
    checker = _Checker(initial, seed, every=verify != "numerics") if verify else None
    records: list[PassRecord] = []
    previous = initial
    kept = work.snapshot() if keep_after == 0 else None
    after = _signatures(work) if diffs else {}
    for index, config in enumerate(entries, 1):
        before = after  # the signatures after the previous pass: nothing ran in between
        p, count = get_pass(config.name), len(work.nodes)
        result, iterations, settled, ms = _run_entry(p, config, work, context, records)
        after = _signatures(work) if diffs else {}
        record = _record(p, result, iterations, settled, ms, count, work, before, after, diffs)
        if snapshots:
            previous = work.snapshot() if result.changed else previous
            record.snapshot = previous
        if checker is not None:
            checker.check(p.name, work, record, result, last=index == len(entries))
        records.append(record)
        if on_record is not None:
            on_record(record)
        if index == keep_after:
            kept = record.snapshot if snapshots else work.snapshot()
    return PipelineResult(initial, records, work, diffs, kept)


def run_context(pipeline: Pipeline, graph: Graph) -> PassContext:
    """The context of a run: the pipeline's requantization rule, else the model's, else onnx."""
    rule = pipeline.requant or graph.metadata.get(REQUANT_KEY, "onnx")
    return PassContext(requant=rule if rule in MODES else "onnx")


def _entries(pipeline: Pipeline, stop_after: str | int | None) -> list:
    entries = pipeline.enabled()
    if isinstance(stop_after, str):
        return entries[:pipeline.stage_index(stop_after) + 1]
    return entries if stop_after is None else entries[:stop_after]


def _signatures(graph: Graph) -> dict[int, tuple]:
    return {n.id: _signature(n) for n in graph.nodes}


def _run_entry(p, config, work: Graph, context: PassContext, records: list[PassRecord]
               ) -> tuple[PassResult, int, bool, float]:
    """Run one pipeline entry (once, or to its fixpoint): (merged result, runs, settled, ms)."""
    start = time.perf_counter()
    merged = PassResult(False)
    iterations, settled = 0, config.mode == "once"
    limit = config.max_iterations if config.mode == "fixpoint" else 1
    try:
        while iterations < limit:
            iterations += 1
            result = p(work, context)
            merged.notes += result.notes
            merged.rebases_numerics |= result.rebases_numerics
            if not result.changed:
                settled = True
                break
            merged.changed = True
    except Exception as exc:
        done = ", ".join(r.name for r in records) or "none"
        raise KilnError(f"pass {p.name} failed ({type(exc).__name__}: {exc}); passes run "
                        f"before it: {done}") from exc
    return merged, iterations, settled, (time.perf_counter() - start) * 1e3


def _record(p, result: PassResult, iterations: int, settled: bool, ms: float, count: int,
            work: Graph, before: dict, after: dict, diffs: bool) -> PassRecord:
    """The record of one entry; a pass that says it changed nothing must have changed nothing."""
    added = [i for i in after if i not in before]
    removed = [i for i in before if i not in after]
    modified = [i for i in after if i in before and after[i] != before[i]]
    if not result.changed and (added or removed or modified):
        raise KilnError(f"pass {p.name} reported no change but changed nodes "
                        f"{(added + removed + modified)[:5]}")
    provenance = {n.id: n.provenance for n in work.nodes if n.id not in before} if diffs else {}
    return PassRecord(p.name, p.category, result.changed, iterations, count, len(work.nodes),
                      added, removed, modified, provenance, ms, settled, notes=result.notes,
                      rebases_numerics=result.rebases_numerics)


class _Checker:
    """Verify mode: each changed graph is verified, run and compared with the model's outputs.

    After a pass that rebases the numerics, later stages are compared with that pass's own.
    """

    def __init__(self, initial: Graph, seed: int, every: bool = True):
        self.initial, self.every, self.pending = initial, every, False
        self.feeds = random_inputs(initial, seed)
        self.expected = run(initial, self.feeds)
        self.errors: tuple[float, float, bool] = (0.0, 0.0, True)

    def check(self, name: str, work: Graph, record: PassRecord, result: PassResult,
              last: bool = False) -> None:
        if result.changed:
            try:
                verify_graph(work)
            except VerifyError as exc:
                raise VerifyError(f"after pass {name}: {exc}") from None
        self.pending |= result.changed
        if not (self.every or result.rebases_numerics or last):
            return  # record.verified stays False: this graph was not run
        if self.pending:
            self.pending = False
            try:
                got = run(work, self.feeds)
            except KilnError as exc:
                raise KilnError(f"after pass {name}, the interpreter fails: {exc}") from None
            steps = REQUANT_STEPS if result.rebases_numerics else 0
            self.errors = _compare(got, self.expected, work, self.initial, steps)
            if result.rebases_numerics:  # later stages must give exactly these integers
                self.expected = {old.name: got[new.name]
                                 for new, old in zip(work.outputs, self.initial.outputs)}
            record.verified = True
        record.max_abs_err, record.max_rel_err, record.matches = self.errors
