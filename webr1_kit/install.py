"""`webr1 install-browser`: make sure a Chromium the kit can drive is present.

Order, as the kit looks for a browser at run time:
1. an existing browser: $WEBR1_BROWSER, Playwright's own, or a system Chromium/Chrome;
2. Playwright's own build (`playwright install chromium`), which needs network;
3. the system package (`apt-get install chromium`), when running as root on Debian/Ubuntu.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def _playwright_chromium_path() -> str | None:
    """Where Playwright's own Chromium lives (whether or not it is installed)."""
    try:
        from playwright.sync_api import sync_playwright  # a short-lived driver, outside any event loop
    except ImportError:
        return None
    try:
        with sync_playwright() as p:
            return p.chromium.executable_path
    except Exception:
        return None


def current_browser() -> str | None:
    from .browser import BrowserNotFound, find_browser

    try:
        return find_browser(None, _playwright_chromium_path())
    except BrowserNotFound:
        return None


def install_browser(allow_apt: bool = True, timeout: int = 600) -> str:
    """Return the path of a usable browser, installing one if needed. Raises SystemExit if it cannot."""
    found = current_browser()
    if found:
        print(f"browser: {found}")
        return found
    print("browser: none found; trying `playwright install chromium` ...", flush=True)
    try:
        r = subprocess.run([sys.executable, "-m", "playwright", "install", "chromium"], timeout=timeout,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("  Playwright could not download its browser (no network?)")
    except (subprocess.TimeoutExpired, OSError) as exc:
        print(f"  Playwright install failed: {exc}")
    found = current_browser()
    if found:
        print(f"browser: {found}")
        return found
    apt = shutil.which("apt-get")
    if allow_apt and apt and hasattr(os, "geteuid"):
        prefix = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
        if prefix is not None:
            print("browser: installing the system package `chromium` with apt-get ...", flush=True)
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(prefix + [apt, "-qq", "update"], env=env, check=False)
            subprocess.run(prefix + [apt, "install", "-y", "-qq", "chromium"], env=env, check=False)
            found = current_browser()
            if found:
                print(f"browser: {found}")
                return found
    from .browser import NO_BROWSER_HELP

    raise SystemExit("webr1: " + NO_BROWSER_HELP)
