"""Logging in to the WebArena sites once, and reusing the login in every episode.

WebArena's tasks assume the agent is already signed in (as emma.lopez on the shop, admin
on the shop's admin, MarvelsGrantMan136 on the forum, byteblaze on GitLab). As in
WebArena's auto_login script, the kit signs in with a real browser, saves Playwright's
storage state (cookies and local storage) per site, and starts every episode's browser
context from it. Here the state is saved under the cache dir, one file per site and URL,
checked the first time a process uses it (and again every `RECHECK_S`), and refreshed by
a new login when the site no longer accepts it.

The login steps are data (`LOGIN_FLOWS`): adapt a site's selectors or its logged-in check
there if your images differ. Accounts come from `config.ACCOUNTS` or the config file.

One caveat that WebArena has too: cookies belong to a host, not to a port. Sites served
on one host share one cookie jar, so two sites that use the same session cookie name
(PHP's PHPSESSID for the shop and the forum) overwrite each other's login in a task
that uses both. `merged_state` warns when that happens; serving the sites under
different host names avoids it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from .config import WebArenaConfig

RECHECK_S = 600.0
"""How long a process trusts a login it has checked before checking it again."""
LOGIN_TIMEOUT_MS = 30_000


class LoginError(RuntimeError):
    """A site could not be logged in to (down, wrong account, or login steps that do not fit)."""


@dataclass(frozen=True)
class Step:
    """One login step. `target` picks the element, by the kind before the first colon:
    label:TEXT, placeholder:TEXT, role:ROLE:NAME, testid:ID, text:TEXT, or css:SELECTOR.
    `action` is "fill" (types `value`, where {username}/{password} are replaced),
    "click", or "submit" (a click that waits for the page it loads)."""

    action: str
    target: str
    value: str = ""
    exact: bool = False


@dataclass(frozen=True)
class LoginFlow:
    """How to sign in to a site, and how to tell that a saved login still works."""

    start: str
    """Path (after the site URL) where the login steps begin."""
    steps: tuple[Step, ...]
    check: str
    """Path to open to test the login (may use {username})."""
    keyword: str = ""
    """Logged in when the check page contains this text; empty: when it did not redirect."""
    account: str = ""
    """Which entry of the accounts table signs in (default: the site's name)."""


LOGIN_FLOWS: dict[str, LoginFlow] = {
    "shopping": LoginFlow(
        start="/customer/account/login/",
        steps=(Step("fill", "label:Email", "{username}", exact=True),
               Step("fill", "label:Password", "{password}", exact=True),
               Step("submit", "role:button:Sign In")),
        check="/wishlist/"),
    "shopping_admin": LoginFlow(
        start="",
        steps=(Step("fill", "placeholder:user name", "{username}"),
               Step("fill", "placeholder:password", "{password}"),
               Step("submit", "role:button:Sign in")),
        check="/dashboard", keyword="Dashboard"),
    "reddit": LoginFlow(
        start="",
        steps=(Step("submit", "role:link:Log in"),
               Step("fill", "label:Username", "{username}"),
               Step("fill", "label:Password", "{password}"),
               Step("submit", "role:button:Log in")),
        check="/user/{username}/account", keyword="Delete"),
    "gitlab": LoginFlow(
        start="/users/sign_in",
        steps=(Step("fill", "testid:username-field", "{username}"),
               Step("fill", "testid:password-field", "{password}"),
               Step("submit", "testid:sign-in-button")),
        check="/-/profile"),
}
"""The sites that need a login and how (after WebArena's auto_login: same accounts, same
checks; map, wikipedia and homepage need none)."""

NewContext = Callable[[], Awaitable[Any]]
"""Opens a fresh, empty Playwright browser context."""


def locate(page: Any, target: str, exact: bool = False) -> Any:
    """The Playwright locator a step's `target` names."""
    kind, _, rest = target.partition(":")
    if kind == "label":
        return page.get_by_label(rest, exact=exact)
    if kind == "placeholder":
        return page.get_by_placeholder(rest, exact=exact)
    if kind == "role":
        role, _, name = rest.partition(":")
        return page.get_by_role(role, name=name or None, exact=exact)
    if kind == "testid":
        return page.get_by_test_id(rest)
    if kind == "text":
        return page.get_by_text(rest, exact=exact)
    if kind == "css":
        return page.locator(rest)
    raise ValueError(f"login step target {target!r}: use label:, placeholder:, role:, testid:, text: or css:")


def _same_url(a: str, b: str) -> bool:
    return a.split("#")[0].rstrip("/") == b.split("#")[0].rstrip("/")


@dataclass
class _Known:
    state: dict[str, Any]
    checked: float
    how: str


@dataclass
class AuthManager:
    """Saved logins of one configuration: `state(site, new_context)` returns a storage
    state that works, logging in when the saved one is missing or expired."""

    config: WebArenaConfig
    flows: dict[str, LoginFlow] = field(default_factory=lambda: dict(LOGIN_FLOWS))
    _known: dict[str, _Known] = field(default_factory=dict)
    _locks: dict[tuple[int, str], asyncio.Lock] = field(default_factory=dict)

    def needs_login(self, site: str) -> bool:
        return site in self.flows

    def path(self, site: str) -> Path:
        """The storage-state file of a site (one per site URL, so changing URLs never reuses a stale login)."""
        digest = hashlib.sha1(self.config.url(site).encode()).hexdigest()[:10]
        return self.config.cache / "auth" / f"{site}-{digest}.json"

    def how(self, site: str) -> str:
        """How the current login was obtained: "saved" (reused from disk), "login", or "" (none yet)."""
        known = self._known.get(site)
        return known.how if known else ""

    def _lock(self, site: str) -> asyncio.Lock:
        key = (id(asyncio.get_running_loop()), site)
        if key not in self._locks:
            self._locks[key] = asyncio.Lock()
        return self._locks[key]

    def saved(self, site: str) -> dict[str, Any] | None:
        """The state saved on disk for a site, if any (not checked)."""
        try:
            data = json.loads(self.path(site).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("cookies"), list) else None

    async def state(self, site: str, new_context: NewContext, recheck_s: float = RECHECK_S) -> dict[str, Any]:
        """A working storage state for `site`. Raises LoginError when none can be had."""
        async with self._lock(site):
            known = self._known.get(site)
            if known and time.monotonic() - known.checked < recheck_s:
                return known.state
            saved = known.state if known else self.saved(site)
            if saved is not None and await self.logged_in(site, saved, new_context):
                self._known[site] = _Known(saved, time.monotonic(), "saved")
                return saved
            state = await self.login(site, new_context)
            self._known[site] = _Known(state, time.monotonic(), "login")
            return state

    async def logged_in(self, site: str, state: dict[str, Any], new_context: NewContext) -> bool:
        """Whether `state` is still signed in to `site` (WebArena's check: the account page
        opens without a redirect to the login, or shows its keyword)."""
        flow = self.flows[site]
        user = self.config.account(flow.account or site)["username"]
        url = self.config.url(site) + flow.check.format(username=user)
        context = await new_context()
        try:
            await apply_state(context, state)
            page = await context.new_page()
            try:
                response = await page.goto(url, wait_until="load", timeout=LOGIN_TIMEOUT_MS)
            except Exception as exc:
                raise LoginError(f"{site}: could not open {url}: {str(exc).splitlines()[0][:200]}") from None
            if response is not None and response.status >= 500:
                raise LoginError(f"{site}: {url} answered HTTP {response.status}")
            if flow.keyword:
                return flow.keyword in await page.content()
            return _same_url(page.url, url)
        finally:
            await context.close()

    async def login(self, site: str, new_context: NewContext) -> dict[str, Any]:
        """Sign in with the site's flow, check it worked, save and return the storage state."""
        flow = self.flows[site]
        account = self.config.account(flow.account or site)
        base = self.config.url(site)
        context = await new_context()
        try:
            page = await context.new_page()
            page.set_default_timeout(LOGIN_TIMEOUT_MS)
            try:
                await page.goto(base + flow.start, wait_until="load")
                for step in flow.steps:
                    target = locate(page, step.target, step.exact)
                    if step.action == "fill":
                        await target.fill(step.value.format(**account))
                    elif step.action == "click":
                        await target.click()
                    elif step.action == "submit":
                        async with page.expect_navigation(wait_until="load"):
                            await target.click()
                    else:
                        raise ValueError(f"{site}: unknown login step action {step.action!r}")
            except LoginError:
                raise
            except Exception as exc:
                raise LoginError(f"{site}: the login steps failed at {page.url}: {str(exc).splitlines()[0][:200]} "
                                 "(adapt LOGIN_FLOWS if the site's login page differs)") from None
            state = await context.storage_state()
        finally:
            await context.close()
        if not await self.logged_in(site, state, new_context):
            check = flow.check.format(username=account["username"])
            raise LoginError(f"{site}: signing in as {account['username']!r} did not work: {check} does not show a "
                             "login afterwards (wrong account or password, or LOGIN_FLOWS does not fit the site)")
        path = self.path(site)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state), encoding="utf-8")
        tmp.replace(path)
        return state


