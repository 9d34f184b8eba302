"""Offscreen screens of a chosen size: Qt's offscreen platform reads them from a JSON file."""

from __future__ import annotations

from app.window.gui import offscreen_platform

# The GUI tests' screen: a desktop's, so a window asked for at 1400x900 gets it.
DESKTOP = (1920, 1200)


screen_platform = offscreen_platform  # the window's own: one home for the screen file
