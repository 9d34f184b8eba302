"""Static memory planning: lifetimes, lower bound, packing strategies, regions and a checker.

`plan_memory` (in compiler.memory.report) runs the whole flow; it is not imported here so that
the packers stay usable without the graph layers.
"""

from compiler.memory.buffers import Buffer, align_up, live_bytes, lower_bound
from compiler.memory.plan import (
    HOST_ALIGNMENT,
    MCU_ALIGNMENT,
    ArenaPlan,
    PlanError,
    check_plan,
    plan_arena,
)

__all__ = ["Buffer", "align_up", "live_bytes", "lower_bound", "ArenaPlan", "PlanError",
           "check_plan", "plan_arena", "HOST_ALIGNMENT", "MCU_ALIGNMENT"]
