"""The compile driver: one home for the chain from a loaded graph to a bundle.

Given a graph and a pass pipeline, a `Compilation` yields every stage a caller may want, each
computed once, on first request: the pass records, the final graph, the graph prepared for code
generation (a recorded stage, shown by the Passes panel like any pass), the memory plan (with
its schedule and low-level IR) per alignment and arena option, the kernel map the code views
read, the compiled network per target and the bundle. `compilation(graph, pipeline)` returns the
same object for the same graph and pipeline, so the CLI, every GUI panel and the benchmarks
share one computation and always show what the export writes.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from compiler.codegen.build import CompiledNet, build_net, check_net_name
from compiler.codegen.bundle import report, write_bundle
from compiler.codegen.explain import KernelMap
from compiler.codegen.targets import Board, DotProduct, Target, get_target
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph
from compiler.ir.hashing import graph_hash
from compiler.lowir.passes import ALL_LOWERING, check_lowering_names, effective_lowering
from compiler.memory.report import MemoryPlan, plan_memory
from compiler.memory.stages import LoweringRecord, lowering_records
from compiler.passes.pipeline import PassConfig, Pipeline, default_pipeline
from compiler.passes.prepare import PREPARE_PASS
from compiler.passes.runner import PassRecord, PipelineResult, run_pipeline

# (alignment, inputs and outputs in the arena, lowering passes, int8 residual in the store).
PlanKey = tuple[int, bool, frozenset[str], bool]


@dataclass(frozen=True)
class Options:
    """How to compile: target, entry-point name, memory layout and weight placement.

    Attributes:
        target: A target or board name (`compiler.codegen.targets`).
        name: Entry point and file prefix of the bundle (a C identifier).
        alignment: Region and buffer alignment; None takes the target's (64 on hosted CPUs,
            16 on microcontrollers).
        io_in_arena: Inputs and outputs live in the activation arena (their space is reused).
        weights: "embedded" (read-only data in the object) or "external" (a blob to place).
        separate_kernels: Keep every kernel a function of its own instead of inlining it into
            the entry point, so per-layer instruction counts can tell its code apart.
        timed_kernels: Kernels kept apart and each call's counter advance added up in
            `NAME_layer_ticks`: the time-stamp counter on a host (the per-layer host time
            overlay), the port's `kiln_port_ticks` on a microcontroller (the runner firmware's
            per-layer timing on the board).
        fast_compile: Compile in a fraction of LLVM's usual time for code a few percent
            slower (compact kernels): for a network run once over a data set, as profiling
            does.
        disabled_lowering: Lowering passes switched off (`compiler.lowir.passes`): the memory
            plan, the code and the bundle are made without them.
        lean_weights: On DSP cores (Cortex-M4/M7/M33), keep int8 weights as bytes, widened in
            the kernel (half their flash), or store them as int16 pairs (fewer instructions);
            None takes the target's default (`Target.lean_weights`).
        schedules: Tuned kernel schedules, (workload key, ((knob, value), ...)) pairs
            (`compiler.tuning.log.best_schedules`); a kernel not named takes the defaults.
        tuning_log: The SHA-256 of the tuning log the schedules were chosen from ("" for
            none), which the bundle's build file records.
    """

    target: str = "host"
    name: str = "net"
    alignment: int | None = None
    io_in_arena: bool = False
    weights: str = "embedded"
    separate_kernels: bool = False
    timed_kernels: bool = False
    fast_compile: bool = False
    disabled_lowering: frozenset[str] = frozenset()
    lean_weights: bool | None = None
    schedules: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    tuning_log: str = ""

    def resolved_target(self) -> Target:
        """The Target object (KilnError for an unknown name), with the weight layout asked."""
        target = get_target(self.target)
        if self.lean_weights is None or target.int8_dot is not DotProduct.DSP:
            return target
        return replace(target, lean_weights=self.lean_weights)

    def resolved_alignment(self) -> int:
        """The alignment in force: the one asked for, else the target's."""
        if self.alignment is None:
            return self.resolved_target().alignment
        if self.alignment < 1 or self.alignment & (self.alignment - 1):
            raise KilnError(f"alignment {self.alignment} must be a power of two")
        return self.alignment

    def check(self) -> Options:
        """Self, after refusing what cannot compile (before any work starts)."""
        self.resolved_alignment()
        check_net_name(self.name)
        check_lowering_names(self.disabled_lowering)
        return self

    def lowering(self) -> frozenset[str]:
        """The lowering passes that can apply for this target and these switches."""
        return effective_lowering(ALL_LOWERING - check_lowering_names(self.disabled_lowering),
                                  self.resolved_target().int8_residual_in_store)


