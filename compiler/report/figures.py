"""The figures of an analysis report, taken from the code behind `kiln memory`, `compile`, `bench`.

Nothing here measures anew: the memory plan is the driver's (`kiln memory --json`), the sizes
are the bundle report's (`kiln compile --json`), the instruction counts are
`compiler.layer_instructions.count_instructions` (`kiln bench --target`), so every total in
the report equals what those commands print for the same model and target. Per layer it adds
what the prepared graph says of the layer's nodes (shapes, MACs, weight and output bytes) and,
when a profile quantized the model, each layer's SQNR against float on held-out samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from compiler import ops
from compiler.codegen.build import CompiledNet
from compiler.codegen.bundle import report as bundle_report
from compiler.codegen.targets import Board, get_target
from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node
from compiler.stats import compute_stats

DEFAULT_CLOCK_MHZ = 100.0  # a round figure; the report says which clock it assumed
EVAL_SAMPLES = 64  # held-out samples the SQNR is measured on (the interpreter runs each twice)
TIME_NOTE = ("estimated time = executed instructions / clock, assuming one instruction per "
             "cycle: an instruction-count estimate, not a cycle-accurate measurement (QEMU "
             "models neither dual issue, wait states nor memory latency)")

Report_progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Layer:
    """One row of the per-layer table: a kernel as `kiln bench --target` lists it.

    Attributes:
        label: The kernel's symbol.
        op: What it computes ("QLinearConv+QLinearAdd (one row)", a chain's driver).
        nodes: Names of the prepared graph's nodes it runs; () for a chain's driver.
        inputs: Shapes of the runtime tensors it reads (its first node's).
        outputs: Shapes of the tensors it writes (its last node's).
        dtype: Element type of its outputs ("int8", "float32", "" without nodes).
        macs: Multiply-accumulates of its nodes.
        weight_bytes: Constant bytes its nodes read, as stored.
        float_weight_bytes: The same weights as float32 (4 bytes an element).
        activation_bytes: Bytes of the tensors it writes, whole.
        instructions: Executed instructions on the emulated core, None when not counted.
        sqnr_db: SQNR of its output against float, None when not measured.
    """

    label: str
    op: str
    nodes: tuple[str, ...]
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]
    dtype: str
    macs: int
    weight_bytes: int
    float_weight_bytes: int
    activation_bytes: int
    instructions: int | None = None
    sqnr_db: float | None = None

    def per_mac(self) -> float | None:
        """Executed instructions per multiply-accumulate, None uncounted or without MACs."""
        return None if self.instructions is None or not self.macs else self.instructions / self.macs

    def time_us(self, clock_mhz: float) -> float | None:
        """Estimated microseconds at `clock_mhz` (one instruction a cycle), None uncounted."""
        return None if self.instructions is None else self.instructions / clock_mhz


@dataclass(frozen=True)
class Instructions:
    """The whole-network count (`kiln bench --target`'s) and what lies outside every layer.

    `outside` (the per-layer build's entry point and calls) and `inlined` (the shipped build
    minus the per-layer build) make the layers' sum equal `total`.
    """

    target: str
    machine: str
    total: int
    outside: int
    inlined: int
    note: str


@dataclass
class Quantization:
    """What the report says of integer arithmetic: the profile's choices and the measured loss.

    Attributes:
        origin: "profile" (quantized here from a Kiln profile) or "model" (an integer model).
        dtypes: Tensor count per element type of the reported graph.
        per_tensor: Quantized tensors with one scale.
        per_channel: Quantized tensors with a scale per channel.
        method: Calibration method (with a profile).
        schema: Activations' integer form (with a profile).
        profile: The profile's model, data, bins, equalization and hand edits.
        samples: Held-out samples the SQNR was measured on (0 when not measured).
        data: Where they came from.
        output_sqnr: Output tensor -> SQNR in dB.
        top1_agreement: Fraction of samples whose top class matches float.
        tensors: Activation -> SQNR in dB.
        float_layers: (layer, bytes of float weights) of each layer left float (a warning).
    """

    origin: str
    dtypes: dict[str, int]
    per_tensor: int
    per_channel: int
    method: str = ""
    schema: str = ""
    profile: dict = field(default_factory=dict)
    samples: int = 0
    data: str = ""
    output_sqnr: dict[str, float] = field(default_factory=dict)
    top1_agreement: float | None = None
    tensors: dict[str, float] = field(default_factory=dict)
    float_layers: list[tuple[str, int]] = field(default_factory=list)  # (layer, float bytes)


@dataclass
class Report:
    """Everything one report shows; `to_json` is `kiln report --json`."""

    model: str
    target: str
    triple: str
    mcu: bool
    clock_mhz: float
    summary: dict
    bundle: dict
    memory: dict
    layers: list[Layer]
    instructions: Instructions | None
    passes: list[dict]
    quantization: Quantization | None
    absent: list[str]  # one sentence per part the report could not fill, and why

    def totals(self) -> dict:
        """Column totals of the layer table (instructions: the whole network's count)."""
        def total(key: str) -> int:
            return sum(getattr(layer, key) for layer in self.layers)
        return {"macs": total("macs"), "weight_bytes": total("weight_bytes"),
                "float_weight_bytes": total("float_weight_bytes"),
                "instructions": None if self.instructions is None else self.instructions.total}

    def to_json(self) -> dict:
        """Plain JSON types; an infinite SQNR (a tensor quantized exactly) as "inf"."""
        doc = {"model": self.model, "target": self.target, "triple": self.triple,
               "clock_mhz": self.clock_mhz, "time_note": TIME_NOTE, "summary": self.summary,
               "bundle": self.bundle, "memory": self.memory,
               "layers": [{**asdict(la), "time_us": la.time_us(self.clock_mhz)}
                          for la in self.layers],
               "totals": self.totals(),
               "instructions": None if self.instructions is None else asdict(self.instructions),
               "passes": self.passes,
               "quantization": None if self.quantization is None else asdict(self.quantization),
               "absent": self.absent}
        return _finite(doc)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# -- per layer ------------------------------------------------------------------------------------

def _node_figures(nodes: list[Node]) -> dict:
    """Shapes, types, MACs and bytes of one layer's prepared nodes."""
    macs = weights = floats = 0
    seen: set[int] = set()  # a constant two of the layer's nodes read counts once
    for node in nodes:
        try:
            macs += ops.lookup(node.op).count_macs(node) or 0
        except KilnError:
            pass  # an operator without a MAC count does no multiply-accumulate work
        for value in node.inputs:
            if isinstance(value, Constant) and id(value) not in seen:
                seen.add(id(value))
                weights += value.data.nbytes
                floats += 4 * value.data.size
    if not nodes:
        return {"inputs": (), "outputs": (), "dtype": "", "macs": 0, "weight_bytes": 0,
                "float_weight_bytes": 0, "activation_bytes": 0}
    first, last = nodes[0], nodes[-1]
    outputs = [v for v in last.outputs if v is not None]
    return {"inputs": tuple(tuple(v.type.shape) for v in first.inputs
                            if v is not None and not isinstance(v, Constant)),
            "outputs": tuple(tuple(v.type.shape) for v in outputs),
            "dtype": "/".join(sorted({v.type.dtype for v in outputs})),
            "macs": macs, "weight_bytes": weights, "float_weight_bytes": floats,
            "activation_bytes": sum(v.type.nbytes for v in outputs)}


def kernel_units(net: CompiledNet) -> list[tuple[str, str, tuple[str, ...]]]:
    """(symbol, op, node names) per layer, grouped as `compiler.mcu.counting.count_net` does.

    For targets nobody counts: a shared kernel once, a chain's driver as a row without nodes,
    the one-row kernels of one chain layer as one row.
    """
    units: list[tuple[str, str, tuple[str, ...]]] = []
    seen: set[str] = set()
    rows: set[tuple[str, tuple[str, ...]]] = set()
    for kernel in net.kernels:
        if kernel.symbol in seen:
            continue
        seen.add(kernel.symbol)
        if any(k.part_of == kernel.symbol for k in net.kernels):
            units.append((kernel.symbol, kernel.op, ()))  # a chain's driver
            continue
        key = (kernel.part_of, kernel.nodes)
        if kernel.part_of and key in rows:
            continue
        if kernel.part_of:
            rows.add(key)
        units.append((kernel.symbol, kernel.op, tuple(kernel.nodes)))
    return units


def _layers(prepared: Graph, units, counts: dict[str, int] | None) -> list[Layer]:
    by_name = {n.name: n for n in prepared.nodes}
    layers = []
    for symbol, op, names in units:
        nodes = [by_name[n] for n in names if n in by_name]
        layers.append(Layer(symbol, op, tuple(names), **_node_figures(nodes),
                            instructions=None if counts is None else counts[symbol]))
    return layers


def _counted_units(compiled: Compilation, target: str, progress: Report_progress
                   ) -> tuple[list, dict[str, int], Instructions]:
    """The layers and counts of `kiln bench --target` (no CMSIS-NN peer: it is not reported)."""
    from compiler.layer_instructions import INLINED, OUTSIDE, count_instructions

    metric = count_instructions(compiled, target, report=progress, peer=False)
    extra = {r.label: int(r.value) for r in metric.rows if r.label in (OUTSIDE, INLINED)}
    rows = [r for r in metric.rows if r.label not in (OUTSIDE, INLINED)]
    units = [(r.label, r.op.removesuffix(" driver") if not r.parts else r.op, r.parts)
             for r in rows]
    counts = {r.label: int(r.value) for r in rows}
    machine = metric.note.split("under QEMU ", 1)[1].split(";", 1)[0]
    return units, counts, Instructions(target, machine, int(metric.total), extra[OUTSIDE],
                                       extra[INLINED], metric.note)


def counting_absent(target: str) -> str | None:
    """Why instructions cannot be counted for `target` here, or None when they can."""
    from compiler.harness.cortex_m_bench import BENCH_TARGETS
    from compiler.mcu import firmware

    if target not in BENCH_TARGETS:
        return (f"Instructions per layer: not counted; they are counted under QEMU on an "
                f"emulated Cortex-M ({', '.join(BENCH_TARGETS)}), and {target} is not one.")
    missing = firmware.missing_tools()
    if missing:
        return (f"Instructions per layer: not counted; counting needs {' and '.join(missing)} "
                f"(Debian packages: {firmware.PACKAGES}).")
    return None


# -- passes ---------------------------------------------------------------------------------------

def pass_list(compiled: Compilation) -> list[dict]:
    """Per pass run: what it is, why it sits there, and what it changed."""
    from compiler.passes import get_pass

    records = compiled.passes().records
    configs = compiled.whole_pipeline().passes
    notes = [c.note for c in configs] if len(configs) == len(records) else []
    out = []
    for index, record in enumerate(records):
        try:
            doc = get_pass(record.name).doc
        except KilnError:
            doc = ""
        out.append({"name": record.name, "category": record.category,
                    "changed": record.changed, "iterations": record.iterations,
                    "nodes_before": record.nodes_before, "nodes_after": record.nodes_after,
                    "added": len(record.added), "removed": len(record.removed),
                    "modified": len(record.modified),
                    "why_here": notes[index] if notes else "",
                    "does": doc.split("\n\n", 1)[0].replace("\n", " ")})
    return out


# -- the report -----------------------------------------------------------------------------------

def collect_report(compiled: Compilation, model: str, target: str = "host",
                   board: Board | None = None, clock_mhz: float = DEFAULT_CLOCK_MHZ,
                   quantization: Quantization | None = None,
                   sqnr_of: Callable[[Graph], dict[str, float]] | None = None,
                   progress: Report_progress | None = None, count: bool = True,
                   options: Options | None = None) -> Report:
    """Gather the report of `compiled` (its graph as the user has it) on `target`.

    `quantization` is the profile's summary when a profile quantized the graph (else the
    graph's own integer form is summarized); `sqnr_of(graph)` gives each prepared node's
    output SQNR. `progress(fraction, text)` hears each stage and may raise to cancel.
    Without `count`, instructions are not counted even where they could be. `options` plan
    memory and compile (the workbench's arena choice); `target`'s defaults when None, as the
    commands use them.
    """
    progress = progress or (lambda fraction, text: None)
    if clock_mhz <= 0 or not math.isfinite(clock_mhz):
        raise KilnError(f"the clock must be a positive number of MHz, not {clock_mhz}")
    resolved = get_target(target)
    if board is not None and board.target != resolved.name:
        raise KilnError(f"board {board.name} has a {board.target}, not a {resolved.name}")
    absent: list[str] = []
    progress(0.0, "Running the pass pipeline")
    passes = pass_list(compiled)
    options = options or Options(resolved.name)
    progress(0.1, f"Planning memory for {resolved.name}")
    memory = compiled.plan(options).to_json()
    progress(0.15, f"Compiling for {resolved.name}")
    net = compiled.net(options)
    bundle = bundle_report(net, board)
    reason = counting_absent(resolved.name) if count else (
        "Instructions per layer: not counted (not asked for).")
    if reason is None:
        def counting(fraction: float, text: str) -> None:
            progress(0.2 + 0.6 * fraction, text)
        units, counts, instructions = _counted_units(compiled, resolved.name, counting)
    else:
        absent.append(reason + " Estimated times need them too.")
        units, counts, instructions = kernel_units(net), None, None
    progress(0.85, "Measuring each layer")
    layers = _layers(compiled.prepared, units, counts)
    if sqnr_of is not None:
        progress(0.9, "Comparing the quantized layers with float")
        sqnr = sqnr_of(compiled.prepared)
        layers = [_with_sqnr(la, sqnr) for la in layers]
    quantization = quantization or _integer_summary(compiled.graph)
    absent += _quantization_absent(quantization, sqnr_of is not None)
    if board is None:
        absent.append("Board budget: no board given (--board), so flash and RAM are shown "
                      "without a budget.")
    progress(1.0, "Report ready")
    return Report(model, resolved.name, resolved.triple, resolved.mcu, float(clock_mhz),
                  compute_stats(compiled.graph).to_json(), _bundle_part(bundle), memory,
                  layers, instructions, passes, quantization, absent)


def _with_sqnr(layer: Layer, sqnr: dict[str, float]) -> Layer:
    values = [sqnr[n] for n in reversed(layer.nodes) if n in sqnr]
    if not values:
        return layer
    return replace(layer, sqnr_db=values[0])


def _bundle_part(doc: dict) -> dict:
    """What the report shows of `kiln compile --json`: sizes, regions, board use, layout."""
    keys = ("name", "target", "triple", "weight_layout", "precision", "weights", "weight_bytes",
            "object_bytes", "sections", "regions", "board")
    out = {k: doc[k] for k in keys if k in doc}
    out["sections"] = {k: v for k, v in doc["sections"].items()
                       if k in ("text", "rodata", "data", "bss")}
    return out


def _integer_summary(graph: Graph) -> Quantization | None:
    """The integer form the model itself carries (None for a float model)."""
    from compiler.qmath.summary import summary

    doc = summary(graph)
    quantized = doc["quantized"]
    if not quantized["per_tensor"] and not quantized["per_channel"]:
        return None
    return Quantization("model", doc["dtypes"], quantized["per_tensor"],
                        quantized["per_channel"])


def _quantization_absent(quant: Quantization | None, measured: bool) -> list[str]:
    if quant is None:
        return ["Quantization: the model is float and no profile was given (--profile), so "
                "there is no quantization summary and no SQNR."]
    if quant.origin == "model":
        return ["SQNR per layer: not measured; the model came quantized, so there is no float "
                "model to compare with (quantize a float model with --profile to see it). "
                "Weight bytes are shown as stored (int8) and as float32."]
    if not measured:
        return ["SQNR per layer: not measured; give held-out samples (--data)."]
    return []


def quantization_of(graph: Graph, recipe) -> Quantization:
    """The summary of `graph`, the QDQ graph `recipe` (a QuantRecipe) made.

    Layers the int8 model still computes in float are listed with their float weight bytes:
    a warning, as `kiln compile` gives.
    """
    from compiler.driver import compilation, float_fallbacks
    from compiler.qmath.summary import summary

    doc = summary(graph)
    profile = recipe.profile
    return Quantization("profile", doc["dtypes"], doc["quantized"]["per_tensor"],
                        doc["quantized"]["per_channel"], recipe.method, recipe.schema,
                        {"model": profile.model, "data": dict(profile.data),
                         "bins": profile.bins, "equalized": profile.equalized,
                         "overrides": len(profile.overrides),
                         "keep_float": sorted(set(profile.keep_float) | set(recipe.keep_float)),
                         "per_channel": recipe.per_channel,
                         "float_weights": list(recipe.float_weights),
                         "corrections": len(recipe.corrections)},
                        float_layers=float_fallbacks(compilation(graph)))


def measure_sqnr(float_graph: Graph, qdq: Graph, data, quant: Quantization
                 ) -> Callable[[Graph], dict[str, float]]:
    """`sqnr_of` for `collect_report`: evaluates `qdq` against float on `data` once.

    Fills `quant`'s measured part; each prepared node gets the SQNR of the last tensor (in
    the QDQ graph's order) among those its source nodes make.
    """
    from compiler.quant.evaluate import evaluate
    from compiler.quant.quantize import RENAMED_KEY

    result = evaluate(float_graph, qdq, data, EVAL_SAMPLES)
    quant.samples, quant.data = result.samples, data.source
    quant.output_sqnr = dict(result.output_sqnr)
    quant.top1_agreement = result.top1_agreement
    quant.tensors = {t.name: t.sqnr for t in result.tensors}

    renamed = qdq.metadata.get(RENAMED_KEY, {})  # a model output's float tensor, renamed

    def sqnr_of(prepared: Graph) -> dict[str, float]:
        made = {}  # qdq node id -> (its order, the float tensors it stands for)
        for order, node in enumerate(qdq.nodes):
            names = [v.name for v in node.outputs if v is not None]
            if node.op == "QuantizeLinear":  # it quantizes the float tensor it reads
                names.append(renamed.get(node.inputs[0].name, node.inputs[0].name))
            made[node.id] = (order, names)
        out = {}
        for node in prepared.nodes:
            found = [(made[i][0], name) for i in node.provenance if i in made
                     for name in made[i][1] if name in quant.tensors]
            if found:
                out[node.name] = quant.tensors[max(found)[1]]
        return out

    return sqnr_of
