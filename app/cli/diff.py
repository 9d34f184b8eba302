"""`kiln diff A B`: which layer of one model is which of the other, what changed, by how much.

The headless twin of the Compare window (`compiler.graphdiff`). Both models go through the same
stage (the final graph by default) and are planned for the same target, unless `--stage-b` or
`--target-b` says otherwise; one model given twice is compared with itself, its stages
matched by node ids and provenance.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import UsageError, add_pipeline_arg, parse_shape, with_requant
from compiler.errors import KilnError


def add_parser(sub) -> None:
    """The `diff` subcommand's arguments."""
    diff = sub.add_parser("diff", help="compare two models (or two stages or targets of one): "
                                       "matched layers, changes, metric deltas")
    diff.add_argument("model", help="model A (.onnx or .tflite)")
    diff.add_argument("model_b", metavar="model", help="model B (may be A again)")
    diff.add_argument("--json", action="store_true", help="print one JSON document")
    diff.add_argument("--stage", default="final", metavar="STAGE",
                      help="compare the graphs as loaded ('loaded'), after the pipeline "
                           "('final', the default), after a pass (NAME or NAME#K) or after the "
                           "first N passes")
    diff.add_argument("--stage-b", metavar="STAGE", help="B's stage, when it differs from A's")
    diff.add_argument("--target", metavar="TARGET",
                      help="target whose memory plan gives each layer's arena bytes "
                           "(default host)")
    diff.add_argument("--target-b", metavar="TARGET", help="B's target, when it differs")
    diff.add_argument("--shape", action="append", metavar="NAME=d0,d1,...",
                      help="static shape of an input whose dimensions are symbolic (both "
                           "models)")
    add_pipeline_arg(diff)


def _target(flag: str, name: str | None) -> str:
    """The target's name, refused now (before any work) when unknown."""
    from compiler.driver import Options

    try:
        return Options(name or "host").resolved_target().name
    except KilnError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _load(path: str, shapes: dict):
    from compiler.frontends.load import load_model

    try:
        return load_model(path, shapes)
    except KilnError as exc:  # name the file whichever of the two failed
        message = str(exc)
        name = Path(path).name
        raise UsageError(message if message.startswith(f"{name}: ") else f"{name}: {message}") \
            from None


def run(args) -> int:
    """`kiln diff`."""
    from compiler.driver import Options
    from compiler.graphdiff.stages import Operand, compare
    from compiler.passes import load_pipeline

    shapes = dict(parse_shape(s) for s in args.shape or [])
    target_a = _target("--target", args.target)
    target_b = _target("--target-b", args.target_b or args.target)
    graph_a = _load(args.model, shapes)
    same = Path(args.model).resolve() == Path(args.model_b).resolve()
    graph_b = graph_a if same else _load(args.model_b, shapes)
    pipeline = load_pipeline(args.pipeline) if args.pipeline else None
    if args.requant:
        pipeline = with_requant(pipeline, args.requant)
    stage_b = args.stage_b or args.stage
    a = Operand(graph_a, args.stage, Options(target_a), _label(args.model, args.stage, target_a),
                pipeline)
    b = Operand(graph_b, stage_b, Options(target_b), _label(args.model_b, stage_b, target_b),
                pipeline)
    try:
        result = compare(a, b)
    except KilnError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    _print(result)
    return 0


def _label(path: str, stage: str, target: str) -> str:
    return f"{Path(path).name} ({stage}, {target})"


def _delta(values: tuple) -> str:
    p, q, d = values
    if d is None:
        return "" if p is None and q is None else (f"{p:,}" if p is not None else "—") + " → " \
            + (f"{q:,}" if q is not None else "—")
    return f"{d:+,}" if d else "0"


def _print(result) -> None:
    """Counts, then one row per layer: status, A, B, how matched, what changed, deltas.

    The changes themselves (before and after) are in `--json`; a row names their kinds.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    counts = result.counts()
    by = counts["by"]
    console.print(f"[bold]A[/bold] {escape(result.a.label)}: {len(result.a.graph.nodes)} "
                  f"nodes; [bold]B[/bold] {escape(result.b.label)}: "
                  f"{len(result.b.graph.nodes)} nodes",
                  highlight=False)
    console.print(f"{counts['matched']} layers matched ({by['provenance']} by provenance, "
                  f"{by['name']} by name, {by['structure']} by structure): {counts['changed']} "
                  f"changed, {counts['unchanged']} unchanged; {counts['removed']} nodes only "
                  f"in A, {counts['added']} only in B; {counts['folded_a']} nodes of A and "
                  f"{counts['folded_b']} of B folded into a matched layer", highlight=False)
    metrics = result.metric_names()
    table = Table("status", "A", "B", "how", "changes", *(f"Δ {m}" for m in metrics))
    ua, ub, c = result.units_a, result.units_b, result.correspondence
    for x in ua.order:
        y = c.pairs.get(x)
        if y is None:
            continue
        changes = result.changes.get(x, [])
        deltas = result.deltas(x, y)
        table.add_row("changed" if changes else "same",
                      escape(f"{ua.nodes[x].name} ({ua.nodes[x].op})"),
                      escape(f"{ub.nodes[y].name} ({ub.nodes[y].op})"), c.how[x],
                      ", ".join(dict.fromkeys(ch.what for ch in changes)),
                      *(_delta(deltas[m]) for m in metrics))
    for row in result.differences:
        if row.status in ("changed", "metrics"):  # pairs: their rows are above
            continue
        x, y = row.a, row.b
        deltas = result.deltas(x, y)
        title = escape(row.title)
        table.add_row(row.status, title if x is not None else "", title if y is not None
                      else "", "", "", *(_delta(deltas[m]) for m in metrics))
    console.print(table)
    totals = result.totals()
    console.print("totals: " + ", ".join(
        f"{m} {p:,} → {q:,} ({d:+,})" for m, (p, q, d) in totals.items()
        if p is not None and q is not None), highlight=False)
