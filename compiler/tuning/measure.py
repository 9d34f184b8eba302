"""Measuring candidate schedules: one build of the network measures one per workload.

Every kernel of a per-layer build is a function of its own, so one build with a candidate
schedule for each workload measures all of them at once: on a Cortex-M, each kernel's
executed instructions under QEMU (deterministic, so a loaded machine ranks candidates the
same way); on this host, each kernel's share of the time-stamp counter over interleaved
repeats (medians). The build's outputs are compared with the interpreter's on the same
inputs: a candidate whose outputs differ is logged as not exact and never applied.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from compiler.codegen.build import CompiledNet, build_net
from compiler.codegen.targets import Target, auto_lean_weights, get_target
from compiler.codegen.weights import int8_weight_bytes
from compiler.driver import Compilation, Options, compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.inputs import random_inputs
from compiler.interpreter import run as interpret


@dataclass(frozen=True)
class TuneSpec:
    """What a worker needs to measure candidates: the model, the target, how to measure."""

    model: str
    target: str
    shapes: dict = field(default_factory=dict)
    seed: int = 0
    repeats: int = 5  # host: interleaved blocks per candidate set, their median kept

    def to_json(self) -> dict:
        """The spec as plain JSON (what a Ray task receives)."""
        return {**asdict(self), "shapes": {k: list(v) for k, v in self.shapes.items()}}

    @classmethod
    def from_json(cls, doc: dict) -> TuneSpec:
        """The spec from `to_json`'s document."""
        return cls(str(doc["model"]), str(doc["target"]),
                   {k: tuple(v) for k, v in doc.get("shapes", {}).items()},
                   int(doc.get("seed", 0)), int(doc.get("repeats", 5)))

    @property
    def unit(self) -> str:
        """What the cost counts: instructions on an emulated core, nanoseconds on a host."""
        return "instructions" if get_target(self.target).mcu else "ns"


@dataclass
class Problem:
    """A loaded model, ready to measure schedules on one target (one per worker process)."""

    spec: TuneSpec
    compiled: Compilation
    target: Target
    feeds: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    workloads: dict[str, dict]  # key -> description, in the network's order
    layers: dict[str, int]  # key -> the kernels (calls) of that workload


def load_problem(spec: TuneSpec) -> Problem:
    """The model loaded and planned, the interpreter's outputs, the workloads it has."""
    compiled = compilation(load_model(spec.model, dict(spec.shapes)))
    target = auto_lean_weights(Options(spec.target).resolved_target(),
                               int8_weight_bytes(compiled.prepared))
    feeds = random_inputs(compiled.prepared, spec.seed)
    expected = interpret(compiled.prepared, feeds)
    net = build(compiled, target, {})
    layers: dict[str, int] = {}
    for kernel in net.kernels:
        if kernel.workload:
            layers[kernel.workload] = layers.get(kernel.workload, 0) + 1
    workloads = {key: net.workloads[key] for key in layers}
    if not workloads:
        raise KilnError(f"no layer has a schedule space on {target.name}: int8 "
                        "convolutions, depthwise and fully connected layers have one "
                        "(quantize a float model first: kiln quantize)")
    return Problem(spec, compiled, target, feeds, expected, workloads, layers)


_PROBLEMS: dict[str, Problem] = {}


def cached_problem(spec: TuneSpec) -> Problem:
    """`load_problem`, once per spec in this process (a Ray worker measures many trials)."""
    key = repr(spec.to_json())
    if key not in _PROBLEMS:
        _PROBLEMS.clear()
        _PROBLEMS[key] = load_problem(spec)
    return _PROBLEMS[key]


def build(compiled: Compilation, target: Target, schedules: dict) -> CompiledNet:
    """The per-layer build with `schedules` (kept out of the driver's cache: one per trial)."""
    options = Options(target.name, separate_kernels=True, timed_kernels=not target.mcu)
    return build_net(compiled.prepared, compiled.plan(options), target, "net",
                     separate_kernels=True, timed=not target.mcu, schedules=schedules)


