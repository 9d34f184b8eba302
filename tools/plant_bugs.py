"""Plant known bugs one at a time in a copy of the project and check the tests catch each.

A test suite is only as good as the wrong code it refuses. Each plant below is a bug an audit
once slipped past the suite (or one the suite must always catch): a one-line edit, the tests
that must then fail, and why. For each, the working tree is copied (tracked and untracked,
not ignored, files), the edit made, and the named tests run with `CI=true` and the compiled
object cache off; a plant survives when they pass. The edit must match exactly once, so a
plant whose code has moved on is reported as stale rather than silently skipped.

    python tools/plant_bugs.py            # every plant
    python tools/plant_bugs.py -k vnni    # the plants whose name contains "vnni"
    python tools/plant_bugs.py --list     # names, files and tests only

Exit status 0 when every plant was caught, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plants import Plant, every_plant

ROOT = Path(__file__).resolve().parents[1]


PLANTS = every_plant()


def _copy_tree(into: Path) -> None:
    """The working tree's tracked and untracked (not ignored) files, as they are now."""
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        source = ROOT / raw.decode()
        if source.is_file():
            target = into / raw.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0].split(" ", 1)[1]
    return ""


def run_plant(plant: Plant) -> tuple[str, str, float]:
    """(verdict, the first failing test or the reason, seconds) of one plant."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kiln-plant-") as folder:
        # The copy sits where the checkout does beside the shared models, so tests that need
        # them run (without them, under CI=true, they would fail and look like a catch).
        copy = Path(folder) / ROOT.name
        shared = ROOT.parent / "shared"
        if shared.is_dir():
            (Path(folder) / "shared").symlink_to(shared, target_is_directory=True)
        _copy_tree(copy)
        target = copy / plant.path
        text = target.read_text()
        if text.count(plant.old) != 1:
            found = text.count(plant.old)
            return "STALE", f"{plant.path} holds the planted line {found} times", 0.0
        target.write_text(text.replace(plant.old, plant.new))
        # PYTHONPATH: a test's own child processes import the copy too, not the checkout
        # the virtualenv's editable install points at.
        env = {**os.environ, "CI": "true", "KILN_NO_CACHE": "1", "PYTHONPATH": str(copy),
               "QT_QPA_PLATFORM": "offscreen", "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               "-n", "2", *plant.tests], cwd=copy, env=env, capture_output=True,
                              text=True)
        seconds = time.monotonic() - start
        if done.returncode == 0:
            return "SURVIVED", "every named test passed", seconds
        failing = _first_failure(done.stdout)
        if not failing:
            return "BROKEN", done.stdout[-400:] + done.stderr[-400:], seconds
        return "caught", failing, seconds


def main(argv: list[str] | None = None) -> int:
    """Run the plants asked for and print a line each; 1 when any was not caught."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only plants whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the plants, run nothing")
    args = parser.parse_args(argv)
    chosen = [p for p in PLANTS if args.k in p.name]
    if args.list:
        for p in chosen:
            print(f"{p.name}: {p.path}; {', '.join(p.tests)} — {p.why}")
        return 0
    missed = 0
    for plant in chosen:
        verdict, detail, seconds = run_plant(plant)
        missed += verdict != "caught"
        print(f"{verdict:8} {plant.name:40} {seconds:6.0f} s  {detail}", flush=True)
    print(f"{len(chosen) - missed} of {len(chosen)} plants caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