def merged_state(states: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One storage state from several sites' states, in the given order. When two sites
    set the same cookie (name, domain, path), the first site keeps it and a warning says
    that their logins collide."""
    cookies: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
    origins: dict[str, dict[str, Any]] = {}
    for site, state in states.items():
        for c in state.get("cookies", []):
            key = (c.get("name", ""), c.get("domain", ""), c.get("path", "/"))
            if key in cookies and cookies[key][1].get("value") != c.get("value"):
                warnings.warn(f"the {cookies[key][0]} and {site} logins both set cookie {key[0]!r} on {key[1]}: on one "
                              f"host they overwrite each other, so {site} may not be logged in (serve the sites "
                              "under different host names to avoid this)", stacklevel=2)
                continue
            cookies.setdefault(key, (site, c))
        for o in state.get("origins", []):
            origins.setdefault(o.get("origin", ""), o)
    return {"cookies": [c for _, c in cookies.values()], "origins": list(origins.values())}


_LOCAL_STORAGE_JS = """(origins) => {
  const mine = origins.find((o) => o.origin === location.origin);
  if (!mine) return;
  for (const {name, value} of mine.localStorage || []) {
    try { if (localStorage.getItem(name) === null) localStorage.setItem(name, value); } catch (e) {}
  }
}"""


async def apply_state(context: Any, state: dict[str, Any]) -> None:
    """Give an existing browser context a storage state: its cookies, and its local storage
    (set on each page of a matching origin before the page's scripts run, unless the page
    already has the key). This is what new_context(storage_state=...) does for a new one."""
    if state.get("cookies"):
        await context.add_cookies(state["cookies"])
    origins = [o for o in state.get("origins", []) if o.get("localStorage")]
    if origins:
        await context.add_init_script(f"({_LOCAL_STORAGE_JS})({json.dumps(origins)})")
