"""What an exploration is about: the model, its data, the target, the board and the bound.

`ProblemSpec` is plain strings and numbers, so it travels to every Ray worker and into
EXPLORE.json; `load_problem` turns it into the loaded model, data and profiles once per
process (a worker measuring many trials loads them once). Profiles are measured with 256 bins
so the entropy and MSE methods have a histogram to search.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from compiler.codegen.targets import BOARDS, Board, get_target
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.quant.calibration_data import CalibrationData

PROFILE_BINS = 256
EVALUATION_PURPOSE = ("the samples every point's accuracy drop against the float model is "
                      "measured on (held-out ones, with labels for accuracy; without labels "
                      "the score is top-1 agreement with float)")


@dataclass(frozen=True)
class ProblemSpec:
    """The exploration's inputs, as the command line gave them.

    `max_drop` is a fraction (0.005: half a point of accuracy); `profile` is an optional
    profile file whose ranges (and hand overrides) the un-equalized points start from.
    """

    model: str
    calibration: str
    evaluation: str
    target: str = "cortex-m7"
    board: str | None = None
    max_drop: float = 0.01
    profile: str | None = None

    def to_json(self) -> dict:
        """Plain JSON for EXPLORE.json."""
        return asdict(self)

    def for_workers(self) -> ProblemSpec:
        """The spec with its files as absolute paths.

        A cluster's workers run in the folder `ray start` ran in, not the driver's; the
        record keeps the paths as given.
        """
        def absolute(name: str | None) -> str | None:
            return str(Path(name).absolute()) if name and Path(name).exists() else name
        return replace(self, model=absolute(self.model),
                       calibration=absolute(self.calibration),
                       evaluation=absolute(self.evaluation), profile=absolute(self.profile))

    @classmethod
    def from_json(cls, doc: dict) -> ProblemSpec:
        """The spec `to_json` wrote."""
        try:
            return cls(**doc)
        except TypeError as exc:
            raise KilnError(f"the exploration's problem is malformed: {exc}") from None


@dataclass
class Problem:
    """The loaded inputs of one exploration (per process)."""

    spec: ProblemSpec
    graph: Graph
    calibration: CalibrationData
    evaluation: CalibrationData
    board: Board | None
    float_classes: np.ndarray
    float_score: float
    profiles: dict[bool, object] = field(default_factory=dict)  # equalized -> Profile

    @property
    def labelled(self) -> bool:
        """Whether the evaluation data has labels (else the score is top-1 agreement)."""
        return self.evaluation.labels is not None

    def profile(self, equalized: bool):
        """The profile for plain or equalized quantization, measured on first use."""
        if equalized not in self.profiles:
            from compiler.quant.profiler import profile_model

            self.profiles[equalized] = profile_model(
                self.graph, self.calibration, Path(self.spec.model).name, PROFILE_BINS,
                equalized=equalized)
        return self.profiles[equalized]

    def warnings(self) -> list[str]:
        """What the user should know before the search starts (an evaluation set too coarse)."""
        said = coarse_evaluation(len(self.evaluation), self.spec.max_drop,
                                 "accuracy" if self.labelled else "top-1 agreement")
        return [f"{Path(self.spec.evaluation).name}: {said}"] if said else []

    def can_equalize(self) -> bool:
        """Whether cross-layer equalization finds any pair of layers to balance."""
        from compiler.quant.equalize import equalization_pairs

        return bool(equalization_pairs(self.graph))


def coarse_evaluation(samples: int, max_drop: float, score: str = "accuracy") -> str | None:
    """Why `samples` evaluation samples cannot resolve a `max_drop` bound, or None.

    One sample is 1 / `samples` of the score: when that is more than the bound, losing a
    single sample is over it, so a feasible point must agree on every sample and accuracy
    control keeps layers float until none changes (often every layer).
    """
    if samples <= 0 or 1 / samples <= max_drop + 1e-12:
        return None
    need = (f"give at least {math.ceil(1 / max_drop - 1e-9):,} evaluation samples or a "
            f"wider bound" if max_drop > 0 else "give a wider bound")
    return (f"{samples:,} evaluation samples make one sample {100 / samples:.2f} points of "
            f"{score}, coarser than the {100 * max_drop:g}-point bound: a point may not lose "
            f"a single sample, so accuracy control may keep most layers float; {need}")


def board_of(spec: ProblemSpec) -> Board | None:
    """The board named by the spec (KilnError for an unknown one or another CPU's)."""
    if spec.board is None:
        return None
    if spec.board not in BOARDS:
        raise KilnError(f"unknown board {spec.board!r} (known: {', '.join(BOARDS)})")
    board = BOARDS[spec.board]
    if get_target(board.target).name != get_target(spec.target).name:
        raise KilnError(f"board {spec.board} has a {board.target}, not a {spec.target}")
    return board


def load_problem(spec: ProblemSpec) -> Problem:
    """Load the model, both data sets and the starting profile; the float model's score."""
    from compiler.frontends.load import load_model
    from compiler.quant.accuracy import answers
    from compiler.quant.calibration_data import load_calibration
    from compiler.quant.glow_yaml import read_profile

    get_target(spec.target)
    if not 0 <= spec.max_drop < 1:
        raise KilnError(f"--max-drop must be between 0 and 100 points, not "
                        f"{100 * spec.max_drop:g}")
    board = board_of(spec)
    for what, source, purpose in (
            ("calibration", spec.calibration, "the samples each tensor's range is measured on"),
            ("evaluation", spec.evaluation, EVALUATION_PURPOSE)):
        if not str(source).strip():
            raise KilnError(f"no {what} data was given: it is {purpose}")
    graph = load_model(spec.model)
    calibration = load_calibration(spec.calibration, graph)
    evaluation = load_calibration(spec.evaluation, graph)
    if len(evaluation) == 0:
        raise KilnError(f"{spec.evaluation}: the evaluation data has no samples")
    float_answers = answers(graph, evaluation)
    score = float_answers.accuracy if float_answers.accuracy is not None else 1.0
    problem = Problem(spec, graph, calibration, evaluation, board, float_answers.classes,
                      score)
    if spec.profile:
        given = read_profile(spec.profile)
        problem.profiles[bool(given.equalized)] = given
    return problem


_LOADED: dict[ProblemSpec, Problem] = {}


def cached_problem(spec: ProblemSpec) -> Problem:
    """`load_problem`, once per process and spec (workers measure many trials)."""
    if spec not in _LOADED:
        _LOADED.clear()
        _LOADED[spec] = load_problem(spec)
    return _LOADED[spec]
