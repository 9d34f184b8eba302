"""`kiln profile`: every float tensor's range and histogram over calibration samples.

The measuring lives in `compiler.quant.profiler`; this module parses the arguments, shows
progress on a terminal and writes the profile.
"""

from __future__ import annotations

import sys
from pathlib import Path

from app.cli_args import UsageError, add_model_args, load_graph


def add_profile_parser(sub) -> None:
    """The `profile` subcommand's arguments."""
    profile = sub.add_parser("profile", help="record every float tensor's range over "
                                             "calibration data (a JSON profile)")
    add_model_args(profile)
    profile.add_argument("--data", required=True, metavar="DATA",
                         help="a folder of .npy files or images, an .npz or .npy file, or "
                              "'digits', 'digits:train', 'digits:test' (scikit-learn's digits)")
    profile.add_argument("-o", "--output", required=True, metavar="PROFILE.json",
                         help="where to write the profile")
    profile.add_argument("--bins", type=int, default=10, metavar="N",
                         help="histogram bins per tensor (default 10, as Glow)")
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


def cmd_profile(args) -> int:
    """`kiln profile`: load, profile on the compiled float code, write the JSON."""
    from compiler.quant.calibration_data import Normalization, load_calibration
    from compiler.quant.profiler import profile_model

    if args.bins < 1:
        raise UsageError("--bins must be at least 1")
    output = Path(args.output)
    if not output.parent.is_dir():
        raise UsageError(f"-o {output}: the folder {output.parent} does not exist")
    graph = load_graph(args)
    normalization = Normalization(args.scale, _floats(args.mean, "--mean"),
                                  _floats(args.std, "--std"), args.channels)
    data = load_calibration(args.data, graph, normalization)
    show = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if show:
            print(f"\rprofiling: {done:,} of {total:,} samples", end="", file=sys.stderr,
                  flush=True)

    profile = profile_model(graph, data, Path(args.model).name, args.bins, progress)
    if show:
        print(file=sys.stderr)
    profile.save(output)
    print(f"profiled {len(profile.tensors)} tensors of {Path(args.model).name} on "
          f"{len(data):,} samples of {data.source}; wrote {output}")
    return 0
