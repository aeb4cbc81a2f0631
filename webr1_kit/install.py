"""`webr1 install-browser`: make sure a Chromium the kit can drive is present.

Order, as the kit looks for a browser at run time:
1. an existing browser: $WEBR1_BROWSER, a headless shell (Playwright's own or the system's),
   Playwright's Chromium, or a system Chromium/Chrome;
2. Playwright's own build (`playwright install chromium`, which brings its headless shell),
   which needs network;
3. the system packages (`apt-get install chromium chromium-headless-shell`), when running as
   root on Debian/Ubuntu.

A full Chromium without a headless shell is completed with one (Playwright's, or the system
package beside a system Chromium): headless episodes cost about 40% less CPU in the shell
(`browser.SYSTEM_HEADLESS_SHELLS`). If that fails, the full browser is used.
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


def _apt_prefix(allow_apt: bool) -> list[str] | None:
    """How to call apt-get here: [] as root, sudo -n otherwise; None when apt cannot be used."""
    if not (allow_apt and shutil.which("apt-get") and hasattr(os, "geteuid")):
        return None
    if os.geteuid() == 0:
        return []
    return ["sudo", "-n"] if shutil.which("sudo") else None


def _apt_install(prefix: list[str], packages: list[str]) -> None:
    apt = shutil.which("apt-get") or "apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = prefix + [apt, "install", "-y", "-qq", *packages]
    if subprocess.run(cmd, env=env, check=False, capture_output=True).returncode != 0:
        subprocess.run(prefix + [apt, "-qq", "update"], env=env, check=False)  # stale package lists
        subprocess.run(cmd, env=env, check=False)


def add_headless_shell(found: str, allow_apt: bool = True, timeout: int = 600) -> str:
    """Complete a full Chromium with its headless shell where the kit can; return the browser
    headless runs will use (the shell, or `found` if none could be installed)."""
    from .browser import headless_shell

    if os.environ.get("WEBR1_BROWSER"):
        return found  # the browser the user chose
    playwright_path = _playwright_chromium_path()
    shell = headless_shell(playwright_path)
    if shell:
        return shell  # already there (find_browser chose it)
    if playwright_path and found == playwright_path:
        print("browser: adding Playwright's headless shell (`playwright install chromium-headless-shell`) ...", flush=True)
        try:
            subprocess.run([sys.executable, "-m", "playwright", "install", "chromium-headless-shell"], timeout=timeout,
                           capture_output=True, text=True)
        except (subprocess.TimeoutExpired, OSError) as exc:
            print(f"  Playwright install failed: {exc}")
    else:
        prefix = _apt_prefix(allow_apt)
        if prefix is not None:
            print("browser: adding the system package `chromium-headless-shell` with apt-get ...", flush=True)
            _apt_install(prefix, ["chromium-headless-shell"])
    shell = headless_shell(playwright_path)
    if shell:
        return shell
    print(f"  no headless shell could be installed: headless episodes use {found}, at about 1.7 times the CPU "
          "per episode (`python -m playwright install chromium-headless-shell` or "
          "`apt-get install chromium-headless-shell` adds one)")
    return found


def install_browser(allow_apt: bool = True, timeout: int = 600) -> str:
    """Return the path of a usable browser, installing one if needed. Raises SystemExit if it cannot."""
    found = current_browser()
    if found:
        found = add_headless_shell(found, allow_apt, timeout)
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
    prefix = _apt_prefix(allow_apt)
    if prefix is not None:
        print("browser: installing the system packages `chromium` and `chromium-headless-shell` with apt-get ...",
              flush=True)
        _apt_install(prefix, ["chromium", "chromium-headless-shell"])
        found = current_browser()
        if found:
            print(f"browser: {found}")
            return found
    from .browser import NO_BROWSER_HELP

    raise SystemExit("webr1: " + NO_BROWSER_HELP)
