"""Autosave and recovery: a crash never costs the edits and the ranges tuned by hand.

While the document has unsaved changes, every change (an edit, a range, a tensor kept float, an
applied exploration point, a note, an option) is journaled within a second: the session
(`app.document.sessions`) is written JOURNAL_MS after the first change of a burst (the ones
that come meanwhile go with it) to a per-user recovery folder, as `PID.kiln` (each write
atomic: write, fsync, rename). The window is read on the GUI thread and the file written by a
worker thread, so an edit never waits for the disk; a write overtaken by a newer one, or still
pending when the file is removed, is dropped, never written back. A session's quantization
being restored is not journaled half done: its arrival is a change. A normal close, and a save
that leaves nothing unsaved, remove the file at once. At the next start, a recovery file whose
process is gone is a crash's: the window offers to restore it, discard it, or keep it for
later, naming the model and when it was last autosaved (the PID means nothing to a user). A
restored file belongs to the window from then on: once restored it is journaled as the
window's own (unsaved changes to its model, which a later model does not inherit) and
removed, or removed at the window's normal close if that comes first, so it is never offered
twice.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timedelta
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QMessageBox

from app.document.sessions import SUFFIX, Snapshot, snapshot_session, write_session
from app.window.workers import SerialWorker
from compiler.errors import KilnError

AUTOSAVE_MS = 30_000  # a failed write is tried again at the latest this much later
JOURNAL_MS = 400  # from a change to its journal entry: a burst of changes is written once
TITLE = "Recover unsaved work"
BUTTONS = (QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Discard
           | QMessageBox.StandardButton.Ignore)
RESTORE, DISCARD, LATER = "restore", "discard", "later"


def recovery_dir() -> Path:
    """The per-user folder of recovery sessions."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kiln" / "recovery"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def orphans() -> list[Path]:
    """Recovery sessions left by processes that are gone (crashes), newest first."""
    folder = recovery_dir()
    found = []
    for path in folder.glob(f"*{SUFFIX}") if folder.is_dir() else []:
        try:
            pid = int(path.stem)
        except ValueError:
            continue
        if pid != os.getpid() and not _alive(pid):
            found.append(path)
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def human_time(when: datetime, now: datetime) -> str:
    """`when` as a person says it, relative to `now`: "today at 14:05", "on Tuesday at 9:30".

    English names, not the C library's locale: the sentence around it is English.
    """
    clock = f"{when.hour}:{when.minute:02d}"
    days = (now.date() - when.date()).days
    if days == 0:
        return f"today at {clock}"
    if days == 1:
        return f"yesterday at {clock}"
    if 1 < days < 7:
        return f"on {_DAYS[when.weekday()]} at {clock}"
    year = "" if when.year == now.year else f" {when.year}"
    return f"on {when.day} {_MONTHS[when.month - 1]}{year} at {clock}"


def describe(path: Path) -> tuple[str | None, datetime]:
    """The file name of a recovery session's model (None if unknown) and its last autosave."""
    try:
        saved = datetime.fromtimestamp(path.stat().st_mtime)
    except OSError:
        saved = datetime.now()
    try:
        original = json.loads(path.read_text())["model"]["path"]
        return (Path(original).name if isinstance(original, str) else None), saved
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError):
        return None, saved  # Open will say what is wrong with it


def question(model: str | None, saved: datetime, now: datetime) -> str:
    """The question about a crash's unsaved changes to `model`, autosaved at `saved`."""
    what = f"your changes to {model}" if model else "your last changes"
    return (f"Kiln closed without saving {what}, last autosaved {human_time(saved, now)}. "
            f"Open them now, discard them, or keep them for later (Ignore)?")


def prompt(path: Path, now: datetime | None = None) -> str:
    """The question asked at start after a crash, about the recovery session at `path`."""
    model, saved = describe(path)
    return question(model, saved, now or datetime.now())


def discard(path: Path) -> None:
    """Remove a recovery session and the edited model written beside it."""
    for file in path.parent.glob(f"{path.stem}.*"):
        file.unlink(missing_ok=True)


