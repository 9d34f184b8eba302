"""Offscreen screens of a chosen size: Qt's offscreen platform reads them from a JSON file."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path

# The GUI tests' screen: a desktop's, so a window asked for at 1400x900 gets it.
DESKTOP = (1920, 1200)


def screen_platform(width: int, height: int, folder: Path | None = None) -> str:
    """A `QT_QPA_PLATFORM` value: the offscreen platform with one screen of that size."""
    if folder is None:  # for the whole run: removed when it ends
        folder = Path(tempfile.mkdtemp(prefix="kiln-screen-"))
        atexit.register(shutil.rmtree, folder, True)
    config = folder / f"screen-{width}x{height}.json"
    config.write_text(json.dumps({"screens": [{
        "name": f"offscreen {width}x{height}", "x": 0, "y": 0, "width": width,
        "height": height, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    return f"offscreen:configfile={config}"
