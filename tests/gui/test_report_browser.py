"""`kiln report` opened in headless Chromium with the network off: complete, exact, sortable.

The report's totals are checked against the commands it quotes, run separately in the same
process (`kiln memory --json`, `kiln bench --target --json`), and the page must load with no
request at all: a self-contained file opens from a USB stick.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.cli import main
from tests.browser import headless_chromium
from tests.conftest import SAMPLE_MODEL, require_tools, shared_models

SHOTS = os.environ.get("KILN_REPORT_SHOTS")  # a folder: keep screenshots there to look at


@pytest.fixture(scope="module")
def offline_chromium():
    """Headless Debian Chromium through Selenium, its network emulated offline."""
    driver = headless_chromium("browser checks of the HTML report", (1280, 2400), logs=True)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0})
    yield driver
    driver.quit()


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _open(driver, path: Path) -> None:
    """Load the page; nothing but the file itself may be requested, and nothing may fail."""
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(path.as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    resources = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources == []
    requests = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in requests
            if m["method"] == "Network.requestWillBeSent"]
    assert all(url == path.as_uri() for url in urls), urls
    failed = [m for m in requests if m["method"] == "Network.loadingFailed"]
    assert failed == []
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    assert driver.execute_script("return document.querySelectorAll('svg.timeline rect').length")


def _column(driver, key: str) -> list[str]:
    index = driver.execute_script(
        f"return document.querySelector('#layers th[data-key=\"{key}\"]').cellIndex")
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#layers tbody tr'))"
        f".map(r => r.cells[{index}].getAttribute('data-value'))")


def _card(driver, ident: str) -> int:
    return int(driver.find_element("id", ident).get_attribute("data-value"))


def _check_sorting(driver, key: str) -> None:
    header = driver.find_element("css selector", f'#layers th[data-key="{key}"]')
    before = _column(driver, key)
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    values = [float(v) for v in _column(driver, key)]
    assert values == sorted(values) and sorted(values) == sorted(float(v) for v in before)
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert [float(v) for v in _column(driver, key)] == sorted(values, reverse=True)


def _shot(driver, name: str) -> None:
    if SHOTS:
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1440, min(height + 40, 6000))
        driver.execute_script("window.scrollTo(0, 0); "
                              "document.querySelector('.scroll').scrollLeft = 0")
        driver.save_screenshot(str(Path(SHOTS) / name))


def test_resnet_int8_report_on_cortex_m7(offline_chromium, tmp_path, capsys):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    model = str(shared_models() / "onnx" / "pretrainedResnet_quant.onnx")
    report = tmp_path / "resnet.html"
    assert main(["report", model, "--target", "cortex-m7", "-o", str(report)]) == 0
    capsys.readouterr()
    memory = _json(capsys, ["memory", model, "--target", "cortex-m7", "--json"])
    bench = _json(capsys, ["bench", model, "--target", "cortex-m7", "--json", "--no-peer"])
    driver = offline_chromium
    _open(driver, report)
    kernels = driver.execute_script(
        "return Array.from(document.querySelectorAll('#layers tbody tr'))"
        ".map(r => r.cells[1].textContent)")
    assert kernels == [layer["kernel"] for layer in bench["layers"]]
    assert [int(v) for v in _column(driver, "instructions")] == \
        [layer["instructions"] for layer in bench["layers"]]
    total = driver.find_element("id", "total-instructions").get_attribute("data-value")
    assert int(total) == bench["instructions"]
    assert _card(driver, "arena") == memory["activations"]
    assert _card(driver, "lower-bound") == memory["lower_bound"]
    _check_sorting(driver, "instructions")
    _shot(driver, "report_resnet_m7.png")


def test_digits_report_on_the_host(offline_chromium, tmp_path, capsys):
    report = tmp_path / "digits.html"
    assert main(["report", str(SAMPLE_MODEL), "-o", str(report)]) == 0
    capsys.readouterr()
    memory = _json(capsys, ["memory", str(SAMPLE_MODEL), "--json"])
    compiled = _json(capsys, ["compile", str(SAMPLE_MODEL), "--target", "host", "-o",
                              str(tmp_path / "bundle"), "--json"])
    inspect = _json(capsys, ["inspect", str(SAMPLE_MODEL), "--json"])
    driver = offline_chromium
    _open(driver, report)
    kernels = driver.execute_script(
        "return Array.from(document.querySelectorAll('#layers tbody tr'))"
        ".map(r => r.cells[1].textContent)")
    assert kernels == [layer["symbol"] for layer in compiled["layers"]]
    assert [int(v) for v in _column(driver, "macs")] == \
        [layer["macs"] for layer in compiled["layers"]]
    assert _card(driver, "arena") == memory["activations"]
    assert _card(driver, "lower-bound") == memory["lower_bound"]
    assert _card(driver, "macs") == inspect["macs"]
    assert _card(driver, "params") == inspect["params"]
    text = driver.find_element("id", "section-text").text
    assert text == f"{compiled['sections']['text']:,} B"
    _check_sorting(driver, "macs")
    _shot(driver, "report_digits_host.png")
