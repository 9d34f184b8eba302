"""The `kiln` command line: one entry point for the headless compiler (and, later, the GUI).

Every error a user can cause ends as one line on stderr and exit code 2; `--json` prints exactly
one JSON document on stdout and nothing else there.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.cli_args import (
    Parser,
    StrictFailure,
    UsageError,
    Warnings,
    add_model_args,
    add_pipeline_arg,
    add_profile_arg,
    add_strict_arg,
    add_target_args,
    compilation_of,
    load_graph,
    parse_input,
    target_options,
    writable_file,
)
from app.cli_bench import add_bench_parser, cmd_bench
from app.cli_compile import (
    add_compile_parser,
    budget_warnings,
    cmd_compile,
    fallback_warnings,
    print_budget,
)
from app.cli_diff import add_diff_parser, cmd_diff
from app.cli_explore import add_explore_parser, cmd_explore, cmd_explore_export
from app.cli_passes import add_passes_parser, cmd_passes
from app.cli_profile import add_profile_parser, add_quantize_parser, cmd_profile, cmd_quantize
from app.cli_report import add_report_parser, cmd_report
from app.cli_walkthrough import add_walkthrough_parser, cmd_walkthrough
from compiler.errors import KilnError, one_line

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (sub-commands)."""
    parser = Parser(prog="kiln", description="Kiln: a workbench and ahead-of-time compiler "
                     "for neural networks on microcontrollers.")
    parser.add_argument("-V", "--version", action="store_true",
                        help="print Kiln's version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)

    inspect = sub.add_parser("inspect", help="operators, parameters, MACs, inputs and outputs")
    add_model_args(inspect)
    inspect.add_argument("--json", action="store_true", help="print one JSON document")
    inspect.add_argument("--dump", action="store_true", help="also print the graph, a line a node")

    run = sub.add_parser("run", help="run a model with the reference interpreter or compiled")
    add_model_args(run)
    run.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                     help="an input tensor (inputs not given get a seeded random tensor)")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    run.add_argument("--engine", choices=["reference", "compiled"], default="reference",
                     help="the reference interpreter (default), or the model compiled for this "
                          "host and run as a bundle")
    run.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs to an npz file")
    run.add_argument("--stage", default=None, metavar="STAGE",
                     help="run the graph as loaded ('loaded'), after the whole default pipeline "
                          "('final'), after the named pass (NAME, or NAME#K for its K-th run), "
                          "or after the first N passes (to bisect a miscompile); default: the "
                          "model's own answer, the graph as loaded for a float model and the "
                          "integer graph for a quantized one (its Quantize/Dequantize pairs run "
                          "in float only approximate its rule)")
    run.add_argument("--json", action="store_true",
                     help="print one JSON document: each output's type, shape and values")
    run.add_argument("--dequantize", action="store_true",
                     help="also print quantized (int8/uint8) outputs as real values, "
                          "scale x (q - zero_point)")
    add_pipeline_arg(run)
    add_profile_arg(run)
    add_passes_parser(sub)
    _add_memory_parser(sub)
    add_compile_parser(sub)
    add_bench_parser(sub)
    add_profile_parser(sub)
    add_quantize_parser(sub)
    add_diff_parser(sub)
    add_walkthrough_parser(sub)
    add_report_parser(sub)
    add_explore_parser(sub)
    for command in sub.choices.values():  # what every command takes
        talk = command.add_mutually_exclusive_group()
        talk.add_argument("-q", "--quiet", action="store_true",
                          help="print only the result and warnings: no notes, hints, progress "
                               "or summary lines")
        talk.add_argument("-v", "--verbose", action="store_true",
                          help="also say, on stderr, how long the command took and its peak memory")
    return parser


def cmd_inspect(args) -> int:
    """`kiln inspect`."""
    from compiler.qmath.summary import summary
    from compiler.stats import compute_stats

    graph = load_graph(args)
    stats = compute_stats(graph)
    quant = summary(graph)
    if args.json:
        print(json.dumps({**stats.to_json(), "dtypes": quant["dtypes"],
                          "quantized": {**quant["quantized"], "values": quant["values"]}}))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{Path(args.model).name}[/bold]: graph {graph.name!r}, opset "
                  f"{graph.opset}, {stats.nodes} nodes, {stats.params:,} parameters "
                  f"({stats.param_bytes:,} bytes), {stats.macs:,} MACs")
    types = ", ".join(f"{count} {dtype}" for dtype, count in quant["dtypes"].items())
    console.print(f"tensors: {types}; quantized: {quant['quantized']['per_tensor']} per tensor,"
                  f" {quant['quantized']['per_channel']} per channel", markup=False)
    table = Table("input/output", "name", "type", "shape")
    for kind, items in (("input", stats.inputs), ("output", stats.outputs)):
        for item in items:
            table.add_row(kind, item["name"], item["dtype"], str(item["shape"]))
    console.print(table)
    ops_table = Table("operator", "count")
    for op, count in stats.ops.items():
        ops_table.add_row(op, str(count))
    console.print(ops_table)
    if args.dump:
        from compiler.ir.dump import dump

        console.print(dump(graph), markup=False, highlight=False)
    return 0


