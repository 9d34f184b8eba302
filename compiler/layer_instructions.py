"""Executed instructions per layer on an emulated Cortex-M, as a `MetricSet` for the overlay.

The figures are `kiln bench --target`'s (`compiler.harness.cortex_m_bench`): the per-layer
counts come from the build with separate kernels, the total from the network as it ships
(every kernel inlined into the entry point). The two builds differ by more than the split: the
separate build also runs the entry point's own instructions and the calls between kernels, and
the shipped build saves some of them by inlining. Two rows outside any layer carry these
differences, so the rows add up exactly to the shipped network's count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from compiler.driver import Compilation, Options
from compiler.harness.cortex_m_bench import TargetBench, bench_compilation
from compiler.ir.graph import Graph
from compiler.layer_metrics import SUM, MetricSet, Row, _mapper, row

OUTSIDE = "entry point and calls"  # the separate build's instructions outside every kernel
INLINED = "saved by inlining"  # the shipped build's count minus the separate build's


def instruction_metric(bench: TargetBench, compiled: Compilation,
                       shown: Graph | None = None) -> MetricSet:
    """The bench's per-layer counts on the shown graph's nodes, CMSIS-NN's beside them."""
    nodes_of = _mapper(compiled, shown)
    peer = {la.node: la.instructions for la in (bench.peer.layers if bench.peer else [])}
    ours = bench.kiln
    rows: list[Row] = []
    for layer in ours.layers:
        theirs = [peer[n] for n in layer.nodes if n in peer]
        op = layer.op if layer.nodes else f"{layer.op} driver"
        rows.append(row(layer.symbol, op, nodes_of, layer.nodes, layer.instructions,
                        sum(theirs) if theirs else None))
    split = sum(la.instructions for la in ours.layers)
    rows.append(Row(OUTSIDE, "outside every kernel (separate build)", (),
                    ours.separate_total - split))
    rows.append(Row(INLINED, "shipped build (kernels inlined) minus separate build", (),
                    ours.total - ours.separate_total))
    note = (f"instructions executed on {ours.target} under QEMU {ours.machine}; per layer "
            f"from the build with separate kernels, total as shipped")
    if bench.peer is None and bench.peer_note:
        note += f"; no CMSIS-NN: {bench.peer_note}"
    return MetricSet("instructions", f"Instructions on {ours.target}", "", True, SUM,
                     tuple(rows), total=ours.total,
                     peer_title="CMSIS-NN" if bench.peer is not None else "", note=note)


def count_instructions(compiled: Compilation, target: str, shown: Graph | None = None,
                       report: Callable[[float, str], None] | None = None,
                       peer: bool = True) -> MetricSet:
    """Count the network on `target`'s board as `kiln bench --target` does; its metric.

    `report(fraction, text)` hears each stage (it may raise to cancel between stages).
    """
    report = report or (lambda fraction, text: None)
    report(0.0, "Running the pass pipeline")
    compiled.passes(diffs=False)
    options = Options(target)
    report(0.15, f"Compiling for {target}")
    compiled.net(options)
    report(0.4, f"Compiling for {target} with separate kernels")
    compiled.net(replace(options, separate_kernels=True))
    report(0.6, "Counting under QEMU" + (" beside CMSIS-NN" if peer else ""))
    bench = bench_compilation(compiled, target, peer=peer, options=options)
    report(1.0, "Counted")
    return instruction_metric(bench, compiled, shown)
