"""The walkthrough in a real browser (arrow keys, drawn SVG, region names) and from the GUI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.cli import main
from compiler.driver import Compilation, Options
from compiler.frontends.load import load_model
from compiler.walkthrough.svg import elide
from tests.browser import headless_chromium
from tests.compiler.test_walkthrough import expected_region
from tests.conftest import SAMPLE_MODEL, shared_models
from tests.gui.helpers import make_window

NOTES = {"to_nhwc": "Channels go last here.\n\nAsk: why does the Transpose vanish later?",
         "dce#2": "The final clean-up <everything unused>."}


@pytest.fixture(scope="module")
def chromium():
    """Headless Debian Chromium through Selenium (skipped, with the reason, when absent)."""
    driver = headless_chromium("browser checks of the walkthrough", (1280, 900))
    yield driver
    driver.quit()


def _expected_pages(path: Path, target: str) -> list[tuple[str, list[str], list[str]] | str]:
    """Per changed stage, in order: (key, names before, names after), or a lowering pass's key."""
    compiled = Compilation(load_model(path))
    result = compiled.passes(snapshots=True)
    pages, before, runs = [], result.initial, {}
    for record in result.records:
        runs[record.name] = runs.get(record.name, 0) + 1
        key = record.name if runs[record.name] == 1 else f"{record.name}#{runs[record.name]}"
        if record.changed:
            pages.append((key, *expected_region(before, record.snapshot, record)))
        before = record.snapshot
    return pages + [r.name for r in compiled.lowering(Options(target)) if r.changed]


def _check_drawn(driver) -> None:
    """Every SVG on the page has a size and every image loaded."""
    sizes = driver.execute_script(
        "return Array.from(document.querySelectorAll('svg')).map(function (s) {"
        " var r = s.getBoundingClientRect(); return [r.width, r.height]; });")
    assert sizes and all(w > 0 and h > 0 for w, h in sizes), sizes
    broken = driver.execute_script(
        "return Array.from(document.images).filter(function (i) {"
        " return !i.complete || i.naturalWidth === 0; }).length;")
    assert broken == 0


def _names(driver, side: str) -> list[str]:
    """Full names of the boxes of one side; each box shows its name, elided when long."""
    pairs = driver.execute_script(
        f"return Array.from(document.querySelectorAll('svg[data-side=\"{side}\"] "
        "text.node-name')).map(function (t) { return [t.dataset.name, t.textContent]; });")
    assert all(shown == elide(name) for name, shown in pairs)
    return [name for name, _ in pairs]


@pytest.mark.parametrize("which", ["digits", "kws-int8"])
def test_browser_steps_through_every_changed_stage(chromium, tmp_path, which):
    from selenium.webdriver.common.keys import Keys

    path, target = ((SAMPLE_MODEL, "host") if which == "digits" else
                    (shared_models() / "onnx" / "kws_ref_model.onnx", "cortex-m7"))
    session = tmp_path / "lesson.kiln"
    session.write_text(json.dumps({"kiln_session": 1, "notes": NOTES}))
    folder = tmp_path / "walk"
    assert main(["walkthrough", str(path), "--target", target, "--session", str(session),
                 "-o", str(folder)]) == 0
    for page in folder.glob("*.html"):  # nothing to fetch: the pages open from a USB stick
        text = page.read_text()
        assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "https://" not in text and "src=" not in text
    expected = _expected_pages(path, target)
    chromium.get((folder / "index.html").as_uri())
    body = chromium.find_element("tag name", "body")
    seen = []
    for want in expected:
        body.send_keys(Keys.ARROW_RIGHT)
        title = chromium.find_element("tag name", "h1").text
        body = chromium.find_element("tag name", "body")
        _check_drawn(chromium)
        seen.append(chromium.current_url.rsplit("/", 1)[1])
        if isinstance(want, tuple):
            key, before, after = want
            assert title == key
            assert sorted(_names(chromium, "before")) == sorted(before), key
            assert sorted(_names(chromium, "after")) == sorted(after), key
        else:
            assert title.startswith(f"{want}: ")
            assert chromium.find_elements("css selector", "svg.timeline")
            assert "One kernel followed down" in chromium.page_source
        for stage, note in NOTES.items():
            first = note.split("\n")[0]
            assert (first in chromium.find_element("tag name", "main").text) == \
                (title == stage), (title, stage)
    body.send_keys(Keys.ARROW_RIGHT)  # the last page has no next: the key stays put
    assert chromium.current_url.rsplit("/", 1)[1] == seen[-1]
    body.send_keys(Keys.ARROW_LEFT)
    assert chromium.current_url.rsplit("/", 1)[1] == (seen[-2] if len(seen) > 1
                                                      else "index.html")
    assert len(seen) == len(set(seen)) == len(expected)


def test_gui_exports_the_walkthrough_with_the_notes(qtbot, tmp_path, monkeypatch,
                                                    message_boxes):
    window = make_window(qtbot)
    window.document.stage_notes = dict(NOTES)
    folder = tmp_path / "digits-walkthrough"
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(folder), "")))
    controller = window.walkthrough
    assert controller.action in window.stepping.menu.actions()
    with qtbot.waitSignal(controller.written, timeout=60000):
        controller.action.trigger()
    pages = json.loads((folder / "walkthrough.json").read_text())["stages"]
    page = {s["key"]: s["page"] for s in pages}
    assert "Channels go last here." in (folder / page["to_nhwc"]).read_text()
    assert "&lt;everything unused&gt;" in (folder / page["dce#2"]).read_text()
    marker = (folder / "walkthrough.json").stat().st_mtime_ns
    message_boxes.answer = QMessageBox.StandardButton.No
    assert controller.action.trigger() is None and controller.job.is_active() is False
    assert message_boxes.shown[-1][1] == "Replace Walkthrough?"
    assert (folder / "walkthrough.json").stat().st_mtime_ns == marker
    message_boxes.answer = QMessageBox.StandardButton.Yes
    window.document.stage_notes = {"to_nhwc": "A second thought."}
    with qtbot.waitSignal(controller.written, timeout=60000):
        controller.action.trigger()
    text = (folder / page["to_nhwc"]).read_text()
    assert "A second thought." in text and "Channels go last here." not in text
