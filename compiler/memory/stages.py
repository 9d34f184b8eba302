"""The lowering passes as recorded stages: the memory plan before and after each one.

Lowering starts with every value in a buffer of its own; each lowering pass (in the order of
`compiler.lowir.passes`) then lets values share bytes. A record holds the plan before and
after its pass, so a user sees what each one saved, steps through them, and knows why one did
not run (switched off, its need off, or forbidden by the target's property).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from compiler.lowir.passes import LOWERING_PASSES, STREAMING_ROWS, LoweringPass
from compiler.memory.report import MemoryPlan

# The enabled lowering passes -> the plan of that lowering (the driver's, cached).
PlanOf = Callable[[frozenset[str]], MemoryPlan]


@dataclass
class LoweringRecord:
    """What one lowering pass did to one target's memory plan.

    Attributes:
        step: The pass and its documentation.
        applied: It ran (switched on, its need on, allowed by the target).
        reason: Why it did not run ("" when it did).
        target: The target's name; `properties` its values of the properties steering the pass.
        sites: One line per place it applied.
        before: The plan with the passes above it; `after` adds this one (the same when not
            applied).
        instructions_before / instructions_after: Instructions of one inference on the
            target's board under QEMU, when counted (`compiler.harness.lowering_counts`).
    """

    step: LoweringPass
    applied: bool
    reason: str
    target: str
    properties: dict[str, bool]
    sites: list[str]
    before: MemoryPlan
    after: MemoryPlan
    instructions_before: int | None = None
    instructions_after: int | None = None

    @property
    def name(self) -> str:
        """The pass's name."""
        return self.step.name

    @property
    def changed(self) -> bool:
        """True when the low-level IR or the arena differ after the pass."""
        return (self.after is not self.before
                and (self.after.lowir.dump() != self.before.lowir.dump()
                     or self.after.arena.size != self.before.arena.size))

    @property
    def saved(self) -> int:
        """Arena bytes the pass saved (negative when it cost some)."""
        return self.before.arena.size - self.after.arena.size

    def to_json(self) -> dict:
        """The record in `kiln passes --json`."""
        return {"name": self.name, "title": self.step.title, "why": self.step.why,
                "applied": self.applied, "reason": self.reason, "changed": self.changed,
                "target": self.target, "steered_by": self.properties,
                "sites": list(self.sites),
                "arena_before": self.before.arena.size, "arena_after": self.after.arena.size,
                "lower_bound_before": self.before.arena.lower_bound,
                "lower_bound_after": self.after.arena.lower_bound,
                "steps_before": self.before.lowir.steps, "steps_after": self.after.lowir.steps,
                "instructions_before": self.instructions_before,
                "instructions_after": self.instructions_after}


def lowering_records(plan_of: PlanOf, disabled: frozenset[str], int8_residual: bool,
                     target: str) -> list[LoweringRecord]:
    """One record per lowering pass, each plan made by `plan_of(enabled passes)`.

    `plan_of` is the compile driver's cached planner, so the last record's `after` is the
    very plan the code and bundle are built from.
    """
    records = []
    enabled: frozenset[str] = frozenset()
    before = plan_of(enabled)
    for step in LOWERING_PASSES:
        properties = {step.steered_by: int8_residual} if step.steered_by else {}
        reason = _reason(step, enabled, disabled, int8_residual, target)
        after = before
        if not reason:
            enabled = enabled | {step.name}
            after = plan_of(enabled)
        records.append(LoweringRecord(step, not reason, reason, target, properties,
                                      _sites(step, after) if not reason else [], before, after))
        before = after
    return records


def _reason(step: LoweringPass, enabled: frozenset[str], disabled: frozenset[str],
            int8_residual: bool, target: str) -> str:
    """Why `step` does not run, or "" when it does."""
    if step.name in disabled:
        return "switched off"
    if step.needs and step.needs not in enabled:
        return f"needs {step.needs}, which is off"
    if step.steered_by and not int8_residual and step.needs:
        return f"{target}'s {step.steered_by} is false"
    return ""


def _sites(step: LoweringPass, plan: MemoryPlan) -> list[str]:
    """Where the pass applied; for streaming, which way the planner made each one's rows run."""
    sites = list(plan.lowir.sites.get(step.name, []))
    if step.name != STREAMING_ROWS:
        return sites
    lines = []
    for storage, stream in plan.lowir.streams.items():
        how = plan.streams_from(storage)
        if how is None:
            lines.append(f"{storage} may overlap {stream.source}: the plan keeps them apart")
        else:
            apart = plan.arena.offsets[storage] - plan.arena.offsets[stream.source]
            lines.append(f"{storage} overlaps {stream.source}, starting {apart:+d} B from it: "
                         f"its rows run {'downwards' if how['rows'] == 'down' else 'upwards'}")
    return lines or sites
