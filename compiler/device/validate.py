"""Validation on the device: the model compiled, sent inputs over the link, outputs checked.

The host compiles the model as the runner firmware was compiled (the timed build for the
core), checks the firmware's identity against it, sends each input, reads each output's raw
bytes and compares them with Kiln's interpreter (integer elements must all be equal; floats
agree within rounding) and with the original model's own runtime (the X-cross row). One run
per input gives the latency; `kiln-layers` on the first input the per-layer ticks, and under
QEMU the plugin the per-layer instructions.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.codegen.build import CompiledNet
from compiler.codegen.targets import Board
from compiler.device import model_source, runner_firmware
from compiler.device.emulated_board import emulated_board
from compiler.device.link import Link, LinkError, laps, load_input, open_port, results
from compiler.device.link import field as reply_field
from compiler.device.metrics import Closeness, closeness, top1
from compiler.device.references import NoReference, reference_outputs
from compiler.driver import Compilation, Options, compilation
from compiler.errors import KilnError
from compiler.interpreter import run
from compiler.mcu import counting
from compiler.ops import registry

QEMU = "qemu"
FLOAT_RTOL, FLOAT_ATOL = 1e-4, 1e-5  # compiled float code against the interpreter
RANDOM_WARNING = ("no --inputs: validating on seeded random inputs, which are not "
                  "representative of the model's data")


class Cancelled(KilnError):
    """The user stopped the validation."""


@dataclass(frozen=True)
class LayerTime:
    """One layer's row: its kernel, what it computes, and what the board measured."""

    symbol: str
    op: str
    nodes: tuple[str, ...]
    ticks: int
    instructions: int | None
    macs: int


@dataclass
class Validation:
    """Everything `kiln validate` prints, and whether every check passed."""

    model: str
    target: str
    board: str
    port: str
    inputs: str
    count: int
    network_hash: str
    firmware_version: str = ""
    integer_elements: int = 0
    integer_equal: int = 0
    float_elements: int = 0
    float_close: int = 0
    interpreter: Closeness | None = None
    xcross: Closeness | None = None
    reference: str = ""
    reference_note: str = ""
    accuracy: float | None = None
    reference_accuracy: float | None = None
    latency_us: list[int] = field(default_factory=list)
    tick_unit: str = ""
    ticks_per_second: int = 0
    layers: list[LayerTime] = field(default_factory=list)
    total_ticks: int = 0
    total_instructions: int | None = None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Identity matched, every integer element equal, every float close."""
        return not self.problems

    def to_json(self) -> dict:
        """The result as one JSON document."""
        return {"model": self.model, "target": self.target, "board": self.board,
                "port": self.port, "inputs": self.inputs, "count": self.count,
                "network_hash": self.network_hash, "firmware_version": self.firmware_version,
                "integer_elements": self.integer_elements,
                "integer_equal": self.integer_equal, "float_elements": self.float_elements,
                "float_close": self.float_close,
                "interpreter": self.interpreter.to_json() if self.interpreter else None,
                "xcross": self.xcross.to_json() if self.xcross else None,
                "reference": self.reference, "reference_note": self.reference_note,
                "accuracy": self.accuracy, "reference_accuracy": self.reference_accuracy,
                "latency_us": self.latency_us, "tick_unit": self.tick_unit,
                "ticks_per_second": self.ticks_per_second, "total_ticks": self.total_ticks,
                "total_instructions": self.total_instructions,
                "layers": [{"kernel": la.symbol, "op": la.op, "nodes": list(la.nodes),
                            "ticks": la.ticks, "instructions": la.instructions,
                            "macs": la.macs} for la in self.layers],
                "problems": self.problems, "warnings": self.warnings, "passed": self.passed}


@dataclass(frozen=True)
class Samples:
    """The inputs to send: one feed per sample, their source, and labels when known."""

    feeds: list[dict[str, np.ndarray]]
    source: str
    labels: np.ndarray | None = None
    random: bool = False


def samples(compiled: Compilation, source: str | None, count: int, seed: int = 0) -> Samples:
    """`count` feeds from `source` (the forms `kiln profile --data` reads), else random."""
    graph = compiled.graph
    if source is None:
        from compiler.inputs import random_inputs

        return Samples([random_inputs(graph, seed + i) for i in range(count)],
                       f"{count} seeded random inputs (seed {seed})", random=True)
    from compiler.quant.calibration_data import load_calibration

    data = load_calibration(source, graph)
    n = min(count, len(data))
    labels = data.labels[:n] if data.labels is not None else None
    return Samples(data.feeds(0, n), f"{n} of {len(data)} samples of {source}", labels)


def runner_net(compiled: Compilation, target: str) -> CompiledNet:
    """The build the runner firmware serves: timed kernels, embedded weights."""
    return compiled.net(Options(target, timed_kernels=True))


def input_bytes(net: CompiledNet, feed: dict[str, np.ndarray]) -> bytes:
    """The bytes `db load` takes: every data input in the header's order, as its type."""
    return b"".join(np.ascontiguousarray(feed[t.name], t.dtype).tobytes()
                    for t in net.data_inputs)


