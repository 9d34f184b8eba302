"""The same seed gives the same trials whichever order a generation's results arrive in."""

from __future__ import annotations

from compiler.explore.engine import Exploration
from compiler.explore.executors import InProcess, run_trial
from compiler.explore.problem import ProblemSpec
from tests.conftest import SAMPLE_MODEL, require_module


class Logged(InProcess):
    """Trials in this process, in order or each generation's last first (as a busy cluster
    may finish them), each arrival written to `log`."""

    def __init__(self, log: list, last_first: bool):
        self.log, self.last_first = log, last_first

    def run(self, spec_json, configs, cancelled=lambda: False):
        order = range(len(configs))
        for i in (reversed(order) if self.last_first else order):
            result = run_trial(spec_json, configs[i])
            self.log.append(("measured", configs[i]))
            yield i, result


def test_results_arriving_last_first_give_the_same_trials_and_front(tmp_path):
    require_module("optuna", "the optional extra kiln[explore]")
    spec = ProblemSpec(str(SAMPLE_MODEL), "digits:train", "digits:test", max_drop=0.005)
    runs = {}
    for name, last_first in (("in order", False), ("last first", True)):
        log: list = []

        def progress(p, log=log):
            if p.trial is not None:
                log.append(("added", p.trial["config"]))
        record = Exploration(spec, tmp_path / f"{name}.json", trials=4, seed=2, population=2,
                             executor=Logged(log, last_first), progress=progress).run()
        assert record.complete and [t.number for t in record.trials] == list(range(4))
        added = [config for what, config in log if what == "added"]
        assert added == [t.config for t in record.trials]  # added in trial order
        runs[name] = record, [what for what, _ in log]
    (a, a_log), (b, b_log) = runs["in order"], runs["last first"]
    assert [(t.key, t.result["measurement"]) for t in a.trials] == \
        [(t.key, t.result["measurement"]) for t in b.trials]
    assert a.front == b.front and a.front
    # Each trial is added as soon as those before it are in: in order, each one right after
    # it is measured; last first, a generation's trials once its first one is in.
    assert a_log == ["measured", "added"] * 4
    assert b_log == ["measured", "measured", "added", "added"] * 2
