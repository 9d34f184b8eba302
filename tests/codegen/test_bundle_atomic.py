"""A folder holds one bundle of one target, written whole: `write_bundle` and `kiln compile`.

Another bundle, or files that are not a bundle, are refused without force; the same bundle is
rebuilt without asking; a failure at any step leaves the previous bundle byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from app.cli import main
from compiler.codegen import bundle_folder
from compiler.codegen.bundle import write_bundle
from compiler.codegen.bundle_folder import FolderInUse, survey
from compiler.driver import compile_graph
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL, require_tools

M7_FILES = ["net.h", "net.o", "net.report.json"]  # write_bundle's own files
CLI_M7_BUNDLE = ["net.build.json", *M7_FILES]  # kiln compile's: how it was built, too
# ... and the firmware that builds and runs it under QEMU (`compiler.mcu.firmware_folder`).
CLI_M7_FILES = sorted([*CLI_M7_BUNDLE, "Makefile", "README.md", "board.ld", "main.c",
                       "net.input.bin", "sections.ld", "startup.c"])


@pytest.fixture(scope="module")
def sample_graph():
    return run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph


@pytest.fixture(scope="module")
def host(sample_graph):
    return compile_graph(sample_graph, "host")


@pytest.fixture(scope="module")
def m7(sample_graph):
    return compile_graph(sample_graph, "cortex-m7")


def _files(folder: Path) -> dict[str, bytes | None]:
    """Every entry of `folder` with its bytes (None for a folder)."""
    return {p.name: p.read_bytes() if p.is_file() else None for p in sorted(folder.iterdir())}


def _built_host_bundle(host, folder: Path) -> dict[str, bytes]:
    """A host bundle whose example program was built with its Makefile (as `make run` does)."""
    write_bundle(host, folder)
    require_tools("cc", "make")
    done = subprocess.run(["make", "-s", "-C", str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (folder / "net_example").is_file()
    return _files(folder)


def test_m7_over_a_host_bundle_leaves_exactly_the_m7_bundle(tmp_path, host, m7):
    folder = tmp_path / "out"
    _built_host_bundle(host, folder)
    paths = write_bundle(m7, folder, force=True)
    assert sorted(p.name for p in paths) == M7_FILES
    assert sorted(_files(folder)) == M7_FILES  # no host Makefile, main.c or net_example
    assert json.loads((folder / "net.report.json").read_text())["target"] == "cortex-m7"
    assert (folder / "net.o").read_bytes() == m7.object
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left


def test_another_bundle_is_refused_without_force_and_left_as_it_was(tmp_path, host, m7):
    folder = tmp_path / "out"
    before = _built_host_bundle(host, folder)
    with pytest.raises(FolderInUse, match="already holds the Kiln bundle net for host") as info:
        write_bundle(m7, folder)
    assert info.value.kind == "bundle" and str(folder) in str(info.value)
    assert _files(folder) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_the_same_bundle_is_rebuilt_without_force_keeping_the_users_files(tmp_path,
                                                                          sample_graph, host):
    folder = tmp_path / "out"
    _built_host_bundle(host, folder)
    (folder / "digit.bin").write_bytes(b"\x01\x02")  # the user's input, beside the bundle
    external = compile_graph(sample_graph, "host", weights="external")
    names = {p.name for p in write_bundle(external, folder)}
    assert "net.weights.bin" in names
    assert set(_files(folder)) == names | {"digit.bin"}  # the stale net_example went
    assert (folder / "digit.bin").read_bytes() == b"\x01\x02"


def test_files_that_are_not_a_bundle_need_force_and_are_kept(tmp_path, m7):
    folder = tmp_path / "firmware"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "src").mkdir()
    with pytest.raises(FolderInUse, match=r"2 files that are not part of a Kiln bundle "
                                          r"\(notes.txt, src\)") as info:
        write_bundle(m7, folder)
    assert info.value.kind == "files"
    assert sorted(_files(folder)) == ["notes.txt", "src"]
    write_bundle(m7, folder, force=True)
    assert sorted(_files(folder)) == [*M7_FILES, "notes.txt", "src"]
    assert (folder / "notes.txt").read_text() == "mine"


def test_a_failure_while_swapping_leaves_the_previous_bundle_byte_identical(tmp_path, host, m7,
                                                                            monkeypatch):
    """The second file moved into the folder fails (a full disk, a permission): all goes back."""
    folder = tmp_path / "out"
    before = _built_host_bundle(host, folder)
    real_rename, real_replace = os.rename, os.replace
    into_folder = []

    def failing(move):
        def fake(src, dst, *args, **kwargs):
            if Path(dst).parent.resolve() == folder.resolve():
                into_folder.append(dst)
                if len(into_folder) == 2:
                    raise OSError(28, "No space left on device")
            return move(src, dst, *args, **kwargs)
        return fake

    monkeypatch.setattr(os, "rename", failing(real_rename))
    monkeypatch.setattr(os, "replace", failing(real_replace))
    with pytest.raises(OSError, match="No space left"):
        write_bundle(m7, folder, force=True)
    monkeypatch.undo()
    assert len(into_folder) >= 2
    assert _files(folder) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # neither the new nor the old aside


def test_a_cancel_just_before_the_swap_changes_nothing(tmp_path, host, m7):
    folder = tmp_path / "out"
    before = _built_host_bundle(host, folder)

    def cancel():
        assert _files(folder) == before  # the new bundle is complete, the folder untouched
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_bundle(m7, folder, force=True, check=cancel)
    assert _files(folder) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_report_that_kiln_did_not_write_is_no_bundle(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "net.report.json").write_text('{"name": "other", "target": "host"}')
    (folder / "net.o").write_bytes(b"\x7fELF")
    held = survey(folder)
    assert held.bundles == () and held.others == ("net.o", "net.report.json")
    assert held.conflict(folder, "net", "host").kind == "files"
    with pytest.raises(KilnError, match="not a folder"):
        survey(folder / "net.o")


def test_writing_through_a_symlinked_folder_keeps_the_link(tmp_path, host, m7):
    real = tmp_path / "real"
    write_bundle(host, real)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    write_bundle(m7, link, force=True)
    assert link.is_symlink() and sorted(_files(real)) == M7_FILES


def test_swap_in_never_leaves_a_half_new_folder(tmp_path, m7, monkeypatch):
    """A new folder appears in one rename, complete, or not at all."""
    folder = tmp_path / "new"

    def write_then_fail(tmp: Path) -> None:
        (tmp / "net.o").write_bytes(b"x")
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError):
        bundle_folder.swap_in(folder, ["net.o", "net.h"], write_then_fail)
    assert list(tmp_path.iterdir()) == []


def test_a_mount_point_folder_takes_the_bundle(tmp_path, host, m7, monkeypatch):
    """An output folder that is a mount point (a Docker volume, an SD card): a rename between
    it and its parent crosses devices (EXDEV), so nothing may be staged beside it."""
    import errno
    import os

    assert not bundle_folder.is_mount_point(tmp_path)

    mount = tmp_path / "volume"
    mount.mkdir()
    real_rename = os.rename

    def across_devices(src, dst):
        inside = [Path(os.path.realpath(p)).is_relative_to(mount) for p in (src, dst)]
        if inside[0] != inside[1]:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", across_devices)
    monkeypatch.setattr(bundle_folder, "is_mount_point", lambda folder: folder == mount)
    write_bundle(host, mount)  # an empty mount point
    write_bundle(m7, mount, force=True)  # and one holding another bundle
    assert sorted(_files(mount)) == M7_FILES
    monkeypatch.setattr(bundle_folder, "is_mount_point", lambda folder: False)
    with pytest.raises(OSError, match="cross-device"):  # what staging beside it meets there
        write_bundle(host, mount, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["volume"]


def test_a_staging_folder_left_by_a_crash_is_no_foreign_file(tmp_path, host):
    write_bundle(host, tmp_path / "out")
    (tmp_path / "out" / ".kiln-bundle-new-x1y2").mkdir()  # the process was killed mid-write
    assert survey(tmp_path / "out").conflict(tmp_path / "out", "net", "host") is None


# -- kiln compile ---------------------------------------------------------------------------------

def _compile(*args: str) -> subprocess.CompletedProcess:
    """`kiln compile SAMPLE ...` in a fresh interpreter: its real exit code and stderr."""
    code = "import sys; from app.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "compile", str(SAMPLE_MODEL), *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_refuses_another_bundle_without_force_and_replaces_it_with(tmp_path, capsys):
    folder = tmp_path / "out"
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(folder)]) == 0
    before = _files(folder)
    capsys.readouterr()
    refused = _compile("--target", "cortex-m7", "-o", str(folder))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (f"kiln: error: {folder} already holds the Kiln bundle net for "
                              "host; pass --force to replace it\n")
    assert _files(folder) == before
    assert main(["compile", str(SAMPLE_MODEL), "--target", "cortex-m7", "-o", str(folder),
                 "--force"]) == 0
    assert sorted(_files(folder)) == CLI_M7_FILES
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_cli_rebuilds_the_same_bundle_and_refuses_a_strangers_folder(tmp_path, capsys):
    folder = tmp_path / "out"
    for _ in range(2):  # `make run` twice: the same bundle twice into one folder
        assert main(["compile", str(SAMPLE_MODEL), "-o", str(folder)]) == 0
    assert (folder / "main.c").is_file()
    other = tmp_path / "docs"
    other.mkdir()
    (other / "thesis.tex").write_text("%")
    capsys.readouterr()
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(other) in err and "thesis.tex" in err
    assert err.rstrip().endswith("pass --force to write the bundle beside them")
    assert [p.name for p in other.iterdir()] == ["thesis.tex"]


def test_cli_never_replaces_the_users_own_makefile_even_with_force(tmp_path, capsys):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "Makefile").write_text("all:\n\techo mine\n")
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(folder), "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Makefile exists and was not written by Kiln" in err
    capsys.readouterr()
    assert main(["compile", str(SAMPLE_MODEL), "--target", "cortex-m7", "-o", str(folder),
                 "--force"]) == 0  # the Cortex-M bundle goes beside it, without firmware
    assert sorted(_files(folder)) == ["Makefile", *CLI_M7_BUNDLE]
    assert (folder / "Makefile").read_text() == "all:\n\techo mine\n"
    err = capsys.readouterr().err
    assert ("kiln: note: no firmware written beside the bundle: the folder holds Makefile of "
            "your own") in err