def pipeline_key(pipeline: Pipeline) -> str:
    """A pipeline as canonical text: equal pipelines, equal keys."""
    return json.dumps(pipeline.to_json(), sort_keys=True)


def prepare_stage() -> Pipeline:
    """The stage the driver runs after every pipeline, as a one-entry pipeline."""
    return Pipeline([PassConfig(PREPARE_PASS, note="float kernels read float weights")])


BUILD_FORMAT = "kiln-build"
BUILD_VERSION = 1
FLOAT_LAYER_OPS = ("Conv", "Gemm", "MatMul", "ConvTranspose", "FullyConnected")


def build_file_name(name: str) -> str:
    """The file in every bundle that says how to build it again (NET.build.json)."""
    return f"{name}.build.json"


@dataclass(frozen=True)
class BuildRequest:
    """Everything a bundle is built from besides the model file: `kiln compile --build` input.

    `options` are the compile driver's (target, name, layout, lowering switches, alignment);
    `board` the budget checked (a known board or a user's own); `pipeline` a pipeline's JSON
    (None: the default one); `recipe` the quantization recipe's JSON (None: the model is
    compiled as it is); `shapes` the `--shape` overrides the model was loaded with;
    `model_hash` the content hash of the float graph the bundle comes from.
    """

    options: Options = Options()
    board: Board | None = None
    pipeline: dict | None = None
    recipe: dict | None = None
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    model_hash: str = ""

    def to_json(self) -> dict:
        """The request as plain JSON types (what NET.build.json holds besides the version)."""
        o = self.options
        return {"target": o.target, "name": o.name, "alignment": o.alignment,
                "io_in_arena": o.io_in_arena, "weights": o.weights,
                "disabled_lowering": sorted(o.disabled_lowering),
                "weight_layout": {None: "auto", True: "int8", False: "int16"}[o.lean_weights],
                "separate_kernels": o.separate_kernels,
                "board": None if self.board is None else board_json(self.board),
                "pipeline": self.pipeline, "recipe": self.recipe,
                "shapes": {k: list(v) for k, v in sorted(self.shapes.items())},
                "model_hash": self.model_hash,
                **({"tuning": {"log_sha256": o.tuning_log,
                               "schedules": {k: dict(v) for k, v in o.schedules}}}
                   if o.schedules or o.tuning_log else {})}

    def file_bytes(self) -> bytes:
        """NET.build.json: the request, the Kiln that built it; the same bytes on a rebuild."""
        from compiler.version import kiln_version

        doc = {"format": BUILD_FORMAT, "version": BUILD_VERSION, "kiln": kiln_version(),
               "request": self.to_json()}
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def board_json(board: Board) -> dict:
    """A board as JSON (a user's board file has the same keys)."""
    return {"name": board.name, "target": board.target, "flash": board.flash, "ram": board.ram,
            "qemu_machine": board.qemu_machine, "flash_origin": board.flash_origin,
            "ram_origin": board.ram_origin, "cflags": list(board.cflags)}


