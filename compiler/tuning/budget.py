"""Flash as a budget: per workload, one of its measured (instructions, bytes) trade-offs.

Each workload's exact log entries are points (cost of its layers in this model, code and
weight bytes); the dominated ones go, and a multiple-choice knapsack over the workloads picks
one point each so that the network's flash (`bundle.footprint`: code, read-only data and
external weights) stays within the budget with the fewest instructions. The byte figures come
from the per-layer build, so the chosen build is measured again; when it still overshoots,
the knapsack runs again with the overshoot taken off the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from compiler.codegen.bundle import footprint
from compiler.codegen.sizes import object_sizes
from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.tuning.log import Entry

GRAIN = 16  # bytes per knapsack cell
_ROUNDS = 4  # knapsacks run before giving up on a build that overshoots


@dataclass(frozen=True)
class Point:
    """One schedule of one workload: its cost and bytes over this model's layers."""

    schedule: tuple
    cost: float
    nbytes: int


@dataclass(frozen=True)
class BudgetChoice:
    """The schedules that fit, the flash they take, and what the budget cost."""

    options: Options
    flash: int
    budget: int
    fits: bool
    cost: float  # the tuned kernels' cost within the budget
    unbounded_cost: float  # their cost with the fastest schedule everywhere
    note: str


def flash_of(compiled: Compilation, options: Options) -> int:
    """Flash bytes of the network compiled with `options` (as a board's budget counts)."""
    net = compiled.net(options)
    return footprint(net, object_sizes(net.object))[0]


def pareto(points: list[Point]) -> list[Point]:
    """The points no other is both cheaper and smaller than, by bytes."""
    kept: list[Point] = []
    for p in sorted(points, key=lambda p: (p.nbytes, p.cost)):
        if not kept or p.cost < kept[-1].cost:
            kept.append(p)
    return kept


def knapsack(groups: dict[str, list[Point]], room: int) -> dict[str, Point] | None:
    """One point per group, total bytes within `room`, least total cost (None: none fits)."""
    base = {key: min(p.nbytes for p in pts) for key, pts in groups.items()}
    cells = (room - sum(base.values())) // GRAIN
    if cells < 0:
        return None
    best = np.zeros(cells + 1)
    picks: list[tuple[str, np.ndarray]] = []
    for key, points in groups.items():
        new = np.full(cells + 1, np.inf)
        pick = np.zeros(cells + 1, np.int32)
        for i, p in enumerate(points):
            extra = -(-(p.nbytes - base[key]) // GRAIN)
            if extra > cells:
                continue
            shifted = np.full(cells + 1, np.inf)
            shifted[extra:] = best[:cells + 1 - extra] + p.cost
            better = shifted < new
            new[better], pick[better] = shifted[better], i
        best = new
        picks.append((key, pick))
    if not np.isfinite(best[-1]):
        return None
    chosen, cell = {}, cells
    for key, pick in reversed(picks):
        point = groups[key][pick[cell]]
        chosen[key] = point
        cell -= -(-(point.nbytes - base[key]) // GRAIN)
    return chosen


def _groups(entries: dict[str, list[Entry]], layers: dict[str, int]) -> dict[str, list[Point]]:
    groups = {}
    for key, found in entries.items():
        if key not in layers:
            continue
        points = [Point(e.schedule_key(), e.per_layer * layers[key],
                        int(round(e.bytes_per_layer * layers[key]))) for e in found if e.exact]
        if points:
            groups[key] = pareto(points)
    return groups


def within_budget(compiled: Compilation, options: Options, entries: dict[str, list[Entry]],
                  budget: int) -> BudgetChoice:
    """`options` with, per workload, the schedule that keeps the network within `budget`.

    `entries`: every exact entry per workload key for the options' target and this Kiln.
    """
    plain = Options(options.target, options.name, options.alignment, options.io_in_arena,
                    options.weights, separate_kernels=True,
                    disabled_lowering=options.disabled_lowering)
    net = compiled.net(plain)
    layers: dict[str, int] = {}
    for kernel in net.kernels:
        if kernel.workload:
            layers[kernel.workload] = layers.get(kernel.workload, 0) + 1
    groups = _groups(entries, layers)
    if not groups:
        raise KilnError("the tuning log has no exact entry for any layer of this model on "
                        f"{options.resolved_target().name}: run kiln tune on it first")
    fastest = {k: min(pts, key=lambda p: p.cost) for k, pts in groups.items()}
    unbounded = sum(p.cost for p in fastest.values())
    estimate = {k: min(pts, key=lambda p: p.nbytes) for k, pts in groups.items()}
    # Flash outside the tuned kernels: the smallest points' build, less their bytes.
    smallest = _with(options, estimate)
    rest = flash_of(compiled, smallest) - sum(p.nbytes for p in estimate.values())
    room = budget - rest
    for _ in range(_ROUNDS):
        chosen = knapsack(groups, room)
        if chosen is None:
            break
        tuned = _with(options, chosen)
        used = flash_of(compiled, tuned)
        if used <= budget:
            cost = sum(p.cost for p in chosen.values())
            return BudgetChoice(tuned, used, budget, True, cost, unbounded,
                                f"within {budget:,} B of flash ({used:,} B used): the tuned "
                                f"kernels run {cost:,.0f} against {unbounded:,.0f} with no "
                                f"budget ({cost / max(unbounded, 1):.3f})")
        room -= used - budget + GRAIN
    # The estimates kept overshooting (or nothing fits them): the default schedules if they
    # fit, else the smallest measured ones.
    for fallback, what in ((replace(options, schedules=()), "the default schedules"),
                           (smallest, "the smallest measured schedules")):
        used = flash_of(compiled, fallback)
        if used <= budget:
            return BudgetChoice(fallback, used, budget, True, float("nan"), unbounded,
                                f"within {budget:,} B of flash ({used:,} B used) with {what}")
    return BudgetChoice(smallest, used, budget, False, float("nan"), unbounded,
                        f"no choice of schedules fits {budget:,} B of flash; the smallest "
                        f"takes {used:,} B")


def _with(options: Options, chosen: dict[str, Point]) -> Options:
    return replace(options, schedules=tuple(sorted((k, p.schedule) for k, p in chosen.items())))
