"""The wheel: installed outside the checkout, `kiln` runs with everything it needs inside it.

The wheel is built from this tree and installed, without dependencies, into a fresh virtual
environment in a temporary folder; the dependencies come from the development environment's
site-packages through a path file (no download in a test). The checkout is nowhere on the path:
`app` must be imported from the new environment, and the sample model must come from there.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_the_installed_wheel_runs_kiln_with_its_sample(tmp_path):
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
          str(ROOT)])
    (wheel,) = (tmp_path / "dist").glob("kiln-*.whl")
    env_dir = tmp_path / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)])
    python = env_dir / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; "
                         "print(sysconfig.get_paths()['purelib'])"]).strip())
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(purelib),
          str(wheel)])
    # kiln's dependencies, from this environment (its own kiln is an editable finder that a
    # path file does not activate).
    deps = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    (purelib / "kiln_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path),
               XDG_CONFIG_HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path))
    where = _run([str(python), "-c", "import app, app.window.gui; print(app.__file__); "
                  "print(app.window.gui.sample_model())"], cwd=tmp_path, env=env).split()
    assert all(Path(p).is_relative_to(purelib) for p in where), where
    sample = Path(where[1])
    kiln = [str(python), "-m", "app"]
    shots = tmp_path / "shots"
    out = _run([*kiln, "--screenshot", str(shots)], cwd=tmp_path, env=env)
    assert "main_window.png" in out and (shots / "quantization_panel.png").is_file()
    _run([*kiln, "compile", str(sample), "-o", str(tmp_path / "bundle")], cwd=tmp_path, env=env)
    assert (tmp_path / "bundle" / "net.o").is_file() and (tmp_path / "bundle" / "net.h").is_file()
