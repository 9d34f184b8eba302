"""What a validation on a device asks for and what it leaves: the request, the run, the job.

The run (`DeviceRun`) is document state: the canvas overlay reads its metric, and it names
the graph it was measured on, so an edit (or another model) shows no stale ticks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.window.workers import Progress
from compiler.device.validate import QEMU, Validation, validate
from compiler.driver import Compilation
from compiler.ir.graph import Graph
from compiler.layer_device_time import device_metric
from compiler.layer_metrics import MetricSet
from compiler.mcu import firmware

QEMU_LABEL = "QEMU (emulated board)"


@dataclass(frozen=True)
class ValidateRequest:
    """The dialog's choices: the core, the port, where inputs come from, and how many."""

    target: str
    port: str  # a device, a pyserial URL, or "qemu"
    inputs: str | None = None  # a file or folder of samples; None: seeded random inputs
    count: int = 10
    seed: int = 0


@dataclass(frozen=True)
class DeviceRun:
    """One validation of the document's `graph`: the result and its per-layer metric."""

    graph: Graph
    validation: Validation
    metric: MetricSet

    def layer_names(self) -> list[str]:
        """Each layer's nodes as the canvas names them (the kernels' are the prepared graph's)."""
        names = {n.id: n.name for n in self.graph.nodes}
        return [", ".join(names[i] for i in r.nodes if i in names)
                for r in self.metric.rows[:len(self.validation.layers)]]


def cores() -> list[tuple[str, str]]:
    """(core, label) of every Cortex-M core a QEMU board runs: the runner firmware's cores."""
    machines = {b.target: b.qemu_machine for b in firmware.MACHINES.values()}
    order = sorted(machines, key=lambda t: (len(t), t))  # cortex-m3 before cortex-m33
    return [(t, f"{t} (QEMU {machines[t]})") for t in order]


def ports() -> list[tuple[str, str]]:
    """(port, label): QEMU's emulated board first (it needs no hardware), then serial ports."""
    from serial.tools import list_ports

    found = []
    for port in sorted(list_ports.comports(), key=lambda p: p.device):
        about = port.description if port.description and port.description != "n/a" else ""
        found.append((port.device, f"{port.device}: {about}" if about else port.device))
    return [(QEMU, QEMU_LABEL), *found]


def fraction(done: int, total: int, text: str) -> float:
    """How far the validation is: compiling and building first, then one step per input."""
    if text.startswith("Compiling"):
        return 0.02
    if text.startswith("Building"):
        return 0.08
    return 0.15 + 0.85 * (done / total if total else 1.0)


def validation_job(model: Path, compiled: Compilation, graph: Graph,
                   request: ValidateRequest) -> Callable[[Progress], DeviceRun]:
    """The function of a job validating the document's compilation as `request` says.

    Progress reports raise `Cancelled` inside `validate` once the user cancels, so QEMU is
    stopped on the way out, as on any error.
    """
    def work(progress: Progress) -> DeviceRun:
        def heard(done: int, total: int, text: str) -> None:
            progress.report(fraction(done, total, text), text)

        result = validate(model, request.target, request.port, request.inputs, request.count,
                          seed=request.seed, compiled=compiled, progress=heard,
                          cancelled=progress.is_cancelled)
        progress.report(1.0, "Placing the ticks on the graph")
        return DeviceRun(graph, result, device_metric(result, compiled, graph))

    return work
