"""The desktop files: a valid desktop entry, well-formed MIME types, an SVG icon, an install
that puts them where desktops look."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import require_tools

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ROOT / "packaging"
MIME = "{http://www.freedesktop.org/standards/shared-mime-info}"


def test_the_desktop_entry_validates():
    require_tools("desktop-file-validate")
    done = subprocess.run(["desktop-file-validate", str(PACKAGING / "kiln.desktop")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_the_mime_types_cover_models_and_sessions():
    root = ET.parse(PACKAGING / "kiln-mime.xml").getroot()
    types = {t.get("type"): [g.get("pattern") for g in t.iter(f"{MIME}glob")]
             for t in root.iter(f"{MIME}mime-type")}
    assert types == {"application/x-onnx": ["*.onnx"], "application/x-tflite": ["*.tflite"],
                     "application/x-kiln-session": ["*.kiln"]}
    entry = (PACKAGING / "kiln.desktop").read_text()
    assert all(t in entry for t in types)  # the app opens what it declares
    icon = ET.parse(PACKAGING / "kiln.svg").getroot()
    assert icon.tag == "{http://www.w3.org/2000/svg}svg"


def test_make_install_desktop_puts_them_in_place(tmp_path):
    require_tools("make")
    done = subprocess.run(["make", "-s", "-C", str(ROOT), "install-desktop",
                           f"XDG_DATA_HOME={tmp_path}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "applications" / "kiln.desktop").is_file()
    assert (tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "kiln.svg").is_file()
    assert (tmp_path / "mime" / "packages" / "kiln.xml").is_file()
    if shutil.which("update-mime-database"):
        globs = (tmp_path / "mime" / "globs2").read_text()
        assert "application/x-kiln-session:*.kiln" in globs
