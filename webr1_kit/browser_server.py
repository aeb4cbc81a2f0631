"""A Playwright browser server: the kit's Chromium, started so that other processes or
machines run their episodes' browsers on it (`EnvConfig.browser_endpoints`).

    from webr1_kit.browser_server import BrowserServer
    with BrowserServer() as server:           # Chromium on 127.0.0.1, a random port
        cfg = EnvConfig(browser_endpoints=(server.endpoint,))

`webr1 browser-server` is the command-line front end. The server is Playwright's own
(`python -m playwright launch-server`), not something the kit implements: it takes the
executable on the server's side, so it runs the same Chromium `Browser` finds here (a
system Chromium included), with the same launch flags. Playwright's `run-server` would
serve only Playwright's own browser builds.

Clients must run the same Playwright version as the server (Playwright refuses others).
The WebSocket path carries a random token; still, anyone who can reach the port can drive
a browser on this machine, which reaches whatever this machine reaches. So it listens on
127.0.0.1 unless told otherwise, and says so when it is told otherwise.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class BrowserServer:
    """One `playwright launch-server` process and its WebSocket endpoint."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, browser_path: str | None = None,
                 headless: bool = True, start_timeout_s: float = 60.0):
        self.host, self.port, self.browser_path, self.headless = host, port, browser_path, headless
        self.start_timeout_s = start_timeout_s
        self.endpoint: str | None = None
        self.process: subprocess.Popen[str] | None = None
        self._config: Path | None = None

    def start(self) -> "BrowserServer":
        """Start the server and wait for its endpoint. Raises BrowserNotFound without a
        Chromium, RuntimeError (with the server's output) when it does not come up."""
        from .browser import LAUNCH_ARGS, find_browser
        from .install import _playwright_chromium_path

        if self.process is not None:
            return self
        if self.host not in LOOPBACK:
            warnings.warn(f"the browser server listens on {self.host}: anyone who can reach port {self.port or '(random)'} "
                          "there can drive a browser on this machine", stacklevel=2)
        executable = find_browser(self.browser_path, _playwright_chromium_path(), headless=self.headless)
        fd, name = tempfile.mkstemp(prefix="webr1-browser-server-", suffix=".json")
        self._config = Path(name)
        with os.fdopen(fd, "w") as f:
            json.dump({"executablePath": executable, "headless": self.headless, "host": self.host,
                       "port": self.port, "args": list(LAUNCH_ARGS)}, f)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "playwright", "launch-server", "--browser", "chromium", "--config", str(self._config)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        atexit.register(self.stop)
        lines: list[str] = []
        done = threading.Event()

        def read() -> None:  # the first ws:// line is the endpoint; the rest is drained so the pipe never fills
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                if self.endpoint is None and line.startswith(("ws://", "wss://")):
                    self.endpoint = line.strip()
                    done.set()
                elif len(lines) < 50:
                    lines.append(line.rstrip())
            done.set()

        threading.Thread(target=read, daemon=True).start()
        done.wait(self.start_timeout_s)
        if self.endpoint is None:
            self.stop()
            raise RuntimeError("the browser server did not start: " + ("\n".join(lines) or
                                                                       f"no endpoint within {self.start_timeout_s:.0f} s"))
        return self

    def stop(self) -> None:
        """Stop the server and its Chromium (every client's contexts on it end)."""
        p, self.process = self.process, None
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self._config is not None:
            self._config.unlink(missing_ok=True)
            self._config = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> "BrowserServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

