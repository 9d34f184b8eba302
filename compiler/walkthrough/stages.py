"""The walkthrough's stages: what each graph pass and lowering pass did, as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.codegen.explain import KernelMap
from compiler.codegen.targets import Target
from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.ir.graph import Graph, Node
from compiler.lowir.passes import LOWERING_PASSES
from compiler.memory.report import MemoryPlan
from compiler.memory.stages import LoweringRecord
from compiler.passes import get_pass
from compiler.passes.runner import PassRecord
from compiler.stage_notes import stage_keys

# How a node of a before/after picture took part in the pass.
ADDED, REMOVED, MODIFIED, NEIGHBOUR = "added", "removed", "modified", "neighbour"


@dataclass
class Region:
    """The part of the graph a pass touched, before and after it.

    Attributes:
        ids: Node ids shown: every node the pass added, removed or modified, and each such
            node's direct neighbours (producers of its inputs, readers of its outputs) in the
            graph before or after the pass. A node is drawn on each side it exists on.
        before / after: The graphs before and after the pass.
        marks: Node id -> ADDED, REMOVED, MODIFIED or NEIGHBOUR.
    """

    ids: set[int]
    before: Graph
    after: Graph
    marks: dict[int, str]

    def names(self, side: str) -> list[str]:
        """Names of the shown nodes of one side ("before" or "after"), in graph order."""
        graph = self.before if side == "before" else self.after
        return [n.name for n in graph.nodes if n.id in self.ids]


@dataclass
class KernelTrace:
    """One kernel followed down: its low-level IR lines, its LLVM IR and its assembly.

    `llvm_ir` and `assembly` hold the kernel's own function; `helpers` names the functions of
    its module it calls (a row-streamed chain's one-row kernels), left out of both.
    """

    symbol: str
    nodes: tuple[str, ...]
    lowir: list[str]
    llvm_ir: str
    assembly: str
    target: str
    helpers: list[str] = field(default_factory=list)


def llvm_function(module: str, symbol: str) -> str:
    """The definition of `symbol` in an LLVM IR module's text (the whole text if not found)."""
    lines = module.splitlines()
    heads = [i for i, line in enumerate(lines)
             if line.startswith("define") and (f"@{symbol}(" in line or f'@"{symbol}"(' in line)]
    if not heads:
        return module
    end = next((i for i in range(heads[0], len(lines)) if lines[i] == "}"), len(lines) - 1)
    return "\n".join(lines[heads[0]:end + 1])


def asm_function(assembly: str, symbol: str) -> str:
    """The lines of `symbol`'s function in an assembly listing (the whole text if not found)."""
    lines = assembly.splitlines()
    start = next((i for i, line in enumerate(lines) if line.split() == [".globl", symbol]
                  or line.strip() == f'.globl\t"{symbol}"'), None)
    if start is None:
        return assembly
    end = next((i for i in range(start, len(lines)) if lines[i].split()[:2] == [".size",
                                                                                  f"{symbol},"]),
               len(lines) - 1)
    return "\n".join(lines[start:end + 1])


def _helpers(module: str, symbol: str) -> list[str]:
    """Names of the other functions a module defines."""
    names = []
    for line in module.splitlines():
        if line.startswith("define"):
            name = line.split("@", 1)[1].split("(", 1)[0].strip('"')
            if name != symbol:
                names.append(name)
    return names


@dataclass
class Stage:
    """One pipeline entry or lowering pass as a walkthrough page (or an index line).

    Attributes:
        key: The stage key notes are filed under: a pass name, `name#k` for its k-th run
            (k > 1), or a lowering pass's name.
        title: The heading.
        kind: "graph" (a pipeline pass) or "lowering" (a lowering pass of the memory plan).
        changed: It changed something: only such stages get a page.
        doc: What the pass does.
        why: Why it runs where it does.
        summary: One line on what it did here.
        region: For a changed graph pass, the nodes it touched before and after.
        check: The numeric check sentence of a graph pass.
        matches: Whether the check passed (None when no check applies).
        plans: For a changed lowering pass, the memory plans before and after.
        kernel: For a changed lowering pass, one kernel it affected followed to assembly.
    """

    key: str
    title: str
    kind: str
    changed: bool
    doc: str
    why: str
    summary: str
    region: Region | None = None
    check: str = ""
    matches: bool | None = None
    plans: tuple[MemoryPlan, MemoryPlan] | None = None
    kernel: KernelTrace | None = None
    details: list[str] = field(default_factory=list)


def _neighbours(graph: Graph, nodes: list[Node]) -> set[int]:
    """Ids of the nodes producing the inputs of `nodes` or reading their outputs."""
    outputs = {id(out) for n in nodes for out in n.outputs}
    ids = {v.producer.id for n in nodes for v in n.inputs
           if v is not None and v.producer is not None}
    ids.update(n.id for n in graph.nodes if any(v is not None and id(v) in outputs
                                                for v in n.inputs))
    return ids


def region_of(record: PassRecord, before: Graph, after: Graph) -> Region:
    """The nodes `record`'s pass touched, with their direct neighbours on either side."""
    touched = set(record.added) | set(record.removed) | set(record.modified)
    ids = set(touched)
    for graph in (before, after):
        ids |= _neighbours(graph, [n for n in graph.nodes if n.id in touched])
    marks = {i: NEIGHBOUR for i in ids}
    marks.update({i: MODIFIED for i in record.modified})
    marks.update({i: ADDED for i in record.added})
    marks.update({i: REMOVED for i in record.removed})
    return Region(ids, before, after, marks)


def _check(record: PassRecord) -> str:
    if record.matches is None:
        return "The outputs were not compared for this pass."
    worst = f"largest difference {record.max_abs_err:.3g}" \
        if record.max_abs_err is not None else "no difference measured"
    verdict = "match" if record.matches else "DO NOT match"
    rebase = (" This pass changes the arithmetic on purpose (within rounding); later stages "
              "are compared with its outputs." if record.rebases_numerics else "")
    return (f"On a seeded random input, the outputs after this pass {verdict} the reference "
            f"({worst}).{rebase}")


def graph_stages(compiled: Compilation) -> list[Stage]:
    """One stage per pipeline entry run (the prepare stage last), checked numerically."""
    result = compiled.passes(snapshots=True, verify=True)
    configs = compiled.whole_pipeline().enabled()
    keys = stage_keys([r.name for r in result.records])
    stages, before = [], result.initial
    for index, (record, config, key) in enumerate(zip(result.records, configs, keys)):
        after = record.snapshot
        position = (f"Entry {index + 1} of {len(configs)}"
                    + (f", after {configs[index - 1].name}" if index else ", the first"))
        why = f"{position}: {config.note}" if config.note else f"{position}."
        summary = (f"{record.nodes_before} nodes before, {record.nodes_after} after: "
                   f"{len(record.added)} added, {len(record.removed)} removed, "
                   f"{len(record.modified)} modified"
                   + (f" in {record.iterations} iterations" if record.iterations > 1 else "")
                   if record.changed else "changed nothing")
        stage = Stage(key, key, "graph", record.changed, get_pass(record.name).doc, why,
                      summary, check=_check(record), matches=record.matches,
                      details=list(record.notes))
        if record.changed:
            stage.region = region_of(record, before, after)
        stages.append(stage)
        before = after
    return stages


def _changed_node(record: LoweringRecord) -> str | None:
    """The node of the first instruction whose low-level IR line the pass changed."""
    old = set(record.before.lowir.dump().splitlines())
    plan = record.after
    lines = plan.lowir.dump().splitlines()
    prefix = sum(1 for s in plan.lowir.storages.values() if s.kind != "activation")
    for i, ins in enumerate(plan.lowir.instrs):
        if ins.kind == "op" and lines[prefix + i] not in old:
            return ins.nodes[0] if ins.nodes else ins.name
    return None


def kernel_trace(prepared: Graph, plan: MemoryPlan, target: Target,
                 node: str | None = None) -> KernelTrace | None:
    """The kernel covering `node` (else the plan's first kernel) from low IR to assembly."""
    kernels = KernelMap(prepared, plan)
    step = kernels.kernel_of(node) if node is not None else None
    step = step or (kernels.steps[0] if kernels.steps else None)
    if step is None:
        return None
    dump = plan.lowir.dump().splitlines()
    lines = sorted({kernels.lowir_line(name) for name in step.nodes} - {-1})
    try:
        code = kernels.kernel_code(step.nodes[0], target)
    except KilnError as error:  # a kernel the target cannot compile yet: say so on the page
        return KernelTrace(step.symbol, step.nodes, [dump[i] for i in lines], str(error),
                           str(error), target.name)
    return KernelTrace(step.symbol, step.nodes, [dump[i] for i in lines],
                       llvm_function(code.llvm_ir, step.symbol),
                       asm_function(code.assembly, step.symbol), target.name,
                       _helpers(code.llvm_ir, step.symbol))


def lowering_stages(compiled: Compilation, options: Options) -> list[Stage]:
    """One stage per lowering pass of `options`' target; a changed one follows a kernel."""
    target = options.resolved_target()
    names = [p.name for p in LOWERING_PASSES]
    stages = []
    for record in compiled.lowering(options):
        index = names.index(record.name)
        after = f", after {names[index - 1]}" if index else ", the first"
        steered = (f" The target's {record.step.steered_by} property can forbid it."
                   if record.step.steered_by else "")
        why = (f"Lowering pass {index + 1} of {len(names)}{after}: it lets buffers of the "
               f"memory plan share bytes once the passes above have placed them.{steered}")
        if not record.applied:
            summary = f"did not run: {record.reason}"
        elif record.changed:
            saved = (f"{record.saved:,} B saved" if record.saved >= 0
                     else f"{-record.saved:,} B more")
            summary = (f"arena {record.before.arena.size:,} B -> {record.after.arena.size:,} B "
                       f"({saved}), {record.before.lowir.steps} -> "
                       f"{record.after.lowir.steps} steps")
        else:
            summary = "found nothing to change"
        stage = Stage(record.name, f"{record.name}: {record.step.title}", "lowering",
                      record.changed, record.step.why, why, summary, details=list(record.sites))
        if record.changed:
            stage.plans = (record.before, record.after)
            stage.kernel = kernel_trace(compiled.prepared, record.after, target,
                                        _changed_node(record))
        stages.append(stage)
    return stages