def _read_inputs(graph, specs: Sequence[str], seed: int) -> dict[str, np.ndarray]:
    from compiler.inputs import random_inputs

    feeds = random_inputs(graph, seed)
    by_name = {v.name: v for v in graph.inputs}
    for spec in specs:
        name, path = parse_input(spec)
        if name not in by_name:
            raise UsageError(f"--input {name}: the model has no input of that name (inputs are: "
                             f"{', '.join(by_name)})")
        try:
            array = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise UsageError(f"--input {name}: no such file {str(path)!r}") from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"--input {name}: {str(path)!r} is not a readable .npy file "
                             f"({exc})") from None
        if not isinstance(array, np.ndarray):
            raise UsageError(f"--input {name}: {str(path)!r} holds several arrays; give a .npy")
        want = by_name[name].type
        if array.dtype.name != want.dtype:
            if not np.can_cast(array.dtype, want.dtype, casting="same_kind"):
                raise UsageError(f"--input {name}: {str(path)!r} holds {array.dtype.name}, the "
                                 f"model wants {want.dtype}")
            array = _converted_input(name, path, array, want.dtype)
        if tuple(array.shape) != want.shape:
            raise UsageError(f"--input {name}: {str(path)!r} has shape {list(array.shape)}, the "
                             f"model wants {list(want.shape)}")
        feeds[name] = array
    return feeds


def _converted_input(name: str, path, array: np.ndarray, dtype: str) -> np.ndarray:
    """`array` as the model's element type, refused when a value does not survive the change.

    numpy wraps an int64 200 to int8 -56 and turns a float64 1e39 into float32 infinity, both
    silently; the model would then compute on values the file does not hold.
    """
    target = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(target)
    if target.kind in "iu":
        info = np.iinfo(target)
        bad, limit = (array < info.min) | (array > info.max), \
            f"outside {dtype}'s range [{info.min}, {info.max}]"
    elif target.kind == "f" and array.dtype.kind in "fiu":
        bad, limit = np.isfinite(array) & ~np.isfinite(converted), \
            f"beyond {dtype}'s largest value {np.finfo(target).max:g}"
    else:
        return converted
    if bad.any():
        at = np.unravel_index(int(np.argmax(bad)), array.shape)
        raise UsageError(f"--input {name}: {str(path)!r} holds {array[at]} at "
                         f"{[int(i) for i in at]}, {limit}")
    return converted


def cmd_run(args) -> int:
    """`kiln run`."""
    from compiler.interpreter import run
    from compiler.qmath.explain import real_value_formula

    if args.output:
        writable_file(args.output)
    graph = load_graph(args)
    feeds = _read_inputs(graph, args.input or [], args.seed)
    if args.engine == "compiled":
        if args.stage is not None:
            raise UsageError("--stage applies to the reference engine only; the compiled engine "
                             "always runs the final graph")
        outputs = _run_compiled(compilation_of(args, graph), feeds)
    else:
        compiled = compilation_of(args, graph)
        if args.stage is None and compiled.reference is not graph and not args.json:
            print(f"the integer graph (after to_integer, {_rule_of(compiled)} rule), as the "
                  "compiled code computes it")
        graph = compiled.reference if args.stage is None else compiled.stage(args.stage)
        outputs = run(graph, feeds)
    quant = {v.name: v.type.quant for v in graph.outputs}
    if args.output:
        _write_outputs(args.output, outputs)
    if args.json:
        print(json.dumps({"engine": args.engine, "outputs": {
            name: {"dtype": array.dtype.name, "shape": list(array.shape),
                   "values": array.reshape(-1).tolist(),
                   "argmax": int(np.argmax(array)) if array.size else None}
            for name, array in outputs.items()}, "written": args.output}))
        return 0
    for name, array in outputs.items():
        flat = array.reshape(-1)
        preview = np.array2string(flat[:8], precision=5, separator=", ")
        more = " ..." if flat.size > 8 else ""
        line = f"{name}: {array.dtype.name}{list(array.shape)} {preview}{more}"
        if array.ndim >= 1 and array.size > 1 and array.shape[0] == 1:
            line += f"  argmax={int(np.argmax(flat))}"
        print(line)
        q = quant.get(name)
        if args.dequantize and q is not None and len(q.scale) == 1:
            real = np.float32(q.scale[0]) * (flat[:8].astype(np.float32) - q.zero_point[0])
            print(f"  {real_value_formula(q)}: "
                  f"{np.array2string(real, precision=5, separator=', ')}{more}")
    if args.output:
        print(f"wrote {args.output}")
    return 0


