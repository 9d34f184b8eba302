"""`kiln memory`: the schedule, lifetimes and arena plan; with a board, its budget."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import (
    UsageError,
    Warnings,
    add_model_args,
    add_pipeline_arg,
    add_strict_arg,
    add_target_args,
    compilation_of,
    target_options,
)
from app.cli.compile import budget_warnings, fallback_warnings, print_budget


def add_parser(sub) -> None:
    """The `memory` command's arguments."""
    memory = sub.add_parser("memory", help="schedule, lifetimes, arena plan per strategy, lower "
                                           "bound")
    add_model_args(memory)
    memory.add_argument("--json", action="store_true", help="print one JSON document")
    memory.add_argument("--io-in-arena", action="store_true",
                        help="place inputs and outputs inside the activation arena so their "
                             "space is reused once dead")
    add_target_args(memory)
    add_pipeline_arg(memory)
    add_strict_arg(memory)
    memory.add_argument("--dump", action="store_true", help="also print the low-level IR")


def run(args) -> int:
    """`kiln memory`: the plan; with --board or --board-file, the budget checked as well.

    The board's figures are the compiled bundle's (`codegen.bundle.report`), so they are
    what `kiln compile --board` reports for the same options.
    """
    if args.dump and args.json:
        raise UsageError("--dump prints text, so it cannot be combined with --json")
    options, board = target_options(args)
    warnings = Warnings(args)
    compiled = compilation_of(args)
    fallback_warnings(compiled, warnings)
    plan = compiled.plan(options)
    doc = plan.to_json()
    if board is not None:
        from compiler.codegen.bundle import report

        chosen, _ = compiled.layout_that_fits(options, board)
        doc["board"] = report(compiled.net(chosen), board)["board"]
        budget_warnings(doc["board"], warnings)
    warnings.check()
    doc["warnings"] = warnings.lines
    if args.json:
        print(json.dumps(doc))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{Path(args.model).name}[/bold]: {plan.lowir.steps} steps, "
                  f"scheduler {doc['scheduler']}: peak {doc['schedule_peak']:,} B (topological "
                  f"order {doc['topological_peak']:,} B)")
    whole = doc["whole_tensor_bound"]
    rows = (f" row-streamed, {whole:,} B with whole tensors" if whole != doc["lower_bound"]
            else "")
    console.print(f"activations {doc['activations']:,} B (lower bound {doc['lower_bound']:,} B"
                  f"{rows}, "
                  f"efficiency {doc['efficiency']:.3f}), mutable {doc['mutable']:,} B, constant "
                  f"{doc['constant']:,} B, alignment {plan.alignment}"
                  + (", inputs and outputs in the arena" if args.io_in_arena else ""))
    strategies = Table("strategy", "arena bytes")
    for name, size in doc["strategies"].items():
        strategies.add_row(name + (" (kept)" if name == plan.arena.strategy else ""), f"{size:,}")
    console.print(strategies)
    streaming = any(b["streams_from"] or b["window"] for b in doc["buffers"])
    buffers = Table("buffer", "node", "size", "offset", "steps",
                    *(["overlaps (rows) / window"] if streaming else []))
    for b in doc["buffers"]:
        stream, window = b["streams_from"], b["window"]
        how = (f"{stream['source']} ({stream['rows']})" if stream else
               f"{window['rows']} row{'s' if window['rows'] > 1 else ''} of {window['of']}"
               if window else "")
        buffers.add_row(b["name"], b["node"], f"{b['size']:,}", f"{b['offset']:,}",
                        f"{b['first']}-{b['last']}", *([how] if streaming else []))
    console.print(buffers)
    if board is not None:
        print_budget(doc["board"])
    if args.dump:
        print(plan.lowir.dump(), end="")  # plain print: rich would wrap long operand lists
    return 0
