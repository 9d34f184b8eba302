"""Explorations on a real Ray cluster: a worker killed mid-run costs a retry, nothing more.

The cluster is `ray start --head` on a free port with two CPUs, its own temporary folder and a
temporary HOME (a Ray run must leave nothing in the user's home). It is stopped by ending the
`ray start --block` process, which stops what it started: `ray stop` would stop every Ray
process on the machine, other people's included.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLE_MODEL, require_module

RAY = Path(sys.executable).with_name("ray")
HOME_LITTER = (".ray", "intel")
EXPLORE = [sys.executable, "-m", "app.cli", "explore", str(SAMPLE_MODEL.relative_to(ROOT)),
           "--data", "digits:train", "--eval", "digits:test", "--max-drop", "0.5"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _home_litter() -> set[str]:
    return {name for name in HOME_LITTER if (Path.home() / name).exists()}


def _parent(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1))


def _processes() -> dict[int, bytes]:
    """Pid -> command line of every process we can see."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                pass
    return found


def _trial_worker(raylet: int) -> int | None:
    """A worker of our raylet measuring a trial (Ray titles it `ray::run_trial`)."""
    for pid, cmdline in _processes().items():
        if cmdline.startswith(b"ray::run_trial") and _parent(pid) == raylet:
            return pid
    return None


@contextmanager
def _ray_cluster(env: dict, temp: Path):
    """A head node with two CPUs on a free port: yields (address, raylet pid, session logs)."""
    port = _free_port()
    log = temp / "ray-start.log"
    with open(log, "w") as out:
        head = subprocess.Popen(
            [str(RAY), "start", "--head", "--block", "--port", str(port), "--num-cpus", "2",
             "--node-ip-address", "127.0.0.1", "--temp-dir", str(temp / "ray"),
             "--disable-usage-stats", "--include-dashboard=false",
             "--dashboard-agent-listen-port", str(_free_port())],
            cwd=temp, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None, f"ray start failed:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "ray start took over 90 s"
            time.sleep(0.2)
        raylets = [pid for pid, cmd in _processes().items()
                   if b"raylet" in cmd.split(b"\0")[0] and str(temp).encode() in cmd]
        assert len(raylets) == 1, "the cluster's raylet not found"
        yield f"127.0.0.1:{port}", raylets[0], temp / "ray" / "session_latest" / "logs"
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # ray start --block stops what it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()


def _trials(doc: dict) -> list[tuple[int, str, dict, dict]]:
    return [(t["number"], t["key"], t["config"], t["measurement"]) for t in doc["trials"]]


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_retried_and_the_front_matches_a_local_run(tmp_path):
    require_module("ray", "the optional extra kiln[explore]")
    require_module("optuna", "the optional extra kiln[explore]")
    trials, seed = 10, 1
    litter = _home_litter()
    temp = Path(tempfile.mkdtemp(prefix="kiln-ray-"))  # short: Ray's sockets live under it
    home = temp / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "RAY_AUTH_MODE": "disabled",
           "RAY_TMPDIR": str(temp), "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    env.pop("RAY_ADDRESS", None)
    workers_seen: set[int] = set()
    try:
        with _ray_cluster(env, temp) as (address, raylet, logs):
            run = subprocess.Popen(
                [*EXPLORE, "--trials", str(trials), "--seed", str(seed), "--address", address,
                 "-o", str(tmp_path / "a.json")],
                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            killed = None
            while run.poll() is None:
                workers_seen |= {pid for pid in _processes() if _parent(pid) == raylet}
                if killed is None and (killed := _trial_worker(raylet)) is not None:
                    os.kill(killed, signal.SIGKILL)
                time.sleep(0.05)
            output = run.stdout.read()
            assert killed is not None, "no worker was seen measuring a trial"
            assert run.returncode == 0, output
            driver_log = "".join(p.read_text() for p in logs.glob("python-core-driver-*.log"))
        local = subprocess.run([*EXPLORE, "--trials", str(trials), "--seed", str(seed),
                                "-o", str(tmp_path / "b.json")],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert local.returncode == 0, local.stdout + local.stderr
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())

    # Every trial once, none failed or lost, none from the killed worker.
    assert a["complete"] and [t["number"] for t in a["trials"]] == list(range(trials))
    assert len({t["key"] for t in a["trials"]}) == trials
    assert [t.get("error") for t in a["trials"]] == [None] * trials
    pids = {t["worker"]["pid"] for t in a["trials"]}
    assert killed not in pids and len(pids) >= 2, pids

    # Ray saw exactly one task's worker die (ours) and ran that task again: the trial it
    # measured completed elsewhere, as another attempt of the same task.
    died = set(re.findall(r"Task attempt (\w+) failed with error WORKER_DIED", driver_log))
    assert len(died) == 1, died
    task = died.pop()
    assert re.search(rf"Will resubmit task.*task_id={task}.*attempt_number=1", driver_log)
    retried = [t for t in a["trials"] if t["worker"].get("task") == task]
    assert len(retried) == 1 and retried[0]["worker"]["pid"] != killed

    # The same seed gives the same trials and front as the default local run.
    assert _trials(a) == _trials(b)
    assert a["front"] == b["front"] and a["front"]

    # Nothing of the cluster is left running, nothing left in the real home.
    assert not workers_seen & set(_processes()), "the cluster's workers outlived it"
    assert not [pid for pid, cmd in _processes().items() if str(temp).encode() in cmd]
    assert _home_litter() == litter
