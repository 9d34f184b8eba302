"""int8 TFLite builtins built here, on drawn int8 inputs: interpreter and code against TFLite Micro.

Each model is a chain of one to three int8 builtins with the parameters TFLite Micro accepts
(`tests.quant_fuzz.tflite_models.built_model`: convolutions, depthwise, fully connected, add,
mul, the pools, softmax, logistic, mean, pad, concatenation, reshape). Its inputs are drawn of
every int8 kind: uniform, zeros, the zero point, the two extremes mixed, all lowest, all
highest. The interpreter (as loaded and after the pipeline) must give TFLite Micro's bytes, and
the code compiled for every x86 level this CPU runs the interpreter's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.codegen.firmware import outputs_of_each
from tests.exactness.campaign import (
    ARM_TARGETS,
    LONG,
    SEED,
    differing,
    host_levels,
    runnable_levels,
)
from tests.quant_fuzz.tflite_models import built_model
from tests.tflite.writer import Model, Op, T, write

KINDS = ("uniform", "zeros", "zero point", "extremes", "all lowest", "all highest")
PER_KIND = 2
COUNT = (40, 400)  # models, short and long
CHUNK = 20


@dataclass
class TfliteOutcome:
    """Cases compared and failures of a range of models."""

    cases: int = 0
    oracle_cases: int = 0
    refused: int = 0  # models Kiln refuses (parameters TFLite Micro aborts on, say)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"{self.oracle_cases} cases against TFLite Micro, {self.cases} in all, "
                 f"{self.refused} models refused, {len(self.failures)} failures"]
        return "\n".join(lines + [f"  {f}" for f in self.failures[:30]])


def int8_inputs(kind: str, dtype: str, shape, zero_point: int, rng: np.random.Generator
                ) -> np.ndarray:
    """One input of a kind for an 8-bit tensor."""
    info = np.iinfo(dtype)
    if kind == "uniform":
        x = rng.integers(info.min, info.max + 1, shape)
    elif kind == "zeros":
        x = np.zeros(shape)
    elif kind == "zero point":
        x = np.full(shape, zero_point)
    elif kind == "extremes":
        x = rng.choice([info.min, info.max], shape)
    elif kind == "all lowest":
        x = np.full(shape, info.min)
    else:
        x = np.full(shape, info.max)
    return x.astype(dtype)


def run_range(indices, oracle, seed: int = SEED, long: bool = LONG) -> TfliteOutcome:
    """Every case of the models numbered `indices`."""
    outcome = TfliteOutcome()
    for index in indices:
        _check_model(index, seed, oracle, outcome, long)
    return outcome


def _check_model(index: int, seed: int, oracle, outcome: TfliteOutcome, long: bool) -> None:
    rng = np.random.default_rng([seed, index, 8])
    data, notes = built_model(rng)
    _check_data(f"tflite chain #{index} (seed {seed}: {', '.join(notes)})", data, rng, oracle,
                outcome, levels=host_levels(index, long))


def _check_data(label: str, data: bytes, rng: np.random.Generator, oracle,
                outcome: TfliteOutcome, arm_folder: Path | None = None,
                levels: list[str] | None = None) -> None:
    try:
        graph = load_model(data, label="built.tflite")
        compiled = compilation(graph)
        final = compiled.final
    except KilnError:  # the hostile-model campaign checks each refusal is right
        outcome.refused += 1
        return
    feeds = []
    for kind in KINDS:
        for _ in range(PER_KIND):
            feeds.append((kind, {
                v.name: int8_inputs(kind, v.type.dtype, v.type.shape,
                                    int(v.type.quant.zero_point[0]) if v.type.quant else 0, rng)
                for v in graph.inputs}))
    names = [v.name for v in graph.outputs]
    status, answers = oracle.ask("tflm", data, [list(f.values()) for _, f in feeds], len(names))
    if status != "ok":
        outcome.failures.append(f"{label}: TFLite Micro {status}: {str(answers)[:200]}")
        return
    wanted = []
    for (kind, f), answer in zip(feeds, answers):
        want = dict(zip(names, answer))
        for stage, g in (("loaded", graph), ("final", final)):
            got = run(g, f)
            ours = {n: got[v.name] for n, v in zip(names, g.outputs)}
            outcome.oracle_cases += 1
            outcome.cases += 1
            why = differing(ours, want)
            if why:
                outcome.failures.append(f"{label}, {kind} input, interpreter ({stage}) against "
                                        f"TFLite Micro: {why}")
        wanted.append(want)
    for level in levels or runnable_levels():
        runner = HostNet(compiled.net(Options(level)))
        try:
            for (kind, f), want in zip(feeds, wanted):
                got = runner.run(f)
                ours = {n: got[v.name] for n, v in zip(names, compiled.graph.outputs)}
                outcome.cases += 1
                why = differing(ours, want)
                if why:
                    outcome.failures.append(f"{label}, {kind} input, {level}: {why}")
        finally:
            runner.close()
    for target in ARM_TARGETS if arm_folder is not None else ():
        net = compiled.net(Options(target))
        answers = outputs_of_each(net, [f for _, f in feeds], target, arm_folder / target)
        for got, (kind, _), want in zip(answers, feeds, wanted):
            ours = {n: got[v.name] for n, v in zip(names, compiled.graph.outputs)}
            outcome.cases += 1
            why = differing(ours, want)
            if why:
                outcome.failures.append(f"{label}, {kind} input, {target}: {why}")


def count(long: bool = LONG) -> int:
    """Models in the short or the long campaign."""
    return COUNT[1 if long else 0]



def _edge_conv(name: str, depth: int, in_scale: float, w_value: float, out_scale: float,
               biases: tuple[int, ...], weights: tuple[int, ...]) -> tuple[str, bytes]:
    """A one-layer int8 1x1 CONV_2D over `depth` channels on 2x2 pixels, eight output
    channels (so x86 runs it on its lane kernels), each channel's weights all one of
    `weights`, none zero (a channel whose sum cannot change has tables of its own)."""
    out = len(weights)
    filters = np.repeat(np.asarray(weights, np.int8).reshape(out, 1, 1, 1), depth, axis=3)
    bias_scale = float(np.float32(in_scale) * np.float32(w_value))
    tensors = [T("x", (1, 2, 2, depth), "int8", scale=[in_scale], zero_point=[0]),
               T("w", (out, 1, 1, depth), "int8", data=filters, scale=[w_value] * out,
                 zero_point=[0] * out, axis=0),
               T("b", (out,), "int32", data=np.array(biases, np.int32),
                 scale=[bias_scale] * out, zero_point=[0] * out),
               T("y", (1, 2, 2, out), "int8", scale=[out_scale], zero_point=[0])]
    model = Model(tensors, [Op("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {
        "Padding": 1, "StrideH": 1, "StrideW": 1, "DilationHFactor": 1, "DilationWFactor": 1,
        "FusedActivationFunction": 0}))], [0], [3])
    return name, write(model)


def edge_models() -> list[tuple[str, bytes]]:
    """Layers at the edges of the requantization's integer arithmetic, where kernels cut
    corners: a multiplier just below 2**31 with a right shift of 20 on sums near INT32_MAX
    (the rounding addition must saturate, as TFLite's rounding divide never overflows), and
    a left shift of 9 on sums that wrap when shifted (TFLite shifts in int32; no float form
    may stand in for it)."""
    below_one = float(np.float32(1 - 2.0 ** -14))
    top = (1 << 31) - 1001
    return [
        _edge_conv("saturating rounding", 8, 1.0, below_one, 2.0 ** 20,
                   (top, top - 1, -top, 0, top - 600, 5, top, -7), (1, 1, -1, 2, 3, -4, 1, 1)),
        _edge_conv("wrapping left shift", 1024, 1.0, 1.0, 2.0 ** -8, (0, -1, 0, 0, 3, 0, 0, 9),
                   (127, 100, 60, 33, -33, -60, 17, 1)),
    ]


def run_edges(oracle, folder: Path) -> TfliteOutcome:
    """Every edge model on inputs of every kind: the interpreter against TFLite Micro, the
    code for the x86 levels and for Cortex-M7 and M55 (QEMU, firmware built in `folder`)
    against the interpreter."""
    outcome = TfliteOutcome()
    for index, (name, data) in enumerate(edge_models()):
        _check_data(f"edge model {name}", data, np.random.default_rng([index, 9]), oracle,
                    outcome, folder / f"edge{index}")
    return outcome
