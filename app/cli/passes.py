"""`kiln passes`: what each pass of the pipeline did and, for a target, each lowering pass.

The graph passes come from the compile driver's pipeline run; with `--target` the driver's
lowering records follow (`compiler.memory.stages`): the arena and steps before and after each
lowering pass, where it applied, and why one did not run. `--instructions` adds one inference's
instruction count on the target's QEMU board before and after each.
"""

from __future__ import annotations

import json
import sys

from app.cli.args import (
    UsageError,
    add_model_args,
    add_pipeline_arg,
    add_target_args,
    compilation_of,
    target_options,
)


def add_parser(sub) -> None:
    """The `passes` subcommand's arguments."""
    passes = sub.add_parser("passes", help="run the pass pipeline and show what each pass did "
                                           "(with --target, the lowering passes too)")
    add_model_args(passes)
    passes.add_argument("--json", action="store_true", help="print one JSON document")
    passes.add_argument("--verify", action="store_true",
                        help="after every pass, check the graph and compare its outputs with "
                             "the loaded model's on a seeded random input")
    passes.add_argument("--seed", type=int, default=0, help="seed of that input (default 0)")
    add_pipeline_arg(passes)
    passes.add_argument("--dump-after", metavar="PASS",
                        help="print the graph after PASS (every run of it, or NAME#K for the "
                             "K-th)")
    add_target_args(passes)
    passes.add_argument("--io-in-arena", action="store_true",
                        help="with --target: plan inputs and outputs inside the arena")
    passes.add_argument("--instructions", action="store_true",
                        help="with a Cortex-M --target: count one inference's instructions "
                             "under QEMU before and after each lowering pass")


def _passes_document(result, verify: bool, lowering) -> dict:
    """The `kiln passes --json` document: one entry per pass, the final graph, the lowering."""
    entries = []
    for record in result.records:
        entry = {"name": record.name, "changed": record.changed,
                 "nodes_before": record.nodes_before, "nodes_after": record.nodes_after,
                 "added": len(record.added), "removed": len(record.removed),
                 "modified": len(record.modified), "ms": round(record.ms, 3)}
        if verify:
            entry.update(max_abs_err=record.max_abs_err, max_rel_err=record.max_rel_err)
        entries.append(entry)
    doc = {"passes": entries, "final": {"nodes": len(result.graph.nodes),
                                        "ops": result.op_counts()}}
    if lowering is not None:
        doc["lowering"] = [record.to_json() for record in lowering]
    return doc


def _print_passes(result, verify: bool) -> None:
    from rich.console import Console
    from rich.table import Column, Table

    table = Table("#", Column("pass", no_wrap=True,
                              min_width=max((len(r.name) for r in result.records), default=4)),
                  "nodes", "+add/-rm/~mod", "ms", *(["abs err", "rel err"] if verify else []))
    for index, r in enumerate(result.records, 1):
        diff = f"+{len(r.added)} -{len(r.removed)} ~{len(r.modified)}" if r.changed else "-"
        row = [str(index), r.name, f"{r.nodes_before} -> {r.nodes_after}", diff, f"{r.ms:.1f}"]
        if verify:
            row += [f"{r.max_abs_err:.2g}", f"{r.max_rel_err:.2g}"]
        table.add_row(*row)
    console = Console()
    console.print(table)
    ops = ", ".join(f"{op} {count}" for op, count in result.op_counts().items())
    for r in result.records:
        for note in r.notes:
            console.print(f"{r.name}: {note}", markup=False, highlight=False)
    console.print(f"final: {len(result.graph.nodes)} nodes ({ops})", markup=False,
                  highlight=False)


def run(args) -> int:
    """`kiln passes`."""
    from compiler.driver import prepare_stage
    from compiler.ir.dump import dump
    from compiler.passes import Pipeline, default_pipeline, load_pipeline

    pipeline = load_pipeline(args.pipeline) if args.pipeline else default_pipeline()
    if args.dump_after:
        if args.json:
            raise UsageError("--dump-after prints text, so it cannot be combined with --json")
        # An unknown pass is an error before any work.
        Pipeline(pipeline.enabled() + prepare_stage().passes).stage_index(args.dump_after)
    lowered = bool(args.target or args.board or args.disable_lowering or args.instructions)
    options = target_options(args)[0] if lowered else None  # errors before any work
    if args.instructions and not options.resolved_target().mcu:
        raise UsageError("--instructions counts on an emulated Cortex-M: give a Cortex-M "
                         "--target")
    compiled = compilation_of(args)
    result = compiled.passes(verify=args.verify, seed=args.seed,
                             snapshots=bool(args.dump_after))
    lowering = compiled.lowering(options) if lowered else None
    if args.instructions:
        from compiler.harness.lowering_counts import count_lowering

        count_lowering(compiled, options, lowering, args.seed)
    if args.json:
        print(json.dumps(_passes_document(result, args.verify, lowering)))
    else:
        _print_passes(result, args.verify)
        if lowering is not None:
            _print_lowering(lowering)
    if args.dump_after:
        name, _, nth = args.dump_after.partition("#")
        runs = [r for r in result.records if r.name == name]
        for k, record in enumerate(runs, 1):
            if not nth or int(nth) == k:
                print(f"--- after {record.name} (run {k}) ---")
                print(dump(record.snapshot), end="")
    bad = [r for r in result.records if r.matches is False]
    if bad:
        print(f"kiln: error: after pass {bad[0].name} the outputs differ from the loaded model's "
              f"(max abs error {bad[0].max_abs_err:.3g}, relative {bad[0].max_rel_err:.3g})",
              file=sys.stderr)
        return 1
    return 0


def _print_lowering(records) -> None:
    """The lowering passes as a table (arena and steps before and after), then where each ran."""
    from rich.console import Console
    from rich.table import Column, Table

    counted = any(r.instructions_after is not None for r in records)
    table = Table("#", Column("lowering pass", no_wrap=True), Column("arena B", no_wrap=True),
                  Column("saved B", no_wrap=True), Column("steps", no_wrap=True),
                  *([Column("instructions", no_wrap=True)] if counted else []), "")
    for index, r in enumerate(records, 1):
        row = [str(index), r.name, f"{r.before.arena.size:,} -> {r.after.arena.size:,}",
               f"{r.saved:,}" if r.applied else "-",
               f"{r.before.lowir.steps} -> {r.after.lowir.steps}"]
        if counted:
            row.append(f"{r.instructions_before:,} -> {r.instructions_after:,}"
                       if r.instructions_after is not None else "")
        row.append(r.reason or ("" if r.changed else "found nothing to do"))
        table.add_row(*row)
    console = Console()
    target = records[0].target if records else "?"
    console.print(f"lowering for {target}:", markup=False, highlight=False)
    console.print(table)
    for r in records:
        for name, value in r.properties.items():
            console.print(f"{r.name}: steered by {target}'s {name} = {str(value).lower()}",
                          markup=False, highlight=False)
        for site in r.sites:
            console.print(f"{r.name}: {site}", markup=False, highlight=False)
