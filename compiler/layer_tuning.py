"""Tuned against default per layer, as a `MetricSet` for the overlay: what a tuning log says.

Each kernel of the network with a schedule space gets a row: the cost of its layer with the
best schedule the log measured (the value) and with the default schedule (the peer), both as
the log measured them (instructions under QEMU, nanoseconds on a host). A layer whose
workload the log has not measured has no row.
"""

from __future__ import annotations

from compiler.codegen.schedules import clean
from compiler.driver import Compilation, Options
from compiler.ir.graph import Graph
from compiler.layer_metrics import SUM, MetricSet, Row, _mapper, row
from compiler.tuning.log import Entry, entries_by_workload

NAME = "tuned"


def default_entry(entries: list[Entry], target) -> Entry | None:
    """The entry of a workload measured with the default schedule, if the log has one."""
    for entry in entries:
        if not clean(entry.schedule, entry.description.get("family", ""), target):
            return entry
    return None


def tuning_metric(entries: list[Entry], compiled: Compilation, target: str, kiln: str,
                  shown: Graph | None = None) -> MetricSet:
    """Per kernel: the best measured cost and the default's, on the shown graph's nodes."""
    found = entries_by_workload(entries, target, kiln)
    options = Options(target, separate_kernels=True)
    resolved = options.resolved_target()
    net = compiled.net(options)
    nodes_of = _mapper(compiled, shown)
    rows: list[Row] = []
    unit = "instructions"
    for kernel in net.kernels:
        measured = found.get(kernel.workload)
        if not measured:
            continue
        best = min(measured, key=lambda e: e.per_layer)
        plain = default_entry(measured, resolved)
        unit = best.measure
        rows.append(row(kernel.symbol, kernel.op, nodes_of, kernel.nodes, best.per_layer,
                        None if plain is None else plain.per_layer))
    title = f"Tuned {unit} on {target}"
    note = (f"{unit} per layer with the best schedule the tuning log measured, against the "
            f"default schedule's (the peer); {len(rows)} kernels of {len(net.kernels)} have "
            "a measured workload")
    return MetricSet(NAME, title, "", True, SUM, tuple(rows), peer_title="untuned", note=note)
