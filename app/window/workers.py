"""Long work off the GUI thread: loading and laying out a model, with progress and cancel."""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from compiler import edit
from compiler.errors import KilnError, one_line
from compiler.frontends.load import load_model as load_graph
from compiler.ir.graph import Graph
from views.group_layout import lay_out_view
from views.layout import GraphLayout

log = logging.getLogger(__name__)

# How long a worker may keep the interpreter once the GUI thread asks for it. At Python's
# default (5 ms) a worker busy with numpy delays every event the GUI handles by up to that much,
# and the waits add up to stalls a user sees (50 ms and more on a two-core machine); at 1 ms
# they stay short, for a few percent of the workers' speed.
GUI_SWITCH_INTERVAL = 0.001


def share_the_interpreter() -> None:
    """Let the GUI thread take the interpreter back from busy workers quickly (process-wide)."""
    sys.setswitchinterval(GUI_SWITCH_INTERVAL)


class Cancelled(Exception):
    """Raised inside a job's function when the user cancelled it."""


class Progress:
    """What a job's function gets: report progress, and stop early when cancelled."""

    def __init__(self, emit: Callable[[float, str], None]):
        self._emit = emit
        self._cancel = threading.Event()
        self.text = ""

    def report(self, fraction: float, text: str | None = None) -> None:
        """Publish progress (0 to 1); raises Cancelled when the user has cancelled."""
        self.check()
        if text is not None:
            self.text = text
        self._emit(max(0.0, min(1.0, fraction)), self.text)

    def check(self) -> None:
        """Raise Cancelled when the user has cancelled the job."""
        if self._cancel.is_set():
            raise Cancelled

    def cancel(self) -> None:
        """Ask the function to stop at its next report or check."""
        self._cancel.set()

    def is_cancelled(self) -> bool:
        """True once the user has cancelled (for code that checks rather than raises)."""
        return self._cancel.is_set()


class _Runner(QObject):
    """Lives in the worker thread and runs the function there."""

    progress = Signal(float, str)
    done = Signal(object)
    error = Signal(str)

    def __init__(self, fn: Callable[[Progress], Any], label: str):
        super().__init__()
        self.fn = fn
        self.label = label
        self.control = Progress(self.progress.emit)

    @Slot()
    def run(self) -> None:
        try:
            self._run()
        finally:
            QThread.currentThread().quit()  # the thread ends once the function has returned

    def _run(self) -> None:
        try:
            result = self.fn(self.control)
        except Cancelled:
            return
        except KilnError as exc:
            self.error.emit(one_line(str(exc)))
            return
        except MemoryError:
            self.error.emit(f"{self.label}: not enough memory")
            return
        except Exception as exc:  # a bug: the user still gets one line, the log the traceback
            log.error("%s failed", self.label, exc_info=True)
            self.error.emit(one_line(f"{self.label}: unexpected {type(exc).__name__}: {exc}"))
            return
        self.done.emit(result)


# Jobs whose thread is running. A cancelled job's function runs on to its next check; keeping the
# job here until its thread has finished means Python never drops a QThread that still runs.
_RUNNING: set[Job] = set()


def running_jobs() -> list[Job]:
    """Jobs whose thread has not finished yet (cancelled ones included)."""
    return list(_RUNNING)


def shutdown(msecs: int = 10000) -> bool:
    """Cancel every job and wait for the threads (before the application quits)."""
    for job in list(_RUNNING):
        job.cancel()
    return all(job.wait(msecs) for job in list(_RUNNING))


