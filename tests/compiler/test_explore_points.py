"""What the Explore panel shows, from a real exploration of the sample model (no Qt)."""

import json
from dataclasses import asdict

import pytest

from compiler.explore import points as shown
from compiler.explore.config import Config
from compiler.explore.engine import Exploration
from compiler.explore.executors import InProcess
from compiler.explore.problem import ProblemSpec
from compiler.explore.record import read_record
from tests.conftest import SAMPLE_MODEL

TRIALS = 4


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    """Four trials of the digits CNN on Cortex-M7 (counted under QEMU), and the progress."""
    pytest.importorskip("optuna")
    output = tmp_path_factory.mktemp("explore") / "EXPLORE.json"
    spec = ProblemSpec(str(SAMPLE_MODEL), "digits:train", "digits:test", "cortex-m7", None,
                       0.005)
    reports = []
    Exploration(spec, output, TRIALS, executor=InProcess(),
                progress=lambda p: reports.append(json.loads(json.dumps(asdict(p))))).run()
    return read_record(output), output, reports


def test_points_are_the_measured_trials_in_percent(explored):
    doc, _, _ = explored
    got = shown.points_of(doc)
    assert [p.number for p in got] == [t["number"] for t in doc["trials"]
                                      if "measurement" in t]
    for point, trial in zip(got, doc["trials"]):
        m = trial["measurement"]
        assert point.score == pytest.approx(100 * m["score"])
        assert (point.instructions, point.flash, point.fits) == (
            m["instructions"], m["flash"], m["fits"])
        assert point.front == (trial["number"] in doc["front"])
    assert any(p.front for p in got)
    assert shown.floor_of(doc) == pytest.approx(100 * doc["float_score"] - 0.5)


def test_a_point_is_described_by_its_figures_and_configuration(explored):
    doc, _, _ = explored
    trial = doc["trials"][1]
    m = trial["measurement"]
    text = shown.describe_point(doc, 1)
    assert text.splitlines()[0].startswith("Trial 1 (search): ")
    assert f"{100 * m['score']:.2f} % accuracy" in text
    assert f"{m['instructions']:,} instructions" in text
    assert Config.from_json(trial["config"]).summary() in text
    assert shown.describe_point(doc, 99) == "no trial 99"


def test_the_front_table_lists_the_front_in_order(explored):
    doc, _, _ = explored
    rows = shown.front_rows(doc)
    assert [r[0] for r in rows] == doc["front"]
    first = shown.trial_json(doc, rows[0][0])["measurement"]
    assert rows[0][1:6] == (100 * first["score"], first["instructions"], first["flash"],
                            first["ram"], first["float_layers"])


def test_progress_lines_say_trials_best_and_time_left(explored):
    _, _, reports = explored
    assert shown.progress_text(reports[0]).startswith("Accuracy control")
    middle = next(r for r in reports if r["trial"] is not None and r["done"] < TRIALS)
    text = shown.progress_text(middle)
    assert text.startswith(f"{middle['done']} of {TRIALS} trials; ")
    best = middle["best"]
    assert f"best feasible so far #{best['number']}: {100 * best['score']:.2f} %" in text
    assert "left" in text
    assert shown.progress_text(reports[-1]).endswith("finished")
    line = json.dumps(reports[1])
    assert shown.parse_progress(line) == reports[1]
    assert shown.parse_progress("kiln: stopped") is None


def test_record_and_error_lines(explored):
    doc, output, _ = explored
    assert shown.record_text(doc, output) == (f"EXPLORE.json: {TRIALS} trials on cortex-m7, "
                                              f"{len(doc['front'])} on the front (complete)")
    assert shown.error_sentence("warning\nkiln: error: x.npz: no such file\n") == \
        "x.npz: no such file"
    assert shown.error_sentence("") == "the exploration stopped without a message"
