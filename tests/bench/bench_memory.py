"""Benchmark: memory plans of the MLPerf Tiny models and the light models, and Kiln vs TFLite Micro.

Prints per model: lower bound, arena, efficiency, schedule peak vs topological peak, the
scheduler and strategy kept, and planning time; then Kiln's activation arena with inputs and
outputs inside it (`--io-in-arena`) divided by TFLite Micro's non-persistent arena, measured
with the tflite-micro interpreter on the same MLPerf Tiny originals. Targets: at most 0.8 for
vww_96_float and pretrainedResnet, at most 1.0 for ad01_fp32.
Run `python tests/bench/bench_memory.py` from the project root.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for tests.* when run as a script

from compiler.driver import Options, compilation  # noqa: E402
from compiler.frontends.onnx import load_onnx  # noqa: E402
from tests.memory.test_models import TFLM_ARENA  # noqa: E402
from tests.test_real_models import LIGHT, LIGHT_DIR, SHARED_ONNX  # noqa: E402

SHARED = ROOT.parent / "shared" / "models" / "onnx"


def main() -> int:
    """Print the table and the three ratios; exit 1 when a ratio misses its target."""
    paths = [SHARED / f"{n}.onnx" for n in SHARED_ONNX if (SHARED / f"{n}.onnx").exists()]
    paths += [LIGHT_DIR / f"{n}.onnx" for n in LIGHT]
    print(f"{'model':24} {'io':>3} {'lower bound':>12} {'arena':>12} {'eff':>6} "
          f"{'sched peak':>12} {'topo peak':>12}  scheduler / strategy, ms")
    arenas: dict[str, int] = {}
    for path in paths:
        compiled = compilation(load_onnx(path))
        _ = compiled.prepared  # the passes, outside the planning time
        for io in (False, True):
            start = time.perf_counter()
            plan = compiled.plan(Options(io_in_arena=io))
            ms = (time.perf_counter() - start) * 1000
            a = plan.arena
            print(f"{path.stem:24} {'yes' if io else 'no':>3} {a.lower_bound:>12,} {a.size:>12,} "
                  f"{a.efficiency:>6.3f} {plan.schedule.peak:>12,} "
                  f"{plan.schedule.topological_peak:>12,}  {plan.schedule.method} / "
                  f"{a.strategy}, {ms:.0f}")
            if io:
                arenas[path.stem] = a.size
    failed = False
    print("\nKiln --io-in-arena activation arena / TFLite Micro non-persistent arena:")
    for name, (tflm, target) in sorted(TFLM_ARENA.items()):
        if name not in arenas:
            print(f"  {name}: model missing")
            continue
        ratio = arenas[name] / tflm
        failed |= ratio > target
        print(f"  {name:24} {arenas[name]:>9,} / {tflm:>9,} = {ratio:.3f} (target <= {target})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