class Job(QObject):
    """One function run in its own QThread.

    Signals (delivered in the GUI thread):
        progress(fraction, text): how far the work is.
        succeeded(result): the function's return value.
        failed(message): the one-line error.
        cancelled(): `cancel()` was called; nothing more will be emitted.
    """

    progress = Signal(float, str)
    succeeded = Signal(object)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, fn: Callable[[Progress], Any], label: str, parent: QObject | None = None):
        super().__init__(parent)
        self.label = label
        self._thread = QThread()
        self._thread.setObjectName(f"kiln job: {label}")
        self._runner = _Runner(fn, label)
        self._runner.moveToThread(self._thread)
        self._thread.started.connect(self._runner.run)
        self._runner.progress.connect(self._on_progress)
        self._runner.done.connect(self._on_done)
        self._runner.error.connect(self._on_error)
        self._thread.finished.connect(self._on_thread_finished)
        self._active = False

    def start(self) -> Job:
        """Start the work; returns self."""
        self._active = True
        _RUNNING.add(self)
        self._thread.start()
        return self

    def is_active(self) -> bool:
        """True from start until a result, an error or a cancel."""
        return self._active

    def cancel(self) -> None:
        """Stop listening at once and ask the function to stop at its next check."""
        if not self._active:
            return
        self._active = False
        self._runner.control.cancel()
        self.cancelled.emit()

    def wait(self, msecs: int = 30000) -> bool:
        """Block until the thread has finished (for shutdown and tests)."""
        return self._thread.wait(msecs)

    @Slot(float, str)
    def _on_progress(self, fraction: float, text: str) -> None:
        if self._active:
            self.progress.emit(fraction, text)

    @Slot(object)
    def _on_done(self, result: Any) -> None:
        if self._active:
            self._active = False
            self.succeeded.emit(result)

    @Slot(str)
    def _on_error(self, message: str) -> None:
        if self._active:
            self._active = False
            self.failed.emit(message)

    @Slot()
    def _on_thread_finished(self) -> None:
        _RUNNING.discard(self)
        # A job object may live on as its parent's child; its function (and the graph and
        # compilation the function closes over) must not.
        self._runner.fn = None


# -- the jobs the app runs ------------------------------------------------------------------------


@dataclass
class Loaded:
    """A model read and laid out, ready for the window."""

    path: Path
    graph: Graph
    layout: GraphLayout
    problems: dict[int, str]
    seconds: float


def load_model(path: str | Path, show_constants: bool) -> Callable[[Progress], Loaded]:
    """The function of a job that reads `path`, checks it and lays it out."""
    path = Path(path)

    def work(progress: Progress) -> Loaded:
        start = time.perf_counter()
        progress.report(0.0, f"Reading {path.name}")
        graph = load_graph(path)
        progress.report(0.3, f"Checking {path.name}")
        problems = edit.problems(graph)
        progress.report(0.4, f"Laying out {len(graph.nodes):,} nodes")
        layout = lay_out_view(graph, show_constants=show_constants,
                              progress=lambda f: progress.report(0.4 + 0.6 * f))
        return Loaded(path, graph, layout, problems, time.perf_counter() - start)

    return work


def lay_out(graph: Graph, show_constants: bool,
            expanded: frozenset[str] | None = None) -> Callable[[Progress], GraphLayout]:
    """The function of a job that lays out a graph (after an edit, or a display toggle).

    `expanded` names the groups left open (None: the graph's opening view).
    """
    def work(progress: Progress) -> GraphLayout:
        progress.report(0.0, f"Laying out {len(graph.nodes):,} nodes")
        return lay_out_view(graph, show_constants=show_constants, expanded=expanded,
                            progress=lambda f: progress.report(f))

    return work


class SerialWorker(QObject):
    """One long-lived thread that runs submitted functions in order.

    For repeated work on big numpy arrays: a fresh thread's malloc arena has no memory yet, so
    each `Job` (a new QThread) faults its temporaries in again, a cost that showed as half of
    the workbench's re-evaluation time. Results arrive in the GUI thread.

    Signals:
        succeeded(result): a function returned.
        failed(message): a function raised (one line).
    """

    succeeded = Signal(object)
    failed = Signal(str)

    def __init__(self, label: str, parent: QObject | None = None):
        super().__init__(parent)
        self.label = label
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting = 0
        self._outcome.connect(self._deliver)  # queued: emitted from the worker thread
        self._thread = threading.Thread(target=self._loop, name=f"kiln worker: {label}",
                                        daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> None:
        """Run `fn()` after what was submitted before."""
        self._waiting += 1
        self._queue.put(fn)

    def is_busy(self) -> bool:
        """True while a submitted function has not delivered its result."""
        return self._waiting > 0

    @Slot(object)
    def _deliver(self, outcome: tuple[bool, Any]) -> None:
        self._waiting -= 1
        ok, value = outcome
        (self.succeeded if ok else self.failed).emit(value)

    def _loop(self) -> None:
        while True:
            fn = self._queue.get()
            try:
                outcome = (True, fn())
            except KilnError as exc:
                outcome = (False, one_line(str(exc)))
            except MemoryError:
                outcome = (False, f"{self.label}: not enough memory")
            except Exception as exc:  # a bug: one line for the user, the traceback in the log
                log.error("%s failed", self.label, exc_info=True)
                outcome = (False, one_line(f"{self.label}: unexpected {type(exc).__name__}: "
                                           f"{exc}"))
            try:
                self._outcome.emit(outcome)
            except RuntimeError:  # the window (and this object) went away meanwhile
                return

    _outcome = Signal(object)
