"""Linked code views: a kernel's low-level IR, LLVM IR and assembly lines in one colour.

With "Link lines" checked the Code panel shows the whole network built with its kernels kept
apart (`KernelMap.linked_code`), each kernel's lines tinted alike (Compiler Explorer's colour
mapping). A click on a line highlights its kernel's lines in the three views and selects its
node on the canvas; selecting a node highlights its kernel's lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject

from app.window.workers import Job, Progress
from compiler.codegen.explain import KernelMap
from compiler.codegen.line_map import VIEWS, Link, LinkedCode
from compiler.driver import Compilation, Options, pipeline_key
from compiler.ir.graph import Graph


@dataclass
class Linked:
    """What the worker made for one (compilation, options, target)."""

    graph: Graph
    final: Graph
    kernels: KernelMap
    code: LinkedCode
    owners: dict[int, str]  # loaded node id -> the final node holding it (KernelMap's choice)


def _work(compiled: Compilation, options: Options, target: str):
    def work(progress: Progress) -> Linked:
        progress.report(0.0, "Running the pass pipeline")
        final = compiled.final
        progress.report(0.2, "Planning memory")
        kernels = compiled.kernels(options)
        progress.report(0.3, f"Compiling the network for {target} with its kernels apart")
        code = kernels.linked_code(target)
        owners = {}
        for node in compiled.graph.nodes:
            owner = kernels.final_node_for(final, node.id)
            if owner is not None:
                owners[node.id] = owner.name
        return Linked(compiled.graph, final, kernels, code, owners)

    return work


class LineLinks(QObject):
    """The Code panel's linked mode, driven by its controller.

    `select(key)` selects (and reveals) a node on the canvas.
    """

    def __init__(self, controller, select: Callable[[object], None]):
        super().__init__(controller)
        self.controller = controller
        self.document = controller.document
        self.view = controller.view
        self.select = select
        self.last: Linked | None = None
        self.link: Link | None = None  # the highlighted kernel
        self._stamp: tuple | None = None
        self._chosen: tuple[object, Link] | None = None  # (node a click selected, its link)
        self._job: Job | None = None
        self.view.lineClicked.connect(self._clicked)

    def is_busy(self) -> bool:
        """True while the network is being compiled."""
        return self._job is not None and self._job.is_active()

    def cancel(self) -> None:
        """Drop the compilation under way (the selection or the graph changed)."""
        if self._job is not None:
            self._job.cancel()
            self._job = None

    def refresh(self, compiled: Compilation) -> None:
        """Show the linked listings of `compiled` (compiled in a worker once per target)."""
        self.cancel()
        doc = self.document
        options = doc.options()
        stamp = (id(compiled), pipeline_key(doc.pipeline), options, doc.target)
        if self.last is not None and stamp == self._stamp:
            self._follow()
            return
        self.last, self.link, self._stamp, self._chosen = None, None, stamp, None
        self.view.set_busy("compiling the network…")
        job = Job(_work(compiled, options, doc.target), "Compiling the network", self)
        job.succeeded.connect(self._show)
        job.failed.connect(self.controller._failed)
        self._job = job
        job.start()

    def _show(self, linked: Linked) -> None:
        self._job = None
        self.last, self._chosen = linked, None
        code = linked.code
        self.view.set_linked([code.text(v) for v in VIEWS], [code.map.tints[v] for v in VIEWS])
        self._follow()

    def _follow(self) -> None:
        """Highlight the selected node's kernel (or the one a click chose)."""
        linked, key = self.last, self.document.selection
        if self._chosen is not None and self._chosen[0] == key:
            self.controller.shown.emit()  # the node a click selected: its lines are marked
            return
        self._chosen = None
        owner = linked.owners.get(key) if isinstance(key, int) else None
        self._mark(linked.code.map.of_node(owner) if owner is not None else None)
        self.controller.shown.emit()

    def _mark(self, link: Link | None, clicked: int = -1) -> None:
        self.link = link
        linked = self.last
        if link is None:
            self.view.highlight([(), (), ()], 0)
            self.view.set_message(f"{len(linked.code.map.links)} kernels for "
                                  f"{linked.code.target}: click a line or a node to link them")
            return
        self.view.highlight([link.lines[v] for v in VIEWS], link.colour, clicked)
        self.view.set_message(f"{link.label}: {', '.join(link.nodes)}")

    def _clicked(self, view: int, line: int) -> None:
        if self.last is None or not self.view.linked():
            return
        link = self.last.code.map.at(VIEWS[view], line)
        if link is None:
            return
        key = self.source_of(link)
        self._chosen = (key, link)
        self._mark(link, clicked=view)
        if key is not None and key != self.document.selection:
            self.select(key)  # the document follows; `_follow` keeps this link
        self.controller.shown.emit()

    def source_of(self, link: Link) -> int | None:
        """The loaded node a link selects: one that became its first node, the same-named first."""
        linked = self.last
        names = {n.id: n.name for n in linked.graph.nodes}
        ranked = [(link.nodes.index(owner), names[key] != owner, key)
                  for key, owner in linked.owners.items() if owner in link.nodes]
        return min(ranked)[2] if ranked else None
