"""The standalone build: `make package` gives a folder and a .tar.gz whose `kiln` runs alone.

The tarball is unpacked elsewhere and its `kiln` started with a bare environment whose PATH
holds no Python and no C compiler. As root (CI), the run also happens in a private mount
namespace where the checkout (with its virtual environment) and every Python installation
are covered by empty folders, as on a machine without Python; elsewhere PATH alone hides them.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
# The unpacked folder's size is watched: 451 MB once scikit-learn and SciPy left it.
SIZE_BUDGET_MB = 500


def _hidden_paths() -> list[str]:
    """Every place a Python could come from, and the checkout (the app must not read it)."""
    paths = {str(ROOT), sys.prefix, sysconfig.get_paths()["stdlib"],
             sysconfig.get_paths()["platstdlib"], *glob.glob("/usr/lib/python3*"),
             *glob.glob("/usr/local/lib/python3*")}
    if sys.base_prefix not in ("/usr", "/usr/local", "/"):
        paths.add(sys.base_prefix)  # a Python of its own prefix (pyenv, conda)
    paths = [Path(p) for p in paths if os.path.isdir(p)]
    # A folder inside another one is covered with it (and cannot be mounted on once covered).
    return sorted(str(p) for p in paths if not any(p != q and p.is_relative_to(q) for q in paths))


def _can_hide() -> bool:
    return (os.geteuid() == 0 and shutil.which("unshare") is not None
            and shutil.which("mount") is not None
            and subprocess.run(["unshare", "--mount", "true"]).returncode == 0)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """The unpacked standalone folder, built by `make package` into a temporary folder."""
    out = tmp_path_factory.mktemp("package")
    start = time.perf_counter()
    done = subprocess.run(["make", "-s", "package", f"PACKAGE_DIR={out / 'dist'}",
                           f"PACKAGE_WORK={out / 'work'}"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    print(done.stdout.strip(), f"(test: {time.perf_counter() - start:.0f} s)")
    (tarball,) = (out / "dist").glob("kiln-*-linux-*.tar.gz")
    unpacked = out / "unpacked"
    unpacked.mkdir()
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(unpacked)], check=True)
    shutil.rmtree(out / "dist")  # only the unpacked copy is used from here on
    shutil.rmtree(out / "work")
    return unpacked / "kiln"


def _bare(command: list[str], home: Path) -> subprocess.CompletedProcess:
    """Run `command` as on a machine without Python: bare environment, Pythons covered."""
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "PATH": str(home / "no-tools"), "LANG": "C.UTF-8",
           "QT_QPA_PLATFORM": "offscreen", "XDG_RUNTIME_DIR": str(home)}
    if _can_hide():
        mount = shutil.which("mount")
        mounts = "".join(f"{mount} -t tmpfs none '{p}' && " for p in _hidden_paths())
        command = [shutil.which("unshare"), "--mount", "/bin/sh", "-c", mounts + 'exec "$@"',
                   "sh", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=home,
                          timeout=600)


def _kiln(package: Path, home: Path, *args: str) -> str:
    done = _bare([str(package / "kiln"), *args], home)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_bare_machine_has_no_python(tmp_path):
    """The place the standalone build is run in really has no usable Python."""
    done = _bare([os.path.realpath(sys.executable), "-c", "import json"], tmp_path)
    if _can_hide():
        assert done.returncode != 0, "the standard library should be covered"
    assert shutil.which("python3", path=str(tmp_path / "no-tools")) is None


@pytest.mark.slow
def test_standalone_build(package, tmp_path):
    size_mb = sum(f.lstat().st_size for f in package.rglob("*")
                  if f.is_file() and not f.is_symlink()) / 2**20
    assert size_mb < SIZE_BUDGET_MB, f"the standalone folder grew to {size_mb:.0f} MB"
    sample = package / "_internal" / "app" / "resources" / "models" / "digits_cnn.onnx"

    # inspect: the same operators the development environment reports
    got = json.loads(_kiln(package, tmp_path / "home", "inspect", str(sample), "--json"))
    want = json.loads(subprocess.run([sys.executable, "-m", "app.cli", "inspect", str(sample),
                                      "--json"], capture_output=True, text=True).stdout)
    assert got == want

    # the whole GUI flow offscreen, calibration and int8 evaluation included (no C compiler)
    shots = tmp_path / "shots"
    out = _kiln(package, tmp_path / "home", "--screenshot", str(shots))
    for name in ("main_window", "quantization_panel", "user_guide", "about", "export_int8_report"):
        assert (shots / f"{name}.png").stat().st_size > 1000, out

    # what the standalone leaves out is said in one line
    done = _bare([str(package / "kiln"), "bench", str(sample)], tmp_path / "home")
    assert done.returncode == 2
    assert done.stderr.strip() == ("kiln: error: digits_cnn.onnx: kiln bench needs onnxruntime, "
                                   "which the standalone build does not include: run it from "
                                   "Kiln installed with pip")
    done = _bare([str(package / "kiln"), "explore", str(sample), "--data", "digits:train",
                  "--eval", "digits:test", "-o", str(tmp_path / "EXPLORE.json")],
                 tmp_path / "home")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "pip install 'kiln[explore]'" in done.stderr

    # a compiled run, loaded in-process, equals the development environment's bit for bit
    _kiln(package, tmp_path / "home", "run", str(sample), "--engine", "compiled",
          "-o", str(tmp_path / "standalone.npz"))
    subprocess.run([sys.executable, "-m", "app.cli", "run", str(sample), "--engine", "compiled",
                    "-o", str(tmp_path / "dev.npz")], check=True, capture_output=True)
    with np.load(tmp_path / "standalone.npz") as a, np.load(tmp_path / "dev.npz") as b:
        assert sorted(a) == sorted(b)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
