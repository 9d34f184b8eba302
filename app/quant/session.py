"""A calibration's result for the workbench: the profile, the samples, the evaluator.

`Session` links the quantizer's tensors to the canvas (which node makes each tensor, which
convolution's range is its Relu's) and keeps the incremental evaluator, the accuracies and the
ranges the calibration method picks; the functions here run in workers, away from the widgets.
After a graph edit `follow_session` links a profile carried to the edited graph at once
(cheap) and leaves the evaluator and the range searches to the next evaluation, in a worker.
Callers pass the calibration graph when they know it (the document keeps one per graph).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from app.quant.calibrate_dialog import CalibrationRequest
from app.window.workers import Progress
from compiler.driver import compilation
from compiler.interpreter import run
from compiler.ir.graph import Graph
from compiler.quant.accuracy import IntegerFigures, answers, integer_figures
from compiler.quant.calibrate import choose_range
from compiler.quant.calibration_data import CalibrationData, Normalization, load_calibration
from compiler.quant.incremental import DEFAULT_SAMPLES, Evaluation, IncrementalEvaluator
from compiler.quant.profile import Profile, load_profile
from compiler.quant.profiler import calibration_graph, profile_model
from compiler.quant.quantize import Options
from compiler.quant.recipe import QuantRecipe
from compiler.quant.remap import unprofiled

_CLAMPS = ("Relu", "Clip")
# (graph, equalized) -> its calibration graph: `calibration_graph`, or a cache of it.
Bases = Callable[[Graph, bool], Graph]
# The user's choices a worker evaluates: (hand-tuned ranges, tensors kept in float).
Edits = tuple[dict[str, dict[str, float]], tuple[str, ...]]


def profile_path(model: Path) -> Path:
    """Where the profile of `model` is kept beside it."""
    return model.with_name(f"{model.stem}.profile.json")


@dataclass
class Session:
    """What a calibration made: the profile and the data, for one graph."""

    graph: Graph
    profile: Profile
    options: Options
    live: CalibrationData  # the samples evaluated after every change
    labelled: CalibrationData | None  # the samples the accuracy is measured on
    keys: dict[str, object]  # tensor -> canvas key of the node that makes it
    producers: dict[str, str]  # tensor -> "op name" of its producer
    folds: dict[object, str]  # canvas key of a node whose output folds into a tensor -> tensor
    evaluator: IncrementalEvaluator | None = None
    evaluation: Evaluation | None = None
    float_accuracy: float | None = None
    int8_accuracy: float | None = None
    # The compiled integer model's figures on the live samples, and the QDQ graph they
    # measured (current while it is the evaluator's).
    integer: IntegerFigures | None = None
    integer_of: Graph | None = None
    # (tensor, method) -> the range the method picks: the session's method's for every tensor
    # (from its worker), others once searched (`app.quant.ranges`). Written by the GUI thread.
    method_ranges: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    request: CalibrationRequest | None = None  # how it was calibrated (sessions keep it)
    base: Graph | None = None  # the calibration graph the profile describes
    unprofiled: list[str] = field(default_factory=list)  # its tensors without a range
    samples: int = DEFAULT_SAMPLES  # how many live samples the evaluator runs
    # Node -> what bias correction adds to its float bias (an applied exploration point's).
    corrections: dict[str, np.ndarray] | None = None

    def is_stale(self) -> bool:
        """True when ranges are missing or were measured before an edit (Re-profile fixes)."""
        return bool(self.unprofiled or self.profile.stale)


def read_samples(graph: Graph, request: CalibrationRequest
                 ) -> tuple[CalibrationData, CalibrationData | None]:
    """(calibration samples, labelled samples or None) that `request` names."""
    live = load_calibration(request.data, graph, request.normalization)
    labelled = (load_calibration(request.evaluate, graph, request.normalization)
                if request.evaluate else None)
    return live, labelled


@dataclass(frozen=True)
class Weights:
    """How a session's weights are quantized beyond the defaults (an exploration point's)."""

    per_channel: bool = True
    float_weights: tuple[str, ...] = ()  # Conv, Gemm, MatMul nodes computing in float
    corrections: dict[str, np.ndarray] | None = None  # node -> added to its float bias


def session_from_profile(graph: Graph, profile: Profile, request: CalibrationRequest,
                         samples: tuple[CalibrationData, CalibrationData | None] | None = None,
                         base: Graph | None = None, weights: Weights = Weights()) -> Session:
    """The evaluated session of `profile` on `request`'s samples (read unless given).

    For a calibration, a loaded profile file and a restored `.kiln` session alike; `base` is
    the calibration graph of `graph`, computed here unless given; `weights` what a restored
    session's weights were.
    """
    live, labelled = samples if samples is not None else read_samples(graph, request)
    if labelled is None and live.labels is not None:
        labelled = live  # no held-out set: the calibration samples' own labels give accuracy
    options = QuantRecipe(profile, method=request.method, schema=request.schema,
                          per_channel=weights.per_channel,
                          float_weights=weights.float_weights).options
    session = make_session(graph, profile, options, labelled if labelled is not None else live,
                           labelled, request.samples, base)
    session.request = request
    if weights.corrections:
        session.corrections = dict(weights.corrections)
        session.evaluator.set_corrections(session.corrections)
    evaluate_session(session)
    session.method_ranges.update(missing_ranges(session))  # not shared with any thread yet
    return session


def calibrate_job(graph: Graph, request: CalibrationRequest, model: str,
                  bases: Bases = calibration_graph):
    """The function of a worker that profiles `graph` and evaluates the result."""
    def work(progress: Progress) -> Session:
        progress.report(0.0, "Reading the samples")
        samples = read_samples(graph, request)
        profile = profile_model(
            graph, samples[0], model, request.bins,
            progress=lambda done, total: progress.report(
                0.9 * done / total, f"Profiling {done:,} of {total:,} samples"),
            cancelled=progress.is_cancelled)
        progress.report(0.95, "Evaluating")
        return session_from_profile(graph, profile, request, samples,
                                    bases(graph, profile.equalized))
    return work


def profile_job(graph: Graph, path: Path, bases: Bases = calibration_graph):
    """The function of a worker that reads the profile at `path` and evaluates it on `graph`.

    A profile of another graph is a KilnError naming the file; the samples are the ones it
    was measured on (the digits' held-out split measures the sample CNN).
    """
    def work(progress: Progress) -> Session:
        progress.report(0.0, f"Reading {path.name}")
        profile = load_profile(path)
        base = bases(graph, profile.equalized)
        profile.check_graph(base, str(path))
        source = str(profile.data.get("source", ""))
        request = CalibrationRequest(source, "digits:test" if source == "digits:train" else "",
                                     Normalization())
        progress.report(0.1, "Evaluating the profile")
        return session_from_profile(graph, profile, request, base=base)
    return work


def make_session(graph: Graph, profile: Profile, options: Options, live: CalibrationData,
                 labelled: CalibrationData | None, samples: int,
                 base: Graph | None = None) -> Session:
    """Link the calibration graph's tensors to the canvas and build the evaluator."""
    session = link_session(graph, profile, options, live, labelled, samples, base)
    session.evaluator = IncrementalEvaluator(graph, profile, live, options, samples)
    session.evaluation = session.evaluator.evaluation
    return session


def link_session(graph: Graph, profile: Profile, options: Options, live: CalibrationData,
                 labelled: CalibrationData | None, samples: int,
                 base: Graph | None = None) -> Session:
    """A session of `profile` on `graph`, its tensors linked to the canvas, not evaluated yet."""
    base = base if base is not None else calibration_graph(graph, profile.equalized)
    ids = {n.id: n for n in graph.nodes}
    keys: dict[str, object] = {v.name: f"in:{v.name}" for v in base.inputs}
    producers: dict[str, str] = {v.name: "graph input" for v in base.inputs}
    readers: dict[str, list] = {}
    for node in base.nodes:
        for value in node.inputs:
            if value is not None:
                readers.setdefault(value.name, []).append(node)
    folds: dict[object, str] = {}
    for node in base.nodes:
        sources = [i for i in node.provenance if i in ids]
        same = [i for i in sources if ids[i].op == node.op]
        key = (same or sources or [None])[-1]
        for value in node.outputs:
            keys[value.name] = key
            producers[value.name] = f"{node.op} {node.name}"
            after = readers.get(value.name, [])
            if key is not None and len(after) == 1 and after[0].op in _CLAMPS:
                folds[key] = after[0].output.name  # a Conv whose Relu takes its range
    return Session(graph, profile, options, live, labelled, keys, producers, folds,
                   base=base, unprofiled=unprofiled(profile, base), samples=samples)


def follow_session(session: Session, graph: Graph, profile: Profile, base: Graph) -> Session:
    """`session` moved to the edited `graph`, with `profile` (carried to it) and the same data.

    Cheap, for the GUI thread: the evaluator and the accuracies are made by the next
    `evaluate_session`, in a worker, on the edited graph.
    """
    followed = link_session(graph, profile, session.options, session.live, session.labelled,
                            session.samples, base)
    followed.request = session.request
    # A tensor measured the same keeps its ranges; the next evaluation searches the others.
    followed.method_ranges = {
        (name, method): found for (name, method), found in dict(session.method_ranges).items()
        if name in profile.tensors and profile.tensors[name] == session.profile.tensors.get(name)}
    return followed


def _fit_samples(session: Session) -> None:
    """Fit the samples to the edited graph's input.

    A renamed input keeps them; a reshaped one reads them again from their source.
    """
    value = session.graph.inputs[0] if len(session.graph.inputs) == 1 else None
    live = session.live
    if value is not None and tuple(live.samples.shape[1:]) == tuple(value.type.shape[1:]):
        if live.input_name != value.name:
            session.live = replace(live, input_name=value.name)
            if session.labelled is not None:
                session.labelled = replace(session.labelled, input_name=value.name)
    elif session.request is not None:
        live, labelled = read_samples(session.graph, session.request)
        if labelled is None and live.labels is not None:
            labelled = live  # as session_from_profile: the samples' own labels
        session.live, session.labelled = labelled if labelled is not None else live, labelled


def missing_ranges(session: Session) -> dict[tuple[str, str], tuple[float, float]]:
    """The ranges the session's method picks for its tensors that it does not know yet.

    Searches (the KL one takes tens of milliseconds a tensor): for workers.
    """
    method, known = session.options.method, session.method_ranges
    return {(name, method): choose_range(entry, method)
            for name, entry in session.profile.tensors.items() if (name, method) not in known}


@dataclass(frozen=True)
class Evaluated:
    """A session evaluated in a worker, and the ranges its method picks that it lacked."""

    session: Session
    ranges: dict[tuple[str, str], tuple[float, float]]


def evaluate_job(session: Session, edits: Edits) -> Callable[[], Evaluated]:
    """The function of a worker that evaluates `session` with `edits` (a copy the GUI made)."""
    def work() -> Evaluated:
        evaluate_session(session, edits)
        return Evaluated(session, missing_ranges(session))
    return work


@dataclass(frozen=True)
class Measured:
    """The integer model's figures of one QDQ graph of a session, measured in a worker."""

    session: Session
    qdq: Graph
    figures: IntegerFigures


def measure_job(session: Session) -> Callable[[], Measured]:
    """The function of a worker that runs the session's current integer model, compiled.

    The graph and the float outputs are taken now, on the GUI thread: the evaluator swaps in
    a new graph on the next change, so the worker measures the one asked for.
    """
    evaluator = session.evaluator
    qdq, count = evaluator.qdq, evaluator.count
    reference = {v.name: evaluator.float_value(v.name) for v in session.graph.outputs}

    def work() -> Measured:
        return Measured(session, qdq, integer_figures(qdq, session.live, count, reference))
    return work


def evaluate_session(session: Session, edits: Edits | None = None) -> None:
    """Bring the evaluation and the accuracies up to the session's profile, or to `edits`.

    A session that followed an edit gets its evaluator here first, on the edited graph.
    """
    profile = session.profile if edits is None else \
        replace(session.profile, overrides=edits[0], keep_float=list(edits[1]))
    if session.evaluator is None:
        _fit_samples(session)
        # Built from the profile as it is (overrides, float tensors): its first evaluation is
        # current; it ran every node, in the time taken here.
        start = time.perf_counter()
        evaluator = session.evaluator = IncrementalEvaluator(
            session.graph, profile, session.live, session.options, session.samples)
        session.evaluation = replace(evaluator.evaluation, seconds=time.perf_counter() - start)
    else:
        evaluator = session.evaluator
        session.evaluation = evaluator.update(profile.overrides, tuple(profile.keep_float))
    if session.labelled is not None:
        if session.float_accuracy is None:
            session.float_accuracy = answers(session.graph, session.labelled).accuracy
        session.int8_accuracy = answers(evaluator.qdq, session.labelled, "int8").accuracy


@dataclass(frozen=True)
class SampleOutputs:
    """One sample's model output, float and int8 (the integer operators, exact)."""

    index: int
    name: str
    floating: np.ndarray
    integer: np.ndarray


def sample_outputs(session: Session, index: int) -> SampleOutputs:
    """The first output of the float model and of the current int8 model on live sample `index`.

    From the reference interpreter: the values the bundle computes.
    """
    feeds = session.live.feeds(index, index + 1)[0]
    name = session.graph.outputs[0].name
    floating = run(session.graph, feeds)[name]
    integer = run(compilation(session.evaluator.qdq).final, feeds)[name]
    return SampleOutputs(index, name, np.asarray(floating, np.float64).reshape(-1),
                         np.asarray(integer, np.float64).reshape(-1))
