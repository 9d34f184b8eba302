"""Accuracy control in NNCF's manner: layers back to float until the drop is within bounds.

The int8 model is measured against the float one on labelled data (accuracy) or, without
labels, on top-1 agreement. While the drop exceeds `max_drop`, quantized tensors are kept
float, and with each the weights of the Conv, Gemm and MatMul nodes reading it (a layer fed a
float tensor computes in float). Which ones: as NNCF ranks, by what reverting one gives back.
A tensor's SQNR alone misleads (the error of an early layer shows in every later tensor), so
the lowest-SQNR `candidates` are each reverted alone and ranked by the score and output SQNR
that gives back.

The cheap measurements come first: ranking, and the search for how many of the ranked
tensors to keep float (doubling, then bisection), run on the batched fake-quantized model,
which re-runs only what a change reaches and compiles nothing. Only the points it finds are
compiled and scored as a trial is (host code, bit-exact with the integer interpreter); when
the compiled score misses the bound, the search goes on with compiled points. NNCF re-ranks
after every reverted layer, one compile per candidate: an hour-long model here needs 30
steps of 9 compiles, where this needs about a dozen fake-quantized runs and a few compiles.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.quant.accuracy import Answers, answers
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.incremental import Evaluation, IncrementalEvaluator
from compiler.quant.profile import Profile
from compiler.quant.quantize import Options, quantize

WEIGHTED = ("Conv", "Gemm", "MatMul", "ConvTranspose")


class Cancelled(KilnError):
    """The user stopped the run; what was measured is kept."""


def within(float_score: float, score: float, max_drop: float) -> bool:
    """Whether `score` loses at most `max_drop` against `float_score` (a drop at it is in)."""
    return float_score - score <= max_drop + 1e-12


@dataclass
class Step:
    """One compiled measurement: what was kept float, and the score it gave."""

    keep_float: tuple[str, ...]
    float_weights: tuple[str, ...]
    score: float  # accuracy, or top-1 agreement without labels (0 to 1)
    worst: str | None  # the lowest-SQNR tensor still quantized (reported, not the choice)
    worst_sqnr: float | None
    ranking: tuple[str, ...] = ()  # the tensors still quantized, in accuracy control's order


@dataclass
class ControlResult:
    """The float score, every compiled step, and the one chosen (the first feasible found)."""

    float_score: float
    max_drop: float
    steps: list[Step] = field(default_factory=list)
    chosen: int | None = None  # index of the final step (None: the last one)

    @property
    def final(self) -> Step:
        """The point accuracy control settles on (the feasible one when `feasible`)."""
        return self.steps[-1 if self.chosen is None else self.chosen]

    @property
    def feasible(self) -> bool:
        """Whether the final point's drop is within `max_drop`."""
        return within(self.float_score, self.final.score, self.max_drop)

    def options(self, base: Options) -> Options:
        """`base` with the final point's layers kept float."""
        return replace(base, keep_float=self.final.keep_float,
                       float_weights=self.final.float_weights)

    def to_json(self) -> dict:
        """The trace, for EXPLORE.json."""
        return {"float_score": self.float_score, "max_drop": self.max_drop,
                "feasible": self.feasible, "final": self.steps.index(self.final),
                "steps": [{"keep_float": list(s.keep_float), "float_weights":
                           list(s.float_weights), "score": s.score, "worst": s.worst,
                           "worst_sqnr_db": s.worst_sqnr, "ranking": list(s.ranking)}
                          for s in self.steps]}


def final_step(control: dict) -> dict:
    """The final step of a trace `to_json` wrote (older traces: their last step)."""
    return control["steps"][control.get("final", -1)]


def _subset(data: CalibrationData, count: int | None) -> CalibrationData:
    """The first `count` samples (all when None)."""
    if count is None or count >= len(data):
        return data
    labels = None if data.labels is None else data.labels[:count]
    return CalibrationData(data.input_name, data.samples[:count], data.source, labels)