def check_identity(link: Link, net: CompiledNet) -> tuple[str, int, str, int]:
    """Ask `kiln-id`; the version, command buffer, tick unit and tick rate, or a LinkError.

    A firmware that is MLPerf Tiny's but not Kiln's, or Kiln's for another network, is
    refused in one sentence naming both hashes.
    """
    try:
        lines = link.command("kiln-id")
    except LinkError as exc:
        if "Unknown command" in str(exc):
            raise LinkError(f"{link.where}: an MLPerf Tiny firmware answers, but not Kiln's "
                            "runner (it does not know kiln-id); build one with kiln "
                            "firmware") from None
        raise
    where = link.where
    got = reply_field(lines, r"m-kiln-id-\[([0-9a-f]+)\]", where)[1]
    version = reply_field(lines, r"m-kiln-version-\[([^]]*)\]", where)[1]
    want = model_source.network_hash(net)
    if got != want:
        built = re.fullmatch(r"m-kiln-net-\[([^,\]]*),([^,\]]*),([^]]*)\]",
                             next((x for x in lines if x.startswith("m-kiln-net-")), ""))
        if built and built[2] != net.target.name:
            raise LinkError(f"{where}: the firmware was built for {built[2]} (board "
                            f"{built[3]}), not {net.target.name}: pass --target {built[2]}, "
                            f"or build and flash firmware for {net.target.name}")
        raise LinkError(f"{where}: the firmware serves network {got} (Kiln {version}); "
                        f"this model compiled for {net.target.name} is {want}: rebuild "
                        "and flash it with kiln firmware")
    for kind, tensors in (("input", net.data_inputs), ("output", net.outputs)):
        for i, tensor in enumerate(tensors):
            said = reply_field(lines, rf"m-kiln-{kind}-{i}-\[([^]]*)\]", where)[1]
            if said != model_source.describe(net, tensor):
                raise LinkError(f"{where}: the firmware's {kind} {i} is {said!r}, not "
                                f"{model_source.describe(net, tensor)!r}")
    buffer = int(reply_field(lines, r"m-kiln-buffer-\[([0-9]+),[0-9]+\]", where)[1])
    ticks = reply_field(lines, r"m-kiln-ticks-\[([^,\]]+),([0-9]+),([0-9]+)\]", where)
    if int(ticks[3]) != model_source.layer_slots(net):
        raise LinkError(f"{where}: the firmware has {ticks[3]} tick counters, the network "
                        f"{model_source.layer_slots(net)}")
    return version, buffer, ticks[1], int(ticks[2])


def raw_outputs(link: Link, net: CompiledNet) -> list[np.ndarray]:
    """`kiln-out`: each output's bytes from the last run, as arrays of its type and shape."""
    lines = link.command("kiln-out")
    chunks: list[list[str]] = [[] for _ in net.outputs]
    for line in lines:
        match = re.fullmatch(r"m-kiln-out-([0-9]+)-([0-9a-f]*)", line)
        if match and int(match[1]) < len(chunks):
            chunks[int(match[1])].append(match[2])
    arrays = []
    for tensor, hexes in zip(net.outputs, chunks):
        data = bytes.fromhex("".join(hexes))
        want = int(np.prod(tensor.shape, dtype=np.int64)) * np.dtype(tensor.dtype).itemsize
        if len(data) != want:
            raise LinkError(f"{link.where}: output {tensor.name} came as {len(data)} bytes, "
                            f"not {want}; the reply was cut short")
        arrays.append(np.frombuffer(data, tensor.dtype).reshape(tensor.shape).copy())
    return arrays


