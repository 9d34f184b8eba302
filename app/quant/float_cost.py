"""The cost of keeping the selected tensor float, under the dock's Keep float box.

`compiler.quant.float_cost.keep_float_cost` compiles the document's int8 model with the tensor
quantized and with it kept float; that takes seconds on a big model, so it runs in a worker of
its own, one request at a time (the latest selection waits, older ones are dropped), and each
answer is kept for as long as the choices it depends on stay the same.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from app.window.workers import SerialWorker
from compiler.driver import Options
from compiler.errors import KilnError
from compiler.mcu.firmware import emulated_targets
from compiler.quant.float_cost import FloatCost, keep_float_cost, keep_float_instructions

COUNTING = "counting both under QEMU…"


class FloatCostShown(QObject):
    """Asks for the selected tensor's float cost and shows it in the panel.

    Signals:
        shown(str): the panel shows the cost of this tensor (tests wait on it).
    """

    shown = Signal(str)

    def __init__(self, controller):
        super().__init__(controller)
        self.controller, self.panel = controller, controller.panel
        self.document, self.state = controller.document, controller.state
        self._worker = SerialWorker("float cost", self)
        self._worker.succeeded.connect(self._done)
        self._worker.failed.connect(self._failed)
        self._known: dict[tuple, FloatCost] = {}
        self._graph = None  # the float graph the known costs are of
        self._wanted: tuple | None = None  # the key the panel should show
        self._running: tuple | None = None
        self._next = None  # (key, job) asked while another ran

    def _key(self, tensor: str) -> tuple | None:
        """What the cost depends on: the tensor, the model, its float choices, the target."""
        s, recipe = self.state.current(), self.state.recipe()
        if s is None or recipe is None:
            return None
        if s.graph is not self._graph:  # another model or an edit: no earlier answer holds
            self._graph, self._known = s.graph, {}
        doc = self.document
        options = Options(doc.target, io_in_arena=doc.io_in_arena,
                          disabled_lowering=doc.disabled_lowering)
        choices = (tuple(sorted(s.profile.keep_float)), recipe.keep_float,
                   recipe.float_weights, recipe.per_channel, recipe.schema, recipe.requant,
                   repr(sorted(s.profile.overrides.items())))
        return (tensor, id(s.graph), choices, options)

    def ask(self, tensor: str | None) -> None:
        """Show `tensor`'s cost: at once when known, else once a worker has compiled it."""
        key = None if tensor is None else self._key(tensor)
        self._wanted = key
        if key is None:
            self.panel.float_cost.clear()
            return
        if key in self._known:
            self._show(self._known[key])
            return
        self.panel.float_cost.setText(f"Keeping {tensor} float: compiling the int8 model "
                                      "with it and without it…")
        if key in (self._running, self._next and self._next[0]):
            return
        graph, recipe = self.state.current().graph, self.state.recipe()
        options, pipeline = key[3], self.document.pipeline

        def job() -> tuple[tuple, FloatCost]:
            cost = keep_float_cost(graph, recipe, tensor, options, pipeline)
            counted = cost.target in emulated_targets()
            return key, replace(cost, instructions_note=COUNTING if counted else
                                f"not counted: no emulated board runs {cost.target}"), (
                lambda: _counted(cost, graph, recipe, tensor, options, pipeline)) \
                if counted else None
        if self._running is not None:
            self._next = (key, job)  # replaces an older wait: only the latest counts
            return
        self._start(key, job)

    def _start(self, key: tuple, job) -> None:
        self._running = key
        self._worker.submit(job)

    def _done(self, result) -> None:
        key, cost, then = result
        self._known[key] = cost
        if then is not None:  # the instructions next, in the same worker: shown when counted
            self._worker.submit(lambda: (key, then(), None))
        else:
            self._after()
        if key == self._wanted:
            self._show(cost)

    def _failed(self, message: str) -> None:
        if self._running == self._wanted:
            self.panel.float_cost.setText(f"The float cost could not be computed: {message}")
        self._after()

    def _after(self) -> None:
        self._running = None
        if self._next is not None:
            (key, job), self._next = self._next, None
            if key not in self._known:
                self._start(key, job)

    def _show(self, cost: FloatCost) -> None:
        self.panel.float_cost.setText(cost.text())
        self.shown.emit(cost.tensor)

    def is_busy(self) -> bool:
        """True while a cost is being compiled or waits to be."""
        return self._running is not None or self._next is not None


def _counted(cost: FloatCost, graph, recipe, tensor: str, options, pipeline) -> FloatCost:
    """`cost` with its instructions counted, or with the reason they could not be."""
    try:
        return replace(cost, instructions=keep_float_instructions(
            graph, recipe, tensor, options, pipeline), instructions_note="")
    except KilnError as exc:
        return replace(cost, instructions_note=f"not counted: {exc}")
