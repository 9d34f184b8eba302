"""Time and peak memory of one `kiln` command, measured in a fresh process.

RUSAGE_CHILDREN reports the largest child a process ever waited for, so the command runs as
the only child of a short-lived Python that reports it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
          "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
          "dt = time.perf_counter() - t; "
          "mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024; "
          "err = (r.stderr.strip().splitlines() or [''])[-1]; "
          "print(r.returncode, dt, mb, err, sep='\\t')")


def measure_kiln(args: list[str], env: dict | None = None) -> tuple[int, float, float, str]:
    """(exit code, seconds, peak resident MB, last stderr line) of `kiln ARGS`."""
    done = subprocess.run([sys.executable, "-c", _PROBE, sys.executable, "-m", "app.cli",
                           *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=600)
    code, seconds, mb, err = done.stdout.rstrip("\n").split("\t", 3)
    return int(code), float(seconds), float(mb), err
