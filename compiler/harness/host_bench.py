"""`kiln bench`: a compiled host bundle against its peers, each at its best, in one process.

The peers are onnxruntime (one intra-op and one inter-op thread, every graph optimization, run
through IOBinding with inputs and outputs bound once, so the timed call copies nothing in
Python, as the bundle's call copies nothing) and, when the model has a `.tflite` twin, LiteRT
(XNNPACK, one thread, `invoke` on tensors set once); a `.tflite` model is timed against LiteRT
alone, which runs the file itself. Every engine gets the same seeded inputs.
After a warm-up the engines run block by block, the order rotating each block so none always
goes first; each block keeps the median of many single inferences and the result per engine is
the median of its block medians, which a busy machine disturbs far less than a mean would.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.errors import KilnError

# Without --runs, each block of each engine lasts about this long (within the limits below).
_REPEAT_SECONDS = 0.2
_MIN_RUNS, _MAX_RUNS = 10, 5000
KILN, ORT, LITERT = "kiln", "onnxruntime", "litert"


@dataclass
class BenchResult:
    """Medians in milliseconds per inference, per engine, and how they were measured.

    `engines` maps an engine name to its block medians; `max_abs_diff` maps each peer to the
    largest difference of its outputs from Kiln's (a sanity check that all computed the same).
    """

    model: str
    target: str
    triple: str
    compile_s: float
    runs: int
    repeats: int
    engines: dict[str, list[float]]
    max_abs_diff: dict[str, float] = field(default_factory=dict)
    macs: int = 0
    peak_gflops: float = 0.0
    tflite: str = ""
    cpu: str = ""
    level: str = ""
    arithmetic: str = "float32"  # what the model computes in, and what `peak_gflops` is of

    def ms(self, engine: str) -> float:
        """Median of `engine`'s block medians."""
        return statistics.median(self.engines[engine])

    @property
    def kiln_ms(self) -> float:
        """Kiln's median."""
        return self.ms(KILN)

    @property
    def ort_ms(self) -> float:
        """Onnxruntime's median."""
        return self.ms(ORT)

    def ratio(self, peer: str = ORT) -> float:
        """Kiln's time over `peer`'s: below 1 means Kiln's code is faster."""
        return self.kiln_ms / self.ms(peer)

    def peers(self) -> list[str]:
        """The engines Kiln was measured against."""
        return [name for name in self.engines if name != KILN]

    @property
    def kiln_gflops(self) -> float:
        """Operations per second Kiln's code achieved, in billions (a multiply-add is two)."""
        return 2 * self.macs / (self.kiln_ms * 1e-3) / 1e9

    @property
    def peak_fraction(self) -> float:
        """Kiln's throughput over this core's measured peak of the model's own arithmetic.

        `arithmetic` says which: float32 FMAs, or the int8 dot instruction; 0 if unmeasured.
        """
        return self.kiln_gflops / self.peak_gflops if self.peak_gflops else 0.0

    def to_json(self) -> dict:
        """The `kiln bench --json` document."""
        doc = {"model": self.model, "target": self.target, "triple": self.triple,
               "compile_s": round(self.compile_s, 4), "runs": self.runs,
               "repeats": self.repeats, "tflite": self.tflite,
               "engines": {name: {"ms": self.ms(name), "repeats_ms": ms}
                           for name, ms in self.engines.items()},
               "ratios": {peer: self.ratio(peer) for peer in self.peers()},
               "max_abs_diff": self.max_abs_diff, "macs": self.macs,
               "kiln_gflops": self.kiln_gflops, "peak_gflops": self.peak_gflops,
               "peak_fraction": self.peak_fraction, "arithmetic": self.arithmetic,
               "cpu": self.cpu, "level": self.level}
        # The keys of the first version, kept for scripts that read them.
        doc.update(kiln_ms=self.kiln_ms, kiln_repeats_ms=self.engines[KILN])
        if ORT in self.engines:
            doc.update(ort_ms=self.ort_ms, ratio=self.ratio(ORT),
                       ort_repeats_ms=self.engines[ORT])
        return doc


