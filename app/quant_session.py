"""A calibration's result for the workbench: the profile, the samples, the evaluator.

`Session` links the quantizer's tensors to the canvas (which node makes each tensor, which
convolution's range is its Relu's) and keeps the incremental evaluator and the accuracies; the
functions here run in workers, away from the widgets. After a graph edit `follow_session`
links a profile carried to the edited graph at once (cheap) and leaves the evaluator to the
next evaluation, in a worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from app.calibrate_dialog import CalibrationRequest
from app.workers import Progress
from compiler.driver import compilation
from compiler.interpreter import run
from compiler.ir.graph import Graph
from compiler.quant.accuracy import answers
from compiler.quant.calibration_data import CalibrationData, load_calibration
from compiler.quant.incremental import DEFAULT_SAMPLES, Evaluation, IncrementalEvaluator
from compiler.quant.profile import Profile
from compiler.quant.profiler import calibration_graph, profile_model
from compiler.quant.quantize import Options
from compiler.quant.remap import unprofiled

_CLAMPS = ("Relu", "Clip")


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
    method_ranges: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    request: CalibrationRequest | None = None  # how it was calibrated (sessions keep it)
    base: Graph | None = None  # the calibration graph the profile describes
    unprofiled: list[str] = field(default_factory=list)  # its tensors without a range
    samples: int = DEFAULT_SAMPLES  # how many live samples the evaluator runs

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


def session_from_profile(graph: Graph, profile: Profile, request: CalibrationRequest,
                         samples: tuple[CalibrationData, CalibrationData | None] | None = None
                         ) -> Session:
    """The evaluated session of `profile` on `request`'s samples (read unless given).

    For a calibration, a loaded profile file and a restored `.kiln` session alike.
    """
    live, labelled = samples if samples is not None else read_samples(graph, request)
    if labelled is None and live.labels is not None:
        labelled = live  # no held-out set: the calibration samples' own labels give accuracy
    options = Options(method=request.method, schema=request.schema)
    session = make_session(graph, profile, options, labelled if labelled is not None else live,
                           labelled, request.samples)
    session.request = request
    evaluate_session(session)
    return session


def calibrate_job(graph: Graph, request: CalibrationRequest, model: str):
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
        return session_from_profile(graph, profile, request, samples)
    return work


def make_session(graph: Graph, profile: Profile, options: Options, live: CalibrationData,
                 labelled: CalibrationData | None, samples: int) -> Session:
    """Link the calibration graph's tensors to the canvas and build the evaluator."""
    session = link_session(graph, profile, options, live, labelled, samples)
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


def evaluate_session(session: Session) -> None:
    """Bring the evaluation and the accuracies up to the session's profile.

    A session that followed an edit gets its evaluator here first, on the edited graph.
    """
    if session.evaluator is None:
        _fit_samples(session)
        # Built from the profile as it is (overrides, float tensors): its first evaluation is
        # current; it ran every node, in the time taken here.
        start = time.perf_counter()
        evaluator = session.evaluator = IncrementalEvaluator(
            session.graph, session.profile, session.live, session.options, session.samples)
        session.evaluation = replace(evaluator.evaluation, seconds=time.perf_counter() - start)
    else:
        evaluator = session.evaluator
        session.evaluation = evaluator.update(session.profile.overrides,
                                              tuple(session.profile.keep_float))
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
