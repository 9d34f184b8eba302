"""A point of EXPLORE.json made real again: its QDQ graph and compile options, from the file.

Nothing is taken from the run that measured it: the problem is loaded from the file's spec,
the configuration from its JSON, so exporting or verifying a point checks that the file alone
reproduces it.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.driver import Options as CompileOptions
from compiler.errors import KilnError
from compiler.explore.config import Config
from compiler.explore.measure import compile_options, recipe_of
from compiler.explore.problem import Problem, ProblemSpec, load_problem
from compiler.ir.graph import Graph
from compiler.quant.recipe import QuantRecipe, quantize_with


@dataclass
class AppliedPoint:
    """One trial's configuration applied: the problem, the QDQ graph, the compile options."""

    number: int
    problem: Problem
    config: Config
    qdq: Graph
    options: CompileOptions
    reported: dict  # the measurement the file reports
    overrides: dict  # the profile overrides the file gives it
    recipe: QuantRecipe  # what made `qdq` (a bundle of the point records it)


def trial_of(doc: dict, number: int) -> dict:
    """Trial `number` of an EXPLORE.json (KilnError when absent or not measured)."""
    for trial in doc.get("trials", []):
        if trial.get("number") == number:
            if "measurement" not in trial:
                raise KilnError(f"trial {number} failed ({trial.get('error', 'no result')}); "
                                "it has nothing to apply")
            return trial
    raise KilnError(f"the exploration has no trial {number} "
                    f"(it has {len(doc.get('trials', []))})")


def apply_point(doc: dict, number: int, problem: Problem | None = None) -> AppliedPoint:
    """Trial `number`'s QDQ graph and compile options (the problem loaded unless given)."""
    trial = trial_of(doc, number)
    problem = problem or load_problem(ProblemSpec.from_json(doc["problem"]))
    config = Config.from_json(trial["config"])
    recipe = recipe_of(problem, config, trial.get("profile_overrides"))  # the file's ranges
    qdq = quantize_with(problem.graph, recipe)
    return AppliedPoint(number, problem, config, qdq, compile_options(config, problem.spec.target),
                        trial["measurement"], trial.get("profile_overrides") or {}, recipe)
