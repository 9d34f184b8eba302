"""`kiln walkthrough`: the folders it refuses and the sessions it reads, each in one line."""

from __future__ import annotations

import json

from app.cli import main
from tests.conftest import SAMPLE_MODEL


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["walkthrough", str(SAMPLE_MODEL), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_writes_then_replaces_only_with_force(tmp_path, capsys):
    folder = tmp_path / "lesson"
    code, out, _ = _run(capsys, "-o", str(folder))
    assert code == 0 and "wrote 9 pages" in out and (folder / "index.html").is_file()
    code, _, err = _run(capsys, "-o", str(folder))
    assert code == 2 and err.count("\n") == 1 and "--force" in err
    assert _run(capsys, "-o", str(folder), "--force")[0] == 0


def test_refuses_a_folder_of_other_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = _run(capsys, "-o", str(tmp_path), "--force")
    assert code == 2 and err.count("\n") == 1 and "not a walkthrough" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_bad_sessions_are_one_sentence(tmp_path, capsys):
    cases = {"missing.kiln": None, "text.kiln": "not json",
             "other.kiln": json.dumps({"format": "something"}),
             "notes.kiln": json.dumps({"kiln_session": 1, "notes": {"dce": 3}})}
    for name, text in cases.items():
        session = tmp_path / name
        if text is not None:
            session.write_text(text)
        code, _, err = _run(capsys, "--session", str(session), "-o", str(tmp_path / "out"))
        assert code == 2 and err.count("\n") == 1 and name in err, err
    assert not (tmp_path / "out").exists()
