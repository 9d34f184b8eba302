"""Files Kiln writes get the mode `open()` would give them: 0666 less the umask.

Written atomically through a private temporary file (mkstemp makes it 0600), a profile, an
exploration record or its plot used to stay 0600 whatever the umask, unreadable by a CI job's
other users or a container's web server.
"""

from __future__ import annotations

import os
import stat

import pytest

from app.cli import main
from compiler.explore.plot import save_plot
from compiler.explore.record import Record, write_record
from compiler.quant.glow_yaml import write_profile
from compiler.quant.profile import load_profile
from tests.conftest import SAMPLE_MODEL


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_profiles_records_and_plots_follow_the_umask(tmp_path, capsys, umask_022):
    profile = tmp_path / "p.json"
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:test", "-o", str(profile)]) == 0
    assert _mode(profile) == 0o644
    write_profile(load_profile(profile), tmp_path / "p.yaml")
    assert _mode(tmp_path / "p.yaml") == 0o644
    write_record(Record(settings={}), tmp_path / "EXPLORE.json")
    assert _mode(tmp_path / "EXPLORE.json") == 0o644
    doc = {"trials": [], "float_score": 0.9, "problem": {"max_drop": 0.01, "target": "host",
                                                       "model": "m.onnx"}}
    save_plot(doc, tmp_path / "front.png")
    assert _mode(tmp_path / "front.png") == 0o644
    assert (tmp_path / "front.png").read_bytes()[:4] == b"\x89PNG"


def test_a_file_replaced_keeps_its_own_mode(tmp_path, capsys, umask_022):
    path = tmp_path / "EXPLORE.json"
    path.write_text("{}")
    path.chmod(0o600)  # the user made it private: a rewrite keeps it so
    write_record(Record(settings={}), path)
    assert _mode(path) == 0o600
