"""`kiln validate`: the model run on the board over a serial link, checked and timed.

The validating lives in `compiler.device.validate`; this module declares the arguments and
prints the result: the firmware's identity, the integer elements equal to Kiln's interpreter,
the evaluation rows (against the interpreter and, X-cross, the original model's runtime),
the latency and the per-layer table. Exit 0 only when every check passes.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from app.cli.args import UsageError, add_model_args, compilation_of, writable_file


def add_parser(sub) -> None:
    """The `validate` subcommand's arguments."""
    validate = sub.add_parser("validate", help="run the model on a board (or QEMU) over a "
                                               "serial link: outputs against Kiln's "
                                               "interpreter and the original runtime, latency, "
                                               "per-layer timing")
    add_model_args(validate)
    validate.add_argument("--target", required=True, metavar="CORE",
                          help="the core the firmware was built for (cortex-m7, ...)")
    validate.add_argument("--port", required=True, metavar="URL",
                          help="a serial device (/dev/ttyACM0), a pyserial URL "
                               "(socket://127.0.0.1:5555), or 'qemu' to build the firmware "
                               "and run it on QEMU's board of the core")
    validate.add_argument("--board", metavar="BOARD", help="the board (default: QEMU's board "
                                                            "of the core)")
    validate.add_argument("--inputs", metavar="DATA",
                          help="a folder of .npy files or images, an .npz (with labels) or "
                               ".npy file (default: seeded random inputs)")
    validate.add_argument("-n", "--count", type=int, default=10, metavar="N",
                          help="inputs to send (default 10)")
    validate.add_argument("--seed", type=int, default=0, help="seed of random inputs")
    validate.add_argument("--baud", type=int, default=115200, help="baud rate (default 115200)")
    validate.add_argument("--timeout", type=float, default=5.0, metavar="S",
                          help="seconds to wait for each reply (default 5; inferences get 30 "
                               "more)")
    validate.add_argument("--json", action="store_true", help="print one JSON document")
    validate.add_argument("--csv", metavar="FILE", help="write the per-layer table as CSV")


def run(args) -> int:
    """`kiln validate`: validate, print, exit 0 only if every check passed."""
    from compiler.codegen.targets import BOARDS, get_target
    from compiler.device.validate import validate

    target = get_target(args.target)
    if not target.name.startswith("cortex-m"):
        raise UsageError(f"--target {args.target}: validation on a board is for Cortex-M "
                         "cores")
    if args.count < 1:
        raise UsageError("--count must be at least 1")
    if args.timeout <= 0 or args.baud <= 0:
        raise UsageError("--timeout and --baud must be positive")
    board = None
    if args.board:
        if args.board not in BOARDS:
            raise UsageError(f"--board {args.board}: not a known board ({', '.join(BOARDS)})")
        board = BOARDS[args.board]
    csv_path = writable_file(args.csv, "--csv") if args.csv else None

    def progress(done: int, total: int, text: str) -> None:
        if not args.quiet and not args.json and sys.stderr.isatty():
            print(f"\r{text}...".ljust(60), end="", file=sys.stderr, flush=True)

    try:
        result = validate(args.model, target.name, args.port, args.inputs, args.count,
                          board=board, seed=args.seed, baud=args.baud, timeout=args.timeout,
                          compiled=compilation_of(args), progress=progress)
    finally:  # an error's sentence, or Ctrl+C's, starts on a clean line
        if not args.json and sys.stderr.isatty():
            print("\r".ljust(61), end="\r", file=sys.stderr)
    for warning in result.warnings:
        print(f"kiln: warning: {warning}", file=sys.stderr)
    if csv_path is not None:
        write_csv(result, csv_path)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print_result(result)
    return 0 if result.passed else 1


def write_csv(result, path: Path) -> None:
    """The per-layer table: kernel, op, nodes, device ticks (and their unit), instructions."""
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["kernel", "op", "nodes", f"device {result.tick_unit}",
                      "QEMU instructions", "MACs"])
        for la in result.layers:
            out.writerow([la.symbol, la.op, " ".join(la.nodes), la.ticks,
                          "" if la.instructions is None else la.instructions, la.macs])


def _row(name: str, c, acc: float | None) -> str:
    accuracy = f"{100 * acc:6.1f}%" if acc is not None else f"{'-':>7}"
    return (f"  {name:<12} {accuracy} {c.rmse:10.3g} {c.mae:10.3g} {c.l2r:10.3g} "
            f"{c.cos:10.6f}")


def print_result(r) -> None:
    """The human-readable report."""
    print(f"{r.model} on {r.target}, board {r.board}, over {r.port}: {r.count} inputs "
          f"({r.inputs})")
    print(f"  firmware   Kiln {r.firmware_version}, network {r.network_hash} (matches)")
    if r.integer_elements:
        print(f"  integers   {r.integer_equal:,} of {r.integer_elements:,} output elements "
              "equal to Kiln's interpreter")
    if r.float_elements:
        print(f"  floats     {r.float_close:,} of {r.float_elements:,} output elements within "
              "rounding of Kiln's interpreter")
    print(f"  {'':<12} {'acc':>7} {'rmse':>10} {'mae':>10} {'l2r':>10} {'cos':>10}")
    if r.interpreter is not None:
        print(_row("interpreter", r.interpreter, r.accuracy))
    if r.xcross is not None:
        print(_row("X-cross", r.xcross, r.reference_accuracy) + f"   (against {r.reference})")
    else:
        print(f"  X-cross      not measured: {r.reference_note}")
    if r.accuracy is not None:
        print(f"  {'':<12} acc: the board's top-1 against the labels; on the X-cross row, "
              f"{r.reference or 'the original runtime'}'s")
    if r.latency_us:
        ordered = sorted(r.latency_us)
        median = ordered[len(ordered) // 2]
        clock = " (QEMU -icount: emulated time)" if r.port.startswith("qemu") else ""
        print(f"  latency    median {median / 1000:.3f} ms, min {ordered[0] / 1000:.3f}, max "
              f"{ordered[-1] / 1000:.3f} over {len(ordered)} runs{clock}")
    unit = r.tick_unit
    print(f"  per layer  {unit} on the board ({r.ticks_per_second:,} a second) over one "
          f"inference: {r.total_ticks:,} for the entry point")
    header = f"  {unit:>14}  {'instructions':>12}  {'MACs':>10}  layer"
    print(header if r.total_instructions is not None else header.replace(
        f"  {'instructions':>12}", ""))
    for la in r.layers:
        insn = f"  {la.instructions:>12,}" if la.instructions is not None else ""
        nodes = ", ".join(la.nodes) or "(driver)"
        print(f"  {la.ticks:>14,}{insn}  {la.macs:>10,}  {la.op} {nodes}")
    if r.total_instructions is not None:
        print(f"  QEMU counted {r.total_instructions:,} instructions for the profiled inference")
    for problem in r.problems:
        print(f"  FAILED     {problem}")
    print("  passed" if r.passed else "  failed")
