"""MiniWoB++, from the task pages the `miniwob` PyPI package ships.

The pages are served by a small HTTP server bound to 127.0.0.1 (started on first
use, in a daemon thread, so it also works inside a running Jupyter kernel), or
opened from file://. Playwright drives them like any other site; the package's
own Selenium environment is not used.

- The intent is the page's utterance (`core.getUtterance()`).
- A seed fixes the episode: `Math.seedrandom(seed)` before the problem is generated.
- The reward is binary: 1 when the page's raw reward (`WOB_RAW_REWARD_GLOBAL`, which
  does not decay with time) is positive, the usual MiniWoB++ success criterion.
- The page's episode timer is set to 10 minutes (`core.EPISODE_MAX_TIME`), because a
  language model on a CPU thinks for seconds per step; success does not depend on time.
- The page's own HUD (instruction box, reward display, click canvas, start cover) is
  hidden from the agent: the instruction reaches it as the intent.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import threading
from pathlib import Path
from typing import Any

from ..config import http_url, sites_host
from ..observation import show_origin_as
from .suite import Suite
from .task import Task, Verdict

EPISODE_MAX_TIME_MS = 600_000
HUD = "#query, #reward-display, #click-canvas, #sync-task-cover"

# The MiniWoB++ tasks the scripted expert (`experts.MiniWoBExpert`) solves, in two groups.
# They are the tasks a small model can learn from the observation text alone: single and
# multi-step clicks, choosing from lists, tabs and dialogs, typing short text, simple forms.
# Each was checked at 98% success or more over 100 page seeds (tests/test_miniwob_experts.py).

MINIWOB_TRAIN_TASKS: tuple[str, ...] = (
    # the original five, first and in their order: demonstrations and benchmarks use them
    "click-button", "click-link", "enter-text", "focus-text", "click-checkboxes",
    # clicks
    "click-test", "click-test-2", "click-button-sequence", "click-widget", "click-tab",
    "grid-coordinate", "focus-text-2", "click-dialog",
    # choosing, and finding what is hidden
    "click-option", "choose-list", "click-collapsible", "click-tab-2", "click-tab-2-easy",
    # typing and forms
    "enter-text-2", "enter-password", "login-user", "multi-orderings", "use-spinner", "use-autocomplete",
)
"""Tasks for expert demonstrations, behaviour cloning and RL."""

MINIWOB_HELDOUT_TASKS: tuple[str, ...] = (
    "unicode-test",               # click-button with non-ASCII labels
    "click-test-transfer",        # click-test-2 on another page
    "click-checkboxes-transfer",  # click-checkboxes with random-string labels
    "click-dialog-2",             # click-dialog, choosing among three buttons
    "click-tab-2-medium",         # click-tab-2 with two tabs
    "click-collapsible-2",        # click-collapsible's sections searched like click-tab-2's tabs
    "enter-text-dynamic",         # enter-text with random strings
    "login-user-popup",           # login-user with a popup to dismiss
    "multi-layouts",              # multi-orderings' form in five layouts
)
"""Tasks never used for training, to measure transfer: each is a variant of a training task
(noted beside it), so a policy that learnt the skill, not the page, can solve it."""


def html_dir() -> Path:
    """The folder of MiniWoB++ HTML inside the installed `miniwob` package."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or spec.origin is None:
        raise RuntimeError("the `miniwob` package is not installed: pip install miniwob")
    path = Path(spec.origin).parent / "html"
    if not (path / "miniwob").is_dir():
        raise RuntimeError(f"the miniwob package at {path.parent} has no html/miniwob folder")
    return path


def task_names() -> list[str]:
    """Names of every MiniWoB++ task in the package, e.g. "click-button"."""
    return sorted(p.stem for p in (html_dir() / "miniwob").glob("*.html"))


