"""Benchmark: the int8 MLPerf Tiny models on five emulated Cortex-M cores, Kiln vs CMSIS-NN.

Per model and core (M4, M7, M33, M55 and M3): executed instructions of one inference (Kiln's
whole network as shipped; CMSIS-NN's -O3 kernel calls for the same layers and parameters,
built in the same run: its DSP path on M4, M7 and M33, Helium on M55, its pure C path on M3),
their ratio and every layer's ratio (a row-streamed chain's layers one by one), and code
bytes. Then, for Cortex-M7, flash and instructions with int8 weights kept as bytes and as int16
pairs; flash and RAM of the bundle against stm32f746g-disco and nrf52840-dk; and RAM against
TFLite Micro's arena. Goals: no layer above CMSIS-NN on M7 and M55; totals at most 0.85 of
CMSIS-NN's on M7, 0.70 on M55, 1.00 on M3.
Run `python tests/bench/bench_cortex_m.py` from the project root (`--core NAME` for one core).
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
from compiler.harness.cortex_m_bench import bench_compilation, bench_target  # noqa: E402
from compiler.mcu import cmsis_nn, firmware  # noqa: E402

MODELS = ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"]
CORES = ["cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55", "cortex-m3"]
# Per core: (most a layer may take of CMSIS-NN's, most the whole network may), or None.
GOALS = {"cortex-m7": (1.00, 0.85), "cortex-m55": (1.00, 0.70), "cortex-m3": (None, 1.00)}
TFLM_ARENA = {"pretrainedResnet_quant": 49_152, "vww_96_int8": 73_728, "kws_ref_model": 16_000,
              "ad01_int8": 768}
SHARED = ROOT.parent / "shared" / "models" / "tflite"


def _counts(paths: list[Path], cores: list[str]) -> bool:
    met = True
    print(f"{'model':24} {'core':11} {'kiln':>12} {'cmsis-nn':>12} {'ratio':>6} "
          f"{'worst layer':>11} {'kiln code':>10} {'cmsis code':>10}")
    for core in cores:
        layer_goal, total_goal = GOALS.get(core, (None, None))
        for path in paths:
            result = bench_target(path, core)
            ours, theirs = result.kiln, result.peer
            ratio = ours.total / theirs.total
            rows = [(op, nodes, mine, peer) for op, nodes, mine, peer in result.rows() if peer]
            worst = max((mine / peer for _, _, mine, peer in rows), default=0.0)
            missed = ((total_goal is not None and ratio > total_goal)
                      or (layer_goal is not None and worst > layer_goal))
            met &= not missed
            print(f"{path.stem:24} {core:11} {ours.total:>12,} {theirs.total:>12,} "
                  f"{ratio:>6.3f} {worst:>11.3f} {ours.code_bytes:>10,} "
                  f"{theirs.code_bytes:>10,}" + ("  MISSED" if missed else ""))
            for op, nodes, mine, peer in result.rows():
                ratio_text = f"{mine / peer:6.2f}" if peer else "     -"
                print(f"{'':24}   {mine:>12,} {peer or 0:>12,} {ratio_text}  {op} {nodes}")
    return met


def _layouts(paths: list[Path]) -> None:
    """Flash and instructions on Cortex-M7 with int8 weights as bytes and as int16 pairs."""
    board = BOARDS["stm32f746g-disco"]
    print(f"\n{'model (cortex-m7)':24} {'layout':12} {'flash':>9} {'instructions':>13}  default")
    for path in paths:
        compiled = compilation(load_model(path))
        default = compiled.net(Options("cortex-m7")).target.lean_weights
        for lean in (True, False):
            options = Options("cortex-m7", lean_weights=lean)
            flash = report(compiled.net(options), board)["board"]["flash_used"]
            count = bench_compilation(compiled, "cortex-m7", peer=False, options=options)
            print(f"{path.stem:24} {'int8' if lean else 'int16 pairs':12} {flash:>9,} "
                  f"{count.kiln.total:>13,}  {'yes' if lean == default else ''}")


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
    """Print the tables; exit 1 when a goal is missed."""
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
    cores = CORES
    if "--core" in sys.argv:
        cores = [sys.argv[sys.argv.index("--core") + 1]]
    met = _counts(paths, cores)
    if "cortex-m7" in cores:
        _layouts(paths)
        _sizes(paths)
    print("goals (no layer above CMSIS-NN on M7 and M55; totals at most 0.85 on M7, 0.70 on "
          "M55, 1.00 on M3):", "met" if met else "MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
