"""The lowering passes in the Passes panel: stepped through like graph passes, each switchable.

After a pipeline run (and whenever the target or a switch changes) a worker asks the compile
driver for the lowering records of the document's options; the Passes panel lists them after
the graph stages, each with a check box. Selecting one shows the memory timeline before and
after it in place of the canvas. A switch goes to the document (`set_lowering_enabled`), so
the Memory Timeline, the Code panel and the export follow it.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QObject, Signal

from app.window.workers import Job, Progress
from compiler.driver import Compilation, Options
from compiler.memory.buffers import align_up
from compiler.memory.report import MemoryPlan
from compiler.memory.stages import LoweringRecord
from views.lowering import LoweringView, PlanPicture
from views.passes import StageRow
from views.timeline import Bar, window_fields


def picture(plan: MemoryPlan, ops: dict[str, str]) -> PlanPicture:
    """A plan's buffers as the timeline draws them (`ops`: node name -> operator)."""
    offsets, a = plan.arena.offsets, plan.alignment
    bars = [Bar(b.name, b.node, ops.get(b.node, "Input"), b.size, offsets[b.name],
                align_up(b.size, a), b.first, b.last, b.stream[0] if b.stream else "",
                *window_fields(plan.window_of(b.name)))
            for b in plan.arena.buffers]
    return PlanPicture(bars, plan.arena.live_bytes(), plan.arena.lower_bound, plan.arena.size,
                       plan.lowir.steps)


def lowering_job(compiled: Compilation, options: Options):
    """The job: the driver's lowering records and their pictures (plans are shared)."""

    def work(progress: Progress) -> tuple[list[LoweringRecord], dict[int, PlanPicture]]:
        progress.report(0.0, "Planning memory for each lowering pass")
        records = compiled.lowering(options)
        ops = {n.name: n.op for n in compiled.prepared.nodes}
        pictures: dict[int, PlanPicture] = {}
        for r in records:
            for plan in (r.before, r.after):
                if id(plan) not in pictures:
                    pictures[id(plan)] = picture(plan, ops)
        return records, pictures

    return work


def stage_row(record: LoweringRecord, disabled: frozenset[str]) -> StageRow:
    """A record as a line of the Passes panel: its name, switch and effect on the arena."""
    if record.applied:
        effect = f"−{record.saved:,} B" if record.saved > 0 else f"+{-record.saved:,} B" \
            if record.saved else "0 B"
        tip = (f"{record.step.title}: arena {record.before.arena.size:,} → "
               f"{record.after.arena.size:,} B, {len(record.sites)} places")
    else:
        effect, tip = "off", f"{record.step.title}: not run ({record.reason})"
    return StageRow(record.name, changed=record.changed, lowering=record.name,
                    enabled=record.name not in disabled, tip=tip, effect=effect)


def story(record: LoweringRecord) -> str:
    """The pass's documentation, what steered it and where it applied, as HTML."""
    parts = [f"<h3>{escape(record.step.title)} <code>{record.name}</code></h3>",
             f"<p>{escape(record.step.why)}</p>"]
    for name, value in record.properties.items():
        parts.append(f"<p>Steered by the target's property <code>{name}</code>: "
                     f"<b>{str(value).lower()}</b> on {escape(record.target)}.</p>")
    if not record.applied:
        parts.append(f"<p><b>Not run:</b> {escape(record.reason)}.</p>")
    elif not record.sites:
        parts.append("<p>It found nothing to do in this graph.</p>")
    else:
        parts.append("<ul>" + "".join(f"<li>{escape(s)}</li>" for s in record.sites)
                     + "</ul>")
    if record.instructions_after is not None:
        parts.append(f"<p>Instructions per inference: {record.instructions_before:,} → "
                     f"{record.instructions_after:,}</p>")
    return "".join(parts)


