"""`kiln [FILE]`: start the desktop app, or render it to PNG files with `--screenshot DIR`.

FILE is a model, or a `.kiln` session (what a file manager passes when a session is
double-clicked: `packaging/kiln.desktop` runs `kiln %f`), which is opened as File > Open
Session opens it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from compiler.errors import KilnError, one_line

SCREENSHOT_SIZE = (1440, 900)  # the window of `kiln --screenshot`, and a headless run's screen

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
SAMPLE_MODEL = RESOURCES / "models" / "digits_cnn.onnx"

# Inside the headless fallback's folder (`--output`, else `offscreen_folder()`).
HEADLESS_SCREENSHOTS = "screenshots"
HEADLESS_BUNDLE = "bundle"

LOAD_TIMEOUT_MS = 300_000


class _UsageError(KilnError):
    """A command-line argument that cannot be used."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise _UsageError(f"{self.prog}: {message}")


def sample_model() -> Path:
    """The bundled sample model (package data of `app`, in a checkout and installed alike)."""
    if not SAMPLE_MODEL.is_file():
        raise KilnError(f"the bundled sample model {SAMPLE_MODEL.name} is missing")
    return SAMPLE_MODEL


def offscreen_folder() -> Path:
    """Where a run without a display writes, unless `--output` says: the user's data folder.

    Never the current folder: `kiln` typed in a source tree or a firmware repository must
    not leave files there.
    """
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kiln" / "offscreen run"


def has_display() -> bool:
    """True when a window can be shown: a windowing system, or a Qt platform that draws one."""
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform:
        return platform.split(":")[0] not in ("offscreen", "minimal")
    if sys.platform in ("win32", "darwin"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kiln", description="Open the Kiln workbench.")
    parser.add_argument("model", nargs="?", metavar="FILE",
                        help="the model, or the .kiln session, to open (default: the bundled "
                             "sample)")
    parser.add_argument("--screenshot", metavar="DIR",
                        help="render the main window and each panel to PNG files in DIR, then "
                             "exit")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="without a display: where the run's screenshots/ and bundle/ go "
                             "(default: kiln/offscreen run in the user's data folder)")
    return parser


def run_gui(argv: Sequence[str] | None = None) -> int:
    """Run the app; returns the exit code (2 with a one-line message for any error)."""
    headless = not has_display()
    try:
        args = _parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
        model = Path(args.model) if args.model else sample_model()
        # A scripted run refuses a bad session before any window; a window shows the error.
        label = _label(model) if headless or args.screenshot is not None else model.name
    except KilnError as exc:
        print(one_line(str(exc)), file=sys.stderr)
        return 2
    if headless and not os.environ.get("QT_QPA_PLATFORM"):
        # Qt's offscreen screen is 800x800 by default: the screenshots' window would be
        # squeezed into it, so the screen is the size the pictures are taken at.
        os.environ["QT_QPA_PLATFORM"] = offscreen_platform(*SCREENSHOT_SIZE)
    app = _application()
    from app.window.mainwindow import MainWindow

    interactive = args.screenshot is None and not headless
    if not interactive:
        _quiet_window_system_notes()
    window = MainWindow(remember=interactive)  # scripted runs leave the user's settings alone
    if interactive:
        window.show()
        from app.document.recovery import RESTORE

        if window.recovery.offer() != RESTORE:  # after a crash: its unsaved work first
            _open(window, model)
        return app.exec()

    base = Path(args.output) if args.output else offscreen_folder()
    folder = Path(args.screenshot) if args.screenshot else base / HEADLESS_SCREENSHOTS
    bundle = None
    try:
        written = _screenshot_flow(window, model, folder)
        if headless and args.screenshot is None:  # the main flow ends with an export
            bundle = _export_host_bundle(window, base / HEADLESS_BUNDLE)
    except KilnError as exc:
        print(one_line(str(exc)), file=sys.stderr)
        return 2
    finally:
        window.document.undo_stack.setClean()  # nothing to save in a scripted run
        window.close()
    if bundle is not None:
        print(f"No display found, so Kiln ran offscreen on {label}: host bundle written to "
              f"{bundle}/ (build and run it with `make -C {bundle} run`); screenshots written "
              f"to {folder}/")
    else:
        print(f"Screenshots of {label} written to {folder}/")
    for path in written:
        print(f"  {path.name}")
    return 0


# What the offscreen platform says of every window it cannot resize or raise: noise in a
# scripted run's output, which should only list what it wrote.
_WINDOW_SYSTEM_NOTES = ("This plugin does not support",)


