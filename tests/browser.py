"""Headless Chromium for the console's browser test: Debian's `chromium` driven through its
`chromium-driver` by Selenium. The two packages come from the same source package, so the
driver always matches the browser, and Selenium is given both paths, so it never looks for
(or downloads) a browser or driver of its own.

Where they are missing, `chromium_paths` installs them with apt-get when it can (root on a
Debian-like system, as CI's machines are); elsewhere the test is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from node.cluster.local import ROOT

PACKAGES = ("chromium", "chromium-driver")
# Screenshots of the browser tests, kept after the run (git-ignored; named in the README).
ARTIFACTS = ROOT / "test-artifacts"


def _found() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def chromium_paths() -> tuple[str, str] | str:
    """(browser, driver), installing Debian's packages if need be; else why it cannot be had."""
    found = _found()
    if found is not None:
        return found
    if shutil.which("apt-get") is None:
        return "no chromium and chromedriver, and no apt-get to install Debian's chromium and chromium-driver"
    if os.geteuid() != 0:
        return (
            "no chromium and chromedriver; install them with: sudo apt-get install chromium chromium-driver"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", *PACKAGES]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {done.stderr.strip().splitlines()[-1:]}"
    return _found() or "apt-get installed chromium, but chromium or chromedriver is not on PATH"


def headless_chromium(browser: str, driver: str, downloads: Path) -> object:
    """A Selenium Chrome driver on Debian's chromium, headless, at a fixed window size."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        # As root (CI), Chromium's sandbox cannot start; the pages are our own.
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={downloads}",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)