def _write_outputs(path: str, outputs: dict[str, np.ndarray]) -> None:
    """The outputs as an npz file, written atomically."""
    from compiler.fileio import atomic_write_bytes

    buffer = io.BytesIO()
    np.savez(buffer, **outputs)
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def _rule_of(compiled) -> str:
    """The requantization rule a compilation's integer operators follow, as the user names it."""
    from compiler.qmath.requant import REQUANT_KEY

    return {"tflite": "TFLite Micro's", "onnx": "onnxruntime's"}.get(
        compiled.final.metadata.get(REQUANT_KEY), "onnxruntime's")


def _run_compiled(compiled, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of the final graph compiled for this host, written as a bundle and loaded back."""
    import tempfile

    from compiler.codegen.host import HostNet

    with tempfile.TemporaryDirectory(prefix="kiln-run-") as folder:
        compiled.bundle(folder)
        hosted = HostNet.from_bundle(folder)
        try:
            outputs = hosted.run(feeds)
        finally:
            hosted.close()
    missing = [v.name for v in compiled.graph.outputs if v.name not in outputs]
    if missing:
        raise KilnError(f"the compiled network lost output {missing[0]}")
    return {v.name: outputs[v.name] for v in compiled.graph.outputs}


def _add_memory_parser(sub) -> None:
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


def cmd_memory(args) -> int:
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


COMMANDS = {"inspect": cmd_inspect, "run": cmd_run, "passes": cmd_passes, "memory": cmd_memory,
            "compile": cmd_compile, "bench": cmd_bench, "profile": cmd_profile,
            "quantize": cmd_quantize, "diff": cmd_diff, "report": cmd_report,
            "walkthrough": cmd_walkthrough, "explore": cmd_explore,
            "explore-export": cmd_explore_export}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kiln` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # A deep graph is hundreds of thousands of small linked objects; at the default threshold
    # the cyclic collector rescans them thousands of times (a quarter of a 20,000-node compile).
    gc.set_threshold(100_000, 50, 50)
    try:
        if argv[:1] in (["--version"], ["-V"]):
            from compiler.version import kiln_version

            print(f"kiln {kiln_version()}")
            return 0
        if argv and _looks_like_a_command(argv[0]):
            raise UsageError(_unknown_command(argv[0]))
        if not argv or argv[0] not in COMMANDS and argv[0] not in ("-h", "--help"):
            return _open_gui(argv)
        args = build_parser().parse_args(argv)
        started = time.perf_counter()
        try:
            return COMMANDS[args.command](args)
        except (UsageError, StrictFailure):
            raise
        except KilnError as exc:  # a model's error names its file, whichever stage found it
            name = Path(getattr(args, "model", "") or "").name
            if name and not str(exc).startswith(f"{name}: "):
                raise KilnError(f"{name}: {exc}") from None
            raise
        finally:
            if getattr(args, "verbose", False):
                import resource

                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"kiln: {args.command} took {time.perf_counter() - started:.2f} s, "
                      f"peak memory {peak:,.0f} MiB", file=sys.stderr)
    except KilnError as exc:
        print(f"kiln: error: {one_line(str(exc))}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_USAGE)
    except KeyboardInterrupt:
        print("kiln: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (kiln ... | head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # the last line of defence: never a traceback for the user
        if os.environ.get("KILN_DEBUG"):
            raise
        print(f"kiln: internal error: {type(exc).__name__}: {one_line(str(exc))} (set "
              "KILN_DEBUG=1 for the traceback and please report it)", file=sys.stderr)
        return 3


def _looks_like_a_command(word: str) -> bool:
    """A first word that is no command and no file: a mistyped command, not a model to open."""
    return (word not in COMMANDS and word.replace("-", "").isalpha()
            and not word.startswith("-") and not Path(word).exists())


def _unknown_command(word: str) -> str:
    import difflib

    near = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f"did you mean {near[0]}? " if near else ""
    return f"{word!r} is not a kiln command ({hint}commands: {', '.join(COMMANDS)})"


def _open_gui(argv: Sequence[str]) -> int:
    """`kiln [MODEL] [--screenshot DIR]`: the desktop app (imported only when asked for)."""
    from app.gui import run_gui

    return run_gui(argv)


if __name__ == "__main__":
    sys.exit(main())
