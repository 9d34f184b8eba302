"""The Explore panel's work off the GUI thread: a point as a session, a bundle, a comparison.

Each function returns what a `Job` runs (one at a time: they share the loaded problem). A
point is rebuilt from EXPLORE.json alone (`compiler.explore.apply`), as `kiln explore-export`
does, so what the workbench applies, exports or compares is what the exploration measured.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.session import Bases, Session, evaluate_session, make_session, missing_ranges
from app.window.workers import Progress
from compiler.errors import KilnError
from compiler.explore.apply import AppliedPoint, apply_point
from compiler.explore.problem import PROFILE_BINS, Problem, ProblemSpec, cached_problem
from compiler.ir.graph import Graph
from compiler.quant.calibration_data import Normalization
from compiler.quant.incremental import DEFAULT_SAMPLES

_LOCK = threading.Lock()  # the loaded problem and its lazily measured profiles are shared


def problem_of(doc: dict) -> Problem:
    """The exploration's loaded problem (kept while the same one is asked for)."""
    return cached_problem(ProblemSpec.from_json(doc["problem"]))


def session_of_point(doc: dict, number: int, graph: Graph, bases: Bases) -> Session:
    """Trial `number` as a quantization session of `graph` (the document's float graph).

    The profile is the one the trial was measured with (equalized or not), its per-tensor
    methods as hand-set ranges, its float tensors kept float; the options carry the method,
    schema, per-channel weights and float layers, the session its bias corrections. KilnError
    when the exploration's model is not this graph.
    """
    problem = problem_of(doc)
    point = apply_point(doc, number, problem)
    config = point.config
    recipe = point.recipe  # the one its bundle records: profile, choices, corrections
    profile = copy.deepcopy(recipe.profile)
    base = bases(graph, profile.equalized)
    profile.check_graph(base, f"the exploration of {Path(problem.spec.model).name}")
    profile.keep_float = sorted(set(profile.keep_float) | set(recipe.keep_float))
    options = recipe.but(keep_float=()).options  # the profile's list says what stays float
    corrections = recipe.corrections or None
    labelled = problem.evaluation if problem.labelled else None
    live = labelled if labelled is not None else problem.calibration
    session = make_session(graph, profile, options, live, labelled, DEFAULT_SAMPLES, base)
    session.request = CalibrationRequest(problem.spec.calibration, problem.spec.evaluation,
                                         Normalization(), config.method, config.schema,
                                         PROFILE_BINS)
    if corrections:
        session.corrections = corrections
        session.evaluator.set_corrections(corrections)
    evaluate_session(session)
    session.method_ranges.update(missing_ranges(session))
    return session


def apply_job(doc: dict, number: int, graph: Graph, bases: Bases
              ) -> Callable[[Progress], Session]:
    """The job that makes trial `number` a session of `graph`."""
    def work(progress: Progress) -> Session:
        progress.report(0.0, f"Quantizing as trial {number}")
        with _LOCK:
            return session_of_point(doc, number, graph, bases)
    return work


@dataclass
class Bundled:
    """A point's bundle written by `bundle_job`."""

    number: int
    folder: Path
    files: list[Path]


def bundle_job(doc: dict, number: int, folder: Path, force: bool
               ) -> Callable[[Progress], Bundled]:
    """The job that writes trial `number` as a bundle with its compile options.

    `kiln explore-export`'s steps: the QDQ graph, the point's target and options, the board
    it was measured against; the bundle is swapped in whole, so a failure leaves the folder.
    """
    def work(progress: Progress) -> Bundled:
        from compiler.codegen.bundle_folder import check_folder
        from compiler.driver import compilation

        progress.report(0.0, f"Quantizing as trial {number}")
        with _LOCK:
            point = apply_point(doc, number, problem_of(doc))
        options = point.options
        check_folder(folder, options.name, options.target, force,
                     example=not options.resolved_target().mcu)
        progress.report(0.3, "Compiling")
        compiled = compilation(point.qdq)
        try:
            files, _ = compiled.bundle(folder, options, point.problem.board, force=force,
                                       check=progress.check)
        except OSError as exc:
            raise KilnError(f"cannot write the bundle to {folder}: {exc.strerror}") from None
        return Bundled(number, folder, files)
    return work


def compare_sides(doc: dict, numbers: tuple[int, int]) -> tuple[Callable, Callable]:
    """The compare view's two operands: each trial's QDQ graph on the exploration's target.

    Each side carries its layers' SQNR on the calibration samples; made in the compare job.
    """
    from app.compare.controller import sqnr_by_node
    from compiler.graphdiff.stages import Operand

    def side(number: int) -> Callable[[], Operand]:
        def make() -> Operand:
            with _LOCK:
                problem = problem_of(doc)
                point: AppliedPoint = apply_point(doc, number, problem)
                sqnr = sqnr_by_node(problem.graph, point.qdq, problem.calibration,
                                    DEFAULT_SAMPLES)
            m = point.reported
            label = (f"trial {number}: {100 * m['score']:.2f} %, "
                     f"{m['instructions']:,} instructions")
            return Operand(point.qdq, "final", options=point.options, label=label,
                           extra={"sqnr": sqnr})
        return make

    return side(numbers[0]), side(numbers[1])
