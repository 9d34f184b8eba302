"""`kiln bench`: a compiled host bundle against onnxruntime, timed the same way in one process.

Both engines get the same seeded inputs and run single-threaded (onnxruntime with every graph
optimization on, so the comparison is with its best). After a warm-up, each repeat times many
single inferences and keeps their median; the result is the median of the repeat medians, which
a busy machine disturbs far less than a mean would.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.errors import KilnError

# Without --runs, each repeat of each engine lasts about this long (within the limits below).
_REPEAT_SECONDS = 0.2
_MIN_RUNS, _MAX_RUNS = 10, 5000


@dataclass
class BenchResult:
    """Medians in milliseconds per inference, and how they were measured."""

    model: str
    target: str
    triple: str
    compile_s: float
    runs: int
    repeats: int
    kiln_ms: float
    ort_ms: float
    kiln_repeats_ms: list[float]
    ort_repeats_ms: list[float]
    max_abs_diff: float
    macs: int = 0
    peak_gflops: float = 0.0

    @property
    def ratio(self) -> float:
        """Kiln's time over onnxruntime's: below 1 means Kiln's code is faster."""
        return self.kiln_ms / self.ort_ms

    @property
    def kiln_gflops(self) -> float:
        """Float operations per second Kiln's code achieved (a multiply-add counts as two)."""
        return 2 * self.macs / (self.kiln_ms * 1e-3) / 1e9

    @property
    def peak_fraction(self) -> float:
        """Kiln's throughput as a fraction of this core's measured peak (0 if not measured)."""
        return self.kiln_gflops / self.peak_gflops if self.peak_gflops else 0.0

    def to_json(self) -> dict:
        """The `kiln bench --json` document."""
        return {"model": self.model, "target": self.target, "triple": self.triple,
                "compile_s": round(self.compile_s, 4), "runs": self.runs,
                "repeats": self.repeats, "kiln_ms": self.kiln_ms, "ort_ms": self.ort_ms,
                "ratio": self.ratio, "kiln_repeats_ms": self.kiln_repeats_ms,
                "ort_repeats_ms": self.ort_repeats_ms, "max_abs_diff": self.max_abs_diff,
                "macs": self.macs, "kiln_gflops": self.kiln_gflops,
                "peak_gflops": self.peak_gflops, "peak_fraction": self.peak_fraction}


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise KilnError("kiln bench needs onnxruntime, which is not installed (pip install "
                        "onnxruntime, or install Kiln with its test extra)") from None
    return onnxruntime


def ort_session(model: str | Path):
    """A single-threaded onnxruntime session with all graph optimizations."""
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise KilnError(f"onnxruntime cannot load {Path(model).name}: {exc}") from None


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _calibrate(fns: list[Callable[[], object]]) -> int:
    """Runs per repeat so that the slowest engine's repeat lasts about _REPEAT_SECONDS."""
    slowest = max(_median_ms(fn, 5) for fn in fns) / 1e3
    return int(min(_MAX_RUNS, max(_MIN_RUNS, _REPEAT_SECONDS / max(slowest, 1e-7))))


def _host_net(net, folder: Path):
    """The compiled bundle loaded back the way a user would load it."""
    from compiler.codegen.bundle import write_bundle
    from compiler.codegen.host import HostNet

    write_bundle(net, folder)
    return HostNet.from_bundle(folder)


def bench_model(model: str | Path, shapes: dict | None = None, runs: int | None = None,
                repeats: int = 5, seed: int = 0) -> BenchResult:
    """Compile `model` for the host and time it against onnxruntime on the same inputs."""
    from compiler.codegen.peak import peak_flops
    from compiler.codegen.targets import get_target
    from compiler.driver import compilation
    from compiler.frontends.onnx import load_onnx
    from compiler.inputs import random_inputs
    from compiler.stats import compute_stats

    if repeats < 1 or (runs is not None and runs < 1):
        raise KilnError("runs and repeats must be at least 1")
    graph = load_onnx(str(model), shapes or {})
    session = ort_session(model)
    feeds = random_inputs(graph, seed)
    target = get_target("host")
    start = time.perf_counter()
    net = compilation(graph).net()
    compile_s = time.perf_counter() - start
    unknown = [i.name for i in session.get_inputs() if i.name not in feeds]
    if unknown:
        raise KilnError(f"onnxruntime wants input {unknown[0]}, which Kiln's graph does not have")
    ort_feeds = {i.name: feeds[i.name] for i in session.get_inputs()}
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as folder:
        hosted = _host_net(net, Path(folder))
        try:
            ours = hosted.run(feeds)
            theirs = dict(zip([o.name for o in session.get_outputs()],
                              session.run(None, ort_feeds)))
            diff = max((float(np.max(np.abs(ours[k].astype(np.float64) - theirs[k])))
                        for k in ours if k in theirs and ours[k].size), default=0.0)
            engines = [lambda: hosted.run(feeds), lambda: session.run(None, ort_feeds)]
            if runs is None:
                runs = _calibrate(engines)
            for fn in engines:  # warm-up: caches, page faults, onnxruntime's lazy setup
                _median_ms(fn, max(3, runs // 10))
            medians: list[list[float]] = [[], []]
            for _ in range(repeats):
                for k, fn in enumerate(engines):
                    medians[k].append(_median_ms(fn, runs))
        finally:
            hosted.close()
    return BenchResult(Path(model).name, target.name, target.triple, compile_s, runs, repeats,
                       statistics.median(medians[0]), statistics.median(medians[1]),
                       medians[0], medians[1], diff, compute_stats(graph).macs,
                       peak_flops(target) / 1e9)
