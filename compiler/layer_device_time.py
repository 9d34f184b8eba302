"""Device ticks per layer, as a `MetricSet` for the overlay: what a validation measured.

`kiln validate` reads the runner firmware's timed build on its first input: the ticks of its
port's counter around each kernel call and around the whole entry point. The counter is
named by the port ("SysTick ticks" under QEMU, "cycles" only for a cycle counter), and the
metric says so: ticks are not cycles. A row outside any layer carries the entry point's own
ticks (the calls between kernels), so the rows add up to the measured inference.
"""

from __future__ import annotations

from compiler.device.validate import QEMU, Validation
from compiler.driver import Compilation
from compiler.ir.graph import Graph
from compiler.layer_metrics import SUM, MetricSet, Row, _mapper, row

NAME = "device"
OUTSIDE = "entry point and calls"


def where(validation: Validation) -> str:
    """The board as a title names it: "QEMU mps2-an500", or "stm32f746g-disco on COM3"."""
    if validation.port.startswith(QEMU):
        return f"QEMU {validation.board}"
    return f"{validation.board} on {validation.port}"


def device_title(validation: Validation) -> str:
    """What the legend calls the figure: the counter's own unit, the core and the board."""
    unit = validation.tick_unit or "ticks"
    return f"{unit[:1].upper()}{unit[1:]} on {validation.target} ({where(validation)})"


def device_metric(validation: Validation, compiled: Compilation,
                  shown: Graph | None = None) -> MetricSet:
    """The validation's per-layer ticks on the shown graph's nodes (`compiled` is what ran)."""
    nodes_of = _mapper(compiled, shown)
    rows: list[Row] = []
    for layer in validation.layers:
        op = layer.op if layer.nodes else f"{layer.op} driver"
        rows.append(row(layer.symbol, op, nodes_of, layer.nodes, layer.ticks))
    inside = sum(la.ticks for la in validation.layers)
    rows.append(Row(OUTSIDE, "outside every kernel", (), validation.total_ticks - inside))
    clock = "; QEMU -icount: emulated time" if validation.port.startswith(QEMU) else ""
    note = (f"{validation.tick_unit or 'ticks'} of one inference (the first of "
            f"{validation.count} inputs) read by the runner firmware around each kernel, "
            f"{validation.ticks_per_second:,} a second{clock}")
    return MetricSet(NAME, device_title(validation), "", True, SUM, tuple(rows),
                     total=validation.total_ticks, note=note)