class LoweringController(QObject):
    """Keeps the lowering records of the document's options and shows the selected one.

    Signals:
        recordsReady(records): new records are listed in the Passes panel.
    """

    recordsReady = Signal(object)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.stepping = window.stepping
        self.panel = self.stepping.panel
        self.records: list[LoweringRecord] = []
        self.pictures: dict[int, PlanPicture] = {}
        self._job: Job | None = None
        self.view = LoweringView()
        self.view.hide()
        self.view.backRequested.connect(self.stepping.leave_stage)
        central = window.centralWidget().layout()
        central.insertWidget(central.indexOf(self.stepping.view) + 1, self.view, 1)
        self.stepping.lowering = self
        self.stepping.resultReady.connect(self.refresh)
        self.document.optionsChanged.connect(self.refresh)
        self.document.modelOpened.connect(self._forget)
        self.document.graphChanged.connect(self._cancel)
        self.panel.loweringToggled.connect(self.document.set_lowering_enabled)

    # -- records ----------------------------------------------------------------------------

    def refresh(self, *_args) -> Job | None:
        """Ask the driver for the records of the document's options, in a worker."""
        self._cancel()
        compiled = self.document.compilation()
        if compiled is None or self.stepping.result is None:
            return None
        job = Job(lowering_job(compiled, self.document.options()), "Lowering", self)
        job.succeeded.connect(self._apply)
        job.failed.connect(self._failed)
        self._job = job
        job.start()
        return job

    def refresh_now(self) -> None:
        """Compute the records on the GUI thread and list them (scripted screenshots)."""
        self._cancel()
        compiled = self.document.compilation()
        if compiled is not None:
            self._apply(lowering_job(compiled, self.document.options())(
                Progress(lambda *_args: None)))

    def _apply(self, result) -> None:
        self._job = None
        self.records, self.pictures = result
        disabled = self.document.disabled_lowering
        self.panel.set_lowering([stage_row(r, disabled) for r in self.records])
        index = self.stepping.index
        if index is not None and self.owns(index):
            self.show(index)
        self.recordsReady.emit(self.records)

    def _failed(self, message: str) -> None:
        self._job = None
        self.records = []
        self.panel.set_lowering([])
        self.panel.set_status(f"{self.panel.status.text()} · lowering not planned: "
                              f"{escape(message)}")

    def _cancel(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self._job = None

    def _forget(self) -> None:
        self._cancel()
        self.records, self.pictures = [], {}
        self.panel.set_lowering([])

    # -- showing ----------------------------------------------------------------------------

    def owns(self, index: int) -> bool:
        """Whether panel row `index` is a lowering pass."""
        k = index - self.panel.lowering_offset()
        return 0 <= k < len(self.records)

    def show(self, index: int) -> None:
        """Put lowering row `index` in place of the canvas: both timelines and its story."""
        k = index - self.panel.lowering_offset()
        record = self.records[k]
        self.window.canvas.select(None)
        self.window.canvas.hide()
        self.stepping.view.hide()
        self.view.show()
        self.stepping.dock.show()  # stepping from the menu: the list comes forward
        self.stepping.dock.raise_()
        self.panel.set_doc(story(record))
        arena = (f"arena {record.before.arena.size:,} → {record.after.arena.size:,} B"
                 if record.applied else f"not run: {record.reason}")
        self.view.show_pass(
            f"Lowering pass {k + 1}/{len(self.records)} for {record.target}: {record.name} — "
            f"{arena} · read-only, Esc to return to the model", story(record),
            self.pictures[id(record.before)], self.pictures[id(record.after)])

    def hide(self) -> None:
        """Leave the lowering view (the stepping controller shows what comes next)."""
        self.view.hide()


def install(window) -> LoweringController:
    """The lowering rows of the Passes panel and their view (after the stepping controller)."""
    return LoweringController(window)


def screenshots(window, save) -> None:
    """lowering_stage.png: the window on the convolution pair's stage, else the last one.

    The whole window: the Passes panel's lowering rows beside the timelines before and after.
    """
    controller: LoweringController = window.lowering
    stepping = window.stepping
    if window.document.graph is None or stepping.result is None:
        return
    controller.refresh_now()
    if not controller.records:
        return
    names = [r.name for r in controller.records]
    k = next((i for i, r in enumerate(controller.records) if r.name == "conv_pair"
              and r.changed), len(names) - 1)
    stepping.show_stage(stepping.panel.lowering_offset() + k)
    save(window, "lowering_stage.png")
    stepping.leave_stage()
