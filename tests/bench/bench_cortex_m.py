"""Benchmark: the int8 MLPerf Tiny models on emulated Cortex-M7 and M55, Kiln vs CMSIS-NN.

Per model and core: executed instructions of one inference (Kiln's whole network as shipped;
CMSIS-NN's -O3 kernel calls for the same layers and parameters, built in the same run), their
ratio, the three layers where Kiln spends most beside CMSIS-NN's count for them, and code bytes
(Kiln's object text; CMSIS-NN's kernel functions linked for the model). Then, for cortex-m7,
flash and RAM of the bundle against stm32f746g-disco and nrf52840-dk, and RAM (arena and I/O;
and the arena with the I/O inside it, as TFLite Micro places them) against TFLite Micro's
arena. Goal: Kiln below CMSIS-NN on every model on both cores.
Run `python tests/bench/bench_cortex_m.py` from the project root.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for compiler.* when run as a script

from compiler.codegen.bundle import report  # noqa: E402
from compiler.codegen.targets import BOARDS  # noqa: E402
from compiler.driver import Options, compilation  # noqa: E402
from compiler.frontends.load import load_model  # noqa: E402
from compiler.harness.cortex_m_bench import bench_target  # noqa: E402
from compiler.mcu import cmsis_nn, firmware  # noqa: E402

MODELS = ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"]
CORES = ["cortex-m7", "cortex-m55"]
TFLM_ARENA = {"pretrainedResnet_quant": 49_152, "vww_96_int8": 73_728, "kws_ref_model": 16_000,
              "ad01_int8": 768}
SHARED = ROOT.parent / "shared" / "models" / "tflite"


def _counts(paths: list[Path]) -> bool:
    met = True
    print(f"{'model':24} {'core':11} {'kiln':>12} {'cmsis-nn':>12} {'ratio':>6} "
          f"{'kiln code':>10} {'cmsis code':>10}")
    for path in paths:
        for core in CORES:
            result = bench_target(path, core)
            ours, theirs = result.kiln, result.peer
            ratio = ours.total / theirs.total
            met &= ratio < 1.0
            print(f"{path.stem:24} {core:11} {ours.total:>12,} {theirs.total:>12,} "
                  f"{ratio:>6.3f} {ours.code_bytes:>10,} {theirs.code_bytes:>10,}")
            for op, nodes, mine, peer in sorted(result.rows(), key=lambda r: -r[2])[:3]:
                other = f"{peer:,}" if peer else "-"
                print(f"{'':24}   {mine:>12,} {other:>12}  {op} {nodes}")
    return met


def _sizes(paths: list[Path]) -> None:
    boards = [BOARDS["stm32f746g-disco"], BOARDS["nrf52840-dk"]]
    print(f"\n{'model (cortex-m7)':24} {'flash':>9} {'ram':>9} {'io in arena':>11} "
          f"{'tflm arena':>10} " + " ".join(f"{b.name:>18}" for b in boards))
    for path in paths:
        compiled = compilation(load_model(path))
        doc = report(compiled.net(Options("cortex-m7")), boards[0])
        usage = doc["board"]
        fits = []
        for board in boards:
            flash_ok = usage["flash_used"] <= board.flash
            ram_ok = usage["ram_used"] <= board.ram
            fits.append(f"{'fits' if flash_ok and ram_ok else 'too big':>18}")
        shared = compiled.plan(Options("cortex-m7", io_in_arena=True)).arena.size
        print(f"{path.stem:24} {usage['flash_used']:>9,} {usage['ram_used']:>9,} "
              f"{shared:>11,} {TFLM_ARENA[path.stem]:>10,} " + " ".join(fits))


def main() -> int:
    """Print both tables; exit 1 when Kiln is not below CMSIS-NN somewhere."""
    missing = firmware.missing_tools()
    if missing:
        print(f"bench_cortex_m: skipped, {' and '.join(missing)} not found")
        return 0
    try:
        cmsis_nn.find_root()
    except Exception as exc:  # noqa: BLE001 - reported, not raised: a benchmark prints
        print(f"bench_cortex_m: skipped, {exc}")
        return 0
    paths = [SHARED / f"{m}.tflite" for m in MODELS if (SHARED / f"{m}.tflite").exists()]
    if not paths:
        print(f"bench_cortex_m: skipped, no models in {SHARED}")
        return 0
    met = _counts(paths)
    _sizes(paths)
    print("goal (Kiln below CMSIS-NN on every model and core):", "met" if met else "MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