def cpu_model() -> str:
    """This machine's CPU as its vendor names it, and as LLVM knows it."""
    import platform

    import llvmlite.binding as llvm

    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            name = next((line.split(":", 1)[1].strip() for line in info
                         if line.lower().startswith(("model name", "hardware"))), "")
    except OSError:
        pass
    name = name or platform.processor() or platform.machine()
    return f"{name} (LLVM: {llvm.get_host_cpu_name()})"


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        if getattr(sys, "frozen", False):  # the standalone build leaves the peers out
            raise KilnError("kiln bench needs onnxruntime, which the standalone build does not "
                            "include: run it from Kiln installed with pip") from None
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


def _ort_engine(model: str | Path, feeds: dict[str, np.ndarray]):
    """(timed call, outputs by name) of onnxruntime through IOBinding, bound once."""
    ort = _onnxruntime()
    session = ort_session(model)
    unknown = [i.name for i in session.get_inputs() if i.name not in feeds]
    if unknown:
        raise KilnError(f"onnxruntime wants input {unknown[0]}, which Kiln's graph does not have")
    binding = session.io_binding()
    keep = []  # the OrtValues must outlive the binding
    for meta in session.get_inputs():
        value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(feeds[meta.name]))
        keep.append(value)
        binding.bind_ortvalue_input(meta.name, value)
    names = [o.name for o in session.get_outputs()]
    for name in names:
        binding.bind_output(name, "cpu")
    session.run_with_iobinding(binding)  # allocates the outputs once; later runs reuse them
    outputs = dict(zip(names, binding.copy_outputs_to_cpu()))

    def call() -> None:
        session.run_with_iobinding(binding)

    call.keep = (keep, session, binding)  # type: ignore[attr-defined]
    return call, outputs


def litert_twin(model: str | Path) -> Path | None:
    """The `.tflite` twin of an ONNX model: beside it, or in a sibling `tflite` folder."""
    path = Path(model)
    for candidate in (path.with_suffix(".tflite"),
                      path.parent.parent / "tflite" / f"{path.stem}.tflite"):
        if candidate.is_file():
            return candidate
    return None


def _litert_engine(tflite: Path, feeds: dict[str, np.ndarray]):
    """(timed call, outputs in order) of LiteRT with XNNPACK and one thread, inputs set once."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise KilnError("timing LiteRT needs ai-edge-litert, which is not installed (install "
                        "Kiln with its test extra)") from None
    try:
        interpreter = Interpreter(model_path=str(tflite), num_threads=1)
        interpreter.allocate_tensors()
    except Exception as exc:  # LiteRT raises its own exception types
        raise KilnError(f"LiteRT cannot load {tflite.name}: {exc}") from None
    inputs = interpreter.get_input_details()
    if len(inputs) != len(feeds):
        raise KilnError(f"{tflite.name} has {len(inputs)} inputs, the ONNX model {len(feeds)}")
    for detail, array in zip(inputs, feeds.values()):
        if tuple(detail["shape"]) != array.shape or detail["dtype"] != array.dtype:
            raise KilnError(f"{tflite.name}: input {detail['name']} is "
                            f"{np.dtype(detail['dtype']).name}{list(detail['shape'])}, the ONNX "
                            f"model's is {array.dtype.name}{list(array.shape)}")
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    outputs = [interpreter.get_tensor(d["index"]).copy()
               for d in interpreter.get_output_details()]
    return interpreter.invoke, outputs


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _calibrate(fns: list[Callable[[], object]]) -> int:
    """Runs per block so that the slowest engine's block lasts about _REPEAT_SECONDS."""
    slowest = max(_median_ms(fn, 5) for fn in fns) / 1e3
    return int(min(_MAX_RUNS, max(_MIN_RUNS, _REPEAT_SECONDS / max(slowest, 1e-7))))


def _max_diff(ours: list[np.ndarray], theirs: list[np.ndarray]) -> float:
    diffs = [float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
             for a, b in zip(ours, theirs) if a.size and a.shape == b.shape]
    return max(diffs, default=float("inf"))


