"""Dock sizes that follow the window: the canvas keeps its share, docks come back on enlarging.

Qt's main window takes every pixel a window loses from the central widget first, down to its
minimum, and gives it every pixel it gains: a window made small shows a canvas strip, and made
big again keeps its docks at their squeezed sizes. Here each dock has a preferred size, the one
the user (or a panel) last gave it. On every window resize each dock area takes its docks'
preferred size unless that leaves the canvas less than its share of the window, in which case
the areas on that axis shrink together (none below its minimum); the docks sharing an area get
their preferred proportions back. Enlarging again restores the preferred sizes.

The share is 42 % of the width and 55 % of the height between toolbar and status bar, or
less if the user dragged a separator to leave the canvas less: their layout is kept as they
left it, while a panel asking for room (`resizeDocks`) or a restored layout never takes the
canvas below it.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow

Area = Qt.DockWidgetArea
HORIZONTAL, VERTICAL = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
# Each area and the direction its size is measured in (a side's width, an end's height).
AREAS = {Area.LeftDockWidgetArea: HORIZONTAL, Area.RightDockWidgetArea: HORIZONTAL,
         Area.TopDockWidgetArea: VERTICAL, Area.BottomDockWidgetArea: VERTICAL}
SHARE = {HORIZONTAL: 0.42, VERTICAL: 0.55}  # of the room on each axis the canvas keeps
SEPARATOR = 6  # room a dock separator takes
SLACK = 3  # pixels a dock may move without it counting as a new preference
RETRIES = 3  # applications after a resize, when a late re-layout of the window undid one


def _along(size: QSize, orientation: Qt.Orientation) -> int:
    return size.width() if orientation == HORIZONTAL else size.height()


def _across(orientation: Qt.Orientation) -> Qt.Orientation:
    return VERTICAL if orientation == HORIZONTAL else HORIZONTAL


class DockSizes(QObject):
    """Keeps the docks of `window` at their preferred sizes, within the canvas's share.

    A preference is recorded when a dock's size changes while the window keeps its own: a
    separator dragged, `resizeDocks` or `restoreState` called, a dock shown, moved or floated.
    A window resize only applies the preferences, so the sizes it squeezes are never kept.
    """

    def __init__(self, window: QMainWindow):
        super().__init__(window)
        self.window = window
        self.preferred: dict[QDockWidget, QSize] = {}
        # The docks watched: every dock of the window (all made before it is shown). Kept here
        # because `findChildren` walks the whole window, milliseconds a call on a full one.
        self._all: list[QDockWidget] = []
        self.share = dict(SHARE)  # lowered where the user left the canvas less
        self._seen: dict[QDockWidget, QSize] = {}  # sizes after the last record or apply
        self._by_user = False  # the pending record is the user's own layout
        self._record_timer = QTimer(self, singleShot=True, interval=0)
        self._record_timer.timeout.connect(self.record)
        self._apply_timer = QTimer(self, singleShot=True, interval=0)
        self._apply_timer.timeout.connect(self.apply)
        # A look at the sizes once Qt has laid the window out after an application.
        self._look_timer = QTimer(self, singleShot=True, interval=30)
        self._look_timer.timeout.connect(self._look)
        self._retries = 0
        window.installEventFilter(self)

    def busy(self) -> bool:
        """True while sizes are still to be recorded or applied (tests wait for False)."""
        return any(t.isActive() for t in (self._record_timer, self._apply_timer,
                                           self._look_timer))

    def watch(self, dock: QDockWidget) -> None:
        """Record a preference when `dock` is shown, hidden, moved or floated."""
        self._all.append(dock)
        dock.visibilityChanged.connect(lambda _visible: self.record_soon())
        dock.dockLocationChanged.connect(lambda _area: self.record_soon())
        dock.topLevelChanged.connect(lambda _floating: self.record_soon())

    def record_soon(self, by_user: bool = False) -> None:
        """Record the sizes once the window's layout has settled (after this event).

        `by_user`: the sizes are the user's own (a separator dragged), kept even where they
        leave the canvas less than its usual share.
        """
        if not self._apply_timer.isActive():  # a resize is pending: its sizes are no choice
            self._by_user = self._by_user or by_user
            self._record_timer.start()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: D102 (Qt override)
        if watched is self.window:
            kind = event.type()
            if kind == QEvent.Type.Resize:
                self._record_timer.stop()  # sizes mid-resize are Qt's squeeze, not a choice
                self._retries = RETRIES
                self._apply_timer.start()
            elif kind == QEvent.Type.MouseButtonRelease:  # separators are the window's own
                self.record_soon(by_user=True)
            elif kind == QEvent.Type.Show:
                self.record_soon()
        return False

    # -- measuring ----------------------------------------------------------------------------

    def docks(self) -> dict[Area, list[QDockWidget]]:
        """The shown, docked docks of each area (a tab group by its current tab)."""
        out: dict[Area, list[QDockWidget]] = {}
        for dock in self._all:
            area = self.window.dockWidgetArea(dock)
            if not dock.isFloating() and dock.isVisible() and area in AREAS:
                out.setdefault(area, []).append(dock)
        return out

    def sizes(self) -> dict[Area, int]:
        """The size of each area holding a shown dock (a side's width, an end's height)."""
        return {area: max(_along(d.size(), AREAS[area]) for d in docks)
                for area, docks in self.docks().items()}

    def room(self, orientation: Qt.Orientation) -> int:
        """The pixels the canvas and the docks share along `orientation`.

        The window's width, or the height between the toolbar and the status bar.
        """
        if orientation == HORIZONTAL:
            return self.window.width()
        current = self.sizes()
        return self.window.centralWidget().height() + sum(
            current[a] + SEPARATOR for a in current if AREAS[a] == VERTICAL)

    def minimum(self, area: Area) -> int:
        """The least size Qt lets `area` take: its largest dock minimum, tabs hidden or not."""
        least = 0
        for dock in self._all:
            if dock.isFloating() or self.window.dockWidgetArea(dock) != area or \
                    not dock.toggleViewAction().isChecked():  # closed
                continue
            least = max(least, _along(dock.minimumSizeHint().expandedTo(dock.minimumSize()),
                                      AREAS[area]))
        return least

    def _wanted(self, dock: QDockWidget, orientation: Qt.Orientation) -> int:
        """`dock`'s preferred size along `orientation` (its size now if it has none yet)."""
        return _along(self.preferred.get(dock, dock.size()), orientation)

    # -- recording and applying ---------------------------------------------------------------

    def record(self) -> None:
        """Take the sizes that changed since the last look as the new preferences."""
        by_user, self._by_user = self._by_user, False
        if not self.window.isVisible():
            return
        for docks in self.docks().values():
            for dock in docks:
                seen = self._seen.get(dock)
                if dock not in self.preferred or seen is None or \
                        abs(dock.width() - seen.width()) > SLACK or \
                        abs(dock.height() - seen.height()) > SLACK:
                    self.preferred[dock] = dock.size()
        if by_user:
            central = self.window.centralWidget().size()
            for orientation in (HORIZONTAL, VERTICAL):
                left = _along(central, orientation) / max(self.room(orientation), 1)
                self.share[orientation] = min(SHARE[orientation], left)
        self.apply()

    def targets(self) -> dict[Area, int]:
        """The size each area holding a shown dock should have at the window's size."""
        docks = self.docks()
        want = {area: max(self._wanted(d, AREAS[area]) for d in shown)
                for area, shown in docks.items()}
        least = {area: self.minimum(area) for area in want}
        for orientation in (HORIZONTAL, VERTICAL):
            areas = [a for a in want if AREAS[a] == orientation]
            room = self.room(orientation) * (1 - self.share[orientation])
            _fit(want, areas, room - SEPARATOR * len(areas), least)
        # A side that owns a bottom or top corner runs past that row: the row has the rest of
        # the width, and Qt lets its docks overlap rather than the side give way.
        for end, corners in ((Area.BottomDockWidgetArea, (Qt.Corner.BottomLeftCorner,
                                                          Qt.Corner.BottomRightCorner)),
                             (Area.TopDockWidgetArea, (Qt.Corner.TopLeftCorner,
                                                       Qt.Corner.TopRightCorner))):
            sides = [a for a in (self.window.corner(c) for c in corners)
                     if a in want and AREAS[a] == HORIZONTAL]
            if end in docks and sides:
                room = self.room(HORIZONTAL) - self.row_minimum(docks[end])
                _fit(want, sides, room - SEPARATOR * (len(sides) + 1), least)
        return want

    @staticmethod
    def row_minimum(docks: list[QDockWidget]) -> int:
        """The width docks side by side in a row need: each column's widest minimum, summed.

        Docks at one x are tabs or stacked in a column; each further x is a column beside.
        """
        columns: dict[int, int] = {}
        for dock in docks:
            least = dock.minimumSizeHint().expandedTo(dock.minimumSize()).width()
            columns[dock.x()] = max(columns.get(dock.x(), 0), least)
        return sum(columns.values()) + SEPARATOR * max(len(columns) - 1, 0)

    def apply(self) -> None:
        """Give each area its target size and its docks their proportions back."""
        if not self.window.isVisible():
            return
        docks, current = self.docks(), self.sizes()
        # The plain Qt call: the window's own resizeDocks would record these as preferences.
        resize = QMainWindow.resizeDocks
        for area, size in self.targets().items():
            orientation = AREAS[area]
            if abs(size - current[area]) > 1:
                resize(self.window, docks[area][:1], [size], orientation)
            # Docks side by side in one area (a column beside another) are sized one by one:
            # the area's size, its widest dock's, says nothing of the narrower column.
            for dock in docks[area][1:]:
                own = min(size, self._wanted(dock, orientation))
                if _along(dock.size(), orientation) < own - SLACK:
                    resize(self.window, [dock], [own], orientation)
            if len(docks[area]) > 1:  # side by side or stacked: the split they were given
                across = _across(orientation)
                resize(self.window, docks[area],
                       [self._wanted(d, across) for d in docks[area]], across)
        self._look_timer.start()

    def _look(self) -> None:
        """Remember the sizes applied; apply again if a later re-layout moved them away."""
        current = self.sizes()
        missed = [a for a, size in self.targets().items()
                  if abs(current[a] - size) > SLACK and size >= self.minimum(a)]
        if missed and self._retries > 0:
            self._retries -= 1
            self.apply()
            return
        self._seen = {dock: dock.size() for docks in self.docks().values() for dock in docks}


def _fit(want: dict[Area, int], areas: list[Area], room: float, least: dict[Area, int]) -> None:
    """Scale the sizes of `areas` down together until they fit in `room`.

    An area that would go below its minimum stays at it, and the others give up more.
    """
    fixed: set[Area] = set()
    while True:
        free = [a for a in areas if a not in fixed]
        budget = room - sum(want[a] for a in fixed)
        total = sum(want[a] for a in free)
        if not free or total <= budget:
            return
        scale = max(budget, 0.0) / total
        low = [a for a in free if want[a] * scale < least[a]]
        if not low:
            for a in free:
                want[a] = int(want[a] * scale)
            return
        for a in low:
            want[a] = least[a]
            fixed.add(a)