def read_build_file(path: str | Path) -> tuple[BuildRequest, str]:
    """(request, Kiln version that wrote it) of a NET.build.json; one sentence when unusable."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise KilnError(f"{path}: cannot read the build file ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KilnError(f"{path}: not a JSON build file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != BUILD_FORMAT:
        raise KilnError(f"{path}: not a Kiln build file (NET.build.json of a bundle)")
    version = doc.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > BUILD_VERSION:
        raise KilnError(f"{path}: build file version {version} was written by a newer Kiln; "
                        f"this one reads version {BUILD_VERSION}")
    if version != BUILD_VERSION:
        raise KilnError(f"{path}: build file version {version!r} is not {BUILD_VERSION}")
    try:
        return _request_of(doc["request"], str(path)), str(doc.get("kiln", "unknown"))
    except (KeyError, TypeError, ValueError) as exc:
        reason = f"no {exc} entry" if isinstance(exc, KeyError) else str(exc)
        raise KilnError(f"{path}: malformed build file: {reason}") from None


def _request_of(doc: dict, where: str) -> BuildRequest:
    from compiler.codegen.board_file import board_from_json

    layouts = {"auto": None, "int8": True, "int16": False}
    if doc["weight_layout"] not in layouts:
        raise ValueError(f"weight_layout {doc['weight_layout']!r} is not auto, int8 or int16")
    if doc["weights"] not in ("embedded", "external"):
        raise ValueError(f"weights {doc['weights']!r} is not embedded or external")
    alignment = doc.get("alignment")
    if alignment is not None and (isinstance(alignment, bool) or not isinstance(alignment, int)):
        raise ValueError("alignment must be a whole number or null")
    options = Options(str(doc["target"]), str(doc["name"]), alignment,
                      bool(doc["io_in_arena"]), doc["weights"],
                      separate_kernels=bool(doc.get("separate_kernels", False)),
                      disabled_lowering=frozenset(map(str, doc.get("disabled_lowering", []))),
                      lean_weights=layouts[doc["weight_layout"]],
                      **_tuning_of(doc.get("tuning"))).check()
    options.resolved_target()
    board = doc.get("board")
    board = None if board is None else board_from_json(board, f"{where}'s board")
    pipeline = doc.get("pipeline")
    if pipeline is not None:
        Pipeline.from_json(pipeline, f"{where}'s pipeline")
    recipe = doc.get("recipe")
    if recipe is not None and not isinstance(recipe, dict):
        raise ValueError("recipe must be an object or null")
    shapes = doc.get("shapes", {})
    if not isinstance(shapes, dict) or not all(
            isinstance(v, list) and all(isinstance(d, int) and d >= 0 for d in v)
            for v in shapes.values()):
        raise ValueError("shapes must map inputs to lists of dimensions")
    return BuildRequest(options, board, pipeline, recipe,
                        {str(k): tuple(v) for k, v in shapes.items()}, str(doc["model_hash"]))


def _tuning_of(doc) -> dict:
    """The Options fields of a build file's `tuning` entry (absent: untuned)."""
    if doc is None:
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("schedules", {}), dict):
        raise ValueError("tuning must hold a log_sha256 and a schedules object")
    schedules = []
    for key, knobs in sorted(doc.get("schedules", {}).items()):
        if not isinstance(knobs, dict):
            raise ValueError(f"tuning schedule {key!r} must be an object")
        schedules.append((str(key), tuple(sorted(knobs.items()))))
    return {"schedules": tuple(schedules), "tuning_log": str(doc.get("log_sha256", ""))}


def float_fallbacks(compiled: Compilation) -> list[tuple[str, int]]:
    """(layer, bytes of its float weights) of each weighted layer left float in an int8 model.

    Empty for a float model, whose layers are all meant to be float.
    """
    if not is_quantized(compiled.graph):
        return []
    sources = {n.id: n for n in compiled.graph.nodes}
    found = []
    for node in compiled.prepared.nodes:  # float kernels read float weights there
        if node.op not in FLOAT_LAYER_OPS or node.outputs[0].type.dtype != "float32":
            continue
        named = [sources[i] for i in node.provenance if i in sources]
        layer = next((n.name for n in named if n.op == node.op), node.name)
        weights = sum(int(np.asarray(v.data).nbytes) for v in node.inputs
                      if isinstance(v, Constant) and v.type.dtype == "float32")
        found.append((layer, weights))
    return found


