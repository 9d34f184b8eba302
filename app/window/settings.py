"""Where the app keeps what it remembers between runs: recent files, geometry, layouts, sources."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

ORGANIZATION = "Kiln"
APPLICATION = "Kiln"
MAX_RECENT = 10


def settings() -> QSettings:
    """The user's settings, an INI file (tests point `QSettings.setPath` at a temporary folder)."""
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION,
                     APPLICATION)


def recent_files() -> list[str]:
    """Recently opened model files, newest first, without those that no longer exist."""
    value = settings().value("recentFiles", [])
    if isinstance(value, str):  # QSettings returns a lone string for a one-item list
        value = [value]
    return [p for p in (value or []) if isinstance(p, str) and os.path.exists(p)]


def add_recent_file(path: str | os.PathLike) -> list[str]:
    """Put `path` first in the recent files; returns the new list."""
    text = str(Path(path).resolve())
    files = [text] + [p for p in recent_files() if p != text]
    files = files[:MAX_RECENT]
    settings().setValue("recentFiles", files)
    return files


def clear_recent_files() -> None:
    """Forget the recent files."""
    settings().setValue("recentFiles", [])


def calibration_sources() -> tuple[str, str, str]:
    """The last Calibrate dialog's (data, evaluate, folder browsed); empty strings at first."""
    store = settings()
    return tuple(str(store.value(f"calibrate/{key}", "") or "")
                 for key in ("data", "evaluate", "folder"))


def remember_calibration_sources(data: str, evaluate: str, folder: str) -> None:
    """Keep the Calibrate dialog's sources and browsed folder for its next opening."""
    store = settings()
    for key, value in (("data", data), ("evaluate", evaluate), ("folder", folder)):
        store.setValue(f"calibrate/{key}", value)


def workspace_layouts() -> tuple[str, dict[str, QByteArray]]:
    """The workspace shown last and each workspace's saved dock layout ("" and {} at first)."""
    store = settings()
    store.beginGroup("workspaces")
    try:
        current = str(store.value("current", "") or "")
        layouts = {key: value for key in store.childKeys() if key != "current"
                   and isinstance(value := store.value(key), QByteArray)}
    finally:
        store.endGroup()
    return current, layouts


def remember_workspace_layouts(current: str, layouts: dict[str, QByteArray]) -> None:
    """Keep each workspace's dock layout (`QMainWindow.saveState`) and the one shown."""
    store = settings()
    store.beginGroup("workspaces")
    try:
        store.setValue("current", current)
        for name, layout in layouts.items():
            store.setValue(name, layout)
    finally:
        store.endGroup()
