"""Workspaces, one per task: each shows its own few docks in a layout of its own, kept.

Every feature adds a dock; shown together they leave each a strip (eleven panels with
Explore open). As Qt Creator's modes and Eclipse's perspectives do, the window has a
workspace per task, switched from the mode bar (Ctrl+1 to Ctrl+5): Inspect, Passes,
Quantize, Explore and Deploy. Each lists the docks it starts with, where and how big; the
user may move, resize, close or add docks, and each workspace keeps its own layout
(`QMainWindow.saveState`, remembered by `app.window.settings`). A dock a feature brings
forward (a calibration's Quantization dock, the Layer Metrics of an overlay) takes the
window to the first workspace that has it, unless the current one has it too; a dock the
user opens from the View menu joins the current workspace.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QEvent, QObject, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QStyle, QTabBar, QToolBar, QToolButton

Area = Qt.DockWidgetArea
LEFT, RIGHT, BOTTOM = (Area.LeftDockWidgetArea, Area.RightDockWidgetArea,
                       Area.BottomDockWidgetArea)
STATE_VERSION = 1  # of the saved layouts: another version is dropped, not misread


@dataclass(frozen=True)
class Place:
    """Where a workspace puts one dock when it is first entered (or its layout reset).

    Exactly one of `area` (starts a column or row there), `tab` (a tab behind that dock),
    `below` or `beside` (splits that dock's room) is given. `size` is the width on a side,
    the height at the bottom (0: Qt's choice); `shown` False places a dock its feature shows
    when it has something (problems, an overlay chosen).
    """

    dock: str
    area: Area | None = None
    tab: str | None = None
    below: str | None = None
    beside: str | None = None
    size: int = 0
    shown: bool = True


@dataclass(frozen=True)
class Workspace:
    """A task's docks in their first layout; `why` is the mode button's tooltip."""

    name: str
    why: str
    places: tuple[Place, ...]

    def docks(self) -> tuple[str, ...]:
        """The titles of the docks it places."""
        return tuple(p.dock for p in self.places)


# Sizes are for the 1400x900 window a first start asks for; app.window.dock_sizes scales
# them down together on a smaller screen, the canvas keeping its share.
WORKSPACES = (
    Workspace("Inspect", "The graph, its properties, memory plan and code; edit it here", (
        Place("Operator Palette", area=LEFT, size=220),
        Place("Problems", tab="Operator Palette", shown=False),
        Place("Properties", area=RIGHT, size=340),
        Place("Activations", tab="Properties", shown=False),
        Place("Minimap", below="Properties", size=190),
        Place("Memory Timeline", area=BOTTOM, size=250),
        Place("Code", beside="Memory Timeline", size=420),
    )),
    Workspace("Passes", "Step through the pass pipeline, stage by stage; edit the pipeline", (
        Place("Passes", area=LEFT, size=380),
        Place("Pipeline", below="Passes", size=330),
        Place("Problems", tab="Pipeline", shown=False),
        Place("Properties", area=RIGHT, size=320),
    )),
    Workspace("Quantize", "Calibrate, tune ranges on histograms, see each layer's error", (
        Place("Quantization", area=RIGHT, size=600),
        Place("Properties", tab="Quantization"),
        Place("Activations", tab="Quantization", shown=False),
    )),
    Workspace("Explore", "Search quantization and compile options for the fastest points", (
        Place("Explore", area=LEFT, size=520),
        Place("Properties", area=RIGHT, size=290),
    )),
    Workspace("Deploy", "Memory plan, generated code and per-layer cost on the target", (
        Place("Code", area=RIGHT, size=480),
        Place("Layer Metrics", below="Code", size=330),
        Place("Memory Timeline", area=BOTTOM, size=280),
    )),
)
NAMES = tuple(w.name for w in WORKSPACES)

# The least size at which each panel can still be read; the window never squeezes a dock
# below it (a title bar's text and buttons always fit too: `title_width`).
MINIMUM = {"Properties": QSize(240, 200), "Minimap": QSize(120, 90),
           "Operator Palette": QSize(170, 150), "Problems": QSize(200, 100),
           "Quantization": QSize(340, 300), "Explore": QSize(320, 300),
           "Layer Metrics": QSize(260, 150), "Activations": QSize(260, 200),
           "Memory Timeline": QSize(260, 170), "Code": QSize(270, 150),
           "Passes": QSize(240, 200), "Pipeline": QSize(240, 160)}


def _orientation(place: Place) -> Qt.Orientation:
    """The direction `place.size` measures: a side's or a row's width, a column's height."""
    if place.area in (LEFT, RIGHT) or place.beside is not None:
        return Qt.Orientation.Horizontal
    return Qt.Orientation.Vertical


def title_width(dock: QDockWidget) -> int:
    """The width a dock's title bar needs: its title and its float and close buttons."""
    style = dock.style()
    button = style.pixelMetric(QStyle.PixelMetric.PM_DockWidgetTitleBarButtonMargin) + \
        style.pixelMetric(QStyle.PixelMetric.PM_SmallIconSize)
    margin = style.pixelMetric(QStyle.PixelMetric.PM_DockWidgetTitleMargin)
    return dock.fontMetrics().horizontalAdvance(dock.windowTitle()) + 2 * (button + 4) + \
        4 * margin + 8


def dock_title(dock: QDockWidget) -> str:
    """The title a workspace knows the dock by (its object name without `dock:`)."""
    return dock.objectName().removeprefix("dock:")


class Workspaces(QObject):
    """The window's workspaces: the mode bar, each workspace's layout, following docks.

    Signals:
        switched(str): the window shows this workspace now.
    """

    switched = Signal(str)

    def __init__(self, window: QMainWindow):
        super().__init__(window)
        self.window = window
        self.docks = {dock_title(d): d for d in window.findChildren(QDockWidget)}
        self.current = NAMES[0]
        self.states: dict[str, QByteArray] = {}  # layouts of the workspaces left
        self.joined: dict[str, set[str]] = {name: set() for name in NAMES}  # by the user
        self._arranging = False
        self._shown: list[QDockWidget] = []  # docks shown since the last look
        self._follow_timer = QTimer(self, singleShot=True, interval=0)
        self._follow_timer.timeout.connect(self._follow)
        for title, dock in self.docks.items():
            least = MINIMUM.get(title, QSize(0, 0))
            dock.setMinimumSize(max(least.width(), title_width(dock), dock.minimumWidth()),
                                max(least.height(), dock.minimumHeight()))
            dock.installEventFilter(self)
            dock.toggleViewAction().triggered.connect(
                lambda on, t=title: on and self.joined[self.current].add(t))
        self.actions = self._build_bar()
        self.arrange(self.current)

    def _build_bar(self) -> dict[str, QAction]:
        bar = QToolBar("Workspaces", self.window)
        bar.setObjectName("toolbar:workspaces")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        bar.setContextMenuPolicy(Qt.ContextMenuPolicy.PreventContextMenu)  # never hidden
        bar.toggleViewAction().setVisible(False)
        group = QActionGroup(bar)
        actions = {}
        for i, workspace in enumerate(WORKSPACES, start=1):
            action = QAction(workspace.name, bar)
            action.setCheckable(True)
            action.setShortcut(QKeySequence(f"Ctrl+{i}"))
            action.setToolTip(f"{workspace.why} ({action.shortcut().toString()})")
            action.setStatusTip(workspace.why)
            action.triggered.connect(lambda _on=False, n=workspace.name: self.switch(n))
            group.addAction(action)
            bar.addAction(action)
            button = bar.widgetForAction(action)
            if isinstance(button, QToolButton):
                button.setObjectName(f"workspace:{workspace.name}")
            actions[workspace.name] = action
        actions[self.current].setChecked(True)
        self.window.addToolBar(bar)
        self.bar = bar
        menu = next((a.menu() for a in self.window.menuBar().actions()
                     if a.text() == "&View" and a.menu() is not None), None)
        if menu is not None:  # listed with their keys (Help > Keyboard Shortcuts reads menus)
            workspaces = menu.addMenu("&Workspace")
            workspaces.addActions(list(actions.values()))
        return actions

    # -- which docks a workspace has -----------------------------------------------------------

    def workspace(self, name: str | None = None) -> Workspace:
        """The workspace named `name` (default: the current one)."""
        name = name or self.current
        return next(w for w in WORKSPACES if w.name == name)

    def has(self, title: str, name: str | None = None) -> bool:
        """Whether workspace `name` (default: current) holds the dock: placed or joined."""
        name = name or self.current
        return title in self.workspace(name).docks() or title in self.joined[name]

    def home(self, title: str) -> str | None:
        """The first workspace that places the dock (None: a dock no workspace knows)."""
        return next((w.name for w in WORKSPACES if title in w.docks()), None)

    def shown_docks(self) -> list[QDockWidget]:
        """The docks shown docked in the window (a tab group by its every tab)."""
        return [d for d in self.docks.values() if not d.isHidden() and not d.isFloating()]

    # -- switching -------------------------------------------------------------------------------

    def switch(self, name: str) -> None:
        """Show workspace `name`: the current one's layout is kept, `name`'s brought back."""
        if name not in NAMES:
            raise ValueError(f"no workspace named {name!r}: {', '.join(NAMES)}")
        self.actions[name].setChecked(True)
        if name == self.current:
            return
        self.states[self.current] = self.window.saveState(STATE_VERSION)
        self.current = name
        state = self.states.get(name)
        self._arranging = True
        try:
            if state is None or not self.window.restoreState(state, STATE_VERSION):
                self.arrange(name)
        finally:
            self._arranging = False
        self._hide_unused_tab_bars()
        self.joined[name] |= {dock_title(d) for d in self.shown_docks()}
        self.switched.emit(name)

    def arrange(self, name: str) -> None:
        """Put workspace `name`'s docks where it starts them; hide every other dock."""
        window, places = self.window, self.workspace(name).places
        placed = {p.dock for p in places}
        self._arranging = True
        try:
            # Out of every tab group and split first: a dock tabbed behind another (hidden
            # or not) would take the next one split beside it into its tabs.
            for title, dock in self.docks.items():
                if title not in placed and dock.isFloating():
                    dock.hide()  # floating as the user left it, where it belongs
                    continue
                dock.setFloating(False)
                window.removeDockWidget(dock)
                if title not in placed:  # kept in the layout, hidden, for its feature
                    window.addDockWidget(self._start_area(title), dock)
                    dock.hide()
            # Columns and rows, then their splits, then tabs: a split of a dock in a tab
            # group would become one more tab.
            for p in sorted(places, key=lambda p: 0 if p.area else 2 if p.tab else 1):
                dock = self.docks.get(p.dock)
                if dock is None:
                    continue
                if p.area is not None:
                    window.addDockWidget(p.area, dock)
                elif p.tab is not None:
                    window.tabifyDockWidget(self.docks[p.tab], dock)
                else:
                    window.splitDockWidget(self.docks[p.below or p.beside], dock,
                                           Qt.Orientation.Vertical if p.below else
                                           Qt.Orientation.Horizontal)
                dock.setVisible(p.shown)
            for p in places:  # each tab group shows the dock that starts it
                if p.area is not None or p.below or p.beside:
                    self.docks[p.dock].raise_()
            for p in places:
                if p.size and p.shown and p.tab is None:
                    window.resizeDocks([self.docks[p.dock]], [p.size], _orientation(p))
        finally:
            self._arranging = False
        self.joined[name] = set()
        self._hide_unused_tab_bars()

    def _hide_unused_tab_bars(self) -> None:
        """Hide the dock tab bars of tab groups no longer shown.

        Qt keeps a tab group's bar shown after its docks leave the layout: it was left
        painted over the canvas of the next workspace.
        """
        groups = []
        for dock in self.shown_docks():
            group = {dock.windowTitle()} | {d.windowTitle() for d in
                                             self.window.tabifiedDockWidgets(dock)
                                             if not d.isHidden()}
            if len(group) > 1:
                groups.append(group)
        for bar in self.window.findChildren(QTabBar):
            if bar.parentWidget() is self.window and not bar.isHidden():
                tabs = {bar.tabText(i) for i in range(bar.count())}
                if tabs not in groups:
                    bar.hide()

    def _start_area(self, title: str) -> Area:
        """The area where the dock's home workspace starts it (or its column or row)."""
        places = {p.dock: p for w in WORKSPACES for p in reversed(w.places)}
        place = places.get(title)
        while place is not None and place.area is None:
            place = places.get(place.tab or place.below or place.beside)
        return place.area if place is not None else RIGHT

    def reset(self) -> None:
        """View > Reset Layout: the current workspace's docks where it starts them."""
        self.states.pop(self.current, None)
        self.arrange(self.current)

    def busy(self) -> bool:
        """True while a dock a feature showed may still take the window to its workspace."""
        return self._follow_timer.isActive()

    # -- docks a feature brings forward -----------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: D102 (Qt override)
        if event.type() == QEvent.Type.Show and not event.spontaneous() and \
                not self._arranging and isinstance(watched, QDockWidget):
            # Looked at after this event: a View menu toggle says it was the user's own.
            self._shown.append(watched)
            self._follow_timer.start()
        return False

    def _follow(self) -> None:
        """Take the window to the workspace of each dock a feature showed outside its own.

        A dock of the current workspace comes forward from behind its tabs instead.
        """
        shown, self._shown = self._shown, []
        for dock in shown:
            title = dock_title(dock)
            if not dock.isVisible() or dock.isFloating():
                continue
            home = self.home(title)
            if self.has(title) or home is None:
                if self.window.tabifiedDockWidgets(dock):
                    dock.raise_()
                continue
            # Panels open now that the other workspace keeps hidden until asked for (the
            # Activations of a sample run) stay open there.
            carried = [d for d in self.shown_docks() if dock_title(d) in {
                p.dock for p in self.workspace(home).places if not p.shown}]
            self._arranging = True
            try:
                dock.hide()  # not kept in the layout of the workspace left
            finally:
                self._arranging = False
            self.switch(home)
            self._arranging = True
            try:
                for other in carried:
                    other.show()
                dock.show()
            finally:
                self._arranging = False
            self._hide_unused_tab_bars()
            dock.raise_()

    # -- kept between runs --------------------------------------------------------------------

    def saved(self) -> tuple[str, dict[str, QByteArray]]:
        """The current workspace's name and every workspace's layout, the current one now."""
        return self.current, {**self.states,
                              self.current: self.window.saveState(STATE_VERSION)}

    def restore(self, current: str, states: dict[str, QByteArray]) -> None:
        """Take saved layouts and show `current` with its own (unknown names are dropped)."""
        self.states = {n: s for n, s in states.items() if n in NAMES}
        name = current if current in NAMES else NAMES[0]
        state = self.states.pop(name, None)
        if name != self.current:
            self.current = name
            self.arrange(name)
        self.actions[name].setChecked(True)
        if state is not None:
            self._arranging = True
            try:
                self.window.restoreState(state, STATE_VERSION)
            finally:
                self._arranging = False
            self._hide_unused_tab_bars()
        self.joined[name] |= {dock_title(d) for d in self.shown_docks()}


def screenshots(window, save) -> None:
    """workspace_<name>.png: the window in each workspace, at the size its screen allows."""
    workspaces: Workspaces = window.workspaces
    current = workspaces.current
    for name in NAMES:
        workspaces.switch(name)
        save(window, f"workspace_{name.lower()}.png")
    workspaces.switch(current)
