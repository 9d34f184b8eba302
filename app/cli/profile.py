"""`kiln profile`: every float tensor's range and histogram over calibration samples.

The measuring lives in `compiler.quant.profiler`; this module parses the arguments, shows
progress on a terminal and writes the profile.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from app.cli.args import UsageError, Warnings, add_model_args, load_graph, writable_file
from compiler.quant.histogram import DEFAULT_BINS


def add_parser(sub) -> None:
    """The `profile` subcommand's arguments."""
    profile = sub.add_parser("profile", help="record every float tensor's range over "
                                             "calibration data (a JSON profile)")
    add_model_args(profile)
    profile.add_argument("--data", required=True, metavar="DATA",
                         help="a folder of .npy files or images, an .npz or .npy file, or "
                              "'digits', 'digits:train', 'digits:test' (the 8x8 digits)")
    profile.add_argument("-o", "--output", required=True, metavar="PROFILE.json",
                         help="where to write the profile (a .yaml or .yml name writes Glow's "
                              "profile format)")
    profile.add_argument("--json", action="store_true", help="print one JSON document")
    profile.add_argument("--equalize", action="store_true",
                         help="equalize the weight ranges of consecutive convolutions first "
                              "(cross-layer equalization); the profile records it")
    profile.add_argument("--bins", type=int, default=DEFAULT_BINS, metavar="N",
                         help=f"histogram bins per tensor (default {DEFAULT_BINS}, as the "
                              "window profiles: fine enough for every --method)")
    profile.add_argument("--scale", type=float, default=1 / 255, metavar="S",
                         help="images: pixel (0..255) times S, before mean and std "
                              "(default 1/255)")
    profile.add_argument("--mean", default="0", metavar="M[,M,M]",
                         help="images: subtracted after scaling, per channel (default 0)")
    profile.add_argument("--std", default="1", metavar="S[,S,S]",
                         help="images: divided by after the mean, per channel (default 1)")
    profile.add_argument("--channels", choices=("rgb", "bgr", "gray"), default="rgb",
                         help="images: channel order (default rgb)")


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"{what} takes numbers separated by commas, not {text!r}") from None


def run(args) -> int:
    """`kiln profile`: load, profile on the compiled float code, write the JSON."""
    from compiler.quant.calibration_data import Normalization, load_calibration
    from compiler.quant.glow_yaml import write_profile
    from compiler.quant.profiler import profile_model

    if not 1 <= args.bins <= 1_000_000:
        raise UsageError("--bins must be between 1 and 1,000,000")
    output = writable_file(args.output)
    graph = load_graph(args)
    normalization = Normalization(args.scale, _floats(args.mean, "--mean"),
                                  _floats(args.std, "--std"), args.channels)
    data = load_calibration(args.data, graph, normalization)
    bar, progress = contextlib.nullcontext(), None
    if sys.stderr.isatty() and not args.quiet:  # a progress bar; Ctrl+C stops between samples
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        bar = Progress("profiling", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                       transient=True)
        task = bar.add_task("profile", total=len(data))

        def progress(done: int, _total: int) -> None:
            bar.update(task, completed=done)
    with bar:
        profile = profile_model(graph, data, Path(args.model).name, args.bins, progress,
                                equalized=args.equalize)
    try:
        write_profile(profile, output)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    if args.json:
        print(json.dumps({"model": Path(args.model).name, "tensors": len(profile.tensors),
                          "samples": len(data), "data": data.source, "bins": profile.bins,
                          "equalized": profile.equalized, "graph_hash": profile.graph_hash,
                          "written": str(output)}))
        return 0
    Warnings(args).say(f"profiled {len(profile.tensors)} tensors of {Path(args.model).name} "
                       f"on {len(data):,} samples of {data.source}; wrote {output}")
    return 0
