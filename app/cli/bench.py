"""`kiln bench`: the model timed on this host against its peers, or counted on a Cortex-M.

The measuring lives in `compiler.harness.host_bench` (host) and
`compiler.harness.cortex_m_bench` (QEMU with CMSIS-NN beside it); this module declares the
command's arguments and formats the results.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import UsageError, Warnings, add_model_args, add_strict_arg, parse_shape
from app.cli.tune import add_tuning_arg, with_tuning


def add_parser(sub) -> None:
    """The `bench` subcommand's arguments."""
    bench = sub.add_parser("bench", help="the model compiled for this host against onnxruntime "
                                         "and LiteRT (LiteRT alone for a .tflite model)")
    add_model_args(bench)
    bench.add_argument("--json", action="store_true", help="print one JSON document")
    bench.add_argument("--runs", type=int, metavar="N",
                       help="inferences per block (default: about 0.2 s worth)")
    bench.add_argument("--repeats", type=int, default=5, metavar="K",
                       help="blocks per engine; each keeps its median, the result is their "
                            "median (default 5)")
    bench.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    bench.add_argument("--target", metavar="CORE",
                       help="count executed instructions per layer on an emulated Cortex-M "
                            "instead of timing on this host (cortex-m3, cortex-m4, "
                            "cortex-m7, cortex-m33, cortex-m55; needs arm-none-eabi-gcc and "
                            "qemu-system-arm); or time the kernels of a level this CPU runs "
                            "(x86-64-v3, skylake-avx512, icelake-server; aarch64 on Arm) "
                            "beside the same peers")
    bench.add_argument("--cmsis-nn", metavar="DIR",
                       help="with --target: the CMSIS-NN source tree built as the peer "
                            "(default: $KILN_CMSIS_NN, else the shared third_party copy)")
    bench.add_argument("--no-peer", action="store_true",
                       help="with --target: count Kiln only")
    bench.add_argument("--top", type=int, default=10, metavar="N",
                       help="with --target: the N layers with the most instructions (default "
                            "10; 0 lists every layer)")
    add_strict_arg(bench)
    add_tuning_arg(bench)
    bench.add_argument("--flash-budget", type=int, metavar="BYTES",
                       help="with --target and --tuning: the schedules that keep the network "
                            "within this much flash (as kiln compile --flash-budget)")
    bench.add_argument("--tflite", metavar="FILE",
                       help="the model's .tflite twin, timed with LiteRT (default: X.tflite "
                            "beside X.onnx or in a sibling tflite folder, when there is one)")


def run(args) -> int:
    """`kiln bench`: the measuring lives in compiler.harness.host_bench; this only formats."""
    from compiler.codegen.targets import get_target
    from compiler.harness.host_bench import bench_model

    if args.repeats < 1 or (args.runs is not None and args.runs < 1):
        raise UsageError("--runs and --repeats must be at least 1")
    shapes = dict(parse_shape(s) for s in args.shape or [])
    _check_fallbacks(args, shapes)
    if args.target and get_target(args.target).mcu:
        return _bench_target(args, shapes)
    from compiler.driver import Options

    options = with_tuning(Options(args.target or "host"), args.tuning, Warnings(args))
    result = bench_model(args.model, shapes, args.runs, args.repeats, args.seed, args.tflite,
                         args.target or "host", options)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    print(f"{result.model} on {result.target} ({result.triple}): compiled in "
          f"{result.compile_s:.2f} s; median of {result.repeats} repeats x {result.runs} runs, "
          "one thread each, engines interleaved")
    print(f"  CPU          {result.cpu}")
    print(f"  kernels      {result.level}")
    for name in result.engines:
        print(f"  {name:<12} {result.ms(name):.4g} ms")
    for peer in result.peers():
        short = {"onnxruntime": "ort"}.get(peer, peer)
        print(f"  kiln/{short:<7} {result.ratio(peer):.3g}   (outputs differ by at most "
              f"{result.max_abs_diff[peer]:.2g})")
    unit = "GFLOP/s" if result.arithmetic == "float32" else "GOP/s"
    peak = (f"{100 * result.peak_fraction:.0f}% of this core's measured {result.arithmetic} "
            f"peak ({result.peak_gflops:.0f} {unit})" if result.peak_gflops
            else f"no measured {result.arithmetic} peak for this core")
    print(f"  throughput   {result.kiln_gflops:.1f} {unit} over {result.macs:,} "
          f"{result.arithmetic} MACs, {peak}")
    return 0


