"""Exercise one mutant the way `kiln` does and judge everything that came out of it.

The library path loads the model, inspects it, runs it in the reference interpreter (as loaded
and after the pipeline), compiles it for this host (fast mode, object cache) and runs the
object, and for some compiles it for Cortex-M7; the CLI path calls `app.cli.main` in this
process for `inspect`, `run` (both engines) and `compile`. Every stage must end in success or in
Kiln's one-sentence refusal: an exception of another type, a Python warning or a stray line on
stderr is a failure, and so are engines that disagree and an oracle (onnxruntime, TFLite Micro)
that accepts the model and answers otherwise. A `Record` keeps the outcome and its classes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import sys
import tempfile
import threading
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from app import cli
from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.inputs import random_inputs
from compiler.interpreter import run
from compiler.qmath.summary import summary
from compiler.stats import compute_stats
from tests.conftest import ROOT
from tests.quant.int8_oracle import u8s8_inexact_reason
from tests.quant_fuzz.oracle import Oracle
from tests.quant_fuzz.sources import Mutant
from tests.test_fuzz import PYTHON_ERROR

MUTANT_TIMEOUT_S = 120
# Loading and running a model accept it (an invalid one must be refused by then), by either path.
ACCEPTING_STAGES = [("load", "run"), ("cli inspect", "cli run")]
# The code generator's refusals name the node as "cannot generate OP NAME: ...".
NAMED_KERNEL = re.compile(r"cannot generate \w+ \S+:")
# The library stage each CLI step stands for, so that refusals count together.
CLI_STAGES = {"cli inspect": "load", "cli run": "run", "cli run final": "passes",
              "cli run compiled": "compile", "cli compile host": "compile",
              "cli compile cortex-m7": "compile cortex-m7"}


class MutantTimeout(Exception):
    """One mutant took longer than MUTANT_TIMEOUT_S."""


@dataclass
class Record:
    """What happened to one mutant.

    Attributes:
        mutant: The mutant.
        path: "library" or "cli".
        refusal: "<stage>: <reason class>" of Kiln's first refusal, "" when it ran.
        names_node: Whether that refusal names a node.
        engines: "agreed", "differ" or "not compared" (compiled object against interpreter).
        oracle: "agreed", "refused: ...", "crashed", "inexact, skipped: ..." or "not asked".
        failures: (class, detail) of every failure.
        stages: The stages that ended in success.
        seconds: The wall time it took.
    """

    mutant: Mutant
    path: str = "library"
    refusal: str = ""
    names_node: bool = False
    engines: str = "not compared"
    oracle: str = "not asked"
    failures: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    seconds: float = 0.0

    def fail(self, cls: str, detail: str) -> None:
        """Count failure class `cls` (once per mutant; the first detail is kept)."""
        if all(cls != known for known, _ in self.failures):
            self.failures.append((cls, detail.splitlines()[0][:300] if detail else ""))

    def refuse(self, stage: str, message: str, file_named: bool = True) -> None:
        if "\n" in message:
            self.fail("refusal of several lines", f"at {stage}: {message}")
        if PYTHON_ERROR.search(message):
            self.fail(f"refusal quotes a Python exception: {PYTHON_ERROR.search(message)[0]}",
                      f"at {stage}: {message}")
        if not file_named:
            self.fail("refusal does not name the file", f"at {stage}: {message}")
        if not self.refusal:
            self.refusal = f"{CLI_STAGES.get(stage, stage)}: " \
                           f"{reason_class(message, self.mutant.label)}"
            self.names_node = "node " in message or bool(NAMED_KERNEL.search(message))

    @property
    def accepted(self) -> bool:
        return any(all(s in self.stages for s in path) for path in ACCEPTING_STAGES)


def reason_class(message: str, label: str) -> str:
    """A refusal's reason without names and numbers, so that alike refusals count together."""
    text = message.removeprefix(f"{label}: ")
    text = re.sub(r"node \S+?( \([A-Za-z]+\))?:", r"node N\1:", text)
    text = re.sub(r"cannot generate (\w+) \S+:", r"cannot generate \1 N:", text)
    text = re.sub(r"(?<![A-Za-z])'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\[[^\]]*\]", "[…]", text)
    text = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", text)
    node = re.match(r"node N( \([A-Za-z]+\))?: ", text)
    head, text = (node.group(0), text[node.end():]) if node else ("", text)
    text = re.sub(r"\([^()]*\)", "(…)", text)
    return (head + text.split(";")[0].strip())[:100]