class Compilation:
    """Every stage of compiling one graph with one pipeline, computed lazily and kept.

    Stages are computed under a lock, so GUI workers asking for the same stage at once wait
    for one computation instead of running it twice. The input graph is never modified.
    """

    def __init__(self, graph: Graph, pipeline: Pipeline | None = None):
        self.graph = graph
        self.pipeline = Pipeline.from_json((pipeline or default_pipeline()).to_json())
        self._lock = threading.RLock()
        self._result: PipelineResult | None = None
        self._seed = 0
        self._final: Graph | None = None
        self._prepared: Graph | None = None
        self._plans: dict[PlanKey, MemoryPlan] = {}
        self._kernels: dict[PlanKey, KernelMap] = {}
        self._nets: dict[Options, CompiledNet] = {}

    # -- passes -------------------------------------------------------------------------------

    def passes(self, *, snapshots: bool = False, verify: bool = False, seed: int = 0,
               diffs: bool = True, on_record: Callable[[PassRecord], None] | None = None
               ) -> PipelineResult:
        """The pipeline's records followed by the prepare stage's; `graph` is the prepared one.

        A kept result serves any request it satisfies (one with snapshots serves one without);
        otherwise the pipeline runs again. `on_record` sees every record, kept or new. Without
        `diffs` the records lack the ids each pass touched (enough to compile).
        """
        diffs = diffs or snapshots or verify
        with self._lock:
            known = self._result
            if known is not None and self._serves(known, snapshots, verify, seed, diffs):
                for record in known.records:
                    if on_record is not None:
                        on_record(record)
                return known
            whole = run_pipeline(self.graph, self.whole_pipeline(), snapshots=snapshots,
                                 verify=verify, seed=seed, diffs=diffs, on_record=on_record,
                                 keep_after=len(self.pipeline.enabled()))
            if self._final is None:  # later runs recompute the same graphs: keep the first
                self._final, self._prepared = whole.kept, whole.graph
            self._result, self._seed = whole, seed
            return whole

    def whole_pipeline(self) -> Pipeline:
        """The pipeline's enabled passes, then the prepare stage: what one run executes."""
        return Pipeline(self.pipeline.enabled() + prepare_stage().passes,
                        requant=self.pipeline.requant)

    @staticmethod
    def _snapshots(result: PipelineResult) -> bool:
        return all(r.snapshot is not None for r in result.records)

    def _serves(self, result: PipelineResult, snapshots: bool, verify: bool, seed: int,
                diffs: bool) -> bool:
        if (snapshots and not self._snapshots(result)) or (diffs and not result.diffs):
            return False
        verified = all(r.matches is not None for r in result.records)
        return not verify or (verified and self._seed == seed)

    def stage(self, stage: str | int) -> Graph:
        """The graph after a stage.

        A stage is 'final', 'loaded', a pass (NAME, or NAME#K for its K-th run, with
        `prepare_for_codegen` among them) or a count N of first passes.
        """
        if stage == "final":
            return self.final
        if stage in ("loaded", 0, "0"):
            return self.graph
        if isinstance(stage, str) and stage.isdigit():
            stage = int(stage)
        records = self.passes(snapshots=True).records
        if isinstance(stage, int):
            if stage < 0:
                raise KilnError(f"stage {stage}: a count of passes cannot be negative")
            return records[min(stage, len(records)) - 1].snapshot
        return records[self.whole_pipeline().stage_index(stage)].snapshot

    @property
    def reference(self) -> Graph:
        """The graph whose interpreted outputs are the model's own answer.

        A quantized model's Quantize/Dequantize pairs, run in float, only approximate the
        integer arithmetic its requantization rule defines (TFLite Micro rounds twice and so
        parts from one float rounding near a half step; onnxruntime's integer path multiplies
        its accumulator in float32). `to_integer` gives that arithmetic and every later stage
        keeps it exactly, so for such a model this is the final graph: what TFLite Micro,
        onnxruntime's integer path and the compiled code compute. A float model's is the graph
        as loaded.
        """
        return self.final if is_quantized(self.graph) else self.graph

    @property
    def records(self) -> list[PassRecord]:
        """One record per pass run, the prepare stage last."""
        return self.passes().records

    @property
    def final(self) -> Graph:
        """The graph after the pipeline (what `kiln run --stage final` runs)."""
        with self._lock:
            if self._final is None:
                self.passes(diffs=False)
            return self._final

    @property
    def prepared(self) -> Graph:
        """The final graph after the prepare stage: what memory is planned and code made for."""
        with self._lock:
            if self._prepared is None:
                self.passes(diffs=False)
            return self._prepared

    # -- memory and code ----------------------------------------------------------------------

    @staticmethod
    def _plan_key(options: Options) -> PlanKey:
        """What a memory plan depends on: the plan and its kernel map are cached by it alike."""
        return (options.resolved_alignment(), options.io_in_arena, options.lowering(),
                options.resolved_target().int8_residual_in_store)

    def _plan_of(self, key: PlanKey) -> MemoryPlan:
        with self._lock:
            if key not in self._plans:
                alignment, io_in_arena, enabled, int8_residual = key
                self._plans[key] = plan_memory(self.prepared, alignment, io_in_arena,
                                               int8_residual=int8_residual, enabled=enabled)
            return self._plans[key]

    def plan(self, options: Options = Options()) -> MemoryPlan:
        """The memory plan (schedule, low-level IR, regions, arena) for these options."""
        return self._plan_of(self._plan_key(options))

    def lowering(self, options: Options = Options()) -> list[LoweringRecord]:
        """One record per lowering pass for these options; the last one's plan is `plan`'s."""
        alignment, io_in_arena, _, int8_residual = self._plan_key(options)
        disabled = check_lowering_names(options.disabled_lowering)

        def plan_of(enabled: frozenset[str]) -> MemoryPlan:
            return self._plan_of((alignment, io_in_arena,
                                  effective_lowering(enabled, int8_residual), int8_residual))

        with self._lock:
            return lowering_records(plan_of, disabled, int8_residual,
                                    options.resolved_target().name)

    def kernels(self, options: Options = Options()) -> KernelMap:
        """The kernels of the plan for these options, and each kernel's code per target."""
        key = self._plan_key(options)
        with self._lock:
            if key not in self._kernels:
                self._kernels[key] = KernelMap(self.prepared, self.plan(options))
            return self._kernels[key]

    def net(self, options: Options = Options()) -> CompiledNet:
        """The network compiled for `options.target` (object, I/O map, kernels)."""
        options = options.check()
        key = replace(options, alignment=options.resolved_alignment())
        with self._lock:
            if key not in self._nets:
                self._nets[key] = build_net(self.prepared, self.plan(key),
                                            options.resolved_target(), options.name,
                                            options.weights, options.separate_kernels,
                                            options.fast_compile, options.timed_kernels,
                                            dict((k, dict(v)) for k, v in options.schedules))
            return self._nets[key]

    def layout_that_fits(self, options: Options, board: Board | None) -> tuple[Options, str]:
        """`options`, with int8 weights when int16 pairs would not fit `board`'s flash.

        Only when the options leave the layout to the target and its automatic choice
        (`auto_lean_weights`) stored pairs; returns the options and a sentence saying why the
        layout changed ("" when it did not).
        """
        if (board is None or options.lean_weights is not None
                or options.resolved_target().int8_dot is not DotProduct.DSP):
            return options, ""
        net = self.net(options)
        if net.target.lean_weights or report(net, board)["board"]["flash_used"] <= board.flash:
            return options, ""
        lean = replace(options, lean_weights=True)
        used = report(self.net(lean), board)["board"]["flash_used"]
        if used > board.flash:
            return options, ""  # neither fits: the budget warning says by how much
        return lean, (f"int8 weights kept as bytes (--weight-layout int8): int16 pairs would "
                      f"not fit {board.name}'s flash; this way {used:,} B of {board.flash:,} B")

    def bundle(self, folder: str | Path, options: Options = Options(),
               board: Board | None = None, *, force: bool = False,
               extra: dict[str, bytes] | None = None,
               check: Callable[[], None] | None = None) -> tuple[list[Path], dict]:
        """Write the bundle into `folder` whole; returns its files and its report.

        `force`, `extra` and `check` are `write_bundle`'s: replace another bundle, more files
        to write with it, a last cancel point before the swap.
        """
        net = self.net(options)
        return (write_bundle(net, folder, board, force=force, extra=extra, check=check),
                report(net, board))

    def export(self, folder: str | Path, request: BuildRequest, *, force: bool = False,
               extra: dict[str, bytes] | None = None,
               check: Callable[[], None] | None = None,
               report_doc: dict | None = None) -> tuple[list[Path], dict, str]:
        """Write the bundle `request` asks for, with its NET.build.json; (files, report, note).

        The one path of `kiln compile` and the GUI's export, so both write the same bytes.
        A Cortex-M bundle gets the firmware folder that builds and runs it (`firmware_of`).
        The weight layout may change to fit the board (`layout_that_fits`); `note` says why.
        The report is computed once (`report_doc` when the caller checked it already).
        """
        options, note = self.layout_that_fits(request.options.check(), request.board)
        if not request.model_hash:
            request = replace(request, model_hash=graph_hash(self.graph))
        net = self.net(options)
        firmware, skipped = firmware_of(net, request.board, folder)
        files = {**(extra or {}), build_file_name(options.name): request.file_bytes(),
                 **firmware}
        doc = report_doc if report_doc is not None else report(net, request.board)
        written = write_bundle(net, folder, request.board, force=force, extra=files,
                               check=check, report_doc=doc)
        return written, doc, "; ".join(n for n in (note, skipped) if n)


