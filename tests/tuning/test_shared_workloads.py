"""A log made on one model serves another that shares some of its workloads: applied, it
changes exactly the kernels of those workloads, and every other kernel's code stays the
untuned one."""

from __future__ import annotations

import re
from dataclasses import replace

from compiler.codegen.schedules import candidates
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.tuning.log import Entry, best_entries
from compiler.tuning.measure import TuneSpec, load_problem
from tests.tuning.models import tiny_dscnn

OTHER_PLAN = [("conv3", 16), ("depthwise", 0), ("conv1", 16), ("conv1", 32)]


def _functions(text: str) -> dict[str, str]:
    """LLVM IR function bodies by name."""
    found = {}
    for match in re.finditer(r'define [^@]*@"?([\w.]+)"?\(.*?\n}\n', text, re.S):
        found[match.group(1)] = match.group(0)
    return found


def test_a_log_changes_exactly_the_layers_of_the_workloads_it_shares(tmp_path):
    made = load_problem(TuneSpec(str(tiny_dscnn(tmp_path)), "cortex-m7"))
    other_path = tiny_dscnn(tmp_path, OTHER_PLAN, units=4)
    other = load_problem(TuneSpec(str(other_path), "cortex-m7"))
    shared = [k for k in made.workloads if k in other.workloads]
    assert len(shared) >= 3
    chosen = shared[:3]
    entries = []
    for key in made.workloads:  # the log of the first model: a non-default best for each
        description = made.workloads[key]
        schedule = candidates(description["family"], made.target)[-1]
        entries.append(Entry(key, "cortex-m7", "test", schedule, "instructions", 1.0,
                             description=description))
        entries.append(Entry(key, "cortex-m7", "test", {}, "instructions", 2.0,
                             description=description))
    log = [e for e in entries if e.workload in chosen]
    picked = best_entries(log, "cortex-m7", "test")
    assert sorted(k for k, _ in picked.schedules) == sorted(chosen)
    compiled = compilation(load_model(other_path))
    plain = Options("cortex-m7", separate_kernels=True)
    tuned = replace(plain, schedules=picked.schedules)
    before, after = compiled.net(plain), compiled.net(tuned)
    old, new = _functions(before.llvm_ir), _functions(after.llvm_ir)
    # A chain's driver passes its kernels their weights: a tuned layout moves its offsets.
    layers = [k for k in after.kernels if not k.op.startswith("RowChain")]
    changed = {k.symbol for k in layers if old.get(k.symbol) != new.get(k.symbol)}
    expected = {k.symbol for k in after.kernels if k.workload in chosen}
    assert expected and changed == expected
    assert [k.workload for k in before.kernels] == [k.workload for k in after.kernels]