class _Scorer:
    """Scores from compiled host code: accuracy with labels, else top-1 agreement.

    The code is bit-exact with the integer interpreter and takes milliseconds per sample.
    """

    def __init__(self, graph: Graph, data: CalibrationData):
        self.data = data
        self.float_answers = answers(graph, data)

    @property
    def float_score(self) -> float:
        return 1.0 if self.float_answers.accuracy is None else self.float_answers.accuracy

    def __call__(self, qdq: Graph) -> float:
        return score_of(answers(qdq, self.data), self.float_answers.classes)


def score_of(got: Answers, float_classes: np.ndarray) -> float:
    """Accuracy when the samples have labels, else top-1 agreement with `float_classes`."""
    if got.accuracy is not None:
        return got.accuracy
    return float(np.mean(got.classes == float_classes))


def readers(graph: Graph, tensor: str) -> tuple[str, ...]:
    """Names of the weighted nodes reading `tensor` (they compute in float when it is)."""
    return tuple(n.name for n in graph.nodes if n.op in WEIGHTED
                 and any(v is not None and v.name == tensor for v in n.inputs))


class _Cheap:
    """The fake-quantized model on the ranking samples: scores without compiling.

    `progress(stage, score, kept)` hears every measurement, cheap or compiled, so a long
    ranking is never silent.
    """

    def __init__(self, graph: Graph, profile: Profile, data: CalibrationData, options: Options,
                 samples: int, cancelled: Callable[[], bool]):
        self.graph, self.options, self.cancelled = graph, options, cancelled
        self.errors = IncrementalEvaluator(graph, profile, data, options, samples)
        count, first = self.errors.count, graph.outputs[0].name
        self.labels = None if data.labels is None else np.asarray(data.labels)[:count]
        self.float_classes = self._classes(self.errors.float_value(first))
        self.float_score = self._score(self.float_classes)
        self.measured = 0

    def _classes(self, values: np.ndarray) -> np.ndarray:
        return values.reshape(self.errors.count, -1).argmax(axis=1)

    def _score(self, classes: np.ndarray) -> float:
        want = self.float_classes if self.labels is None else self.labels
        return float(np.mean(classes == want))

    def keep(self, tensors: list[str]) -> tuple[float, float, Evaluation]:
        """(score, summed output SQNR, evaluation) with `tensors` kept float too."""
        if self.cancelled():
            raise Cancelled("accuracy control was stopped")
        measured = self.errors.set_options(_with(self.graph, self.options, tensors))
        self.measured += 1
        first = self.graph.outputs[0].name
        classes = self._classes(self.errors.quantized_value(first))
        return self._score(classes), float(sum(measured.output_sqnr.values())), measured


def _with(graph: Graph, options: Options, tensors: list[str]) -> Options:
    """`options` with `tensors` kept float too, and the weighted layers reading them."""
    keep = list(options.keep_float) + [t for t in tensors if t not in options.keep_float]
    weights = list(options.float_weights)
    for tensor in tensors:
        weights += [n for n in readers(graph, tensor) if n not in weights]
    return replace(options, keep_float=tuple(keep), float_weights=tuple(weights))


def _rank(cheap: _Cheap, by_sqnr: list[str], candidates: int,
          report: Callable[[str, float, int], None]) -> list[str]:
    """Every quantized tensor, those whose reversion alone gives back most first.

    The lowest-SQNR `candidates` are measured (score first, output SQNR on ties, SQNR order
    after that); the others follow in SQNR order.
    """
    tried = by_sqnr[:candidates]
    gains = {}
    for tensor in tried:
        score, sqnr, _ = cheap.keep([tensor])
        gains[tensor] = (score, sqnr, -tried.index(tensor))
        report("ranking", score, 1)
    return sorted(tried, key=lambda t: gains[t], reverse=True) + by_sqnr[candidates:]


