"""Benchmark: `kiln explore` trials per minute on a local Ray instance of 1 and 2 workers.

The same exploration (same model, data, seed and trials) runs from scratch with
`RayExecutor(workers=1)` and `RayExecutor(workers=2)`: the speed-up between them is the
scaling figure on this machine. Printed per run: trials per minute from the search's first
trials sent to its last result in (each worker's loading of the problem included; Ray's
start-up and accuracy control, which come before, excluded), how busy the workers were (the
trials' own seconds over workers x that time: what waiting for a generation's straggler
costs), and the wall time to the first feasible point (Ray's start-up plus EXPLORE.json's
`first_feasible_seconds`). The same in this process without Ray (`--workers 0`), to the
first feasible point only; then Ray's start-up time and the memory of an idle instance.

Model: the MLPerf Tiny keyword-spotting DS-CNN in float (../shared/models/onnx), calibrated on
its real MFCC sample and 31 variants of it (time shifts and noise, seeded), scored by top-1
agreement on 16 others; without the shared models, the bundled digits CNN on scikit-learn's
digits. Ray runs with HOME and its temporary folder in a temporary directory, so nothing is
left in the user's home. Run `python tests/bench/bench_explore.py` from the project root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for compiler.* when run as a script

from compiler.harness.host_bench import cpu_model  # noqa: E402

SHARED = ROOT.parent / "shared" / "models"
SAMPLE = ROOT / "app" / "resources" / "models" / "digits_cnn.onnx"
TRIALS = 40  # five generations of 8: about a minute with 2 workers
SEED = 0
MIN_SPEEDUP = 1.3  # below it on a 2-core machine, something else was using a core


def _kws_data(folder: Path) -> tuple[Path, str, str]:
    """The float KWS model and calibration / evaluation files made from its real sample."""
    from compiler.frontends.load import load_model

    quant = load_model(SHARED / "tflite" / "kws_ref_model.tflite").inputs[0].type.quant
    q = np.load(SHARED / "inputs" / "kws_input_int8_1x49x10x1.npy").astype(np.float32)
    real = (q - quant.zero_point[0]) * np.float32(quant.scale[0])
    rng = np.random.default_rng(0)

    def variant():
        shifted = np.roll(real, int(rng.integers(-6, 7)), axis=1)
        noise = rng.standard_normal(real.shape) * 0.3 * quant.scale[0]
        return (shifted + noise).astype(np.float32)[0]
    np.save(folder / "calibration.npy", np.stack([real[0]] + [variant() for _ in range(31)]))
    np.save(folder / "evaluation.npy", np.stack([variant() for _ in range(16)]))
    return (SHARED / "onnx" / "kws_ref_model_float32.onnx", str(folder / "calibration.npy"),
            str(folder / "evaluation.npy"))


def _problem(folder: Path) -> tuple[Path, str, str]:
    if (SHARED / "onnx" / "kws_ref_model_float32.onnx").is_file() and \
            (SHARED / "tflite" / "kws_ref_model.tflite").is_file():
        return _kws_data(folder)
    print("note: ../shared/models not found; the digits CNN instead of KWS")
    return SAMPLE, "digits:train", "digits:test"


class Timed:
    """An executor that notes when the search first sent trials and when each result came."""

    def __init__(self, executor) -> None:
        self.executor, self.workers = executor, executor.workers
        self.sent: float | None = None
        self.done: list[float] = []

    def run(self, spec_json, configs, cancelled=lambda: False):
        """The executor's results, each noted as it comes (in whatever order)."""
        if self.sent is None:
            self.sent = time.perf_counter()
        for item in self.executor.run(spec_json, configs, cancelled):
            self.done.append(time.perf_counter())
            yield item

    def close(self) -> None:
        """Close the executor."""
        self.executor.close()