def firmware_board(options: Options, board: Board | None) -> Board | None:
    """The emulated board an export's firmware is linked for; None when it has no firmware."""
    target = options.resolved_target()
    if not target.mcu:
        return None
    from compiler.mcu.firmware_folder import firmware_board as emulated

    return emulated(target.name, board)


def firmware_of(net: CompiledNet, board: Board | None, folder: str | Path
                ) -> tuple[dict[str, bytes], str]:
    """A Cortex-M bundle's main.c, Makefile, README, linker script, start-up and input.

    Nothing for a hosted bundle (its example comes with the bundle) or a core no emulated
    board runs (Cortex-M0+, RISC-V). Nor when `folder` holds a main.c, Makefile or README
    of the user's (a firmware project the bundle goes into): those are never replaced, and a
    firmware folder missing some of its files would not build; the note says so.
    """
    if not net.target.mcu:
        return {}, ""
    from compiler.codegen.bundle_folder import survey
    from compiler.mcu.firmware_folder import FILES, firmware_files
    from compiler.mcu.firmware_folder import firmware_board as emulated

    runs = emulated(net.target.name, board)
    if runs is None:
        return {}, ""
    theirs = [name for name in survey(folder).others if name in FILES]
    if theirs:
        return {}, (f"no firmware written beside the bundle: the folder holds {', '.join(theirs)}"
                    " of your own; export into a folder without them to get main.c, a "
                    "Makefile and a README that build and run it under QEMU")
    return firmware_files(net, runs, board), ""


