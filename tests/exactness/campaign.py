"""The exactness campaign: quantize a float model on drawn data, then every engine must agree.

A trial draws a model, a calibration kind, a schema and a requantization rule; it profiles the
float model on the drawn calibration set (Kiln's profiler), quantizes it (`quantize`), and
runs the integer graph (the interpreter's answer, `Compilation.reference`) on inputs of every
kind. Each (model, calibration, input, schema, rule, target) is one case: the code compiled
for every x86 level this CPU runs (`host_levels`) and, in some trials, for Cortex-M7 and
Cortex-M55 under QEMU must give the interpreter's outputs element for element. Under the onnx
rule the QDQ file `kiln quantize` writes must also give, in onnxruntime's integer path, the
interpreter's outputs (where that path is exact: `u8s8_inexact_reason`).

A failing case writes a reproducer folder (the float model, the profile, the input and the
commands) and names the seed.

    KILN_EXACT_LONG=1   the long campaign (tens of thousands of cases)
    KILN_EXACT_SEED=N   another seed
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.errors import KilnError
from compiler.frontends.onnx.export import save_onnx, to_onnx
from compiler.interpreter import run
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.glow_yaml import write_profile
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import Options as QuantOptions
from compiler.quant.quantize import quantize
from tests.codegen.firmware import outputs_of_each
from tests.exactness import draws
from tests.exactness.models import BUILT, SHARED, available, float_graph

SEED = int(os.environ.get("KILN_EXACT_SEED", "0"))
LONG = os.environ.get("KILN_EXACT_LONG", "") not in ("", "0")
ARM_TARGETS = ("cortex-m7", "cortex-m55")
# Trials per model, (short, long); inputs per kind and trial; one trial in ARM_EVERY also
# runs on the Cortex-M boards.
TRIALS = {"operator_zoo": (6, 50), "digits_cnn": (4, 30), "separable_block": (5, 45),
          "wide_classifier": (5, 45), "kws_ref_model_float32": (1, 10),
          "pretrainedResnet": (1, 8), "mnist-8": (1, 10), "ad01_fp32": (1, 10),
          "vww_96_float": (0, 4)}
PER_KIND = (2, 4)
# Models whose firmware does not fit the smallest emulated board's flash (AN547's 512 KB ITCM
# holds Cortex-M55's code and weights): their trials run on the hosts only.
HOST_ONLY = ("vww_96_float",)
ARM_EVERY = (3, 2)
CHUNK = (3, 10)  # trials per test
assert set(TRIALS) == set(BUILT) | set(SHARED)


@dataclass(frozen=True)
class Trial:
    """One drawn quantization of one model, checked on every target it names."""

    model: str
    index: int
    calibration: str
    schema: str
    rule: str
    arm: bool
    seed: int
    long: bool = False  # part of the long campaign: more inputs, every x86 level

    @property
    def label(self) -> str:
        return (f"{self.model}#{self.index} {self.calibration} calibration, {self.schema} "
                f"schema, {self.rule} rule (seed {self.seed})")

    def rng(self, purpose: str) -> np.random.Generator:
        """A generator of its own for each use, so draws never shift one another."""
        key = [self.seed, self.index, sum(map(ord, self.model)), sum(map(ord, purpose))]
        return np.random.default_rng(key)


@dataclass
class Outcome:
    """What one trial found."""

    trial: Trial
    cases: Counter = field(default_factory=Counter)  # target -> cases compared
    oracle_cases: int = 0
    skipped: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    reproducers: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def plan(long: bool = LONG, seed: int = SEED) -> list[Trial]:
    """Every trial of the campaign, in a fixed order (a seed draws the same plan again)."""
    which = 1 if long else 0
    trials = []
    for model, counts in TRIALS.items():
        rng = np.random.default_rng([seed, sum(map(ord, model))])
        for index in range(counts[which]):
            trials.append(Trial(
                model, index, draws.CALIBRATIONS[(index + seed + len(trials))
                                                 % len(draws.CALIBRATIONS)],
                str(rng.choice(draws.SCHEMAS)), str(rng.choice(draws.RULES)),
                index % ARM_EVERY[which] == 0 and model not in HOST_ONLY, seed, long))
    return trials


def chunks(long: bool = LONG, seed: int = SEED) -> list[list[Trial]]:
    """The plan cut into test-sized pieces, each of one model."""
    size = CHUNK[1 if long else 0]
    pieces = []
    for model in TRIALS:
        mine = [t for t in plan(long, seed) if t.model == model]
        pieces += [mine[i:i + size] for i in range(0, len(mine), size)]
    return pieces


def runnable_levels() -> list[str]:
    """Every x86 level whose code this CPU runs (the host's own first): SSE2, AVX2, AVX-VNNI,
    AVX-512 with and without VNNI, as far as it has them; on another CPU the host alone."""
    from compiler.codegen.targets import get_target, missing_on_this_cpu, target_names

    if not get_target("host").triple.startswith("x86_64"):
        return ["host"]
    return ["host"] + [name for name in target_names()[1:]
                       if get_target(name).triple.startswith("x86_64")
                       and not missing_on_this_cpu(get_target(name))]


def host_levels(index: int = 0, long: bool = LONG) -> list[str]:
    """The levels a trial (or a TFLite chain) numbered `index` runs: every runnable level in
    the long campaign; in the short one the host's own and one other in turn, so the trials
    between them cover every level."""
    levels = runnable_levels()
    if long or len(levels) <= 2:
        return levels
    return ["host", levels[1 + index % (len(levels) - 1)]]


def differing(got: dict, want: dict) -> str:
    """Why two output sets differ ("" when every element is equal, NaN equal to NaN)."""
    for name, expected in want.items():
        ours = got.get(name)
        if ours is None:
            return f"output {name} missing"
        ours, expected = np.asarray(ours), np.asarray(expected)
        if ours.shape != expected.shape or ours.dtype != expected.dtype:
            return f"{name}: {ours.dtype}{list(ours.shape)} against " \
                   f"{expected.dtype}{list(expected.shape)}"
        same = ours == expected
        if ours.dtype.kind == "f":
            same |= np.isnan(ours) & np.isnan(expected)
        if not same.all():
            first = int(np.flatnonzero(~same)[0])
            return (f"{name}: {int((~same).sum())} of {same.size} elements differ (first at "
                    f"{first}: {ours.reshape(-1)[first]} against "
                    f"{expected.reshape(-1)[first]})")
    return ""


def input_quantizer(qdq) -> tuple[float, int, int, int]:
    """(scale, zero point, lowest, highest integer) of the QuantizeLinear on the model input."""
    source = qdq.inputs[0]
    for node in qdq.nodes:
        if node.op == "QuantizeLinear" and node.inputs[0] is source:
            scale = float(np.asarray(node.inputs[1].data).reshape(-1)[0])
            zero = node.inputs[2].data
            info = np.iinfo(zero.dtype)
            return scale, int(np.asarray(zero).reshape(-1)[0]), int(info.min), int(info.max)
    return 1.0, 0, -128, 127


class TrialRun:
    """The state of one trial: its quantized model, inputs and the interpreter's outputs."""

    def __init__(self, trial: Trial, folder: Path):
        self.trial, self.folder = trial, folder
        self.outcome = Outcome(trial)
        graph = float_graph(trial.model)
        self.float_graph = graph
        self.input = graph.inputs[0]
        calib = draws.calibration(trial.calibration, self.input.type.shape, trial.rng("calib"))
        self.profile = profile_model(graph, CalibrationData(self.input.name, calib, "drawn"))
        self.options = QuantOptions(schema=trial.schema, requant=trial.rule)
        self.qdq = quantize(graph, self.profile, self.options)
        self.compiled = compilation(self.qdq)
        reference = self.compiled.reference
        rng = trial.rng("inputs")
        per_kind = PER_KIND[1 if trial.long else 0]
        quantizer = input_quantizer(self.qdq)
        self.inputs = [(kind, x) for kind in draws.INPUTS
                       for x in draws.inputs(kind, calib, rng, per_kind, quantizer)]
        self.wanted = [run(reference, {self.input.name: x}) for _, x in self.inputs]

    def feeds(self, k: int) -> dict[str, np.ndarray]:
        return {self.input.name: self.inputs[k][1]}

    def fail(self, target: str, k: int | None, why: str) -> None:
        """Count a failure and write its reproducer."""
        kind = self.inputs[k][0] if k is not None else "every input"
        self.outcome.failures.append(f"{self.trial.label}, {kind} input, {target}: {why}")
        self.outcome.reproducers.append(self.reproducer(target, k))

    def reproducer(self, target: str, k: int | None) -> Path:
        """A folder with the float model, the profile, the input and the commands to rerun."""
        t = self.trial
        slug = re.sub(r"[^a-z0-9.]+", "-", target.lower()).strip("-")
        where = self.folder / "reproducers" / (
            f"{t.model}-{t.index}-{slug}-{k if k is not None else 'all'}-seed{t.seed}")
        where.mkdir(parents=True, exist_ok=True)
        save_onnx(self.float_graph, where / "model.onnx")
        write_profile(self.profile, where / "profile.json")
        k = 0 if k is None else k
        np.save(where / "input.npy", self.inputs[k][1])
        common = (f"model.onnx --profile profile.json --schema {t.schema} --requant {t.rule} "
                  f"--input {self.input.name}=input.npy")
        lines = ["# " + t.label, f"# {self.inputs[k][0]} input; failed on {target}",
                 f"kiln run {common} --engine reference -o reference.npz"]
        if target in ARM_TARGETS:
            lines.append(f"kiln compile model.onnx --profile profile.json --schema {t.schema} "
                         f"--requant {t.rule} --target {target} -o bundle")
        elif target.startswith("onnxruntime"):
            lines.append(f"kiln quantize model.onnx --profile profile.json --schema {t.schema} "
                         f"--requant {t.rule} -o quantized.onnx  # then run it in onnxruntime "
                         "with session.qdqisint8allowed=1")
        else:
            lines.append(f"kiln run {common} --engine compiled -o compiled.npz")
        (where / "README.sh").write_text("\n".join(lines) + "\n")
        return where

    # -- the targets ----------------------------------------------------------------------

    def host(self, level: str) -> None:
        net = self.compiled.net(Options(level))
        runner = HostNet(net)
        try:
            for k in range(len(self.inputs)):
                got = runner.run(self.feeds(k))
                self.outcome.cases[level] += 1
                why = differing(got, self.wanted[k])
                if why:
                    self.fail(level, k, why)
        finally:
            runner.close()

    def arm(self, target: str) -> None:
        net = self.compiled.net(Options(target))
        work = self.folder / f"fw-{target}"
        feeds = [self.feeds(k) for k in range(len(self.inputs))]
        for k, got in enumerate(outputs_of_each(net, feeds, target, work)):
            self.outcome.cases[target] += 1
            why = differing(got, self.wanted[k])
            if why:
                self.fail(target, k, why)
        shutil.rmtree(work, ignore_errors=True)

    def onnxruntime(self, oracle) -> None:
        """The QDQ file `kiln quantize` writes, in onnxruntime's integer path."""
        from tests.quant.int8_oracle import u8s8_inexact_reason

        reason = u8s8_inexact_reason() if self.trial.schema == "uint8" else None
        if reason:
            self.outcome.skipped.append(f"onnxruntime: {reason}")
            return
        data = to_onnx(self.qdq).SerializeToString()
        names = [v.name for v in self.qdq.outputs]
        for k in range(len(self.inputs)):
            status, result = oracle.ask("ort", data, self.feeds(k), True)
            if status != "ok":
                self.fail("onnxruntime's integer path", k, f"{status}: {result}")
                continue
            self.outcome.oracle_cases += 1
            want = {n: self.wanted[k][n] for n in names if n in self.wanted[k]}
            why = differing(result, want)
            if why:
                self.fail("onnxruntime's integer path", k, why)


def run_trial(trial: Trial, folder: Path, oracle=None) -> Outcome:
    """Every case of one trial; a Kiln refusal or a crash is a failure like a wrong byte."""
    began = time.perf_counter()
    try:
        state = TrialRun(trial, folder)
    except KilnError as exc:
        outcome = Outcome(trial, failures=[f"{trial.label}: refused: {exc}"])
        outcome.seconds = time.perf_counter() - began
        return outcome
    levels = host_levels(trial.index, trial.long)
    steps = [(level, lambda lv=level: state.host(lv)) for level in levels]
    if trial.arm:
        steps += [(target, lambda t=target: state.arm(t)) for target in ARM_TARGETS]
    if trial.rule == "onnx" and oracle is not None:
        steps.append(("onnxruntime", lambda: state.onnxruntime(oracle)))
    for target, step in steps:
        try:
            step()
        except KilnError as exc:
            state.fail(target, None, f"refused: {exc}")
    state.outcome.seconds = time.perf_counter() - began
    return state.outcome


def runnable(trials: list[Trial]) -> list[Trial]:
    """The trials whose model is here."""
    return [t for t in trials if available(t.model)]


def summary(outcomes: list[Outcome]) -> str:
    """Cases by target and model, the time, and every failure."""
    targets, models = Counter(), Counter()
    for o in outcomes:
        targets.update(o.cases)
        models[o.trial.model] += sum(o.cases.values())
        targets["onnxruntime's integer path (oracle)"] += o.oracle_cases
    total = sum(sum(o.cases.values()) for o in outcomes)
    lines = [f"{len(outcomes)} trials, {total} cases against the interpreter, "
             f"{sum(o.oracle_cases for o in outcomes)} against onnxruntime, "
             f"{sum(o.seconds for o in outcomes):.1f} s"]
    lines += [f"  {count:6d}  {name}" for name, count in sorted(targets.items())]
    lines += [f"  {count:6d}  {name}" for name, count in sorted(models.items())]
    skipped = Counter(s for o in outcomes for s in o.skipped)
    lines += [f"  skipped {count} times: {why}" for why, count in skipped.items()]
    failures = [f for o in outcomes for f in o.failures]
    lines.append(f"{len(failures)} failures")
    lines += [f"  {f}" for f in failures[:40]]
    folders = [str(p) for o in outcomes for p in o.reproducers]
    if folders:
        lines.append("reproducers: " + ", ".join(folders[:10]))
    return "\n".join(lines)
