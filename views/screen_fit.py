"""Windows that fit the screen they open on, and close from the keyboard.

A window asked for at a desktop's size (the main window's 1400x900, Compare's, a report
dialog grown to its content) lands partly below a laptop's or a projector's screen: its
buttons and status bar cannot be reached. `ScreenFit`, installed once on the application,
brings every top-level window inside the available part of its screen whenever it is
shown, resized or laid out again, never below the window's own minimum size; a window that
must hold more than the screen scrolls its content instead (the export report, the docks).
Moves alone are left to the user: a window dragged partly off screen stays where it was put.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QMargins, QObject, QRect, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QWidget

# Window kinds that are not windows a user places: menus, tooltips, drop-down lists.
_TRANSIENT = (Qt.WindowType.Popup, Qt.WindowType.ToolTip, Qt.WindowType.SplashScreen)
# The frame a window manager adds, assumed until the window has one (then it is measured).
_FRAME_GUESS = QMargins(4, 30, 4, 4)


def available(widget: QWidget) -> QRect:
    """The part of the widget's screen windows may cover (the desktop's panels left out)."""
    screen = widget.screen() if widget.windowHandle() is not None else None
    if screen is None:
        centre = widget.frameGeometry().center()
        screen = QGuiApplication.screenAt(centre) or QGuiApplication.primaryScreen()
    return screen.availableGeometry()


def frame_margins(widget: QWidget) -> QMargins:
    """What the window's frame adds around its client area (a guess before it is shown)."""
    frame, inner = widget.frameGeometry(), widget.geometry()
    if widget.isVisible() and frame != inner:
        return QMargins(inner.left() - frame.left(), inner.top() - frame.top(),
                        frame.right() - inner.right(), frame.bottom() - inner.bottom())
    return QMargins(_FRAME_GUESS) if not widget.isVisible() else QMargins()


def room(widget: QWidget) -> QSize:
    """The largest client size whose frame still fits the available screen."""
    margins, screen = frame_margins(widget), available(widget)
    return QSize(screen.width() - margins.left() - margins.right(),
                 screen.height() - margins.top() - margins.bottom())


def share_of_screen(widget: QWidget, wanted: QSize, fraction: float) -> QSize:
    """`wanted`, or `fraction` of the room on the widget's screen where that is less."""
    space = room(widget)
    return QSize(min(wanted.width(), int(space.width() * fraction)),
                 min(wanted.height(), int(space.height() * fraction)))


def fitted_size(wanted: QSize, space: QSize, minimum: QSize) -> QSize:
    """`wanted`, cut to `space`, but never below `minimum` (Qt would refuse it anyway)."""
    return QSize(max(min(wanted.width(), space.width()), minimum.width()),
                 max(min(wanted.height(), space.height()), minimum.height()))


def fit_window(widget: QWidget, wanted: QSize | None = None) -> bool:
    """Size `widget` to `wanted` (default: its size) within its screen, and move it inside.

    Returns whether anything changed.
    """
    wanted = wanted if wanted is not None else widget.size()
    size = fitted_size(wanted, room(widget), widget.minimumSize())
    changed = size != widget.size()
    if changed:
        widget.resize(size)
    screen, frame = available(widget), widget.frameGeometry()
    if not widget.isVisible():
        frame = frame.marginsAdded(_FRAME_GUESS)
    left = min(max(frame.left(), screen.left()), screen.right() + 1 - frame.width())
    top = min(max(frame.top(), screen.top()), screen.bottom() + 1 - frame.height())
    left, top = max(left, screen.left()), max(top, screen.top())  # too big: its top-left in
    if (left, top) != (frame.left(), frame.top()):
        widget.move(widget.pos().x() + left - frame.left(), widget.pos().y() + top - frame.top())
        changed = True
    return changed


def inside_screen(widget: QWidget) -> bool:
    """True when the window's frame lies within its screen's available area."""
    return available(widget).contains(widget.frameGeometry())


class ScreenFit(QObject):
    """Fits each top-level window to its screen when it is shown or resized (see module)."""

    def __init__(self, app: QApplication):
        super().__init__(app)
        self._pending: list[QWidget] = []
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self._fit_pending)
        app.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: D102 (Qt override)
        kind = event.type()
        # A layout request too: a minimum that kept the window big may have gone since.
        if kind not in (QEvent.Type.Show, QEvent.Type.Resize, QEvent.Type.LayoutRequest) or \
                not isinstance(watched, QWidget) or not watched.isWindow() or \
                watched.windowType() in _TRANSIENT:
            return False
        if kind == QEvent.Type.Show:
            fit_window(watched)  # before the first paint: no jump
        elif watched not in self._pending:  # after the resize settles: no nested resize
            self._pending.append(watched)
            self._timer.start()
        return False

    def _fit_pending(self) -> None:
        pending, self._pending = self._pending, []
        for widget in pending:
            try:
                if widget.isVisible() and not inside_screen(widget):
                    fit_window(widget)
            except RuntimeError:  # deleted since it was resized
                continue

    def busy(self) -> bool:
        """True while a resized window is still to be fitted (tests wait for False)."""
        return self._timer.isActive()


def install(app: QApplication | None = None) -> ScreenFit:
    """The application's one `ScreenFit` (made on the first call)."""
    app = app or QApplication.instance()
    existing = app.findChild(ScreenFit)
    return existing if existing is not None else ScreenFit(app)


def closable(widget: QWidget) -> QShortcut:
    """Esc, Ctrl+W and the platform's other Close keys close the window `widget`."""
    keys = [QKeySequence(Qt.Key.Key_Escape), QKeySequence("Ctrl+W")]
    keys += [k for k in QKeySequence.keyBindings(QKeySequence.StandardKey.Close) if k not in keys]
    shortcut = QShortcut(widget)
    shortcut.setKeys(keys)
    shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
    shortcut.activated.connect(widget.close)
    return shortcut