def _where(tb) -> str:
    """The innermost frame of Kiln's own code (compiler/ or app/) in a traceback."""
    where = "outside Kiln"
    for frame in traceback.extract_tb(tb):
        path = Path(frame.filename)
        if path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in ("compiler", "app"):
            where = f"{path.relative_to(ROOT).as_posix()}:{frame.name}"
    return where


class Stage:
    """One step of the flow: turns exceptions, warnings and stderr into the record's classes.

    A KilnError is a refusal (judged by `Record.refuse`); any other exception is an internal
    error, classed by type and the innermost frame of Kiln's code. Both are swallowed so the
    next stage can run; `ok` says whether this one succeeded. With `stderr_ok` what went to
    stderr is left in `stderr` for the caller to judge (the CLI prints refusals there).
    """

    def __init__(self, record: Record, name: str, stderr_ok: bool = False,
                 refusal_names_file: bool = False):
        self.record, self.name, self.stderr_ok = record, name, stderr_ok
        self.names_file = refusal_names_file
        self.ok = False
        self.stderr = ""

    def __enter__(self) -> Stage:
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always")
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        self._python_err = io.StringIO()
        self._redirect = contextlib.redirect_stderr(self._python_err)
        self._redirect.__enter__()
        return self

    def _stderr_text(self) -> str:
        self._redirect.__exit__(None, None, None)
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        text = self._file.read().decode(errors="replace") + self._python_err.getvalue()
        self._file.close()
        return text

    def __exit__(self, kind, exc, tb) -> bool:
        self.stderr = self._stderr_text()
        self._warnings.__exit__(None, None, None)
        record, stage = self.record, self.name
        for caught in self._caught[:1]:
            record.fail(f"{caught.category.__name__} {_relative(caught.filename)}:"
                        f"{caught.lineno}", f"at {stage}: {caught.message}")
        if self.stderr.strip() and not self.stderr_ok:
            record.fail("stray stderr", f"at {stage}: {self.stderr.strip()}")
        if exc is None:
            self.ok = True
            if not self.stderr_ok:  # the CLI's stages count by their exit code
                record.stages.append(stage)
            return False
        if isinstance(exc, KilnError):
            message = str(exc)
            named = not self.names_file or message.startswith(f"{record.mutant.label}: ")
            record.refuse(stage, message, named)
            return True
        if isinstance(exc, MutantTimeout):
            record.fail("timeout", f"at {stage}: {exc}")
            return True
        if not isinstance(exc, Exception):
            return False  # KeyboardInterrupt and the like end the campaign
        record.fail(f"internal error: {type(exc).__name__} in {_where(tb)}",
                    f"at {stage}: {type(exc).__name__}: {exc}")
        return True


# What a command that succeeded may say on stderr: a warning (a layer left float), a note or a
# hint, each on a line of its own.
SAID = ("kiln: warning: ", "kiln: note: ", "kiln: hint: ")


