"""The Pareto front of measured points and the best feasible point for each objective.

A point dominates another when it is no worse in score (higher), instructions, flash and RAM
(lower) and better in one. The front is taken over the feasible points (within the drop bound
and the board); ties keep the earliest trial, so the same measurements give the same front.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.explore.measure import Measurement

OBJECTIVES = ("accuracy", "instructions", "flash", "ram")


def _costs(m: Measurement) -> tuple:
    return (-m.score, m.instructions, m.flash, m.ram)


def dominates(a: Measurement, b: Measurement) -> bool:
    """Whether `a` is no worse than `b` everywhere and better somewhere."""
    ca, cb = _costs(a), _costs(b)
    return all(x <= y for x, y in zip(ca, cb)) and ca != cb


def pareto(points: Sequence[tuple[int, Measurement]]) -> list[int]:
    """Numbers of the non-dominated points (one per distinct set of figures), in order."""
    front, seen = [], set()
    for number, m in points:
        if _costs(m) in seen or any(dominates(o, m) for _, o in points):
            continue
        seen.add(_costs(m))
        front.append(number)
    return front


def best_per_objective(points: Sequence[tuple[int, Measurement]]) -> dict[str, int]:
    """For each objective, the number of the best point (ties: the others, then earliest)."""
    if not points:
        return {}
    keys = {
        "accuracy": lambda p: (-p[1].score, p[1].instructions, p[1].flash, p[1].ram, p[0]),
        "instructions": lambda p: (p[1].instructions, -p[1].score, p[1].flash, p[1].ram, p[0]),
        "flash": lambda p: (p[1].flash, -p[1].score, p[1].instructions, p[1].ram, p[0]),
        "ram": lambda p: (p[1].ram, -p[1].score, p[1].instructions, p[1].flash, p[0]),
    }
    return {name: min(points, key=key)[0] for name, key in keys.items()}
