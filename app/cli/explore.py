"""`kiln explore`: the fastest configurations within an accuracy bound that fit a board.

The search lives in `compiler.explore`; this module parses the arguments, picks where trials
run (a local Ray instance, a cluster, or this process), reports progress, prints the front
and writes EXPLORE.json with its plot. `kiln explore-export` turns one point into a bundle or
a QDQ ONNX model.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from app.cli.args import UsageError, Warnings, writable_file

CONTROL_LINE_SECONDS = 2.0  # accuracy control's lines on stderr: at least this far apart


def add_parser(sub) -> None:
    """The `explore` and `explore-export` subcommands' arguments."""
    p = sub.add_parser("explore", help="search quantization and compile options for the best "
                                       "accuracy / instructions / flash / RAM on a target")
    p.add_argument("model", help="the float model (.onnx or .tflite)")
    p.add_argument("--data", required=True, metavar="CALIB",
                   help="calibration samples (the forms of kiln profile --data)")
    p.add_argument("--eval", required=True, metavar="DATA",
                   help="evaluation samples, with labels for accuracy (without: top-1 "
                        "agreement with the float model)")
    p.add_argument("--target", default="cortex-m7", metavar="TARGET",
                   help="a Cortex-M target counted under QEMU (default cortex-m7)")
    p.add_argument("--board", metavar="BOARD", help="a board whose flash and RAM bound the "
                                                     "points")
    p.add_argument("--max-drop", type=float, default=1.0, metavar="POINTS",
                   help="accuracy points a point may lose against float (default 1.0)")
    p.add_argument("--trials", type=int, default=40, metavar="N",
                   help="configurations to measure, accuracy control's included (default 40)")
    p.add_argument("--population", type=int, default=8, metavar="P",
                   help="configurations per generation (default 8)")
    p.add_argument("--seed", type=int, default=0, help="the search's seed (default 0)")
    p.add_argument("--sampler", choices=("nsga2", "tpe"), default="nsga2",
                   help="Optuna's NSGA-II (default) or TPE")
    p.add_argument("--profile", metavar="PROFILE.json",
                   help="start from this profile's ranges and overrides (default: profile "
                        "the calibration data)")
    p.add_argument("--address", metavar="ADDR",
                   help="an existing Ray cluster: auto, HOST:PORT or ray://HOST:PORT "
                        "(default: a local instance sized to the cores)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="CPUs of the local Ray instance (default: all); 0 runs trials in "
                        "this process without Ray")
    p.add_argument("--plot", metavar="PNG", help="the plot (default: EXPLORE.png beside -o)")
    p.add_argument("--progress-json", action="store_true",
                   help="print progress as one JSON object per line (for other programs)")
    p.add_argument("--force", action="store_true",
                   help="start over when -o holds another exploration")
    p.add_argument("-o", "--output", required=True, metavar="EXPLORE.json",
                   help="where to keep every trial and the front (a run resumes from it)")
    p.add_argument("--json", action="store_true",
                   help="print the whole exploration record as one JSON document at the end "
                        "(trial lines still go to stderr)")



def _executor(args):
    from compiler.explore.executors import InProcess, Lazy, RayExecutor

    if args.workers is not None and args.workers < 0:
        raise UsageError("--workers must be 0 or more")
    if args.workers == 0:
        if args.address:
            raise UsageError("--workers 0 runs in this process; it cannot be combined with "
                             "--address")
        return InProcess()
    return Lazy(lambda: RayExecutor(args.address, args.workers))


