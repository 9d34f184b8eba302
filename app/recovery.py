"""Autosave and recovery: a crash never costs the edits and the ranges tuned by hand.

While the document has unsaved changes, the session (`app.sessions`) is written every 30
seconds, and at once whenever the undo stack's clean state changes, to a per-user recovery
folder, as `PID.kiln` (each write atomic: write, fsync, rename). A normal close, and a save
that leaves nothing unsaved, remove it. At the next start, a recovery file whose process is
gone is a crash's: the window offers to restore it, discard it, or keep it for later.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QMessageBox

from app.sessions import SUFFIX, save_session
from compiler.errors import KilnError

AUTOSAVE_MS = 30_000
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


def prompt(path: Path) -> str:
    """The question asked at start after a crash."""
    return (f"Kiln closed without saving your last changes. Open the recovered session "
            f"({path.name}) now, discard it, or keep it for later (Ignore)?")


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
        self._written: int | None = None  # undo index of the last write
        self.timer = QTimer(self)
        self.timer.setInterval(AUTOSAVE_MS)
        self.timer.timeout.connect(self.autosave)
        self.timer.start()
        window.document.undo_stack.cleanChanged.connect(lambda _clean: self.autosave())
        window.document.modelOpened.connect(self.remove)

    def autosave(self) -> Path | None:
        """Write the recovery session now if there is something unsaved; else remove it."""
        doc = self.window.document
        if doc.graph is None or not doc.is_dirty():
            self.remove()
            return None
        index = doc.undo_stack.index()  # every edit and range change is an undo step
        if index == self._written and self.path.is_file():
            return self.path  # nothing new since the last write
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            saved = save_session(self.window, self.path)
            self._written = index
            return saved
        except (KilnError, OSError) as exc:  # never in the user's way: say it, go on
            self.window.statusBar().showMessage(f"Autosave failed: {exc}", 8000)
            return None

    def remove(self) -> None:
        """Nothing to recover any more (a normal close, a save, another model)."""
        discard(self.path)
        self._written = None

    def offer(self) -> str | None:
        """At start: ask what to do with a crash's recovery session (the newest one)."""
        left = orphans()
        if not left:
            return None
        path = left[0]
        answer = QMessageBox.question(self.window, TITLE, prompt(path), BUTTONS,
                                      QMessageBox.StandardButton.Open)
        if answer == QMessageBox.StandardButton.Open:
            if self.window.sessions.open_session(path, recovered=True):
                self.window.sessions.restored.connect(lambda: discard(path))
            return RESTORE
        if answer == QMessageBox.StandardButton.Discard:
            discard(path)
            return DISCARD
        return LATER


def install(window) -> RecoveryController:
    """Start autosaving for `window`; returns the controller (`window.recovery`)."""
    return RecoveryController(window)


def screenshots(window, save) -> None:
    """The question a start after a crash asks (as a box that is shown, not run)."""
    box = QMessageBox(QMessageBox.Icon.Question, TITLE,
                      prompt(recovery_dir() / "12345.kiln"), BUTTONS, window)
    box.show()
    save(box, "recovery_prompt.png")
    box.close()