def layer_ticks(link: Link, net: CompiledNet, timeout: float) -> tuple[list[int], int]:
    """`kiln-layers`: ticks per kernel call and of the whole entry point."""
    lines = link.command("kiln-layers", timeout)
    slots = {int(m[1]): int(m[2]) for m in (re.fullmatch(r"m-kiln-layer-([0-9]+)-([0-9]+)",
                                                         x) for x in lines) if m}
    count = model_source.layer_slots(net)
    if sorted(slots) != list(range(count)):
        raise LinkError(f"{link.where}: kiln-layers gave {len(slots)} of {count} counters")
    whole = len(net.timed)  # the entry point's slot, between the calls' and the chains'
    return [slots[k] for k in range(count) if k != whole], slots[whole]


def measured_kernels(net: CompiledNet, symbols: dict[str, tuple[int, int]] | None = None
                     ) -> list:
    """The kernels per-layer rows are made of, as `kiln bench --target` takes them.

    Every kernel (a chain's one-row kernels too) whose code the firmware has.
    """
    return [k for k in net.kernels if symbols is None or k.symbol in symbols]


def layer_rows(compiled: Compilation, net: CompiledNet, ticks: list[int],
               instructions: dict[str, int] | None) -> list[LayerTime]:
    """Per layer as `kiln bench --target` groups kernels: device ticks, QEMU instructions, MACs.

    `ticks` holds one count per slot of `model_source.slot_kernels` but the whole: each
    entry-point call (a chain's driver counts its whole walk), then each chain kernel;
    `instructions` the plugin's count per kernel symbol, when QEMU counted. A driver's row
    keeps its own ticks: its walk less its kernels'.
    """
    per_symbol: dict[str, int] = {}
    slots = [k for k in model_source.slot_kernels(net) if k is not None]
    for index, value in zip(slots, ticks):
        kernel = net.kernels[index]
        per_symbol[kernel.symbol] = per_symbol.get(kernel.symbol, 0) + value
        if index not in net.timed and kernel.part_of:  # inside a chain's walk
            per_symbol[kernel.part_of] = per_symbol.get(kernel.part_of, 0) - value
    kernels = measured_kernels(net)
    tick_rows = counting.layer_counts(kernels, [per_symbol.get(k.symbol, 0) for k in kernels])
    insn_rows = counting.layer_counts(kernels, [instructions.get(k.symbol, 0) for k in kernels]
                                      ) if instructions is not None else None
    nodes = {n.name: n for n in compiled.prepared.nodes}
    rows = []
    for i, row in enumerate(tick_rows):
        macs = 0
        for name in row.nodes:
            node = nodes.get(name)
            opdef = registry.get(node.op) if node is not None else None
            macs += opdef.count_macs(node) if opdef is not None else 0
        rows.append(LayerTime(row.symbol, row.op, row.nodes, row.instructions,
                              insn_rows[i].instructions if insn_rows else None, macs))
    return rows


def _compare(result: Validation, net: CompiledNet, got: list[np.ndarray],
             want: list[np.ndarray], index: int) -> None:
    for tensor, ours, theirs in zip(net.outputs, got, want):
        theirs = np.asarray(theirs).reshape(ours.shape)
        if tensor.dtype == "float32":
            close = np.isclose(ours, theirs, rtol=FLOAT_RTOL, atol=FLOAT_ATOL, equal_nan=True)
            result.float_elements += close.size
            result.float_close += int(np.count_nonzero(close))
            if not close.all() and len(result.problems) < 5:
                result.problems.append(f"input {index}, output {tensor.name}: "
                                       f"{close.size - int(close.sum())} float elements "
                                       "differ from Kiln's interpreter beyond rounding")
        else:
            equal = ours.astype(np.int64) == theirs.astype(np.int64)
            result.integer_elements += equal.size
            result.integer_equal += int(np.count_nonzero(equal))
            if not equal.all() and len(result.problems) < 5:
                result.problems.append(f"input {index}, output {tensor.name}: "
                                       f"{equal.size - int(equal.sum())} of {equal.size} "
                                       f"{tensor.dtype} elements differ from Kiln's "
                                       "interpreter")


