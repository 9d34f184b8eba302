"""Tuning on Ray: two local workers give the log one process gives, for the same seed.

Trials run in rounds of a fixed size whatever the workers, and instruction counts are
deterministic, so the proposals and the log cannot depend on which worker finished first.
"""

from __future__ import annotations

import pytest

from compiler.explore.executors import InProcess, RayExecutor
from compiler.mcu import firmware
from compiler.tuning.log import read_log
from compiler.tuning.measure import TuneSpec
from compiler.tuning.search import tune, tune_trial
from tests.tuning.models import tiny_dscnn


def test_one_seed_gives_one_log_on_one_worker_or_two(tmp_path):
    if firmware.missing_tools():
        pytest.fail(f"the Cortex-M tools are missing: {firmware.missing_tools()}")
    spec = TuneSpec(str(tiny_dscnn(tmp_path)), "cortex-m7")
    alone, pair = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    tune(spec, alone, 8, InProcess(tune_trial), seed=4)
    ray = RayExecutor(workers=2, task=tune_trial)
    try:
        workers = set()
        original = ray.run

        def run(spec_json, configs, cancelled=lambda: False):
            for index, result in original(spec_json, configs, cancelled):
                workers.add(result.get("pid"))
                yield index, result
        ray.run = run
        tune(spec, pair, 8, ray, seed=4)
    finally:
        ray.close()
    assert len(workers) == 2  # both workers measured trials
    assert alone.read_text() == pair.read_text()
    assert len(read_log(alone)) >= 8 * 5
    other = tmp_path / "other.jsonl"
    tune(spec, other, 8, InProcess(tune_trial), seed=5)
    assert other.read_text() != alone.read_text()  # the seed steers the proposals
