"""The same seed gives the same trials whichever order a generation's results arrive in."""

from __future__ import annotations

import time

from compiler.explore.engine import Exploration
from compiler.explore.executors import InProcess, run_trial
from compiler.explore.problem import ProblemSpec
from tests.conftest import SAMPLE_MODEL, require_module


class LastFirst(InProcess):
    """Trials in this process, each generation's last first (as a busy cluster may finish)."""

    def run(self, spec_json, configs, cancelled=lambda: False):
        for i in reversed(range(len(configs))):
            yield i, run_trial(spec_json, configs[i])


def test_results_arriving_last_first_give_the_same_trials_and_front(tmp_path):
    require_module("optuna", "the optional extra kiln[explore]")
    spec = ProblemSpec(str(SAMPLE_MODEL), "digits:train", "digits:test", max_drop=0.005)
    runs = {}
    for name, executor in (("in order", InProcess()), ("last first", LastFirst())):
        added = {}  # trial number -> when its progress came

        def progress(p, added=added):
            if p.trial is not None:
                added[p.trial["number"]] = time.perf_counter()
        record = Exploration(spec, tmp_path / f"{name}.json", trials=4, seed=2, population=2,
                             executor=executor, progress=progress).run()
        assert record.complete and [t.number for t in record.trials] == list(range(4))
        assert list(added) == list(range(4))  # added in trial order
        runs[name] = record, added
    (a, a_added), (b, b_added) = runs["in order"], runs["last first"]
    assert [(t.key, t.result["measurement"]) for t in a.trials] == \
        [(t.key, t.result["measurement"]) for t in b.trials]
    assert a.front == b.front and a.front
    # Each trial is added as soon as those before it are in: in order, trial 0 (the accuracy
    # control's point) before trial 1 is measured; last first, both when trial 0 is.
    assert a_added[1] - a_added[0] > 0.5 * a.trials[1].result["seconds"]
    assert b_added[1] - b_added[0] < 0.5 * b.trials[1].result["seconds"]
