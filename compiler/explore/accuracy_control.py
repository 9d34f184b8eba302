"""Accuracy control in NNCF's manner: layers back to float until the drop is within bounds.

The int8 model is measured against the float one on labelled data (accuracy) or, without
labels, on top-1 agreement. While the drop exceeds `max_drop`, one quantized tensor is kept
float, and with it the weights of the Conv, Gemm and MatMul nodes reading it (a layer fed a
float tensor computes in float). Which one: as NNCF ranks, by what reverting it gives back,
each candidate measured on a ranking subset of the data. A tensor's SQNR alone misleads: the
error of an early layer shows in every later tensor, whose SQNR is then lower still; it only
picks the `candidates` to try (the lowest SQNR on the batched fake-quantized model). Scores
come from the compiled host code, as a trial's do. Each step re-measures on all the data; the
first feasible point is what a search starts from.
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
from compiler.quant.incremental import IncrementalEvaluator
from compiler.quant.profile import Profile
from compiler.quant.quantize import Options, quantize

WEIGHTED = ("Conv", "Gemm", "MatMul", "ConvTranspose")


class Cancelled(KilnError):
    """The user stopped the run; what was measured is kept."""


@dataclass
class Step:
    """One measurement: what was kept float, and the score it gave."""

    keep_float: tuple[str, ...]
    float_weights: tuple[str, ...]
    score: float  # accuracy, or top-1 agreement without labels (0 to 1)
    worst: str | None  # the lowest-SQNR tensor still quantized (reported, not the choice)
    worst_sqnr: float | None
    ranking: tuple[str, ...] = ()  # the tensors still quantized, lowest SQNR first


@dataclass
class ControlResult:
    """The float score, every step taken, and whether the last one meets the bound."""

    float_score: float
    max_drop: float
    steps: list[Step] = field(default_factory=list)

    @property
    def final(self) -> Step:
        """The last measured point (the feasible one when `feasible`)."""
        return self.steps[-1]

    @property
    def feasible(self) -> bool:
        """Whether the last point's drop is within `max_drop`."""
        return self.float_score - self.final.score <= self.max_drop + 1e-12

    def options(self, base: Options) -> Options:
        """`base` with the final point's layers kept float."""
        return replace(base, keep_float=self.final.keep_float,
                       float_weights=self.final.float_weights)

    def to_json(self) -> dict:
        """The trace, for EXPLORE.json."""
        return {"float_score": self.float_score, "max_drop": self.max_drop,
                "feasible": self.feasible,
                "steps": [{"keep_float": list(s.keep_float), "float_weights":
                           list(s.float_weights), "score": s.score, "worst": s.worst,
                           "worst_sqnr_db": s.worst_sqnr, "ranking": list(s.ranking)}
                          for s in self.steps]}


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

    def __call__(self, qdq: Graph, count: int | None = None) -> float:
        data = _subset(self.data, count)
        return score_of(answers(qdq, data), self.float_answers.classes[:len(data)])


def score_of(got: Answers, float_classes: np.ndarray) -> float:
    """Accuracy when the samples have labels, else top-1 agreement with `float_classes`."""
    if got.accuracy is not None:
        return got.accuracy
    return float(np.mean(got.classes == float_classes))


def readers(graph: Graph, tensor: str) -> tuple[str, ...]:
    """Names of the weighted nodes reading `tensor` (they compute in float when it is)."""
    return tuple(n.name for n in graph.nodes if n.op in WEIGHTED
                 and any(v is not None and v.name == tensor for v in n.inputs))


def _with(options: Options, keep: list[str], weights: list[str]) -> Options:
    return replace(options, keep_float=tuple(keep), float_weights=tuple(weights))


def _rank(graph: Graph, profile: Profile, score: _Scorer, options: Options,
          keep: list[str], weights: list[str], candidates: list[str], samples: int,
          cancelled: Callable[[], bool]) -> str:
    """The candidate whose reversion gives the best score on the first `samples` samples."""
    best, best_score = candidates[0], -1.0
    for tensor in candidates:
        if cancelled():
            raise Cancelled("accuracy control was stopped")
        more = weights + [n for n in readers(graph, tensor) if n not in weights]
        qdq = quantize(graph, copy.deepcopy(profile), _with(options, keep + [tensor], more))
        got = score(qdq, samples)
        if got > best_score:
            best, best_score = tensor, got
    return best


def accuracy_control(graph: Graph, profile: Profile, data: CalibrationData,
                     max_drop: float, options: Options | None = None,
                     limit: int | None = None,
                     report: Callable[[int, float], None] | None = None,
                     max_steps: int = 64, ranking_samples: int = 100,
                     candidates: int = 8,
                     cancelled: Callable[[], bool] = lambda: False) -> ControlResult:
    """Revert layers to float, the most rewarding first, until the drop is at most `max_drop`.

    `max_drop` is in the score's unit (0.01: one point of accuracy); `options` (default:
    `Options()`) say how to quantize the rest. `report(step, score)` hears each measurement.
    Raises KilnError when `data` is empty, Cancelled when `cancelled()` turns true.
    """
    if len(data) == 0:
        raise KilnError("accuracy control needs at least one evaluation sample")
    options = options or Options()
    data = _subset(data, limit)
    score = _Scorer(graph, data)
    errors = IncrementalEvaluator(graph, profile, data, options, ranking_samples)
    keep, weights = list(options.keep_float), list(options.float_weights)
    result = ControlResult(score.float_score, max_drop)
    for step in range(max_steps + 1):
        qdq = quantize(graph, copy.deepcopy(profile), _with(options, keep, weights))
        measured = errors.set_options(_with(options, keep, weights))
        ranking = sorted((t for t in measured.tensors.values() if t.name not in keep),
                         key=lambda t: t.sqnr)
        worst = ranking[0] if ranking else None
        result.steps.append(Step(tuple(keep), tuple(weights), score(qdq),
                                 worst.name if worst else None,
                                 worst.sqnr if worst else None,
                                 tuple(t.name for t in ranking)))
        if report is not None:
            report(step, result.final.score)
        if result.feasible or worst is None:
            return result
        chosen = _rank(graph, profile, score, options, keep, weights,
                       [t.name for t in ranking[:candidates]], ranking_samples, cancelled)
        keep.append(chosen)
        weights.extend(n for n in readers(graph, chosen) if n not in weights)
    return result
