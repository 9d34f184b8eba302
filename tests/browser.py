"""Headless Debian Chromium through Selenium, for the tests of HTML and SVG the app writes."""

from __future__ import annotations

import shutil

from tests.conftest import require_module, require_tools


def headless_chromium(purpose: str, window: tuple[int, int] | None = None,
                      logs: bool = False):
    """A Chromium driver (skipped with the reason when Chromium or Selenium is absent).

    `window` sizes it; `logs` keeps the browser and performance logs (failed requests).
    """
    require_tools("chromium", "chromedriver")
    webdriver = require_module("selenium.webdriver", purpose)
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--force-device-scale-factor=1", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    if window is not None:
        options.add_argument(f"--window-size={window[0]},{window[1]}")
    if logs:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    options.binary_location = shutil.which("chromium")
    return webdriver.Chrome(options=options,
                            service=webdriver.ChromeService(shutil.which("chromedriver")))