def _explore(problem, workers: int, trials: int, out: Path) -> dict:
    """One exploration from scratch with `workers` (0: in this process); its figures."""
    from compiler.explore.engine import Exploration
    from compiler.explore.executors import InProcess, RayExecutor
    from compiler.explore.problem import ProblemSpec

    model, calibration, evaluation = problem
    spec = ProblemSpec(str(model), calibration, evaluation, max_drop=0.01)
    # An object cache of its own, empty: a run must not compile from another's objects (Ray's
    # workers take the environment of the instance started below).
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="cache-", dir=out.parent)
    start = time.perf_counter()
    executor = Timed(RayExecutor(workers=workers) if workers else InProcess())
    ray_seconds = time.perf_counter() - start
    try:
        record = Exploration(spec, out, trials, SEED, executor=executor, fresh=True).run()
    finally:
        executor.close()
    window = executor.done[-1] - executor.sent
    doc = record.to_json()
    # A configuration proposed again is read from the cache: count each measured once.
    measured = {t.key: t.result["seconds"] for t in record.trials}.values()
    return {"ray": ray_seconds, "doc": doc, "failed": sum("error" in t for t in doc["trials"]),
            "rate": 60 * len(executor.done) / window, "window": window,
            "measured": len(executor.done),
            "busy": sum(measured) / (workers * window) if workers else 1.0,
            "first": ray_seconds + doc["first_feasible_seconds"]}


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _ray_start(env: dict) -> tuple[float, float]:
    """Seconds for `RayExecutor(workers=2)` to start a local instance; its processes' MB."""
    code = ("import os, time; t = time.perf_counter()\n"
            "from compiler.explore.executors import RayExecutor\n"
            "e = RayExecutor(workers=2); print(time.perf_counter() - t, flush=True)\n"
            "input(); e.close()\n")
    with subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as run:
        seconds = float(run.stdout.readline())
        time.sleep(3)  # idle workers settle
        rss = 0
        for pid in _descendants(run.pid):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            rss += next((int(line.split()[1]) for line in status.splitlines()
                         if line.startswith("VmRSS:")), 0)
        run.communicate("\n")
    return seconds, rss / 1024


def main() -> int:
    """Run the three explorations and print the figures."""
    print(f"kiln explore scaling on {os.cpu_count()} cores, {cpu_model()}; load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    temp = Path(tempfile.mkdtemp(prefix="kiln-bench-"))  # short: Ray's sockets live under it
    try:
        (temp / "home").mkdir()
        # Ray reads these when it starts (here and in the child that times its start-up).
        os.environ.update(HOME=str(temp / "home"), RAY_TMPDIR=str(temp))
        os.environ.pop("RAY_ADDRESS", None)
        env = dict(os.environ)
        problem = _problem(temp)
        print(f"  {Path(problem[0]).name}, {TRIALS} trials, seed {SEED}, population 8")
        runs = {workers: _explore(problem, workers, TRIALS, temp / f"w{workers}.json")
                for workers in (1, 2)}
        alone = _explore(problem, 0, 1, temp / "w0.json")
        for workers, run in runs.items():
            print(f"  {workers} worker{'s' if workers > 1 else ' '}: {run['rate']:5.1f} "
                  f"trials/min ({run['measured']} measured in {run['window']:.0f} s, "
                  f"{run['failed']} failed, workers busy {100 * run['busy']:.0f} %), first "
                  f"feasible after {run['first']:.1f} s (Ray's start {run['ray']:.1f} s in it)")
        print(f"  in process (no Ray): first feasible after {alone['first']:.1f} s")
        speedup = runs[2]["rate"] / runs[1]["rate"]
        a, b = runs[1]["doc"], runs[2]["doc"]
        same = [(t["key"], t["measurement"]) for t in a["trials"]] == \
            [(t["key"], t["measurement"]) for t in b["trials"]] and a["front"] == b["front"]
        print(f"  speed-up with 2 workers: {speedup:.2f}x (same trials and front: "
              f"{'yes' if same else 'NO'})")
        seconds, megabytes = _ray_start(env)
        print(f"  Ray start-up (local instance, 2 CPUs): {seconds:.1f} s, {megabytes:.0f} MB "
              "idle")
        leftovers = sorted(p.name for p in (temp / "home").iterdir()
                           if p.name in (".ray", "intel"))
        ok = same and not leftovers
        if leftovers:
            print(f"  FAIL: Ray left {', '.join(leftovers)} in its home folder")
        if speedup < MIN_SPEEDUP:
            print(f"  note: speed-up below {MIN_SPEEDUP}x; load average now "
                  f"{os.getloadavg()[0]:.1f} (other programs were using the cores)")
        return 0 if ok else 1
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