_LOCK = threading.Lock()
# (id of the graph, pipeline key) -> Compilation, for as long as someone holds it. A Compilation
# holds its graph, so the id cannot be reused meanwhile; held weakly here, a graph nobody uses
# any more is freed with its stages (the document keeps the current one alive).
_CACHE: weakref.WeakValueDictionary[tuple[int, str], Compilation] = \
    weakref.WeakValueDictionary()


def is_quantized(graph: Graph) -> bool:
    """Whether `graph` holds a Quantize or Dequantize pair (a QDQ or QOperator model)."""
    return any(node.op in _QUANTIZERS for node in graph.nodes)


_QUANTIZERS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})


def compilation(graph: Graph, pipeline: Pipeline | None = None) -> Compilation:
    """The Compilation of `graph` with `pipeline` (the default one when None), shared.

    Every caller asking about the same graph and pipeline while one of them still holds the
    Compilation gets the same object, hence the same stages.
    """
    pipeline = pipeline or default_pipeline()
    key = (id(graph), pipeline_key(pipeline))
    with _LOCK:
        known = _CACHE.get(key)
        if known is None or known.graph is not graph:
            known = Compilation(graph, pipeline)
            _CACHE[key] = known
        return known


def compile_graph(graph: Graph, target: Target | str, name: str = "net",
                  alignment: int | None = None, io_in_arena: bool = False,
                  weights: str = "embedded", fast_compile: bool = False,
                  disabled_lowering: frozenset[str] = frozenset()) -> CompiledNet:
    """Compile a graph that already went through a pipeline (only the prepare stage runs).

    A Target object that is not the registered target of its name (one with another CPU's
    vector width, to test that CPU's kernel shapes on this host) is compiled as given, with
    the registered target's memory plan.
    """
    target_name = target if isinstance(target, str) else target.name
    options = Options(target_name, name, alignment, io_in_arena, weights,
                      fast_compile=fast_compile, disabled_lowering=frozenset(disabled_lowering))
    known = compilation(graph, Pipeline([]))
    if isinstance(target, Target) and target != get_target(target_name):
        options.check()
        return build_net(known.prepared, known.plan(options), target, name, weights,
                         fast_compile=fast_compile)
    return known.net(options)
