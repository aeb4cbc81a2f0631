"""The async browser environment: one Chromium, many isolated episodes.

    async with Browser() as browser:              # one Chromium process
        env = BrowserEnv(browser)                  # one episode at a time, own context
        obs = await env.reset(task, seed=0)
        obs, reward, done, info = await env.step('do(action="Click", element="3")')

Everything is `playwright.async_api`, so it runs under Jupyter's event loop with a
plain `await`. Each reset opens a fresh browser context (own cookies, storage and
tabs), so parallel episodes on one browser never see each other.

What `step` does with problems:
- the agent's fault (malformed action, unknown or hidden element, a blocked
  navigation, a timeout): the step completes, the observation's `error` tells the
  agent, and `info["error_kind"]` counts it;
- the infrastructure's fault (browser or page crashed, start page or server
  failing): `InfraError` is raised, so the rollout can record, retry or drop the
  episode; it is never turned into reward 0.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

from .actions import Action, ActionError, describe, execute, parse_action
from .config import EnvConfig
from .errors import BrowserNotFound, InfraError
from .observation import ID_ATTR, Observation, observe
from .tasks.task import Task, Verdict

LAUNCH_ARGS = (
    "--no-sandbox",  # needed when running as root (CI, containers)
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",  # no calls home: the machine may have no network
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
SYSTEM_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
SYSTEM_HEADLESS_SHELLS = ("chromium-headless-shell", "chrome-headless-shell")
"""Chromium's headless shell: the same engine without the browser's UI. Playwright itself
launches it for headless runs; on a 2-core machine 99 scripted MiniWoB++ episodes took 31 s
of wall time and about 59 CPU-seconds under it, 52 s and about 100 CPU-seconds under the
full browser in its headless mode (Chromium 156, concurrency 4)."""
MAC_BROWSERS = (
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
)

NO_BROWSER_HELP = """no Chromium or Chrome browser was found. Get one in any of these ways:
  - python -m playwright install chromium      (Playwright's own build, with its headless shell; needs network)
  - apt-get install chromium chromium-headless-shell   (Debian/Ubuntu system packages)
  - install Google Chrome
  - or point the kit at an executable: EnvConfig(browser_path=...) or WEBR1_BROWSER=/path/to/chrome"""


# Counts the page's requests for new tabs (window.open, target=_blank links and forms).
# Playwright reports a new tab a moment after the click returns; this flag tells the
# step to wait for it instead of observing too early.
POPUP_WATCH_JS = """
(() => {
  window.__webr1Popups = 0;
  const open = window.open;
  window.open = function (...args) { window.__webr1Popups++; return open.apply(this, args); };
  document.addEventListener('click', (e) => {
    const t = e.target && e.target.closest ? e.target.closest('a[target], form[target]') : null;
    if (t && !['', '_self', '_parent', '_top'].includes((t.target || '').toLowerCase())) window.__webr1Popups++;
  }, true);
})();
"""
POPUP_TAKE_JS = "() => { const n = window.__webr1Popups || 0; window.__webr1Popups = 0; return n; }"


class Step(NamedTuple):
    observation: Observation
    reward: float
    done: bool
    info: dict[str, Any]


def find_browser(configured: str | None = None, playwright_path: str | None = None, headless: bool = True) -> str:
    """Path of the browser to launch: configured path, $WEBR1_BROWSER, then, for a headless
    run, a headless shell (Playwright's own, then the system's), then Playwright's Chromium and
    a system Chromium/Chrome. Raises BrowserNotFound with install instructions."""
    for candidate in (configured, os.environ.get("WEBR1_BROWSER")):
        if candidate:
            if Path(candidate).is_file() and os.access(candidate, os.X_OK):
                return candidate
            resolved = shutil.which(candidate)
            if resolved:
                return resolved
            raise BrowserNotFound(f"the configured browser {candidate!r} does not exist or is not executable")
    if headless:
        shell = headless_shell(playwright_path)
        if shell:
            return shell
    if playwright_path and Path(playwright_path).is_file():
        return playwright_path
    for name in SYSTEM_BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    for path in MAC_BROWSERS:
        if Path(path).is_file():
            return path
    raise BrowserNotFound(NO_BROWSER_HELP)


def headless_shell(playwright_path: str | None = None) -> str | None:
    """Chromium's headless shell, if one is installed: Playwright's own (installed beside its
    Chromium, in a `chromium_headless_shell-<revision>` folder next to `chromium-<revision>`),
    else a system one (`chromium-headless-shell`, Debian's package of that name)."""
    if playwright_path:
        build = Path(playwright_path).parent.parent  # .../chromium-<revision>/<platform folder>/chrome
        if build.name.startswith("chromium-"):
            shells = build.parent / build.name.replace("chromium-", "chromium_headless_shell-", 1)
            for name in ("chrome-headless-shell", "chrome-headless-shell.exe", "headless_shell"):
                for found in sorted(shells.glob(f"*/{name}")):
                    if found.is_file() and os.access(found, os.X_OK):
                        return str(found)
    for name in SYSTEM_HEADLESS_SHELLS:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """The Chromium that many environments share, each in a context of its own: one local
    process, or the browser servers of `EnvConfig.browser_endpoints` (a pool: each new
    context goes to the live server with the fewest open contexts)."""

    def __init__(self, config: EnvConfig | None = None):
        self.config = config or EnvConfig()
        limit = self.config.max_starting
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"EnvConfig.max_starting must be a positive integer or None, got {limit!r}")
        endpoints = self.config.browser_endpoints
        if isinstance(endpoints, str) or not all(isinstance(e, str) and e.startswith(("ws://", "wss://"))
                                                 for e in endpoints):
            raise ValueError(f"EnvConfig.browser_endpoints must be a list of ws:// or wss:// URLs, got {endpoints!r}")
        self.endpoints: tuple[str, ...] = tuple(endpoints)
        self.max_starting = limit or 2 * (os.cpu_count() or 1)
        self._pw: Any = None
        self._browsers: dict[str, Any] = {}  # "local" or an endpoint -> its Playwright Browser
        self.executable: str | None = None
        self._lock = asyncio.Lock()
        self._starting = asyncio.Semaphore(self.max_starting)
        self._parked: list[BrowserEnv] = []  # idle environments a later run may take (`park`)

    PARK_LIMIT = 32
    """Idle environments kept for later runs at most (each holds a tab and its renderer)."""

    def park(self, env: "BrowserEnv") -> bool:
        """Keep an environment its runner is done with, so that the next run on this browser
        (the next M-GRPO step, the next evaluation) starts its first episode in that tab
        rather than in a new context, as the environment's own next episode would
        (`BrowserEnv._can_reuse` decides at the next reset). Only an environment whose last
        episode ended in a tab its suite lets episodes reuse is kept; returns False for any
        other, which the caller closes."""
        if env.browser is not self or not env._parkable() or len(self._parked) >= self.PARK_LIMIT:
            return False
        self._parked.append(env)
        return True

    async def close_idle(self) -> None:
        """Close the parked environments' tabs now; the browser stays up."""
        parked, self._parked = self._parked, []
        for env in parked:
            await env.close()

    def unpark(self, config: EnvConfig) -> "BrowserEnv | None":
        """A parked environment whose tab was opened as `config` would open it (the same
        `CONTEXT_FIELDS`: viewport and timeouts), the most recent, now observing and acting
        as `config` says; or None. So a pipeline's evaluation (screenshots on) plays in the
        tabs its training left, and so does a run that observes the accessibility tree."""
        key = context_key(config)
        for i in range(len(self._parked) - 1, -1, -1):
            if context_key(self._parked[i].config) == key:
                env = self._parked.pop(i)
                env.config = config  # read afresh at every step: observation, screenshots, parsing, waits
                return env
        return None

    async def start(self) -> "Browser":
        async with self._lock:
            if self._pw is None:
                await self._launch()
        return self

    async def ensure_alive(self) -> None:
        """Replace browsers that died: a new local Chromium, or a new connection to each lost
        server that answers again (safe to call from many episodes at once). A server that
        does not answer stays out of the pool; the episodes go to the others."""
        async with self._lock:
            if self._pw is None:
                await self._launch()
                return
            for key, b in list(self._browsers.items()):
                if not b.is_connected():
                    del self._browsers[key]
            missing = [e for e in (self.endpoints or ("local",)) if e not in self._browsers]
            for key in missing:
                try:
                    self._browsers[key] = await self._open(key)
                except Exception:
                    if not self.endpoints:
                        raise

    async def _launch(self) -> None:
        from playwright.async_api import async_playwright

        self._pw = await async_playwright().start()
        errors = []
        try:
            for key in self.endpoints or ("local",):
                try:
                    self._browsers[key] = await self._open(key)
                except BrowserNotFound:
                    raise
                except Exception as exc:
                    if not self.endpoints:
                        raise
                    errors.append(f"{key}: {_first_line(exc)}")
            if not self._browsers:
                raise InfraError("could not connect to any browser server: " + "; ".join(errors))
        except BaseException:
            await self._shutdown()
            raise

    async def _open(self, key: str) -> Any:
        if key == "local":
            self.executable = find_browser(self.config.browser_path, self._pw.chromium.executable_path,
                                           headless=self.config.headless)
            return await self._pw.chromium.launch(executable_path=self.executable, headless=self.config.headless,
                                                  args=list(LAUNCH_ARGS))
        return await self._pw.chromium.connect(key, timeout=self.config.navigation_timeout_ms)

    def starting(self) -> asyncio.Semaphore:
        """Held while an episode starts (EnvConfig.max_starting): page loads are CPU-bound,
        so starting a few at a time keeps each one within the navigation timeout."""
        return self._starting

    @property
    def connected(self) -> bool:
        """Whether any of the browsers is alive."""
        return any(b.is_connected() for b in self._browsers.values())

    @property
    def version(self) -> str | None:
        """The version of the first live browser, None before the start."""
        return next((b.version for b in self._browsers.values() if b.is_connected()), None)

    def load(self) -> dict[str, int]:
        """Open contexts per browser ("local" or its endpoint), the live ones only."""
        return {k: len(b.contexts) for k, b in self._browsers.items() if b.is_connected()}

    async def new_context(self, config: EnvConfig | None = None, **options: Any) -> Any:
        """A fresh, isolated browser context (own cookies, storage, tabs), set up by
        `config` (viewport, timeouts; the browser's own config by default) and Playwright's
        `new_context` keyword `options`, on the live browser with the fewest contexts."""
        if self._pw is None:
            await self.start()
        live = [b for b in self._browsers.values() if b.is_connected()]
        if not live:
            raise InfraError("the browser process is gone (crashed or closed)" if not self.endpoints else
                             f"no browser server is reachable ({', '.join(self.endpoints)})")
        cfg = config or self.config
        browser = min(live, key=lambda b: len(b.contexts))
        try:
            ctx = await browser.new_context(viewport={"width": cfg.viewport_width, "height": cfg.viewport_height},
                                            service_workers="block", **options)
        except Exception as exc:
            if browser.is_connected() and not _closed(exc):
                raise
            # Out of the pool at once: a browser whose server just went may still call itself
            # connected for a while, and the retries must not all go to it. ensure_alive
            # brings it back if its server answers again.
            self._browsers = {k: b for k, b in self._browsers.items() if b is not browser}
            raise InfraError(f"the browser went away while opening a context: {_first_line(exc)}") from None
        ctx.set_default_timeout(cfg.action_timeout_ms)
        ctx.set_default_navigation_timeout(cfg.navigation_timeout_ms)
        return ctx

    async def close(self) -> None:
        async with self._lock:
            await self._shutdown()

    async def _shutdown(self) -> None:
        await self.close_idle()
        for b in self._browsers.values():
            try:
                await b.close()  # a connected server's browser: only this connection closes
            except Exception:  # already gone
                pass
        self._browsers = {}
        if self._pw is not None:
            try:
                await self._pw.stop()
            except Exception:
                pass
            self._pw = None

    async def __aenter__(self) -> "Browser":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def _closed(exc: BaseException) -> bool:
    """Whether Playwright failed because the page, context or browser it used is gone."""
    return type(exc).__name__ == "TargetClosedError" or "has been closed" in str(exc)


def _prefix_pattern(prefixes: tuple[str, ...]) -> re.Pattern[str]:
    """A regex matching every URL *outside* the allowed prefixes (and not about:blank).

    Routing by regex keeps allowed requests inside the browser: only blocked ones
    reach Python.
    """
    alts = []
    for p in prefixes:
        p = p if p.endswith("/") else p + "/"
        alts.append(re.escape(p))
        alts.append(re.escape(p[:-1]) + r"(?:[?#]|$)")
    return re.compile(r"^(?!(?:" + "|".join(alts + [r"about:blank", r"data:image/"]) + r"))")


CONTEXT_FIELDS = ("viewport_width", "viewport_height", "action_timeout_ms", "navigation_timeout_ms")
"""The EnvConfig fields a browser context is opened with (`Browser.new_context`); an
environment reads every other field at each step, so a parked one can serve any config
that agrees on these."""


def context_key(config: EnvConfig) -> tuple:
    return tuple(getattr(config, f) for f in CONTEXT_FIELDS)


class BrowserEnv:
    """An async, Gymnasium-shaped web environment: `reset(task, seed)` and `step(action_text)`.

    Pass a shared `Browser` to run many environments on one Chromium. Without one,
    the environment starts (and owns) its own.
    """

    def __init__(self, browser: Browser | None = None, config: EnvConfig | None = None):
        self.config = config or (browser.config if browser else EnvConfig())
        self.browser = browser or Browser(self.config)
        self._owns_browser = browser is None
        self.context: Any = None
        self.pages: list[Any] = []
        self.active = 0
        self.task: Task | None = None
        self.suite: Any = None
        self.seed: int | None = None
        self.intent = ""
        self.done = True
        self.steps = 0
        self.errors: Counter[str] = Counter()
        self._ids: set[int] = set()
        self._allowed: re.Pattern[str] | None = None
        self._prefixes: tuple[str, ...] = ()
        self._blocked: list[str] = []
        self._notes: list[str] = []
        self._server_errors: list[str] = []
        self._crashed = False
        self._watched: list[Any] = []
        self._episodes_here = 0
        """Episodes started in the current context (see `_can_reuse`)."""

    # ------------------------------------------------------------------ pages

    @property
    def page(self) -> Any:
        return self.pages[self.active]

    async def switch_tab(self, index: int) -> None:
        if not 0 <= index < len(self.pages):
            raise ActionError("invalid_argument", f"there is no tab {index}; open tabs are 0..{len(self.pages) - 1}")
        self.active = index
        await self.page.bring_to_front()

    async def locate(self, element: int | None) -> Any:
        """The Playwright locator of a numbered element from the last observation."""
        if element is None or element not in self._ids:
            raise ActionError("unknown_element", f"there is no element {element} in the current observation")
        loc = self.page.locator(f'[{ID_ATTR}="{int(element)}"]')
        if await loc.count() == 0:
            raise ActionError("detached_element", f"element {element} is no longer on the page")
        loc = loc.first
        if not await loc.is_visible():
            raise ActionError("hidden_element", f"element {element} is not visible")
        return loc

    def _allowed_url(self, url: str) -> bool:
        return self._allowed is None or not self._allowed.match(url)

    def _on_page(self, page: Any) -> None:
        if any(page is w for w in self._watched):
            return
        self._watched.append(page)
        page.on("dialog", self._on_dialog)
        page.on("crash", lambda _: setattr(self, "_crashed", True))
        page.on("response", self._on_response)
        page.on("console", self._on_console)
        if page not in self.pages:  # a tab opened by the page (target=_blank, window.open)
            self.pages.append(page)
            self.active = len(self.pages) - 1
            self._notes.append(f"a new tab opened and is now the current one (tab {self.active})")

    async def _on_dialog(self, dialog: Any) -> None:
        self._notes.append(f"a dialog ({dialog.type}) said {dialog.message[:200]!r} and was accepted")
        try:
            await dialog.accept()
        except Exception:  # the page went away meanwhile
            pass

    def _on_response(self, response: Any) -> None:
        try:
            req = response.request
            if response.status >= 500 and req.is_navigation_request() and req.frame.parent_frame is None:
                self._server_errors.append(f"{response.url} answered HTTP {response.status}")
        except Exception:  # detached frame
            pass

    def _on_console(self, message: Any) -> None:
        # Chromium refuses file:// navigations from web pages without any request
        # that routing could see; its console message is the only trace.
        text = message.text
        if text.startswith("Not allowed to load local resource:"):
            self._blocked.append(text.split(":", 1)[1].strip())

    async def _guard(self, route: Any) -> None:
        """Abort requests outside the task's allowed origins; remember blocked navigations."""
        req = route.request
        try:
            main_frame = req.frame.parent_frame is None
        except Exception:  # e.g. a new tab's request before its frame exists
            main_frame = True
        if req.is_navigation_request() and main_frame:
            self._blocked.append(req.url)
            # A 204 answer cancels the navigation and leaves the current page as it was
            # (aborting would commit Chromium's error page instead).
            await route.fulfill(status=204, body="")
        else:
            await route.abort("blockedbyclient")

    # ------------------------------------------------------------------ episode

    async def reset(self, task: Task, seed: int | None = None) -> Observation:
        """Start an episode of `task` in a fresh context and return the first observation.

        A suite whose pages keep no browser state (`Suite.reuse_tab`, e.g. MiniWoB++)
        starts the next episode in the last one's tab instead, with its storage, cookies
        and history cleared: a new renderer process per episode was most of an episode's
        CPU time on a 2-core machine.

        `seed` fixes the page's randomness where the suite supports it (MiniWoB++).
        Raises InfraError when the browser or the start page fails.
        """
        from .tasks import get_suite

        suite = get_suite(task.suite)
        reuse = await self._can_reuse(task, suite)
        if not reuse:
            await self._close_context()
        self.task, self.suite = task, suite
        self.seed = seed if seed is not None else random.randrange(2**31)
        self.steps, self.done, self.intent = 0, False, ""
        self.errors = Counter()
        self._ids, self._blocked, self._notes, self._server_errors = set(), [], [], []
        if reuse:
            await self._restart(task)
        else:
            self._crashed, self._watched, self._episodes_here = False, [], 0
            async with self.browser.starting():
                await self._start(task)
        self._episodes_here += 1
        self._notes = []
        return await self._observe(None)

    REUSE_LIMIT = 50
    """Episodes one context serves before a fresh one (reuse bounds, not removes, its cost)."""

    def _parkable(self) -> bool:
        """Whether the next episode could start in this tab as far as this environment
        knows: the last episode ended in a suite that allows it, in one live tab."""
        return (self.context is not None and self.done and getattr(self.suite, "reuse_tab", False)
                and len(self.pages) == 1 and not self._crashed and not self.page.is_closed()
                and self._episodes_here < self.REUSE_LIMIT)

    async def _can_reuse(self, task: Task, suite: Any) -> bool:
        """Whether the next episode may start in the current tab: the suite allows it
        (`Suite.reuse_tab`), the last episode was of the same suite and origins and ended
        (an episode cut off by an infrastructure failure, or a start that failed, leaves the
        next one a fresh context), it left one healthy tab, and the context has served fewer
        than REUSE_LIMIT episodes."""
        if not (self.suite is suite and self._parkable()) or suite.origins(task) != self._prefixes:
            return False
        browser = self.context.browser
        return browser.is_connected() if browser is not None else self.browser.connected

    async def _restart(self, task: Task) -> None:
        """Start an episode in the last episode's tab: storage and cookies cleared, a new
        document of the start page, and the tab's history emptied, so that nothing of the
        last episode is left to observe, read or go back to."""
        page = self.page
        try:
            await page.evaluate(_FORGET_JS)
            await self.context.clear_cookies()
            await self.suite.setup(self.context, task, self.seed)
            response = await page.goto(self.suite.start_url(task), wait_until="load")
            if response is not None and response.status >= 400:
                raise InfraError(f"{task.task_id}: start page answered HTTP {response.status}")
            cdp = await self.context.new_cdp_session(page)
            try:
                await cdp.send("Page.resetNavigationHistory")
            finally:
                await cdp.detach()
            self.intent = await self.suite.prepare(page, task, self.seed)
        except InfraError:
            raise
        except Exception as exc:
            self._raise_if_infra(exc)
            raise InfraError(f"{task.task_id}: could not restart the task in its tab: {_first_line(exc)}") from None

    async def _start(self, task: Task) -> None:
        """Open the episode's context and start page, and let the suite set the task up."""
        self.context = await self.browser.new_context(self.config)
        self._prefixes = self.suite.origins(task)
        self._allowed = _prefix_pattern(self._prefixes)
        try:
            await self.context.route(self._allowed, self._guard)
            await self.context.add_init_script(POPUP_WATCH_JS)
            page = await self.context.new_page()
        except Exception as exc:
            if not _closed(exc):
                raise
            # e.g. a browser server that went away just after the context opened
            raise InfraError(f"{task.task_id}: the browser went away while opening the episode's page: "
                             f"{_first_line(exc)}") from None
        self.pages, self.active = [page], 0
        self._on_page(page)
        self.context.on("page", self._on_page)
        url = self.suite.start_url(task)
        try:
            await self.suite.setup(self.context, task, self.seed)
        except Exception as exc:
            raise InfraError(f"{task.task_id}: could not set up the task's sites: {_first_line(exc)}") from None
        try:
            response = await page.goto(url, wait_until="load")
        except Exception as exc:
            raise InfraError(f"{task.task_id}: start page {url} failed to load: {_first_line(exc)}") from None
        if response is not None and response.status >= 400:
            raise InfraError(f"{task.task_id}: start page {url} answered HTTP {response.status}")
        try:
            self.intent = await self.suite.prepare(page, task, self.seed)
        except InfraError:
            raise
        except Exception as exc:
            raise InfraError(f"{task.task_id}: could not start the task: {_first_line(exc)}") from None

    async def step(self, action_text: str) -> Step:
        """Parse and perform one action; return (observation, reward, done, info).

        The reward is the task's binary verdict once the episode ends, else 0.
        """
        if self.done or self.task is None:
            raise RuntimeError("the episode is over: call reset() first")
        self.steps += 1
        info: dict[str, Any] = {"step": self.steps, "action": None, "error_kind": None, "answer": None}
        error: str | None = None
        action: Action | None = None
        self._blocked, self._server_errors = [], []
        url_before = self.page.url
        try:
            action = parse_action(action_text, strict=self.config.action_format == "strict")
            info["action"] = describe(action)
            pages_before = len(self.pages)
            if action.element is not None:
                scroll_before = await self.page.evaluate(_SCROLL_GET_JS)
            await execute(self, action)
            await self._settle(pages_before)
        except ActionError as exc:
            error, info["error_kind"] = str(exc), exc.kind
        except Exception as exc:
            self._raise_if_infra(exc)
            kind, error = _classify(exc, action)
            info["error_kind"] = kind
            if action is not None and action.element is not None:
                # Playwright scrolls while it retries an element action; a failed action
                # should leave the agent's view as it was.
                await self._try(self.page.evaluate(_SCROLL_SET_JS, scroll_before))
        self._raise_if_infra(None)
        if self._blocked or not self._allowed_url(self.page.url):
            target = self._blocked[0] if self._blocked else self.page.url
            await self._return_to_allowed(url_before)
            error = f"navigation to {target} was blocked: it is outside this task's websites"
            info["error_kind"] = "blocked_navigation"
        if info["error_kind"]:
            self.errors[info["error_kind"]] += 1
        info["invalid_action"] = info["error_kind"] is not None
        info["errors"] = dict(self.errors)

        ended_by_agent = action is not None and action.name == "exit" and error is None
        if ended_by_agent:
            info["answer"] = action.argument
        self.done = ended_by_agent or await self._page_done()
        reward = 0.0
        if self.done:
            verdict = await self._evaluate(info["answer"])
            reward = verdict.reward
            info["verdict"] = verdict.to_dict()
        obs = await self._observe(error)
        return Step(obs, reward, self.done, info)

    async def evaluate(self, answer: str | None = None) -> Verdict:
        """Score the current state (e.g. when the turn limit ends an episode without exit)."""
        verdict = await self._evaluate(answer)
        self.done = True
        return verdict

    async def close(self) -> None:
        await self._close_context()
        if self._owns_browser:
            await self.browser.close()

    async def __aenter__(self) -> "BrowserEnv":
        await self.browser.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ internals

    async def _observe(self, error: str | None) -> Observation:
        try:
            tabs = [await p.title() for p in self.pages]
            obs = await observe(
                self.page, self.config, tabs=tabs, active_tab=self.active, error=error,
                notes=self._notes, exclude=self.suite.exclude,
            )
        except Exception as exc:
            self._raise_if_infra(exc)
            raise InfraError(f"could not observe {self.page.url}: {_first_line(exc)}") from None
        self._notes = []
        self._ids = {e.id for e in obs.elements}
        return obs

    async def _settle(self, pages_before: int) -> None:
        """Wait for a new tab the action opened, then for the current page to load.

        "load", not "domcontentloaded": the DOM is ready before the stylesheets have been
        applied, and the observation keeps only what is inside the viewport, so a page seen
        unstyled shows other elements (a sidebar below the fold instead of beside the text).
        Waiting for the DOM only made the same action on the same page give two
        observations, and the arena expert's answer to one of its tasks flip from run to run."""
        try:
            if await self.page.evaluate(POPUP_TAKE_JS) and len(self.pages) == pages_before:
                await self.context.wait_for_event("page", timeout=self.config.action_timeout_ms)
        except Exception as exc:
            self._raise_if_infra(exc)  # otherwise: the page navigated away meanwhile, or no tab came
        try:
            await self.page.wait_for_load_state("load", timeout=self.config.navigation_timeout_ms)
        except Exception as exc:
            self._raise_if_infra(exc)
            raise InfraError(f"page {self.page.url} did not finish loading: {_first_line(exc)}") from None

    async def _page_done(self) -> bool:
        try:
            return bool(await self.suite.done(self.page, self.task))
        except Exception as exc:
            self._raise_if_infra(exc)
            return False  # the page went elsewhere; the episode continues until exit or the turn limit

    async def _evaluate(self, answer: str | None) -> Verdict:
        from .tasks.evaluators import EvaluationUnavailable

        try:
            return await self.suite.evaluate(self.page, self.context, self.task, answer)
        except EvaluationUnavailable as exc:
            raise InfraError(f"{self.task.task_id}: not evaluated: {exc}") from None
        except Exception as exc:
            self._raise_if_infra(exc)
            raise InfraError(f"{self.task.task_id}: evaluation failed: {_first_line(exc)}") from None

    async def _return_to_allowed(self, url_before: str) -> None:
        """After a blocked navigation, go back to where the agent was (closing stray tabs)."""
        for p in list(self.pages):
            if len(self.pages) > 1 and not self._allowed_url(p.url):
                self.pages.remove(p)
                await p.close()
        self.active = min(self.active, len(self.pages) - 1)
        if not self._allowed_url(self.page.url):
            try:
                await self.page.goto(url_before, wait_until="load")
            except Exception as exc:
                self._raise_if_infra(exc)
                raise InfraError(f"could not return to {url_before} after a blocked navigation") from None

    async def _try(self, coro: Any) -> None:
        """Await a best-effort page operation; only infrastructure failures propagate."""
        try:
            await coro
        except Exception as exc:
            self._raise_if_infra(exc)

    def _raise_if_infra(self, exc: BaseException | None) -> None:
        if isinstance(exc, InfraError):
            raise exc
        if self._crashed:
            raise InfraError("the page crashed")
        browser = self.context.browser if self.context is not None else None
        if not (browser.is_connected() if browser is not None else self.browser.connected):
            raise InfraError("the browser is gone (crashed or closed, or its server was lost)")
        if self.page.is_closed():
            raise InfraError("the page was closed")
        if self._server_errors:
            raise InfraError("server error: " + "; ".join(self._server_errors))
        if exc is not None and _closed(exc):
            raise InfraError(_first_line(exc))

    async def _close_context(self) -> None:
        if self.context is not None:
            try:
                await self.context.close()
            except Exception:  # browser already gone
                pass
        self.context, self.pages, self.active = None, [], 0


_FORGET_JS = "() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }"
_SCROLL_GET_JS = "() => [window.scrollX, window.scrollY]"
_SCROLL_SET_JS = "([x, y]) => window.scrollTo(x, y)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _classify(exc: Exception, action: Action | None) -> tuple[str, str]:
    """Turn a Playwright error from an agent's action into (kind, message for the agent)."""
    what = f"{action.name} on element {action.element}" if action and action.element is not None else (
        action.name if action else "the action")
    text = str(exc)
    if type(exc).__name__ == "TimeoutError" or "Timeout" in text.splitlines()[0]:
        reason = ""
        for hint in ("intercepts pointer events", "not visible", "not enabled", "not editable", "not stable"):
            if hint in text:
                reason = f" (element {hint})" if hint != "intercepts pointer events" else " (another element covers it)"
                break
        return "timeout", f"{what} timed out{reason}"
    if "not an <input>" in text or "Element is not" in text or "is not a <select>" in text:
        return "invalid_target", f"{what} failed: {_first_line(exc).split(': ', 1)[-1]}"
    return "action_failed", f"{what} failed: {_first_line(exc)}"
