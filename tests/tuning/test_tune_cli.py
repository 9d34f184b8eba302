"""`kiln tune` then `kiln compile --tuning`: the journey of a firmware developer's CI.

Tuned on the tiny DS-CNN for Cortex-M7: the log resumes without measuring anything twice, the
tuned bundle's firmware prints the interpreter's outputs under QEMU, its build file records the
log's hash and rebuilds the same object, a flash budget is kept, and a malformed log or one for
another target is one sentence.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from app.cli import main
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run as interpret
from compiler.mcu import firmware
from compiler.tuning.log import best_entries, read_log, write_log
from compiler.version import kiln_version
from tests.tuning.models import tiny_dscnn


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    if firmware.missing_tools():
        pytest.fail(f"the Cortex-M tools are missing: {firmware.missing_tools()}")
    folder = tmp_path_factory.mktemp("tune")
    model = tiny_dscnn(folder)
    log = folder / "tiny.jsonl"
    assert main(["tune", str(model), "--target", "cortex-m7", "--trials", "8",
                 "--workers", "0", "--log", str(log), "-q"]) == 0
    return model, log


def _pairs(entries):
    return [(e.workload, json.dumps(e.schedule, sort_keys=True)) for e in entries]


def test_the_log_has_the_default_first_and_a_better_schedule(tuned):
    model, log = tuned
    entries = read_log(log)
    assert entries[0].trial == 0 and all(e.exact for e in entries)
    workloads = {e.workload for e in entries}
    assert len(workloads) >= 5
    chosen = best_entries(entries, "cortex-m7", kiln_version())
    defaults = {e.workload: e.per_layer for e in entries if e.trial == 0}
    assert any(e.per_layer < defaults[k] for k, e in chosen.entries.items())
    assert len(set(_pairs(entries))) == len(entries)  # nothing measured twice


def test_a_resumed_run_measures_nothing_twice(tuned, tmp_path):
    model, log = tuned
    copy = tmp_path / "resumed.jsonl"
    copy.write_bytes(log.read_bytes())
    before = read_log(copy)
    assert main(["tune", str(model), "--target", "cortex-m7", "--trials", "4",
                 "--workers", "0", "--log", str(copy), "-q"]) == 0
    after = read_log(copy)
    assert after[:len(before)] == before and len(after) > len(before)
    # Every round measures a new schedule of each workload that has one left.
    from compiler.codegen.schedules import candidates
    from compiler.tuning.measure import TuneSpec, load_problem

    problem = load_problem(TuneSpec(str(model), "cortex-m7"))
    left = {key: len(candidates(d["family"], problem.target))
            - sum(e.workload == key for e in before) for key, d in problem.workloads.items()}
    assert len(after) - len(before) == sum(min(4, n) for n in left.values())
    assert len(set(_pairs(after))) == len(after)
    assert min(e.trial for e in after[len(before):]) == 8


def test_the_tuned_bundle_runs_the_interpreters_outputs_under_qemu(tuned, tmp_path):
    model, log = tuned
    out = tmp_path / "bundle"
    assert main(["compile", str(model), "--target", "cortex-m7", "--tuning", str(log),
                 "-o", str(out), "-q"]) == 0
    doc = json.loads((out / "net.build.json").read_text())
    from compiler.tuning.log import log_hash

    assert doc["request"]["tuning"]["log_sha256"] == log_hash(log)
    assert doc["request"]["tuning"]["schedules"]
    workloads = {e.workload for e in read_log(log)}
    assert set(doc["request"]["tuning"]["schedules"]) <= workloads
    done = subprocess.run(["make", "-s", "run"], cwd=out, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    compiled = compilation(load_model(model))
    request = doc["request"]
    options = Options("cortex-m7", schedules=tuple(
        (k, tuple(sorted(v.items()))) for k, v in sorted(request["tuning"]["schedules"].items())))
    net = compiled.net(options)
    assert net.object == (out / "net.o").read_bytes()
    feeds = {t.name: np.fromfile(out / "net.input.bin", t.dtype).reshape(t.shape)
             for t in net.inputs}
    want = interpret(compiled.prepared, feeds)
    got = firmware.parse_outputs(net, done.stdout)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value)
    untuned = compiled.net(Options("cortex-m7"))
    assert untuned.object != net.object
    again = tmp_path / "again"
    assert main(["compile", str(model), "--build", str(out / "net.build.json"),
                 "-o", str(again), "-q"]) == 0
    assert (again / "net.o").read_bytes() == (out / "net.o").read_bytes()


def test_a_flash_budget_is_kept_or_said(tuned, tmp_path, capsys):
    model, log = tuned
    plain = tmp_path / "plain"
    assert main(["compile", str(model), "--target", "cortex-m7", "-o", str(plain), "--json",
                 "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    used = report["sections"]["text"] + report["sections"]["rodata"]
    out = tmp_path / "budget"
    assert main(["compile", str(model), "--target", "cortex-m7", "--tuning", str(log),
                 "--flash-budget", str(used), "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sections"]["text"] + doc["sections"]["rodata"] <= used
    assert main(["compile", str(model), "--target", "cortex-m7", "--tuning", str(log),
                 "--flash-budget", "1000", "-o", str(tmp_path / "tiny")]) == 0
    assert "no choice of schedules fits 1,000 B" in capsys.readouterr().err


def test_a_log_for_another_target_is_skipped_with_a_note(tuned, tmp_path, capsys):
    model, log = tuned
    assert main(["compile", str(model), "--target", "cortex-m55", "--tuning", str(log),
                 "-o", str(tmp_path / "m55")]) == 0
    err = capsys.readouterr().err
    assert "tuning log entries for cortex-m7 skipped (compiling for cortex-m55)" in err
    other = tmp_path / "old.jsonl"
    from dataclasses import replace

    write_log(other, [replace(e, kiln="0.0.1") for e in read_log(log)])
    assert main(["compile", str(model), "--target", "cortex-m7", "--tuning", str(other),
                 "-o", str(tmp_path / "old")]) == 0
    assert "measured by Kiln 0.0.1 skipped" in capsys.readouterr().err


@pytest.mark.parametrize("text, says", [
    ("{not json\n", "line 1 of the tuning log is not JSON"),
    ('{"format": "kiln-tuning", "version": 1}\n', "line 1: the entry's 'workload' is missing"),
    ('{"format": "other"}\n', "line 1: not a Kiln tuning log entry"),
])
def test_a_malformed_log_is_one_sentence(tuned, tmp_path, capsys, text, says):
    model, _ = tuned
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    for argv in (["compile", str(model), "--target", "cortex-m7", "--tuning", str(bad),
                  "-o", str(tmp_path / "b")],
                 ["tune", str(model), "--target", "cortex-m7", "--log", str(bad),
                  "--workers", "0"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_the_build_file_keeps_only_this_models_schedules(tuned, tmp_path):
    from dataclasses import replace

    model, log = tuned
    foreign = tmp_path / "foreign.jsonl"
    entries = read_log(log)
    extra = replace(entries[0], workload="convolution:0000000000000000", cost=0.5)
    write_log(foreign, [*entries, extra])
    out = tmp_path / "own"
    assert main(["compile", str(model), "--target", "cortex-m7", "--tuning", str(foreign),
                 "-o", str(out), "-q"]) == 0
    schedules = json.loads((out / "net.build.json").read_text())["request"]["tuning"]
    assert "convolution:0000000000000000" not in schedules["schedules"]
    assert schedules["schedules"]