def _check_fallbacks(args, shapes) -> None:
    """Warn of layers an int8 model leaves float (what it measures is then partly float).

    With --strict that fails before any measuring.
    """
    from app.cli.compile import fallback_warnings
    from compiler.driver import compilation
    from compiler.frontends.load import load_model

    warnings = Warnings(args)
    fallback_warnings(compilation(load_model(args.model, shapes)), warnings)
    warnings.check()


def _within(args, shapes, options):
    """`options` with the schedules that fit --flash-budget (as `kiln compile` chooses)."""
    from app.cli.tune import within_flash
    from compiler.driver import BuildRequest, compilation
    from compiler.frontends.load import load_model

    request = BuildRequest(options)
    compiled = compilation(load_model(args.model, shapes))
    return within_flash(args, compiled, request, Warnings(args)).options


def _bench_target(args, shapes) -> int:
    """`kiln bench --target`: instruction counts, total and per layer, beside CMSIS-NN's."""
    from compiler.driver import Options
    from compiler.harness.cortex_m_bench import bench_target

    options = with_tuning(Options(args.target), args.tuning, Warnings(args))
    if args.flash_budget is not None:
        options = _within(args, shapes, options)
    result = bench_target(args.model, args.target, args.seed, shapes, args.cmsis_nn,
                          not args.no_peer, options)
    ours, peer = result.kiln, result.peer
    floor = 1 / result.products_per_instruction
    per_mac = [result.per_mac(la.instructions, la.nodes) for la in ours.layers]
    rows = sorted(zip(result.rows(), per_mac), key=lambda pair: -pair[0][2])
    if args.json:
        doc = {"model": Path(args.model).name, "target": ours.target, "machine": ours.machine,
               "instructions": ours.total, "code_bytes": ours.code_bytes,
               "tuning": args.tuning, "bound_instructions_per_mac": floor,
               "layers": [{"kernel": la.symbol, "op": la.op, "nodes": list(la.nodes),
                           "instructions": la.instructions,
                           "macs": result.layer_macs(la.nodes),
                           "instructions_per_mac": None if m is None else round(m, 4)}
                          for la, m in zip(ours.layers, per_mac)],
               "cmsis_nn": None if peer is None else {
                   "instructions": peer.total, "code_bytes": peer.code_bytes,
                   "uncovered": peer.uncovered,
                   "layers": [{"node": la.node, "function": la.function,
                               "instructions": la.instructions} for la in peer.layers]}}
        print(json.dumps(doc))
        return 0
    print(f"{Path(args.model).name} on {ours.target} (QEMU {ours.machine}), executed "
          f"instructions of one inference")
    print(f"  kiln      {ours.total:>12,}  code {ours.code_bytes:,} B")
    if peer is None:
        print(f"  cmsis-nn  not measured: {result.peer_note}")
    else:
        print(f"  cmsis-nn  {peer.total:>12,}  code {peer.code_bytes:,} B (its kernels' "
              f"calls only; -O3)")
        print(f"  kiln/cmsis-nn {ours.total / max(peer.total, 1):.3g}")
        if peer.uncovered:
            print(f"  CMSIS-NN has no kernel for: {', '.join(peer.uncovered)}")
    if args.tuning:
        print(f"  tuned by {args.tuning}")
    shown = rows if args.top <= 0 else rows[:args.top]
    print(f"  {'kiln':>12}  {'cmsis-nn':>12}  {'ratio':>5}  {'insn/MAC':>8}  layer   "
          f"(the products alone need {floor:.4g} instructions per MAC on this core)")
    for (op, nodes, mine, theirs), m in shown:
        other = f"{theirs:>12,}" if theirs is not None else f"{'-':>12}"
        ratio = f"{mine / theirs:5.2f}" if theirs else f"{'':>5}"
        rate = f"{m:8.3f}" if m is not None else f"{'':>8}"
        print(f"  {mine:>12,}  {other}  {ratio}  {rate}  {op} {nodes}")
    if len(shown) < len(rows):
        print(f"  ... {len(rows) - len(shown)} more layers (--top 0 lists them)")
    return 0