class RecoveryController(QObject):
    """Writes this window's recovery session while it has unsaved changes."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.path = recovery_dir() / f"{os.getpid()}{SUFFIX}"
        # Changes counted since start (undo steps alone miss a merged note, and an undo then
        # a new edit returns to an index already written).
        self._changes = 0
        self._written: int | None = None  # the change count last written (or being written)
        # Removing the file, and each newer write, bump the generation: older writes drop.
        self._lock = threading.Lock()
        self._generation = 0
        self._writer = SerialWorker("autosave", self)
        self._writer.failed.connect(self._failed)
        self.timer = QTimer(self)
        self.timer.setInterval(AUTOSAVE_MS)
        self.timer.timeout.connect(self.autosave_soon)
        self.timer.start()
        self._soon = QTimer(self, singleShot=True, interval=JOURNAL_MS)
        self._soon.timeout.connect(self.autosave_soon)
        # A crash's session this window restores: removed once restored or at a normal close.
        self._claimed: Path | None = None
        doc = window.document
        doc.undo_stack.cleanChanged.connect(self._clean_changed)
        # Every edit, range, float tensor, applied point and note is an undo step (a note
        # typed on merges into its step); notes a session sets, options and a restored
        # quantization are none.
        for signal in (doc.undo_stack.indexChanged, doc.notesChanged, doc.optionsChanged,
                       doc.pipelineChanged, doc.quant.sessionChanged, doc.quant.edited):
            signal.connect(self._changed)
        doc.modelOpened.connect(self._forget)
        window.sessions.restored.connect(self._restored)

    def _clean_changed(self, clean: bool) -> None:
        """Saved: the file goes at once. Unsaved from now on: written in a moment."""
        if clean:
            self.autosave_soon()
        else:
            self._changed()

    def _changed(self, *_args) -> None:
        """Something the session holds changed: journal it within JOURNAL_MS."""
        self._changes += 1
        if not self._soon.isActive():  # not restarted: a stream of changes still gets written
            self._soon.start()

    def _due(self) -> int | None:
        """The change count to write now, or None (the file removed when nothing is unsaved)."""
        doc = self.window.document
        if doc.graph is None or not doc.is_dirty():
            self._forget()
            return None
        if doc.quant.restoring:
            return None  # half a session: its arrival is a change, written then
        if self._changes == self._written and self.path.is_file():
            return None  # nothing new since the last write
        return self._changes

    def autosave(self) -> Path | None:
        """Write the recovery session now, in this thread, if something is unsaved.

        Returns the file (None when nothing is unsaved, or the write failed).
        """
        self._soon.stop()
        count = self._due()
        if count is None:
            return self.path if self._written is not None and self.path.is_file() else None
        try:
            snapshot = snapshot_session(self.window, self.path)
        except KilnError as exc:  # never in the user's way: say it, go on
            self._failed(str(exc))
            return None
        with self._lock:
            self._generation += 1  # newer than any write still pending: those are dropped
        try:
            saved = self._write(snapshot, self._generation)
        except KilnError as exc:
            self._failed(str(exc))
            return None
        self._written = count
        return saved

    def autosave_soon(self) -> None:
        """Read the window now and write the recovery session in a worker, if something is due."""
        count = self._due()
        if count is None:
            return
        try:
            snapshot = snapshot_session(self.window, self.path)
        except KilnError as exc:
            self._failed(str(exc))
            return
        with self._lock:
            self._generation += 1  # a write still queued is older than this one: dropped
            generation = self._generation
        self._written = count
        self._writer.submit(lambda: self._write(snapshot, generation))

    def is_busy(self) -> bool:
        """True while a write is due or has not finished."""
        return self._soon.isActive() or self._writer.is_busy()

    def _write(self, snapshot: Snapshot, generation: int) -> Path | None:
        """Write `snapshot` unless the file was removed or a newer one asked for (any thread)."""
        with self._lock:
            if generation != self._generation:
                return None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                return write_session(snapshot, compact=True)
            except OSError as exc:
                raise KilnError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def _failed(self, message: str) -> None:
        self._written = None  # the next autosave tries again
        self.window.statusBar().showMessage(f"Autosave failed: {message}", 8000)

    def remove(self) -> None:
        """A normal close: nothing to recover any more, neither ours nor a crash's we took."""
        self._forget()
        self._release()

    def _forget(self) -> None:
        """This window's own session is not needed (a save, another model, a close)."""
        self._soon.stop()
        with self._lock:  # a write under way finishes first; those asked for are dropped
            self._generation += 1
            discard(self.path)
        self._written = None

    def _restored(self) -> None:
        """A crash's session came back whole: journal it as this window's, then drop its file.

        Written here and now, so no moment passes with neither file on disk.
        """
        if self._claimed is not None:
            self.autosave()
        self._release()

    def _release(self) -> None:
        """The crash's session restored here is this window's state now: remove its file.

        Until then it stays, so a crash during the restore still leaves it to recover.
        """
        if self._claimed is not None:
            discard(self._claimed)
            self._claimed = None

    def offer(self) -> str | None:
        """At start: ask what to do with a crash's recovery session (the newest one).

        RESTORE when its restore has started; a file that cannot be read is reported, removed
        (nothing in it can come back) and DISCARD returned, so the caller opens a model.
        """
        left = orphans()
        if not left:
            return None
        path = left[0]
        answer = QMessageBox.question(self.window, TITLE, prompt(path), BUTTONS,
                                      QMessageBox.StandardButton.Open)
        if answer == QMessageBox.StandardButton.Open:
            self._claimed = path
            if self.window.sessions.open_session(path, recovered=True):
                return RESTORE
            self._release()
            return DISCARD
        if answer == QMessageBox.StandardButton.Discard:
            discard(path)
            return DISCARD
        return LATER


def install(window) -> RecoveryController:
    """Start autosaving for `window`; returns the controller (`window.recovery`)."""
    return RecoveryController(window)


def screenshots(window, save) -> None:
    """The question a start after a crash asks (as a box that is shown, not run)."""
    now = datetime.now()
    box = QMessageBox(QMessageBox.Icon.Question, TITLE,
                      question("digits_cnn.onnx", now - timedelta(minutes=2), now), BUTTONS,
                      window)
    box.show()
    save(box, "recovery_prompt.png")
    box.close()
