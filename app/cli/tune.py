"""`kiln tune`: kernel schedules searched against measured cost, kept in a tuning log.

The search lives in `compiler.tuning.search`; this module declares the arguments, picks the
executor (this process, or Ray: local workers or a cluster) and prints a line per round.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from app.cli.args import UsageError, Warnings, parse_shape


def add_parser(sub) -> None:
    """The `tune` subcommand's arguments."""
    p = sub.add_parser("tune", help="search each layer's kernel schedule against measured cost "
                                    "(instructions under QEMU, or time on this host) into a "
                                    "tuning log for kiln compile --tuning")
    p.add_argument("model", help="the model file (.onnx or .tflite), usually int8")
    p.add_argument("--shape", action="append", metavar="NAME=d0,d1,...",
                   help="static shape of an input whose dimensions are symbolic or unknown")
    p.add_argument("--target", required=True, metavar="TARGET",
                   help="cortex-m0plus/m3/m4/m7/m33/m55 (instructions counted under QEMU) or "
                        "host (time-stamp counter on this machine)")
    p.add_argument("--log", metavar="LOG.jsonl",
                   help="the tuning log: read, resumed and appended to (default: "
                        "MODEL.TARGET.tuning.jsonl beside the model's name, in this folder)")
    p.add_argument("--trials", type=int, default=32, metavar="N",
                   help="builds of the network to measure, each with one candidate schedule "
                        "per workload (default 32)")
    p.add_argument("--seed", type=int, default=0, help="the search's seed (default 0)")
    p.add_argument("--seed-inputs", type=int, default=0, metavar="SEED",
                   help="seed of the random inputs the candidates run on (default 0)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="local Ray workers (default: every core); 0 measures in this process")
    p.add_argument("--address", metavar="ADDR",
                   help="a Ray cluster (auto, HOST:PORT or ray://HOST:PORT) instead of a "
                        "local instance")
    p.add_argument("--json", action="store_true",
                   help="print a summary as one JSON document at the end")
    p.add_argument("--progress-json", action="store_true",
                   help="print one JSON line per round on stdout (for the workbench)")


def _executor(args):
    from compiler.explore.executors import InProcess, Lazy, RayExecutor
    from compiler.tuning.search import tune_trial

    if args.workers is not None and args.workers < 0:
        raise UsageError("--workers must be 0 or more")
    if args.workers == 0:
        if args.address:
            raise UsageError("--workers 0 runs in this process; it cannot be combined with "
                             "--address")
        return InProcess(tune_trial)
    return Lazy(lambda: RayExecutor(args.address, args.workers, task=tune_trial))


def default_log(model: str, target: str) -> Path:
    """MODEL.TARGET.tuning.jsonl in the current folder."""
    return Path(f"{Path(model).stem}.{target}.tuning.jsonl")


def run(args) -> int:
    """`kiln tune`: rounds of trials, the log rewritten after each, a summary at the end."""
    from compiler.codegen.targets import get_target
    from compiler.explore.executors import require
    from compiler.tuning.log import best_entries, read_log
    from compiler.tuning.measure import TuneSpec
    from compiler.tuning.search import tune
    from compiler.version import kiln_version

    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    target = get_target(args.target).name
    log = Path(args.log) if args.log else default_log(args.model, target)
    read_log(log)  # a malformed log is refused before any work
    require("optuna")
    shapes = dict(parse_shape(s) for s in args.shape or [])
    spec = TuneSpec(str(args.model), target, shapes, args.seed_inputs)
    said = Warnings(args)
    stop = {"asked": False}

    def ask_stop(*_):
        stop["asked"] = True
    previous = signal.signal(signal.SIGTERM, ask_stop)
    executor = _executor(args)

    def report(progress) -> None:
        if args.progress_json:
            print(json.dumps({"phase": "tune", "done": progress.trials,
                              "total": progress.asked, "measured": progress.measured,
                              "default": progress.default_cost, "best": progress.best_cost,
                              "text": progress.text}), flush=True)
        elif not args.quiet:
            print(f"  {progress.text}", file=sys.stderr, flush=True)
    try:
        try:
            entries = tune(spec, log, args.trials, executor, args.seed, report=report,
                           cancelled=lambda: stop["asked"])
        except KeyboardInterrupt:
            stop["asked"] = True
            entries = read_log(log)
    finally:
        signal.signal(signal.SIGTERM, previous)
        executor.close()
    chosen = best_entries(entries, target, kiln_version())
    doc = {"log": str(log), "target": target, "entries": len(entries),
           "workloads": len(chosen.entries), "stopped": stop["asked"],
           "best": {k: {"schedule": e.schedule, "cost": e.cost, "layers": e.layers,
                        "measure": e.measure} for k, e in chosen.entries.items()}}
    if args.json:
        print(json.dumps(doc))
    elif not args.progress_json:
        said.say(f"{log}: {len(entries)} measured schedules, the best of "
                 f"{len(chosen.entries)} workloads for {target}; apply it with kiln compile "
                 f"{Path(args.model).name} --target {target} --tuning {log} -o DIR")
    if stop["asked"]:
        print(f"kiln: stopped; every finished round is kept in {log} (run the same command "
              "again to resume)", file=sys.stderr)
        return 130
    return 0


def add_tuning_arg(parser) -> None:
    """--tuning LOG: the best schedule of every workload the log has for the target."""
    parser.add_argument("--tuning", metavar="LOG.jsonl",
                        help="apply the best measured schedule per workload from this tuning "
                             "log (kiln tune); entries for another target or Kiln are skipped")


def with_tuning(options, log, warnings: Warnings):
    """`options` with the log's best schedules for its target, its notes said."""
    from dataclasses import replace

    from compiler.tuning.log import best_entries, log_hash, read_log
    from compiler.version import kiln_version

    if not log:
        return options
    if not Path(log).is_file():
        raise UsageError(f"--tuning {log}: no such tuning log")
    chosen = best_entries(read_log(log), options.resolved_target().name, kiln_version())
    for note in chosen.notes:
        warnings.note(note)
    return replace(options, schedules=chosen.schedules, tuning_log=log_hash(log))


def within_flash(args, compiled, request, warnings: Warnings):
    """The request with the schedules that fit --flash-budget (or --board's flash).

    Unchanged without --tuning, or with neither a budget nor a board.
    """
    from dataclasses import replace

    from compiler.tuning.budget import within_budget
    from compiler.tuning.log import entries_by_workload, read_log
    from compiler.version import kiln_version

    budget = getattr(args, "flash_budget", None)
    if budget is not None and not getattr(args, "tuning", None):
        raise UsageError("--flash-budget chooses among a tuning log's schedules: give --tuning")
    if budget is None and request.board is not None and getattr(args, "tuning", None):
        budget = request.board.flash
    if budget is None or not getattr(args, "tuning", None):
        return request
    if budget <= 0:
        raise UsageError("--flash-budget must be a positive number of bytes")
    options = request.options
    found = entries_by_workload(read_log(args.tuning), options.resolved_target().name,
                                kiln_version())
    choice = within_budget(compiled, options, found, budget)
    (warnings.note if choice.fits else warnings.warn)(choice.note)
    return replace(request, options=replace(choice.options, tuning_log=options.tuning_log))


def own_schedules(compiled, request):
    """The request with only the schedules of this model's workloads (a log serves many).

    The build file then records what this bundle applies, not every model the log has seen.
    """
    from dataclasses import replace

    options = request.options
    if not options.schedules:
        return request
    keys = set(compiled.net(options).workloads)
    kept = tuple((key, knobs) for key, knobs in options.schedules if key in keys)
    if kept == options.schedules:
        return request
    return replace(request, options=replace(options, schedules=kept))
