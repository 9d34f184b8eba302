"""The exploration on the sample model, in this process: control first, cache, resume, cancel.

Ray's own runs are in test_explore_models.py and the cluster test; here the in-process
executor shows the engine's bookkeeping, and every front point is re-applied from the file.
"""

from __future__ import annotations

import json

import pytest

from compiler.errors import KilnError
from compiler.explore.accuracy_control import final_step
from compiler.explore.config import Config
from compiler.explore.engine import Exploration
from compiler.explore.executors import InProcess
from compiler.explore.problem import ProblemSpec
from tests.conftest import SAMPLE_MODEL
from tests.explore.verify import verify_front

SPEC = ProblemSpec(str(SAMPLE_MODEL), "digits:train", "digits:test", "cortex-m7",
                   "stm32f746g-disco", 0.005)


class Counting(InProcess):
    """The in-process executor, counting the configurations it was given."""

    def __init__(self):
        self.ran = []

    def run(self, spec_json, configs, cancelled=lambda: False):
        for index, result in super().run(spec_json, configs, cancelled):
            self.ran.append(configs[index])
            yield index, result


def c_key(config_json) -> str:
    return Config.from_json(config_json).key()


def _explore(path, trials, executor, **kwargs):
    return Exploration(SPEC, path, trials, executor=executor, population=4, **kwargs).run()


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    path = tmp_path_factory.mktemp("explore") / "EXPLORE.json"
    executor = Counting()
    record = _explore(path, 8, executor)
    return path, record, executor


def test_the_first_trial_is_accuracy_controls_point_and_the_front_reproduces(explored,
                                                                             tmp_path):
    path, record, executor = explored
    doc = json.loads(path.read_text())
    assert record.complete and len(doc["trials"]) == 8
    assert [t["number"] for t in doc["trials"]] == list(range(8))
    first = doc["trials"][0]
    assert first["source"] == "accuracy control" and first["feasible"]
    assert final_step(doc["accuracy_control"])["keep_float"] == first["config"]["keep_float"]
    assert doc["first_feasible_seconds"] is not None
    assert len(executor.ran) == len({t["key"] for t in doc["trials"]})  # no key run twice
    assert set(doc["best_feasible"]) == {"accuracy", "instructions", "flash", "ram"}
    assert set(doc["best_feasible"].values()) <= set(doc["front"])
    for number in doc["front"]:  # on the board and within half a point of float
        trial = doc["trials"][number]
        assert trial["feasible"] and trial["measurement"]["fits"]
    assert verify_front(doc, tmp_path)


def test_a_repeated_run_reruns_nothing_and_gives_the_same_record(explored):
    path, record, _ = explored
    again = Counting()
    repeated = _explore(path, 8, again)
    assert again.ran == []
    assert [t.result for t in repeated.trials] == [t.result for t in record.trials]
    assert repeated.front == record.front


def test_more_trials_resume_the_same_search(explored, tmp_path):
    path, record, _ = explored
    longer = tmp_path / "longer.json"
    longer.write_text(path.read_text())
    executor = Counting()
    resumed = _explore(longer, 12, executor)
    assert len(executor.ran) <= 4  # only the new generation ran
    fresh = _explore(tmp_path / "fresh.json", 12, Counting())
    assert [t.key for t in resumed.trials] == [t.key for t in fresh.trials]
    assert resumed.front == fresh.front


def test_cancel_keeps_what_was_measured(tmp_path):
    path = tmp_path / "EXPLORE.json"
    executor = Counting()
    record = _explore(path, 8, executor, cancelled=lambda: len(executor.ran) >= 3)
    doc = json.loads(path.read_text())
    assert not record.complete and not doc["complete"]
    kept = {t["key"] for t in doc["trials"]} | {p["key"] for p in doc["pending"]}
    assert kept == {c_key(c) for c in executor.ran} and len(kept) >= 3
    assert len(doc["trials"]) < 8
    resumed = Counting()
    _explore(path, 8, resumed)
    doc = json.loads(path.read_text())
    assert doc["complete"] and len(doc["trials"]) == 8
    assert not doc["pending"]
    assert not {c_key(c) for c in resumed.ran} & kept  # nothing measured twice


def test_another_problem_in_the_file_is_refused(explored, tmp_path):
    path, _, _ = explored
    other = ProblemSpec(str(SAMPLE_MODEL), "digits:train", "digits:test", "cortex-m7",
                        None, 0.02)
    with pytest.raises(KilnError, match="holds another exploration"):
        Exploration(other, path, 8, executor=InProcess())


def test_cancel_during_accuracy_control_stops_at_once(tmp_path):
    """The scaled-channel CNN needs accuracy control to rank layers: stopped there."""
    import onnx

    from tests.helpers import hard_digits_model

    model = tmp_path / "scaled.onnx"
    onnx.save(hard_digits_model(), model)
    spec = ProblemSpec(str(model), "digits:train", "digits:test", "cortex-m7", None, 0.005)
    path, executor = tmp_path / "EXPLORE.json", Counting()
    record = Exploration(spec, path, 8, executor=executor, population=4,
                         cancelled=lambda: True).run()
    assert not record.complete and record.trials == [] and executor.ran == []
    doc = json.loads(path.read_text())
    assert doc["accuracy_control"] is None and not doc["complete"]