def tasks(names: list[str] | None = None, serve: str = "http") -> list[Task]:
    """Task records for MiniWoB++ tasks (all of them by default).

    serve="http" (default) uses the kit's local server; serve="file" opens file:// URLs.
    """
    known = task_names()
    names = known if names is None else list(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown MiniWoB++ task(s): {', '.join(unknown)}. See `webr1 tasks list --suite miniwob`.")
    if serve not in ("http", "file"):
        raise ValueError(f'serve must be "http" or "file", got {serve!r}')
    root = html_dir()
    out = []
    for name in names:
        start = f"miniwob/{name}.html" if serve == "http" else (root / "miniwob" / f"{name}.html").as_uri()
        out.append(Task(task_id=f"miniwob/{name}", intent="", start_url=start, suite="miniwob",
                        sites=("miniwob",), template=name))
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A browser closing a connection mid-response (a context closed at episode end)
        # is normal here; anything else is still reported.
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class StaticServer:
    """A threaded static file server (port 0 picks a free port) on 127.0.0.1, unless
    WEBR1_SITES_HOST names another address (`config.sites_host`)."""

    def __init__(self, root: Path, port: int = 0):
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.host = sites_host()
        self.httpd = _QuietServer((self.host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="webr1-miniwob", daemon=True)
        self.thread.start()
        show_origin_as(self.url, "http://miniwob.local")  # observations name no port

    @property
    def url(self) -> str:
        return http_url(self.host, self.httpd.server_address[1])

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


_server: StaticServer | None = None
_server_lock = threading.Lock()


def server() -> StaticServer:
    """The process-wide MiniWoB++ server, started on first use."""
    global _server
    with _server_lock:
        if _server is None:
            _server = StaticServer(html_dir())
        return _server


_START_JS = """
([seed, maxTime, hud]) => {
  const style = document.createElement('style');
  style.textContent = hud + ' { display: none !important; }';
  document.head.appendChild(style);
  core.EPISODE_MAX_TIME = maxTime;
  Math.seedrandom(seed);
  core.startEpisodeReal();
}
"""
_STATE_JS = "() => (typeof WOB_DONE_GLOBAL === 'undefined') ? null : [WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_REASON]"


class MiniWoBSuite(Suite):
    """Starts MiniWoB++ pages with a seed; the page decides when the episode is done and its reward."""

    name = "miniwob"
    exclude = HUD
    # Every MiniWoB++ page is static HTML whose task lives in the document's own script:
    # a new document of the same page is a new episode (MiniWoB++'s own harness restarts
    # episodes in one tab). Reusing the tab skips a new renderer process per episode.
    reuse_tab = True

    def start_url(self, task: Task) -> str:
        if "://" in task.start_url:
            return task.start_url
        return f"{server().url}/{task.start_url}"

    def origins(self, task: Task) -> tuple[str, ...]:
        url = self.start_url(task)
        if url.startswith("file:"):
            return (html_dir().as_uri() + "/",)
        return (server().url,)

    async def prepare(self, page: Any, task: Task, seed: int) -> str:
        await page.evaluate(_START_JS, [str(seed), EPISODE_MAX_TIME_MS, HUD])
        await page.wait_for_function("() => WOB_TASK_READY", timeout=10_000)
        utterance = await page.evaluate("() => core.getUtterance()")
        if isinstance(utterance, dict):  # a few tasks return {utterance, fields}
            utterance = utterance.get("utterance", "")
        return str(utterance)

    async def done(self, page: Any, task: Task) -> bool:
        state = await page.evaluate(_STATE_JS)
        return bool(state and state[0])

    async def evaluate(self, page: Any, context: Any, task: Task, answer: str | None) -> Verdict:
        state = await page.evaluate(_STATE_JS)
        if state is None:
            return Verdict(0.0, [{"type": "miniwob", "passed": False, "reason": "the agent left the task page"}])
        done, raw, reason = state
        passed = bool(done) and raw > 0
        why = reason or ("episode finished" if done else "the task was not completed")
        return Verdict(1.0 if passed else 0.0, [{"type": "miniwob", "passed": passed, "raw_reward": raw, "reason": why}])
