"""`kiln`: a command (`app.cli`), or the window when none is named (`app.window.gui`).

The one module that knows both, so the command line can be used, tested and packaged
without Qt.
"""

from __future__ import annotations

from collections.abc import Sequence


def open_window(argv: list[str]) -> int:
    """`kiln [FILE] [--screenshot DIR] [--output DIR]`: the desktop app, imported when asked."""
    from app.window.gui import run_gui

    return run_gui(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kiln` console script.

    Ctrl+C while the libraries are still loading is an interruption, not a traceback.
    """
    import sys

    try:
        from app.cli import main as run_command
    except KeyboardInterrupt:
        print("kiln: interrupted", file=sys.stderr)
        return 130
    return run_command(argv, open_window)
