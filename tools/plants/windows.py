"""Plants of the windows that fit their screen and of the workspaces, one per task."""

from __future__ import annotations

from plants import Plant

WORKSPACES = "tests/gui/test_workspaces.py"

PLANTS = (
    Plant("window-geometry-not-clamped", "views/screen_fit.py",
          "    return QSize(screen.width() - margins.left() - margins.right(),",
          "    return QSize(3 * screen.width() - margins.left() - margins.right(),",
          (WORKSPACES + "::test_every_window_fits_a_screen_of",),
          "a window opens at its asked-for size past a small screen"),
    Plant("resized-window-left-off-screen", "views/screen_fit.py",
          "                if widget.isVisible() and not inside_screen(widget):",
          "                if widget.isVisible() and inside_screen(widget):",
          (WORKSPACES + "::test_a_window_made_bigger_than_its_screen_is_brought_back_inside",),
          "a window resized past its screen stays there"),
    Plant("escape-does-not-close-compare", "views/screen_fit.py",
          'keys = [QKeySequence(Qt.Key.Key_Escape), QKeySequence("Ctrl+W")]',
          'keys = [QKeySequence("Ctrl+W")]',
          (WORKSPACES + "::test_compare_fits_beside_the_main_window_and_closes_from_the_keyboard",),
          "Esc does nothing in the Compare window"),
    Plant("workspace-loses-its-layout", "app/window/workspaces.py",
          "        self.states[self.current] = self.window.saveState(STATE_VERSION)\n",
          "        self.states.pop(self.current, None)\n",
          (WORKSPACES + "::test_switching_by_clicks_keeps_each_workspace_layout",),
          "a workspace left and entered again starts over from its first layout"),
    Plant("feature-dock-stays-in-the-wrong-workspace", "app/window/workspaces.py",
          "            self.switch(home)\n",
          "            pass\n",
          (WORKSPACES + "::test_a_panel_its_feature_shows_takes_the_window_to_its_workspace",),
          "Layer Metrics opens squeezed into the workspace shown instead of its own"),
    Plant("dock-minimum-sizes-dropped", "app/window/workspaces.py",
          "            least = MINIMUM.get(title, QSize(0, 0))",
          "            least = QSize(0, 0)",
          (WORKSPACES + "::test_each_workspace_at_1400x900_shows_its_docks_readable",
           WORKSPACES + "::test_every_window_fits_a_screen_of"),
          "docks may be squeezed below a readable size on a small screen"),
    Plant("timeline-labels-every-step", "views/timeline.py",
          "        every = max(1, _nice_step(max(steps / 12, label / max(room, 1e-6))))",
          "        every = max(1, _nice_step(steps / 12))",
          (WORKSPACES + "::test_the_timeline_labels_its_steps_without_running_them_together",),
          "a narrow timeline's step labels run together (0123456789101)"),
    Plant("stale-tab-bar-over-the-canvas", "app/window/workspaces.py",
          "                if tabs not in groups:\n                    bar.hide()",
          "                if tabs not in groups:\n                    pass",
          (WORKSPACES + "::test_every_window_fits_a_screen_of",),
          "the Quantize workspace's tab bar stays painted over the Explore canvas"),
)
