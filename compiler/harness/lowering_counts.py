"""Each lowering pass's effect in instructions: one inference per plan on the target's board.

Bytes come with every lowering record; instructions need a build and a run under QEMU per
distinct plan, so they are counted only when asked (`kiln passes --instructions`). Every plan
must print the same outputs: a lowering pass moves bytes, never values.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from compiler.codegen.build import build_net
from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.inputs import random_inputs
from compiler.mcu import firmware
from compiler.mcu.counting import count
from compiler.memory.report import MemoryPlan
from compiler.memory.stages import LoweringRecord


def count_lowering(compiled: Compilation, options: Options, records: list[LoweringRecord],
                   seed: int = 0) -> None:
    """Fill each record's instructions before and after, one QEMU run per distinct plan."""
    missing = firmware.missing_tools()
    if missing:
        raise KilnError(f"counting instructions needs {' and '.join(missing)} (Debian "
                        f"packages: {firmware.PACKAGES})")
    target = options.resolved_target()
    machine = firmware.board_for(target.name).qemu_machine
    feeds = random_inputs(compiled.prepared, seed)
    counts: dict[int, int] = {}
    outputs: dict[int, dict[str, np.ndarray]] = {}

    def instructions(plan: MemoryPlan, folder: Path) -> int:
        if id(plan) not in counts:
            net = build_net(compiled.prepared, plan, target, options.name)
            where = folder / f"plan{len(counts)}"
            elf = firmware.build(net, firmware.main_c(net, feeds), machine, where)
            measured, stdout = count(elf, machine, [], where)
            counts[id(plan)] = measured.total
            outputs[id(plan)] = firmware.parse_outputs(net, stdout)
        return counts[id(plan)]

    with tempfile.TemporaryDirectory(prefix="kiln-lowering-") as scratch:
        for record in records:
            record.instructions_before = instructions(record.before, Path(scratch))
            record.instructions_after = instructions(record.after, Path(scratch))
    first = next(iter(outputs.values()), {})
    for plan_outputs in outputs.values():
        for name, value in plan_outputs.items():
            if not np.array_equal(value, first[name]):
                raise KilnError(f"output {name} differs between two lowerings of the same "
                                "graph: a lowering pass changed a value")