def bench_model(model: str | Path, shapes: dict | None = None, runs: int | None = None,
                repeats: int = 5, seed: int = 0, tflite: str | Path | None = None,
                target_name: str = "host", options=None) -> BenchResult:
    """Compile `model` for the host and time it against its peers on the same inputs.

    `tflite` names the model's LiteRT twin; by default a twin found by `litert_twin` is used.
    A TFLite `model` is its own twin, and onnxruntime, which cannot read it, sits out.
    `target_name`: a level of this machine's architecture that its CPU runs (x86-64-v3, ...;
    aarch64 on AArch64) instead of the host's own, so one machine times the kernels of a
    lower level beside the same peers. `options` (for that target) say how to compile: a
    tuning's schedules, say; the target's defaults when None.
    """
    from compiler.codegen.host import HostNet
    from compiler.codegen.peak import peak_flops, peak_int8_ops
    from compiler.codegen.targets import get_target, missing_on_this_cpu
    from compiler.driver import Options, compilation, is_quantized
    from compiler.frontends.load import is_tflite, load_model
    from compiler.frontends.onnx import load_onnx
    from compiler.inputs import random_inputs
    from compiler.stats import compute_stats

    if repeats < 1 or (runs is not None and runs < 1):
        raise KilnError("runs and repeats must be at least 1")
    path = Path(model)
    if path.is_file() and is_tflite(path.read_bytes()[:8]):
        if tflite is not None:
            raise KilnError(f"--tflite names the LiteRT twin of an ONNX model; {path.name} is a "
                            "TFLite model, which LiteRT runs itself")
        graph = load_model(path, shapes or {})
        feeds = random_inputs(graph, seed)
        ort_call, ort_out, twin = None, {}, path
    else:
        graph = load_onnx(str(model), shapes or {})
        feeds = random_inputs(graph, seed)
        ort_call, ort_out = _ort_engine(model, feeds)
        twin = Path(tflite) if tflite is not None else litert_twin(model)
    if twin is not None and not twin.is_file():
        raise KilnError(f"--tflite {twin}: no such file")
    target = get_target(target_name)
    if target.mcu or missing_on_this_cpu(target) or not target.triple.startswith(
            get_target("host").triple.split("-")[0]):
        raise KilnError(f"cannot time {target.name} code on this machine (its CPU is "
                        f"{cpu_model()}): bench --target times the levels this CPU runs "
                        "and counts Cortex-M cores' instructions under QEMU")
    options = options or Options(target=target_name)
    start = time.perf_counter()
    compiled = compilation(graph)
    compiled.net(options)
    compile_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as folder:
        compiled.bundle(folder, options)
        hosted = HostNet.from_bundle(folder)
        try:
            ours = hosted.run(feeds)
            ours_list = [ours[v.name] for v in graph.outputs]
            engines: dict[str, Callable[[], object]] = {KILN: hosted.call}
            diffs = {}
            if ort_call is not None:
                engines[ORT] = ort_call
                diffs[ORT] = _max_diff(ours_list, [ort_out[v.name] for v in graph.outputs
                                                   if v.name in ort_out])
            if twin is not None:
                engines[LITERT], litert_out = _litert_engine(twin, feeds)
                diffs[LITERT] = _max_diff(ours_list, litert_out)
            hosted.run(feeds)  # inputs in place again for the timed calls
            fns = list(engines.values())
            if runs is None:
                runs = _calibrate(fns)
            for fn in fns:  # warm-up: caches, page faults, lazy setup
                _median_ms(fn, max(3, runs // 10))
            medians: dict[str, list[float]] = {name: [] for name in engines}
            names = list(engines)
            for block in range(repeats):
                for k in range(len(names)):
                    name = names[(block + k) % len(names)]
                    medians[name].append(_median_ms(engines[name], runs))
        finally:
            hosted.close()
    int8 = is_quantized(graph)
    peak = peak_int8_ops(target) if int8 else peak_flops(target)
    return BenchResult(Path(model).name, target.name, target.triple, compile_s, runs, repeats,
                       medians, diffs, compute_stats(graph).macs, peak / 1e9,
                       twin.name if twin is not None else "", cpu_model(), target.kernel_level,
                       "int8" if int8 else "float32")
