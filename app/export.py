"""Placeholder: replaced by the feature's controller (install adds it to the main window)."""

from __future__ import annotations


def install(window):
    """Add the feature to `window`; returns its controller."""
    return None


def screenshots(window, save) -> None:
    """Render the feature's panels with `save(widget, file_name)`."""
