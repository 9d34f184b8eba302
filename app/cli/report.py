"""`kiln report`: one self-contained HTML analysis of a model on a target (or its JSON).

The figures come from `compiler.report`, which asks the code behind `kiln memory`, `kiln
compile` and `kiln bench --target`; this module parses the arguments and writes the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from app.cli.args import (
    UsageError,
    Warnings,
    add_model_args,
    add_profile_arg,
    load_graph,
    target_and_board,
    writable_file,
)
from compiler.errors import KilnError


def add_parser(sub) -> None:
    """The `report` subcommand's arguments."""
    from compiler.report.figures import DEFAULT_CLOCK_MHZ

    report = sub.add_parser("report", help="a self-contained HTML report: model summary, flash "
                                           "and RAM, memory timeline, per-layer table, passes")
    add_model_args(report)
    report.add_argument("--target", metavar="TARGET",
                        help="the CPU target or a board name (default: the board's CPU with "
                             "--board, else host); instructions are counted under QEMU on "
                             "cortex-m4/m7/m33/m55")
    report.add_argument("--board", metavar="BOARD",
                        help="show flash and RAM use against this board's budget")
    add_profile_arg(report)
    report.set_defaults(quantize_on_load=False)  # the float model is kept to compare with
    report.add_argument("--data", metavar="DATA",
                        help="with --profile: held-out samples the per-layer SQNR is measured "
                             "on (forms as kiln profile --data; default: the profile's own "
                             "data when it can be read)")
    report.add_argument("--clock", type=float, default=DEFAULT_CLOCK_MHZ, metavar="MHZ",
                        help="clock of the estimated times, instructions / clock assuming one "
                             f"instruction a cycle (default {DEFAULT_CLOCK_MHZ:g})")
    report.add_argument("--no-count", action="store_true",
                        help="do not count instructions under QEMU (faster; no times)")
    report.add_argument("-o", "--output", metavar="REPORT.html", help="the HTML file to write")
    report.add_argument("--json", action="store_true",
                        help="print the report's figures as one JSON document")


def run(args) -> int:
    """`kiln report`: collect the figures, then write the page and/or print the JSON."""
    from compiler.driver import compilation
    from compiler.fileio import atomic_write_bytes
    from compiler.report import collect_report, render_html

    if not args.output and not args.json:
        raise UsageError("kiln report needs -o REPORT.html, --json, or both")
    if not math.isfinite(args.clock) or args.clock <= 0:
        raise UsageError(f"--clock {args.clock:g}: give the clock in MHz, a positive number")
    output = writable_file(args.output) if args.output else None
    target, board = target_and_board(args.target, args.board)
    graph = load_graph(args)
    quant = sqnr_of = None
    if args.profile:
        graph, quant, sqnr_of = _quantized(args, graph)
    report = collect_report(compilation(graph), Path(args.model).name, target.name, board,
                            args.clock, quant, sqnr_of, count=not args.no_count)
    if output is not None:
        try:
            atomic_write_bytes(output, render_html(report).encode())
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        Warnings(args).say(f"wrote {output}")
    return 0


def _quantized(args, graph):
    """The graph quantized with --profile, its summary, and the SQNR measure (or None)."""
    from compiler.quant.calibration_data import load_calibration
    from compiler.quant.glow_yaml import read_profile
    from compiler.quant.recipe import QuantRecipe, quantize_with
    from compiler.report.figures import measure_sqnr, quantization_of

    profile = read_profile(args.profile)
    recipe = QuantRecipe.of_profile(profile, graph, method=args.method, schema=args.schema)
    qdq = quantize_with(graph, recipe)
    quant = quantization_of(qdq, recipe)
    source = args.data or profile.data.get("source")
    if not source:
        return qdq, quant, None
    try:
        data = load_calibration(source, graph)
    except KilnError:
        if args.data:
            raise
        return qdq, quant, None  # the profile's data is not here: the report says so
    return qdq, quant, measure_sqnr(graph, qdq, data, quant)
