"""Where a file dialog that writes starts: the folder last chosen for it, else a writable one.

Never the model's folder: models come from downloads, packages and read-only checkouts, and a
dialog that starts there invites a write that fails. The user's documents folder, else the
home folder, is where a first session or walkthrough goes.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QStandardPaths

from app.window.settings import settings


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def default_folder() -> Path:
    """The user's documents folder when it exists and can be written, else the home folder."""
    documents = QStandardPaths.writableLocation(
        QStandardPaths.StandardLocation.DocumentsLocation)
    if documents and _writable(Path(documents)):
        return Path(documents)
    return Path.home()


def start_folder(kind: str) -> Path:
    """Where the `kind` dialog (e.g. "session", "walkthrough") starts this time."""
    last = settings().value(f"folders/{kind}", "")
    if isinstance(last, str) and last and _writable(Path(last)):
        return Path(last)
    return default_folder()


def remember(kind: str, chosen: str | os.PathLike) -> None:
    """The `kind` dialog chose `chosen` (a file or a new folder): start beside it next time."""
    settings().setValue(f"folders/{kind}", str(Path(chosen).resolve().parent))
