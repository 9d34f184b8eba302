"""Host time per layer, as a `MetricSet` for the overlay: the timed build's counters.

The network is compiled for this host with `Options.timed_kernels`: kernels kept apart, and
the time-stamp counter read around each call and around the whole entry point. It runs on
seeded random inputs for a fixed wall time; the counters' ratio to the measured wall time
turns ticks into milliseconds. A row outside any layer carries the entry point's own time
(the calls, the loops over offset tables), so the rows add up to one inference.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from compiler.codegen.host import HostNet
from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.inputs import random_inputs
from compiler.ir.graph import Graph
from compiler.layer_metrics import SUM, MetricSet, Row, _mapper, row

OUTSIDE = "entry point and calls"
MEASURE_SECONDS = 0.3  # the timed runs last at least this long (whole inferences)


def time_layers(compiled: Compilation, shown: Graph | None = None,
                report: Callable[[float, str], None] | None = None,
                seconds: float = MEASURE_SECONDS) -> MetricSet:
    """Milliseconds per layer of one inference on this host, mapped to the shown nodes."""
    report = report or (lambda fraction, text: None)
    options = Options("host", timed_kernels=True)
    if not options.resolved_target().triple.startswith("x86_64"):
        raise KilnError("host time per layer needs an x86-64 host: it reads the processor's "
                        "time-stamp counter around each kernel")
    report(0.0, "Running the pass pipeline")
    compiled.passes(diffs=False)
    report(0.2, "Compiling for this host with timed kernels")
    net = compiled.net(options)
    runner = HostNet(net)
    try:
        runner.set_inputs(random_inputs(compiled.prepared, 0))
        runner.call()  # warm: caches, pages, branch predictors
        report(0.7, "Timing the layers")
        runner.reset_ticks()
        runs, start = 0, time.perf_counter()
        while runs < 3 or time.perf_counter() - start < seconds:
            runner.call()
            runs += 1
        wall = time.perf_counter() - start
        ticks = runner.ticks()
    finally:
        runner.close()
    whole = int(ticks[-1])
    if whole <= 0:
        raise KilnError("the time-stamp counter did not advance: host time per layer is not "
                        "available on this machine")
    ms_per_tick = 1000.0 * wall / whole / runs  # per inference
    nodes_of = _mapper(compiled, shown)
    rows: list[Row] = []
    for slot, index in enumerate(net.timed):
        kernel = net.kernels[index]
        rows.append(row(kernel.symbol, kernel.op, nodes_of, kernel.nodes,
                        int(ticks[slot]) * ms_per_tick))
    inside = sum(int(t) for t in ticks[:-1])
    rows.append(Row(OUTSIDE, "outside every kernel", (), (whole - inside) * ms_per_tick))
    note = (f"milliseconds of one inference on this host, {runs} runs on random inputs, "
            "from the time-stamp counter around each kernel (kernels kept apart)")
    return MetricSet("host_time", "Host time", "ms", True, SUM, tuple(rows),
                     total=whole * ms_per_tick, note=note)
