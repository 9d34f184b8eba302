"""`kiln explore --target cortex-m7 --max-drop 0.5` on the digits CNN, KWS and ResNet-8.

The command runs as a user runs it: its own process, a local Ray instance sized to the cores,
a home folder of its own (Ray must leave nothing there). Every point of the front it writes
is then re-applied from the file alone and compiled again: the same accuracy, instructions
under QEMU, flash and RAM from the bundle, exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLE_MODEL, require_module, shared_models
from tests.explore.verify import verify_front

TRIALS = 16


def _explore(model, calib, evaluation, folder) -> dict:
    require_module("ray", "the explore extra installs it")
    output = folder / "EXPLORE.json"
    home = folder / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "explore", str(model), "--data", str(calib),
         "--eval", str(evaluation), "--target", "cortex-m7", "--max-drop", "0.5",
         "--trials", str(TRIALS), "-o", str(output)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Pareto front" in done.stdout and (folder / "EXPLORE.png").is_file()
    assert not (home / ".ray").exists() and not (home / "intel").exists()
    doc = json.loads(output.read_text())
    assert doc["complete"] and len(doc["trials"]) == TRIALS
    assert not [t for t in doc["trials"] if "error" in t]
    workers = {t["worker"]["pid"] for t in doc["trials"][1:]}
    assert all(pid != os.getpid() for pid in workers)  # measured by Ray's workers
    return doc


@pytest.mark.slow
def test_the_digits_front_reproduces(tmp_path):
    doc = _explore(SAMPLE_MODEL, "digits:train", "digits:test", tmp_path)
    assert doc["score"] == "accuracy" and doc["float_score"] > 0.97
    assert verify_front(doc, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kws_ref_model_float32", "pretrainedResnet"])
def test_an_mlperf_front_reproduces(name, tmp_path):
    from tests.explore.data import labelled_sets

    model, calib, evaluation = labelled_sets(name, shared_models(), tmp_path)
    doc = _explore(model, calib, evaluation, tmp_path)
    assert doc["float_score"] == 1.0  # the labels are the float model's own answers
    assert verify_front(doc, tmp_path)
