"""Plants in the smaller fixes of the workbench a new user tried: tabs, report wording."""

from __future__ import annotations

from plants import Plant

PLANTS = (
    Plant("smaller-view-menu-leaves-tab-behind", "app/window/workspaces.py",
          "if self.window.tabifiedDockWidgets(dock):\n                    dock.raise_()",
          "if self.window.tabifiedDockWidgets(dock):\n                    pass",
          ("tests/gui/test_activations.py",),
          "View > Activations adds a tab behind Properties, as if nothing happened"),
    Plant("smaller-report-promises-times", "compiler/report/html.py",
          'f", estimated times at {report.clock_mhz:g} MHz.</p>" if report.instructions',
          'f", estimated times at {report.clock_mhz:g} MHz.</p>" if True',
          ("tests/compiler/test_report.py",),
          "a report without instruction counts still promises estimated times"),
    Plant("smaller-calibrate-ok-jumps", "app/quant/calibrate_dialog.py",
          "policy.setRetainSizeWhenHidden(True)", "policy.setRetainSizeWhenHidden(False)",
          ("tests/gui/test_calibrate_journey.py",),
          "the Calibrate dialog's OK button jumps away when a preview or a message appears"),
    Plant("smaller-boards-of-every-core", "views/export_dialog.py",
          "view.setRowHidden(row, BOARDS[self.board.itemData(row)].target != target)",
          "view.setRowHidden(row, False)", ("tests/gui/test_export.py",),
          "the export's board list offers boards of other cores than the chosen target"),
    Plant("smaller-opening-view-ignores-resize", "views/canvas.py",
          "        if self._opening_view:  # docks still settling",
          "        if False:  # docks still settling", ("tests/views/test_canvas.py",),
          "a model opened while the docks settle keeps a view fitted to the old canvas size"),
    Plant("smaller-headless-screen-800", "app/window/gui.py",
          "os.environ[\"QT_QPA_PLATFORM\"] = offscreen_platform(*SCREENSHOT_SIZE)",
          "os.environ[\"QT_QPA_PLATFORM\"] = \"offscreen\"",
          ("tests/gui/test_export_whole.py",),
          "a headless run's screenshots are squeezed into Qt's 800x800 offscreen screen"),
)
