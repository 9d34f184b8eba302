"""Benchmark: tuned kernels on the int8 MLPerf Tiny models, against CMSIS-NN, per core.

Per core (Cortex-M7, M4, M33, M55) and model: `kiln tune` (QEMU instruction counts, the
trials of KILN_TUNE_TRIALS, default 24, in this process) into a log per model and core, then
the whole network compiled with that log: instructions over CMSIS-NN's (-O3, same layers,
built in the same run), the worst layer's ratio and each layer's instructions per MAC against
the core's product bound. Goals (issue: tuning on the target) are printed beside each figure.
Then the search's throughput: the trials per minute of KWS on Cortex-M7 with two local Ray
workers over one, interleaved, medians of three.
Run `python tests/bench/bench_tuning.py` from the project root (`--core NAME`, `--model NAME`
for fewer; `--throughput` for that part alone).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for compiler.* when run as a script

from compiler.driver import Options  # noqa: E402
from compiler.explore.executors import InProcess, RayExecutor  # noqa: E402
from compiler.harness.cortex_m_bench import bench_target  # noqa: E402
from compiler.tuning.log import best_entries, log_hash, read_log  # noqa: E402
from compiler.tuning.measure import TuneSpec  # noqa: E402
from compiler.tuning.search import tune, tune_trial  # noqa: E402
from compiler.version import kiln_version  # noqa: E402

MODELS = ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"]
SHORT = {"ad01_int8": "AD", "kws_ref_model": "KWS", "pretrainedResnet_quant": "ResNet-8",
         "vww_96_int8": "VWW"}
# Whole-network goals, kiln / CMSIS-NN instructions; no layer above 0.90 on any core.
GOALS = {"cortex-m7": {"AD": 0.70, "KWS": 0.50, "ResNet-8": 0.50, "VWW": 0.50},
         "cortex-m4": {"AD": 0.70, "KWS": 0.50, "ResNet-8": 0.50, "VWW": 0.55},
         "cortex-m33": {"AD": 0.70, "KWS": 0.50, "ResNet-8": 0.50, "VWW": 0.55},
         "cortex-m55": {"AD": 0.30, "KWS": 0.50, "ResNet-8": 0.50, "VWW": 0.50}}
LAYER_GOAL = 0.90
SHARED = ROOT.parent / "shared" / "models" / "tflite"


def _tuned_options(path: Path, core: str, folder: Path, trials: int) -> Options:
    log = folder / f"{path.stem}.{core}.jsonl"
    start = time.perf_counter()
    tune(TuneSpec(str(path), core), log, trials, InProcess(tune_trial))
    chosen = best_entries(read_log(log), core, kiln_version())
    print(f"  tuned {path.stem} for {core}: {trials} trials in "
          f"{time.perf_counter() - start:.0f} s")
    return Options(core, schedules=chosen.schedules, tuning_log=log_hash(log))


def _ratios(paths: list[Path], cores: list[str], trials: int) -> bool:
    met = True
    with tempfile.TemporaryDirectory(prefix="kiln-bench-tune-") as scratch:
        for core in cores:
            print(f"{'model':24} {'core':11} {'default':>8} {'tuned':>8} {'goal':>6} "
                  f"{'worst layer':>11}")
            for path in paths:
                plain = bench_target(path, core)
                options = _tuned_options(path, core, Path(scratch), trials)
                tuned = bench_target(path, core, options=options)
                before = plain.kiln.total / plain.peer.total
                after = tuned.kiln.total / tuned.peer.total
                rows = [(op, nodes, mine, peer) for op, nodes, mine, peer in tuned.rows()
                        if peer]
                worst = max((mine / peer for *_, mine, peer in rows), default=0.0)
                goal = GOALS.get(core, {}).get(SHORT[path.stem])
                missed = (goal is not None and after > goal) or worst > LAYER_GOAL
                met &= not missed
                print(f"{path.stem:24} {core:11} {before:>8.3f} {after:>8.3f} "
                      f"{goal or 0:>6.2f} {worst:>11.3f}" + ("  MISSED" if missed else ""))
                floor = 1 / tuned.products_per_instruction
                for layer in tuned.kiln.layers:
                    per_mac = tuned.per_mac(layer.instructions, layer.nodes)
                    if per_mac is not None:
                        print(f"{'':28} {layer.instructions:>12,}  {per_mac:6.3f} insn/MAC "
                              f"(bound {floor:.4g})  {layer.op} {', '.join(layer.nodes)}")
    return met


def _throughput(path: Path, trials: int = 12) -> bool:
    """Trials per minute with 2 local Ray workers over 1: medians of 3, interleaved."""
    rates: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="kiln-bench-tune-") as scratch:
        for repeat in range(3):
            for workers in (1, 2):
                executor = RayExecutor(workers=workers, task=tune_trial)
                try:
                    log = Path(scratch) / f"{workers}.{repeat}.jsonl"
                    list(executor.run(TuneSpec(str(path), "cortex-m7").to_json(),
                                      [{}] * workers))  # workers warm: the model loaded
                    start = time.perf_counter()
                    tune(TuneSpec(str(path), "cortex-m7"), log, trials, executor)
                    rates[workers].append(60 * trials / (time.perf_counter() - start))
                finally:
                    executor.close()
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    ok = two / one >= 1.7
    print(f"tuning {path.stem} for cortex-m7: {one:.1f} trials/min on 1 worker, {two:.1f} on "
          f"2 ({two / one:.2f}x; goal at least 1.7x)" + ("" if ok else "  MISSED"))
    return ok


def main() -> int:
    args = sys.argv[1:]
    cores = [args[i + 1] for i, a in enumerate(args) if a == "--core"] or list(GOALS)
    models = [args[i + 1] for i, a in enumerate(args) if a == "--model"] or MODELS
    paths = [SHARED / f"{m}.tflite" for m in models]
    if not all(p.exists() for p in paths):
        print(f"bench_tuning: the MLPerf Tiny models are not in {SHARED}; nothing measured")
        return 0
    trials = int(os.environ.get("KILN_TUNE_TRIALS", "24"))
    met = _throughput(SHARED / "kws_ref_model.tflite")
    if "--throughput" not in args:
        met &= _ratios(paths, cores, trials)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