@dataclass(frozen=True)
class Measured:
    """One build's costs: per workload (cost summed over its layers, code and weight bytes)."""

    costs: dict[str, dict]
    exact: bool
    seconds: float

    def to_json(self) -> dict:
        """As plain JSON (a Ray task's result)."""
        return asdict(self)


def measure(problem: Problem, schedules: dict) -> Measured:
    """Build the network with `schedules` (workload key -> knobs) and measure every kernel."""
    start = time.perf_counter()
    net = build(problem.compiled, problem.target, schedules)
    if problem.target.mcu:
        per_kernel, code, outputs = _count_on_qemu(net, problem.feeds)
    else:
        per_kernel, code, outputs = _time_on_host(net, problem.feeds, problem.spec.repeats)
    exact = all(np.array_equal(outputs[name], value) for name, value in problem.expected.items())
    costs: dict[str, dict] = {}
    seen: set[str] = set()
    for kernel in net.kernels:
        if not kernel.workload:
            continue
        row = costs.setdefault(kernel.workload, {"cost": 0, "layers": 0, "code_bytes": 0,
                                                 "weight_bytes": 0})
        row["layers"] += 1
        row["weight_bytes"] += kernel.own_weight_bytes
        if kernel.symbol in seen:  # a shared kernel: its count covers every call
            continue
        seen.add(kernel.symbol)
        row["cost"] += per_kernel.get(kernel.symbol, 0)
        row["code_bytes"] += code.get(kernel.symbol, 0)
    return Measured(costs, exact, round(time.perf_counter() - start, 3))


def _count_on_qemu(net: CompiledNet, feeds: dict) -> tuple[dict, dict, dict]:
    """Executed instructions and code bytes per kernel symbol, and the printed outputs."""
    from compiler.mcu import firmware
    from compiler.mcu.counting import count, functions

    missing = firmware.missing_tools()
    if missing:
        raise KilnError(f"tuning for {net.target.name} counts instructions under QEMU and "
                        f"needs {' and '.join(missing)} (Debian packages: {firmware.PACKAGES})")
    board = firmware.board_for(net.target.name)
    with tempfile.TemporaryDirectory(prefix="kiln-tune-") as folder:
        elf = firmware.build(net, firmware.main_c(net, feeds), board.qemu_machine, Path(folder))
        symbols = functions(elf)
        kernels = sorted({k.symbol for k in net.kernels if k.symbol in symbols})
        regions = [(symbols[s][0], symbols[s][0] + symbols[s][1]) for s in kernels]
        counts, stdout = count(elf, board.qemu_machine, regions, Path(folder))
    per_kernel = dict(zip(kernels, counts.regions))
    code = {s: symbols[s][1] for s in kernels}
    return per_kernel, code, firmware.parse_outputs(net, stdout)


def _time_on_host(net: CompiledNet, feeds: dict, repeats: int) -> tuple[dict, dict, dict]:
    """Nanoseconds per kernel (medians of repeated blocks), code bytes, the outputs."""
    from compiler.codegen.host import HostNet

    runner = HostNet(net)
    try:
        outputs = runner.run(feeds)
        runner.call()
        blocks = []
        for _ in range(max(repeats, 1)):
            runner.reset_ticks()
            runs, begin = 0, time.perf_counter()
            while runs < 5 or time.perf_counter() - begin < 0.02:
                runner.call()
                runs += 1
            wall = time.perf_counter() - begin
            ticks = runner.ticks().astype(np.float64)
            chains = runner.chain_ticks()
            ns_per_tick = 1e9 * wall / max(ticks[-1], 1) / runs
            block = {}
            for slot, index in enumerate(net.timed):
                block[net.kernels[index].symbol] = ticks[slot] * ns_per_tick
            for symbol, values in chains.items():
                for value, index in zip(values, dict(net.chain_timed)[symbol]):
                    block[net.kernels[index].symbol] = float(value) * ns_per_tick
            blocks.append(block)
    finally:
        runner.close()
    per_kernel = {s: float(np.median([b.get(s, 0.0) for b in blocks])) for s in blocks[0]}
    return per_kernel, {}, outputs
