"""Every value of every knob computes the interpreter's bytes, on every core family.

One build per knob value (each family's layers all take it), measured as the tuner measures:
under QEMU on Cortex-M7 (DSP), M55 (Helium) and M3 (scalar), and on this host. A schedule of
defaults is the untuned code, byte for byte.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.schedules import candidates, clean, knobs_for
from compiler.codegen.targets import get_target
from compiler.mcu import firmware
from compiler.tuning.measure import TuneSpec, build, load_problem, measure
from tests.tuning.models import tiny_dscnn

TARGETS = ("cortex-m7", "cortex-m55", "cortex-m3", "host")


def _problem(tmp_path, target):
    if get_target(target).mcu and firmware.missing_tools():
        pytest.fail(f"the Cortex-M tools are missing: {firmware.missing_tools()}")
    return load_problem(TuneSpec(str(tiny_dscnn(tmp_path)), target))


@pytest.mark.parametrize("target", TARGETS)
def test_every_knob_value_gives_the_interpreters_bytes(target, tmp_path):
    problem = _problem(tmp_path, target)
    families: dict[str, list[str]] = {}
    for key, description in problem.workloads.items():
        families.setdefault(description["family"], []).append(key)
    builds = 0
    for family, keys in families.items():
        for knob in knobs_for(family, problem.target):
            for value in knob.values[1:]:
                schedule = clean({knob.name: value}, family, problem.target)
                if not schedule:
                    continue  # the target's own layout: the default
                measured = measure(problem, {k: schedule for k in keys})
                builds += 1
                assert measured.exact, (family, knob.name, value)
                assert all(measured.costs[k]["cost"] > 0 for k in keys)
    assert builds >= 3


@pytest.mark.parametrize("target", ("cortex-m7", "cortex-m55"))
def test_random_whole_schedules_give_the_interpreters_bytes(target, tmp_path):
    problem = _problem(tmp_path, target)
    rng = np.random.default_rng(3)
    for _ in range(4):
        chosen = {}
        for key, description in problem.workloads.items():
            options = candidates(description["family"], problem.target)
            chosen[key] = options[rng.integers(len(options))]
        assert measure(problem, chosen).exact, chosen


def test_a_schedule_of_defaults_is_the_untuned_code(tmp_path):
    problem = _problem(tmp_path, "cortex-m7")
    defaults = {key: {k.name: k.values[0] for k in knobs_for(d["family"], problem.target)}
                for key, d in problem.workloads.items()}
    unknown = {key: {"no_such_knob": 3, "taps": "sideways"} for key in problem.workloads}
    plain = build(problem.compiled, problem.target, {}).object
    assert build(problem.compiled, problem.target, defaults).object == plain
    assert build(problem.compiled, problem.target, unknown).object == plain
    tuned = {key: {"taps": "loops", "border_taps": "unrolled"} for key in problem.workloads}
    assert build(problem.compiled, problem.target, tuned).object != plain


def test_a_knob_changes_its_layers_code_and_cost(tmp_path):
    problem = _problem(tmp_path, "cortex-m7")
    key = next(k for k, d in problem.workloads.items() if d["family"] == "depthwise")
    plain = measure(problem, {})
    tuned = measure(problem, {key: {"border_taps": "unrolled"}})
    assert tuned.costs[key]["cost"] != plain.costs[key]["cost"]
    others = [k for k in problem.workloads if k != key]
    assert [plain.costs[k] for k in others] == [tuned.costs[k] for k in others]
