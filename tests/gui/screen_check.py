"""Geometry checks of windows on their screen: what lies outside, what overlaps, what is cut.

Computed from the widgets' own rectangles and the screen's, with none of the code that
places them, so a test can tell a window that fits from one that only looks sized.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QDockWidget,
    QMainWindow,
    QTabBar,
    QWidget,
)


def _rect(rect: QRect) -> str:
    return f"{rect.width()}x{rect.height()}+{rect.x()}+{rect.y()}"


def _name(widget: QWidget) -> str:
    return widget.objectName() or type(widget).__name__


def _behind_a_tab(widget: QWidget) -> bool:
    """Inside a dock tabbed behind another (Qt moves those out of the window, unhidden)."""
    while widget is not None and not widget.isWindow():
        if isinstance(widget, QDockWidget) and widget.visibleRegion().isEmpty():
            return True
        widget = widget.parentWidget()
    return False


def _parked_tab_bar(widget: QWidget) -> bool:
    """A main window's dock tab bar Qt parked out of sight (it keeps the ones unused)."""
    return isinstance(widget, QTabBar) and isinstance(widget.parentWidget(), QMainWindow) \
        and widget.visibleRegion().isEmpty()


def _shown_part(widget: QWidget, top: QWidget) -> QRect:
    """`widget`'s rectangle in `top`'s coordinates, cut by the scroll areas it sits in."""
    rect = QRect(widget.mapTo(top, QPoint(0, 0)), widget.size())
    parent = widget.parentWidget()
    while parent is not None and parent is not top:
        holder = parent.parentWidget()
        if isinstance(holder, QAbstractScrollArea) and holder.viewport() is parent:
            rect &= QRect(parent.mapTo(top, QPoint(0, 0)), parent.size())
        parent = holder
    return rect


def outside(window: QWidget, name: str) -> list[str]:
    """One line for each way `window` does not fit its screen (empty when it fits).

    Its frame must lie inside the screen's available area, it must be at least its layout's
    minimum size (else Qt lays the content out past its edges), and every widget shown in it
    must lie inside it.
    """
    problems = []
    screen = window.screen().availableGeometry()
    frame = window.frameGeometry()
    if not screen.contains(frame):
        problems.append(f"{name}: frame {_rect(frame)} is not inside the screen {_rect(screen)}")
    least = window.minimumSizeHint()
    if window.width() < least.width() or window.height() < least.height():
        problems.append(f"{name}: {window.width()}x{window.height()} is below its layout's "
                        f"minimum {least.width()}x{least.height()}")
    inside = window.rect()
    for child in window.findChildren(QWidget):
        if not child.isVisible() or child.isWindow() or _behind_a_tab(child) or \
                _parked_tab_bar(child):
            continue
        part = _shown_part(child, window)
        if part.isEmpty():
            continue
        if not inside.contains(part):
            problems.append(f"{name}: {_name(child)} at {_rect(part)} is outside the window "
                            f"{_rect(inside)}")
    return problems


def docks_on_screen(window: QMainWindow) -> list[QDockWidget]:
    """The docks a user sees: docked, shown and not behind another dock's tab."""
    return [d for d in window.findChildren(QDockWidget)
            if d.isVisible() and not d.isFloating() and not d.visibleRegion().isEmpty()]


def title_room(dock: QDockWidget) -> tuple[int, int]:
    """(pixels the title text needs, pixels left of the title bar's buttons for it)."""
    buttons = [b for b in dock.findChildren(QAbstractButton) if b.parentWidget() is dock
               and b.isVisible()]
    left = min((b.x() for b in buttons), default=dock.width())
    return dock.fontMetrics().horizontalAdvance(dock.windowTitle()), left


def overlapping_docks(window: QMainWindow) -> list[str]:
    """Pairs of docks on screen (and the canvas) whose rectangles overlap, one line each."""
    shown = [(d.windowTitle(), d.geometry()) for d in docks_on_screen(window)]
    central = window.centralWidget()
    shown.append(("central widget", QRect(central.mapTo(window, QPoint(0, 0)),
                                          central.size())))
    lines = []
    for i, (a, ra) in enumerate(shown):
        for b, rb in shown[i + 1:]:
            if ra.intersects(rb):
                lines.append(f"{a} {_rect(ra)} overlaps {b} {_rect(rb)}")
    return lines