def validate(model: str | Path, target: str, port: str, inputs: str | None = None,
             count: int = 10, *, board: Board | None = None, seed: int = 0,
             baud: int = 115200, timeout: float = 5.0, compiled: Compilation | None = None,
             progress: Callable[[int, int, str], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> Validation:
    """Validate `model` on the board behind `port` (a device, a pyserial URL, or "qemu").

    `progress(done, total, text)` hears each step; `cancelled()` is asked between inputs.
    """
    from compiler.frontends.load import load_model

    model = Path(model)
    progress = progress or (lambda done, total, text: None)
    cancelled = cancelled or (lambda: False)
    if compiled is None:
        compiled = compilation(load_model(model))
    progress(0, count, f"Compiling {model.name} for {target}")
    net = runner_net(compiled, target)
    data = samples(compiled, inputs, count, seed)
    emulated = port == QEMU
    row = runner_firmware.linked_board(target, board)
    result = Validation(model.name, target, (board or row).name,
                        f"qemu ({row.qemu_machine})" if emulated else port, data.source,
                        len(data.feeds), model_source.network_hash(net))
    if len(data.feeds) < count:
        result.warnings.append(f"{inputs} holds {len(data.feeds)} samples: validating on "
                               f"{len(data.feeds)}, not the {count} asked for")
    if board is not None and board.target != target:
        raise KilnError(f"--board {board.name} has a {board.target}, not a {target}")
    if data.random:
        result.warnings.append(RANDOM_WARNING)
    wanted = [[out for out in run(compiled.final, feed).values()] for feed in data.feeds]
    got_all: list[list[np.ndarray]] = []
    with contextlib.ExitStack() as stack:
        url, counted = port, None
        if emulated:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kiln-fw-")))
            progress(0, len(data.feeds), f"Building the runner firmware for {row.name}")
            fw = runner_firmware.build(net, board or row, folder, str(model))
            symbols = counting.functions(fw.elf)
            kernels = measured_kernels(net)
            regions = [(symbols[k.symbol][0], symbols[k.symbol][0] + symbols[k.symbol][1])
                       if k.symbol in symbols else (0, 0) for k in kernels]
            counted = stack.enter_context(emulated_board(fw.elf, row.qemu_machine, regions))
            url = counted.url
        serial_port = open_port(url, baud)
        stack.callback(serial_port.close)
        link = Link(serial_port, result.port if not emulated else f"{result.port} at {url}",
                    timeout)
        link.synchronize()
        version, buffer, result.tick_unit, result.ticks_per_second = check_identity(link, net)
        result.firmware_version = version
        chunk = max(1, (buffer - len("db ") - 2) // 2)
        ticks: list[int] = []
        for i, feed in enumerate(data.feeds):
            if cancelled():
                raise Cancelled(f"{result.port}: validation cancelled after {i} of "
                                f"{len(data.feeds)} inputs")
            progress(i, len(data.feeds), f"Input {i + 1} of {len(data.feeds)}")
            load_input(link, input_bytes(net, feed), chunk)
            lines = link.command("infer 1 0", timeout + 30)
            results(lines, link.where)
            start, end = laps(lines, link.where)
            result.latency_us.append((end - start) % (1 << 32))
            got = raw_outputs(link, net)
            _compare(result, net, got, wanted[i], i)
            if i == 0:
                ticks, result.total_ticks = layer_ticks(link, net, timeout + 30)
            got_all.append(got)
    instructions = None
    if counted is not None and counted.counts is not None:
        instructions: dict[str, int] = {}
        for kernel, n in zip(measured_kernels(net), counted.counts.regions):
            instructions[kernel.symbol] = instructions.get(kernel.symbol, 0) + n
        result.total_instructions = counted.counts.total
    result.layers = layer_rows(compiled, net, ticks, instructions)
    flat = [o for outs in got_all for o in outs]
    result.interpreter = closeness(flat, [w for ws in wanted for w in ws])
    _xcross(result, model, compiled, net, data, got_all)
    if data.labels is not None:
        result.accuracy = top1([outs[0] for outs in got_all], data.labels)
    progress(len(data.feeds), len(data.feeds), "Validated")
    return result


def _xcross(result: Validation, model: Path, compiled: Compilation, net: CompiledNet,
            data: Samples, got: list[list[np.ndarray]]) -> None:
    """The device's outputs against the original model's runtime on the same inputs."""
    names = [v.name for v in compiled.graph.inputs]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result.reference, theirs = reference_outputs(model, data.feeds, names,
                                                         len(net.outputs))
    except NoReference as exc:
        result.reference_note = str(exc)
        return
    ours = [np.asarray(o, np.float64) for outs in got for o in outs]
    want = [np.asarray(t, np.float64).reshape(o.shape) for outs, ts in zip(got, theirs)
            for o, t in zip(outs, ts)]
    result.xcross = closeness(ours, want)
    if data.labels is not None:
        result.reference_accuracy = top1([ts[0] for ts in theirs], data.labels)