def _quiet_window_system_notes() -> None:
    """Drop the offscreen platform's notes; every other Qt message still reaches stderr."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(kind, context, message: str) -> None:
        if not message.startswith(_WINDOW_SYSTEM_NOTES):
            print(message, file=sys.stderr)

    qInstallMessageHandler(handler)


def _export_host_bundle(window, folder: Path) -> Path:
    """Export the open model for the host as File > Export Bundle does; returns the folder."""
    from app.export.controller import run_export
    from views.export_dialog import ExportOptions

    options = ExportOptions("host", None, "net", "embedded", False, folder)
    return run_export(window.document.graph, options).folder


def _application():
    from PySide6.QtWidgets import QApplication

    from app.window import settings

    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0] if sys.argv else "kiln"])
    app.setOrganizationName(settings.ORGANIZATION)
    app.setApplicationName(settings.APPLICATION)
    app.setApplicationDisplayName("Kiln")
    return app


def is_session(path: Path) -> bool:
    """True for a `.kiln` session file (anything else is opened as a model)."""
    from app.document.sessions import SUFFIX

    return path.suffix.lower() == SUFFIX


def _label(path: Path) -> str:
    """How a scripted run names what it opened; reads a session (KilnError when it cannot)."""
    if not is_session(path):
        return path.name
    from app.document.sessions import read_session

    doc, model = read_session(path)
    original = doc["model"].get("path")
    return f"session {path.name} ({Path(original).name if original else model.name})"


def _open(window, path: Path) -> bool:
    """Start opening a model or a session; False when it could not even start."""
    if is_session(path):
        return window.sessions.open_session(path)
    return window.open_file(path) is not None


def _wait_for_load(window, path: Path) -> None:
    """Open `path` and run the event loop until it is all there; KilnError if it fails.

    A model is there once it is on the canvas; a session once its pipeline, target, ranges
    and view are applied too.
    """
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QMessageBox

    done: list[bool] = []
    failure: list[str] = []
    loop = QEventLoop()

    def finish(message: str | None = None) -> None:
        if message is None:
            done.append(True)
        else:
            failure.append(message)
        loop.quit()

    (window.sessions.restored if is_session(path) else window.modelLoaded).connect(
        lambda *_: finish())
    window.loadFailed.connect(finish)
    window.sessions.failed.connect(finish)
    QTimer.singleShot(LOAD_TIMEOUT_MS, loop.quit)
    # No one can click a dialog in a scripted run: errors go to stderr instead.
    original = QMessageBox.critical
    QMessageBox.critical = staticmethod(lambda *args, **kwargs: QMessageBox.StandardButton.Ok)
    try:
        if not _open(window, path):
            raise KilnError(failure[0] if failure else "could not start loading the model")
        loop.exec()
    finally:
        QMessageBox.critical = original
    if failure:
        raise KilnError(failure[0])
    if not done:
        window.cancel_loading()
        raise KilnError(f"{path.name}: loading took longer than {LOAD_TIMEOUT_MS // 1000} s")


# How long a screenshot waits for the memory plan and the code of a big model (the picture is
# taken anyway after that, showing "planning..." where the plan would be).
PLAN_WAIT_S = 120


def _wait_until_planned(app, window) -> None:
    """Run the event loop until the memory plan and the Code panel are done (or PLAN_WAIT_S)."""
    import time

    deadline = time.monotonic() + PLAN_WAIT_S
    _settle(app)
    while time.monotonic() < deadline and (window.memory.is_busy() or window.code.is_busy()):
        app.processEvents()
        time.sleep(0.02)
    _settle(app)


def _settle(app) -> None:
    for _ in range(5):
        app.processEvents()


def _representative_node(graph):
    """The node a screenshot selects: the first with weights (a Conv, say), else the first."""
    for node in graph.nodes:
        if any(v is not None and v.name in graph.constants for v in node.inputs):
            if node.op not in ("Reshape", "Unsqueeze", "Squeeze", "ConstantOfShape"):
                return node
    return graph.nodes[0] if graph.nodes else None


def offscreen_platform(width: int, height: int, folder: Path | None = None) -> str:
    """A `QT_QPA_PLATFORM` value: Qt's offscreen platform with one screen of that size.

    The screen is described in a JSON file in `folder` (a temporary folder, removed when
    the process ends, when None).
    """
    import atexit
    import json
    import shutil
    import tempfile

    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="kiln-screen-"))
        atexit.register(shutil.rmtree, folder, True)
    config = Path(folder) / f"screen-{width}x{height}.json"
    config.write_text(json.dumps({"screens": [{
        "name": f"offscreen {width}x{height}", "x": 0, "y": 0, "width": width,
        "height": height, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    return f"offscreen:configfile={config}"


def _screenshot_flow(window, model: Path, folder: Path) -> list[Path]:
    """Open the model or session, then write the window, the canvas at two zooms and each panel."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    folder.mkdir(parents=True, exist_ok=True)
    window.resize(*SCREENSHOT_SIZE)
    window.show()
    _settle(app)
    _wait_for_load(window, model)
    _wait_until_planned(app, window)
    canvas = window.canvas
    node = _representative_node(window.document.graph)
    written: list[Path] = []

    def save(widget, name: str) -> None:
        _settle(app)
        path = folder / name
        if not widget.grab().save(str(path)):
            raise KilnError(f"cannot write {path}")
        written.append(path)

    if node is not None:
        window.select_and_center(node.id)
    save(window, "main_window.png")
    canvas.fit()
    save(canvas, "canvas_fit.png")
    if node is not None:
        canvas.set_zoom(1.0)
        canvas.center_on(node.id)
    save(canvas, "canvas_zoomed.png")
    for key, dock in window.docks.items():
        dock.show()
        save(dock, f"{key}.png")
    # The properties panel scrolls; its whole page shows the weights and the histogram too.
    save(window.properties.page, "properties_full.png")
    window.open_search()
    window.search_bar.query.setText(node.op if node is not None else "")
    window.search_bar.search_now()
    save(window.search_bar, "search.png")
    window.search_bar.close_bar()
    window.show_shortcuts()
    save(window.shortcuts_dialog, "keyboard_shortcuts.png")
    window.shortcuts_dialog.close()
    window.show_guide()
    save(window.guide_dialog, "user_guide.png")
    window.guide_dialog.close()
    from app.window.help_dialogs import about_box

    box = about_box(window)
    box.show()
    save(box, "about.png")
    box.close()
    from app.window.panels import screenshot_all

    screenshot_all(window, save)
    from app.window.workspaces import screenshots as workspace_screenshots

    workspace_screenshots(window, save)  # last: the panels hold what the features showed
    return written