def _relative(filename: str) -> str:
    path = Path(filename)
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def differing(ours: np.ndarray, want: np.ndarray) -> str:
    """Why two outputs differ ("" when equal): integers exactly, floats to float32 rounding."""
    ours, want = np.asarray(ours), np.asarray(want)
    if ours.dtype != want.dtype or ours.shape != want.shape:
        return f"{ours.dtype}{list(ours.shape)} against {want.dtype}{list(want.shape)}"
    if ours.dtype.kind == "f":
        bad = ~np.isclose(ours, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    else:
        bad = ours.astype(np.int64) != want.astype(np.int64)
    count = int(np.count_nonzero(bad))
    if not count:
        return ""
    first = np.flatnonzero(bad)[0]
    return (f"{count} of {bad.size} elements differ (first at {first}: "
            f"{ours.reshape(-1)[first]} against {want.reshape(-1)[first]})")


def _compare(outputs: dict, wanted: dict, names: list[str]) -> str:
    for position, name in enumerate(names):
        if name not in outputs:
            return f"output {name} missing"
        want = wanted.get(name)
        if want is None:
            values = list(wanted.values())
            if position >= len(values):
                return f"output {name} missing from the reference"
            want = values[position]
        why = differing(outputs[name], want)
        if why:
            return f"{name}: {why}"
    return ""


def feeds_for(inputs, mutant: Mutant, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs (as `kiln run` makes them), former constants fed their values."""
    feeds = random_inputs(SimpleNamespace(inputs=inputs), seed)
    for value in inputs:
        given = mutant.feeds.get(value.name)
        if given is not None and given.dtype.name == value.type.dtype and \
                tuple(given.shape) == tuple(value.type.shape):
            feeds[value.name] = given
    return feeds


# -- the library path --------------------------------------------------------------------------

def library_flow(record: Record, arm: bool):
    """Load, inspect, run, compile and run compiled; (output names, feeds, outputs by stage)."""
    m = record.mutant
    with Stage(record, "load", refusal_names_file=True) as s:
        graph = load_model(m.data, label=m.label)
    if not s.ok:
        return None
    with Stage(record, "inspect"):
        compute_stats(graph)
        summary(graph)
    feeds = feeds_for(graph.inputs, m)
    outputs: dict[str, dict] = {}
    with Stage(record, "run"):
        outputs["loaded"] = run(graph, feeds)
    compiled = compilation(graph)
    with Stage(record, "passes"):
        final = compiled.final
        outputs["final"] = run(final, feeds)
    with Stage(record, "compile"):
        net = compiled.net(Options(fast_compile=True))
        host = HostNet(net)
        try:  # other inputs in between: what a run leaves behind must not change the next
            got = host.run(feeds)
            host.run(feeds_for(graph.inputs, m, seed=1))
            again = host.run(feeds)
        finally:
            host.close()
        names = [v.name for v in compiled.graph.outputs]
        outputs["compiled"] = {name: got[name] for name in names}
        why = _compare({name: again[name] for name in names}, outputs["compiled"], names)
        if why:
            record.fail("compiled object's outputs depend on an earlier run", why)
    if arm:
        with Stage(record, "compile cortex-m7"):
            compiled.net(Options("cortex-m7", fast_compile=True))
    return [v.name for v in graph.outputs], feeds, outputs


# -- the CLI path ---------------------------------------------------------------------------------

def _cli(record: Record, stage: str, args: list[str]) -> tuple[int, str]:
    """`kiln ARGS` in this process: (exit code, stdout); the exit and stderr judged."""
    label = record.mutant.label
    out = io.StringIO()
    code = None
    with Stage(record, f"cli {stage}", stderr_ok=True) as s, contextlib.redirect_stdout(out):
        code = cli.main(args)
    if code is None:
        return -1, ""
    err = s.stderr
    if code == 0:
        record.stages.append(f"cli {stage}")
    stray = [line for line in err.splitlines() if line.strip() and not line.startswith(SAID)]
    if code == 0 and stray:
        record.fail("stray stderr", f"at cli {stage}: {chr(10).join(stray)}")
    elif code == 2:
        prefix = f"kiln: error: {label}: "
        if err.count("\n") != 1 or not err.startswith(prefix):
            record.fail("CLI refusal not one line naming the file", f"at cli {stage}: {err}")
        record.refuse(f"cli {stage}", err.removeprefix("kiln: error: ").strip())
    elif code == 3:
        debug = os.environ.get("KILN_DEBUG")
        os.environ["KILN_DEBUG"] = "1"  # again, to class the error by where it was raised
        try:
            with Stage(record, f"cli {stage}", stderr_ok=True), \
                    contextlib.redirect_stdout(io.StringIO()):
                cli.main(args)
        finally:
            if debug is None:
                os.environ.pop("KILN_DEBUG")
        if not any(c.startswith("internal error") for c, _ in record.failures):
            record.fail("exit 3", f"at cli {stage}: {err.strip()}")
    elif code != 0:
        record.fail(f"exit {code}", f"at cli {stage}: {err.strip()}")
    return code, out.getvalue()


def cli_flow(record: Record, folder: Path, arm: bool):
    """The CLI's inspect, run (as loaded, final stage, compiled) and compile of the mutant."""
    m = record.mutant
    record.path = "cli"
    path = folder / m.label
    path.write_bytes(m.data)
    code, out = _cli(record, "inspect", ["inspect", str(path), "--json"])
    if code != 0:
        return None
    doc = json.loads(out)
    inputs = [SimpleNamespace(name=i["name"], type=SimpleNamespace(
        dtype=i["dtype"], shape=tuple(i["shape"]))) for i in doc["inputs"]]
    feeds = feeds_for(inputs, m)
    given = []
    for k, value in enumerate(inputs):
        if value.name in m.feeds and feeds[value.name] is m.feeds[value.name]:
            np.save(folder / f"in{k}.npy", feeds[value.name])
            given += ["--input", f"{value.name}={folder / f'in{k}.npy'}"]
    outputs: dict[str, dict] = {}
    for stage, extra in (("loaded", ["--stage", "loaded"]), ("final", ["--stage", "final"]),
                         ("compiled", ["--engine", "compiled"])):
        npz = folder / f"{stage}.npz"
        code, _ = _cli(record, "run" if stage == "loaded" else f"run {stage}",
                       ["run", str(path), *given, *extra, "-o", str(npz)])
        if code == 0:
            with np.load(npz) as saved:
                outputs[stage] = dict(saved)
    for target in ("host", "cortex-m7") if arm else ("host",):
        _cli(record, f"compile {target}", ["compile", str(path), "--target", target, "-o",
                                           str(folder / f"bundle_{target}")])
    names = [o["name"] for o in doc["outputs"]]
    return names, feeds, outputs


# -- judging ------------------------------------------------------------------------------------

def _judge_engines(record: Record, names: list[str], outputs: dict) -> None:
    m = record.mutant
    if "compiled" in outputs and "final" in outputs:
        why = _compare(outputs["compiled"], outputs["final"], names)
        record.engines = "differ" if why else "agreed"
        if why:
            record.fail("compiled object differs from the interpreter" + _extreme(m), why)
    if m.oracle != "ort-qdq" and "loaded" in outputs and "final" in outputs:
        # Integer graphs keep their arithmetic through the passes; a QDQ graph as loaded runs
        # in float between its Quantize/Dequantize pairs, so only its final stage is compared.
        why = _compare(outputs["final"], outputs["loaded"], names)
        if why:
            record.fail("the pipeline changed the interpreter's outputs" + _extreme(m), why)


def _extreme(mutant: Mutant) -> str:
    """A class suffix that keeps disagreements over extreme scales apart from the rest."""
    return ", extreme scales" if mutant.extreme else ""


def _ask_oracle(record: Record, oracle: Oracle, names: list[str], feeds: dict,
                outputs: dict) -> None:
    m = record.mutant
    ours = outputs.get("final" if m.oracle == "ort-qdq" else "loaded")
    if ours is None:
        return
    if m.oracle == "tflm":
        status, result = oracle.ask("tflm", m.data, [list(feeds.values())], len(names))
        if status == "ok":
            result = dict(zip(names, result[0]))
    else:
        status, result = oracle.ask("ort", m.data, {**m.feeds, **feeds}, m.oracle == "ort-qdq")
    if status != "ok":
        record.oracle = f"{status}: {str(result).split(':')[0][:40]}"
        return
    why = _compare(ours, result, names)
    if why and m.oracle == "ort-qdq":
        # A unit Kiln keeps in float (its sums could wrap, its scales are extreme) is what
        # the QDQ graph means; onnxruntime's fused kernel is then the inexact one.
        status, result = oracle.ask("ort", m.data, {**m.feeds, **feeds}, False)
        if status == "ok" and not _compare(ours, result, names):
            record.oracle = "agreed with onnxruntime's float path, not its fused kernels"
            return
    if not why:
        record.oracle = "agreed"
    elif m.u8s8 and u8s8_inexact_reason():
        record.oracle = "inexact, skipped: u8s8 kernels without VNNI"
    elif m.overflow and m.oracle == "ort-qdq":
        # onnxruntime's fused kernels wrap their int32 sums; Kiln keeps a unit whose sums could
        # wrap in float, as the QDQ graph means it, so they may part (the QOperator and TFLite
        # kernels wrap in both).
        record.oracle = "inexact, skipped: int32 accumulator overflow"
    else:
        record.oracle = "differs"
        record.fail(f"{m.oracle} oracle differs" + _extreme(m), why)


@contextlib.contextmanager
def _deadline(seconds: int):
    """MutantTimeout after `seconds` (main thread on POSIX only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise MutantTimeout(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_mutant(mutant: Mutant, oracle: Oracle, folder: Path, use_cli: bool,
                 arm: bool) -> Record:
    """Run one mutant through Kiln (CLI or library), the engines and the oracle; its record."""
    record = Record(mutant)
    with _deadline(MUTANT_TIMEOUT_S):
        flow = cli_flow(record, folder, arm) if use_cli else library_flow(record, arm)
    if mutant.must_refuse and record.accepted:
        record.fail(f"invalid model accepted: {mutant.must_refuse}", mutant.how)
    if flow is None:
        return record
    names, feeds, outputs = flow
    _judge_engines(record, names, outputs)
    _ask_oracle(record, oracle, names, feeds, outputs)
    return record
