"""The session guard: a test that leaves Ray's token or NNCF's folder in the home fails."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

LITTERING = '''
from pathlib import Path


def test_starts_ray_carelessly():
    (Path.home() / ".ray").mkdir()
    (Path.home() / ".ray" / "auth_token").write_text("token")


def test_after_it():
    pass
'''


def test_a_token_left_in_the_home_fails_the_test_that_left_it(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "test_litter.py").write_text(LITTERING)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(tmp_path / "test_litter.py")],
        cwd=ROOT, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True,
        timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 passed, 1 error" in run.stdout, run.stdout  # the next test passes
    assert "ERROR at teardown of test_starts_ray_carelessly" in run.stdout
    assert f"{home}/.ray/auth_token appeared in the home folder during this test" in run.stdout