def _printer(args):
    """A progress callback: JSON lines, or a line per trial on stderr.

    On a pipe or in a CI log too: an exploration takes minutes, and silence looks like a hang.
    """
    from compiler.explore.points import control_text

    last = {"stage": None, "at": 0.0}
    said = Warnings(args)

    def report(p) -> None:
        for warning in p.warnings:
            said.warn(warning)
        if args.progress_json:
            print(json.dumps(p.to_json()), flush=True)
        elif p.control is not None and not args.quiet:
            # Every compiled point and stage, else a line every few seconds: never silent.
            now = time.monotonic()
            if (p.control["compiled"] or p.control["stage"] != last["stage"]
                    or now - last["at"] >= CONTROL_LINE_SECONDS):
                last.update(stage=p.control["stage"], at=now)
                print(f"  {control_text(p.control, p.total)}", file=sys.stderr, flush=True)
        elif p.trial is not None and not args.quiet:
            t = p.trial
            what = (f"{100 * t['measurement']['score']:.2f} %, "
                    f"{t['measurement']['instructions']:,} instructions"
                    if "measurement" in t else f"failed: {t.get('error')}")
            print(f"  trial {t['number']} ({p.done}/{p.total}): {what}", file=sys.stderr,
                  flush=True)
    return report


def run(args) -> int:
    """`kiln explore`: accuracy control, then the search; the front printed and saved."""
    from compiler.explore.engine import Exploration
    from compiler.explore.executors import require
    from compiler.explore.plot import save_plot
    from compiler.explore.problem import ProblemSpec

    output = writable_file(args.output)
    if not 0 <= args.max_drop < 100:
        raise UsageError("--max-drop is in accuracy points, between 0 and 100")
    require("optuna")
    spec = ProblemSpec(str(Path(args.model)), args.data, args.eval, args.target, args.board,
                       args.max_drop / 100, args.profile)
    stop = {"asked": False}

    def ask_stop(*_):
        stop["asked"] = True
    previous = signal.signal(signal.SIGTERM, ask_stop)
    executor = None
    try:
        run = Exploration(spec, output, args.trials, args.seed, args.sampler, args.population,
                          None, _printer(args), lambda: stop["asked"], fresh=args.force)
        executor = _executor(args)
        run.executor = executor
        try:
            record = run.run()
        except KeyboardInterrupt:
            stop["asked"] = True
            record = run.record
    finally:
        signal.signal(signal.SIGTERM, previous)
        if executor is not None:
            executor.close()
    doc = record.to_json()
    plot = Path(args.plot) if args.plot else output.with_suffix(".png")
    save_plot(doc, plot)
    if args.json and not args.progress_json:
        print(json.dumps({**doc, "written": [str(output), str(plot)]}))
    elif not args.progress_json:
        _print_summary(doc, output, plot)
    if not record.complete:
        print(f"kiln: stopped; {len(record.trials)} trials kept in {output} (run the same "
              "command again to resume)", file=sys.stderr)
        return 130
    return 0


def _print_summary(doc: dict, output: Path, plot: Path) -> None:
    from compiler.explore.config import Config

    score = "accuracy" if doc["score"] == "accuracy" else "top-1 agreement"
    trials = {t["number"]: t for t in doc["trials"]}
    failed = sum(1 for t in doc["trials"] if "error" in t)
    print(f"{Path(doc['problem']['model']).name} on {doc['problem']['target']}: float "
          f"{score} {100 * doc['float_score']:.2f} %, bound {100 * doc['problem']['max_drop']:g}"
          f" points; {len(trials)} trials ({failed} failed), first feasible after "
          f"{doc['first_feasible_seconds'] or 0:.1f} s")
    if not doc["front"]:
        print("  no feasible point: widen --max-drop, take a bigger board, or run more trials")
    else:
        print(f"  Pareto front ({len(doc['front'])} points):")
        print(f"  {'#':>4} {score[:9]:>9} {'instructions':>13} {'flash':>9} {'RAM':>8} "
              f"{'float':>5}  configuration")
        for n in doc["front"]:
            m, config = trials[n]["measurement"], Config.from_json(trials[n]["config"])
            print(f"  {n:>4} {100 * m['score']:>8.2f}% {m['instructions']:>13,} "
                  f"{m['flash']:>9,} {m['ram']:>8,} {m['float_layers']:>5}  {config.summary()}")
        best = ", ".join(f"{k} #{v}" for k, v in doc["best_feasible"].items())
        print(f"  best feasible: {best}")
    print(f"  wrote {output} and {plot}")