def _search(ok: Callable[[int], bool], low: int, high: int) -> int:
    """The least count in (low, high] that is `ok`, `low` known not ok and `high` ok.

    Doubling from `low` first, so a bound met by a few tensors is found in a few tries.
    """
    step = 1
    while low + step < high:
        if ok(low + step):
            high = low + step
            break
        low, step = low + step, 2 * step
    while high - low > 1:
        middle = (low + high) // 2
        if ok(middle):
            high = middle
        else:
            low = middle
    return high


def accuracy_control(graph: Graph, profile: Profile, data: CalibrationData,
                     max_drop: float, options: Options | None = None,
                     limit: int | None = None,
                     report: Callable[[int, float], None] | None = None,
                     max_steps: int = 64, ranking_samples: int = 100,
                     candidates: int = 32,
                     cancelled: Callable[[], bool] = lambda: False,
                     progress: Callable[[dict], None] | None = None) -> ControlResult:
    """Revert layers to float, the most rewarding first, until the drop is at most `max_drop`.

    `max_drop` is in the score's unit (0.01: one point of accuracy); `options` (default:
    `Options()`) say how to quantize the rest. `report(step, score)` hears each compiled
    step, `progress` each measurement as a dict (stage, measured, candidates, score,
    float_tensors, compiled). Raises KilnError when `data` is empty, Cancelled when
    `cancelled()` turns true.
    """
    if len(data) == 0:
        raise KilnError("accuracy control needs at least one evaluation sample")
    options = options or Options()
    data = _subset(data, limit)
    score = _Scorer(graph, data)
    cheap = _Cheap(graph, profile, data, options, ranking_samples, cancelled)
    result = ControlResult(score.float_score, max_drop)
    start = cheap.errors.evaluation
    by_sqnr = [t.name for t in sorted((t for t in start.tensors.values()
                                       if t.name not in options.keep_float),
                                      key=lambda t: t.sqnr)]
    order = list(by_sqnr)
    planned = min(candidates, len(by_sqnr))

    def tell(stage: str, got: float, kept: int, compiled: bool = False) -> None:
        if progress is not None:
            progress({"stage": stage, "measured": cheap.measured + len(result.steps),
                      "candidates": planned, "score": got, "float_tensors": kept,
                      "compiled": compiled})

    compiled: dict[int, int] = {}  # tensors kept float -> index of its step

    def measure(count: int) -> bool:
        """Compile and score the first `count` tensors of the order kept float."""
        if cancelled():
            raise Cancelled("accuracy control was stopped")
        kept = order[:count]
        chosen = _with(graph, options, kept)
        qdq = quantize(graph, copy.deepcopy(profile), chosen)
        measured = cheap.errors.set_options(chosen)
        left = sorted((t for t in measured.tensors.values() if t.name not in chosen.keep_float),
                      key=lambda t: t.sqnr)
        worst = left[0] if left else None
        result.steps.append(Step(chosen.keep_float, chosen.float_weights, score(qdq),
                                 worst.name if worst else None,
                                 worst.sqnr if worst else None, tuple(order[count:])))
        compiled[count] = len(result.steps) - 1
        if report is not None:
            report(len(result.steps) - 1, result.steps[-1].score)
        tell("checking", result.steps[-1].score, count, compiled=True)
        return within(result.float_score, result.steps[-1].score, max_drop)

    if measure(0) or not order:
        return result
    tell("ranking", result.steps[0].score, 0)
    order = _rank(cheap, by_sqnr, candidates,
                  lambda stage, got, kept: tell(stage, got, kept))

    def fake_ok(count: int) -> bool:
        got, _, _ = cheap.keep(order[:count])
        tell("searching", got, count)
        return within(cheap.float_score, got, max_drop)

    count = _search(fake_ok, 0, len(order))
    if not measure(count):  # the fake-quantized model was kind: on with compiled points
        count = _search(lambda k: len(result.steps) <= max_steps and measure(k), count,
                        len(order))
        if count not in compiled:
            measure(count)
    result.chosen = compiled[count]
    return result
