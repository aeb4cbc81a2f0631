"""Are the sites up, logged in, and as they were after the last reset?

`check(config)` answers for every configured site (what `webr1 webarena check` prints):
- reachable: an HTTP GET of the site's URL answers below 500 within the timeout;
- logged in: a saved login works or a fresh one succeeds (sites with a login flow);
- changed since reset: a *fingerprint* of a few cheap reads differs from the one
  recorded by `check --mark-reset` right after the sites were reset.

What the fingerprint detects, honestly: each probe reads one list sorted newest first
(shop and admin: orders, carts, products, CMS pages and customers by their update time
through Magento's REST API; GitLab: the agent user's latest events and the most recently
active projects through its API; forum: the newest submission and comment ids on
Postmill's listing pages). Creating or editing such records changes it. Changes that
touch none of them (a vote, a wishlist entry, a deleted old comment, a setting) go
unnoticed, and a probe that cannot be read is reported as unreadable, not as unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ...errors import InfraError
from ..task import origin_of
from .auth import AuthManager, LoginError
from .config import SITES, WebArenaConfig

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Probe:
    """One cheap read of a site's state. `path` is relative to the site's origin."""

    site: str
    name: str
    path: str
    pattern: str = ""
    """Regex whose matches make the fingerprint (for pages with changing tokens or times);
    empty: the whole response body."""
    auth: str = "cookies"
    """"cookies": the site's saved login; "magento": a Magento admin REST token."""


def _newest(field_name: str, size: int = 1) -> str:
    return urllib.parse.urlencode({"searchCriteria[sortOrders][0][field]": field_name,
                                   "searchCriteria[sortOrders][0][direction]": "DESC",
                                   "searchCriteria[pageSize]": str(size)})


PROBES: tuple[Probe, ...] = (
    Probe("shopping", "orders", f"/rest/V1/orders?{_newest('updated_at')}", auth="magento"),
    Probe("shopping", "carts", f"/rest/V1/carts/search?{_newest('updated_at')}", auth="magento"),
    Probe("shopping_admin", "orders", f"/rest/V1/orders?{_newest('updated_at')}", auth="magento"),
    Probe("shopping_admin", "products", f"/rest/V1/products?{_newest('updated_at')}", auth="magento"),
    Probe("shopping_admin", "cms pages", f"/rest/V1/cmsPage/search?{_newest('update_time')}", auth="magento"),
    Probe("shopping_admin", "customers", f"/rest/V1/customers/search?{_newest('updated_at')}", auth="magento"),
    Probe("gitlab", "events", "/api/v4/events?per_page=5"),
    Probe("gitlab", "projects", "/api/v4/projects?order_by=last_activity_at&sort=desc&per_page=5",
          pattern=r'"last_activity_at"\s*:\s*"([^"]+)"'),
    Probe("reddit", "submissions", "/all/new", pattern=r'href="/f/[^/"]+/(\d+)'),
    Probe("reddit", "comments", "/comments", pattern=r'/comment/(\d+)'),
)
"""The default probes; edit the tuple (or pass your own) to watch other records."""

MAGENTO_ACCOUNT = {"shopping": "shopping_site_admin", "shopping_admin": "shopping_admin"}


@dataclass
class SiteStatus:
    """One row of the check."""

    site: str
    url: str
    reachable: bool = False
    detail: str = ""
    """HTTP status and time, or why the site is unreachable."""
    login: str = "not needed"
    """"not needed", "ok (saved)", "ok (new login)", "not checked" or "FAILED: ..."."""
    state: str = "-"
    """"unchanged", "CHANGED: probes", "no reset mark", "unreadable: ...", or "-" (no probes)."""
    fingerprint: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.reachable and not self.login.startswith("FAILED")


def reach(url: str, timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
    """(up, detail): GET `url`; up when it answers below HTTP 500."""
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout_s) as r:
            status = r.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        return False, f"unreachable: {getattr(exc, 'reason', exc)}"
    ms = (time.perf_counter() - t0) * 1000
    return status < 500, f"HTTP {status} in {ms:.0f} ms"


def _cookie_header(state: dict[str, Any] | None, url: str) -> str:
    host = urllib.parse.urlsplit(url).hostname or ""
    pairs = []
    for c in (state or {}).get("cookies", []):
        domain = str(c.get("domain", "")).lstrip(".")
        if host == domain or host.endswith("." + domain):
            pairs.append(f"{c['name']}={c['value']}")
    return "; ".join(pairs)


def _fetch(url: str, headers: dict[str, str], data: bytes | None = None, timeout_s: float = TIMEOUT_S) -> str:
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=timeout_s) as r:
        return r.read().decode("utf-8", "replace")


def fingerprint(config: WebArenaConfig, site: str, state: dict[str, Any] | None,
                probes: tuple[Probe, ...] = PROBES) -> dict[str, str]:
    """{probe name: digest} for one site; a probe that cannot be read maps to "unreadable: why"."""
    origin = origin_of(config.url(site))
    out: dict[str, str] = {}
    token: str | None = None
    for p in (p for p in probes if p.site == site):
        url = origin + p.path
        try:
            headers = {"Accept": "application/json, text/html"}
            if p.auth == "magento":
                if token is None:
                    acc = config.account(MAGENTO_ACCOUNT.get(site, "shopping_admin"))
                    token = json.loads(_fetch(origin + "/rest/default/V1/integration/admin/token",
                                              {"Content-Type": "application/json"},
                                              json.dumps({"username": acc["username"], "password": acc["password"]}).encode()))
                headers["Authorization"] = f"Bearer {token}"
            elif state is None:
                out[p.name] = "unreadable: no saved login"
                continue
            else:
                headers["Cookie"] = _cookie_header(state, url)
            body = _fetch(url, headers)
        except urllib.error.HTTPError as exc:
            out[p.name] = f"unreadable: HTTP {exc.code}"
            continue
        except (urllib.error.URLError, OSError, ValueError) as exc:
            out[p.name] = f"unreadable: {getattr(exc, 'reason', exc)}"
            continue
        content = "\n".join(sorted(set(re.findall(p.pattern, body)))) if p.pattern else body
        out[p.name] = hashlib.sha256(content.encode()).hexdigest()[:16]
    return out


def compare(now: dict[str, str], mark: dict[str, str] | None) -> str:
    """The state column: how `now` compares with the fingerprint marked after the reset."""
    if not now:
        return "-"
    bad = [f"{k} ({v.split(': ', 1)[1]})" for k, v in now.items() if v.startswith("unreadable")]
    if bad:
        return "unreadable: " + ", ".join(bad)
    if mark is None:
        return "no reset mark"
    changed = sorted(k for k in now if mark.get(k) != now[k])
    return "CHANGED: " + ", ".join(changed) if changed else "unchanged"


def mark_path(config: WebArenaConfig):
    return config.cache / "reset-fingerprint.json"


def read_marks(config: WebArenaConfig) -> dict[str, Any]:
    try:
        data = json.loads(mark_path(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_marks(config: WebArenaConfig, rows: list[SiteStatus]) -> None:
    marks = read_marks(config)
    sites = marks.setdefault("sites", {})
    for r in rows:
        if r.fingerprint and not any(v.startswith("unreadable") for v in r.fingerprint.values()):
            sites[r.site] = {"url": r.url, "probes": r.fingerprint, "marked_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = mark_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(marks, indent=1), encoding="utf-8")


def _mark_for(marks: dict[str, Any], site: str, url: str) -> dict[str, str] | None:
    m = marks.get("sites", {}).get(site)
    return m["probes"] if m and m.get("url") == url else None


async def check(config: WebArenaConfig, login: bool = True, mark_reset: bool = False,
                browser: Any = None, timeout_s: float = TIMEOUT_S, auth: AuthManager | None = None) -> list[SiteStatus]:
    """Check every configured site; with `mark_reset`, record the fingerprints as the
    state right after a reset (only for sites whose probes could all be read)."""
    rows = [SiteStatus(site, config.sites[site]) for site in SITES if config.sites.get(site)]
    if not rows:
        from .config import HOW_TO_CONFIGURE, WebArenaConfigError

        raise WebArenaConfigError(f"no WebArena site is configured: {HOW_TO_CONFIGURE}")
    results = await asyncio.gather(*(asyncio.to_thread(reach, r.url, timeout_s) for r in rows))
    for r, (up, detail) in zip(rows, results):
        r.reachable, r.detail = up, detail
    auth = auth or AuthManager(config)
    own = None
    try:
        for r in rows:
            if not auth.needs_login(r.site):
                continue
            if not r.reachable:
                r.login = "not checked"
                continue
            if not login:
                r.login = "not checked"
                continue
            if browser is None:
                from ...browser import Browser

                own = browser = await Browser().start()
            try:
                await auth.state(r.site, browser.new_context, recheck_s=0)
                r.login = "ok (saved)" if auth.how(r.site) == "saved" else "ok (new login)"
            except LoginError as exc:
                r.login = f"FAILED: {exc}"
    finally:
        if own is not None:
            await own.close()
    marks = read_marks(config)
    for r in rows:
        if r.reachable and (not auth.needs_login(r.site) or not r.login.startswith("FAILED")):
            state = auth.saved(r.site) if auth.needs_login(r.site) else None
            r.fingerprint = await asyncio.to_thread(fingerprint, config, r.site, state)
            r.state = compare(r.fingerprint, None if mark_reset else _mark_for(marks, r.site, r.url))
    if mark_reset:
        write_marks(config, rows)
        for r in rows:
            if r.fingerprint:
                r.state = "marked" if not r.state.startswith("unreadable") else r.state + " (not marked)"
    return rows


def changed_sites(config: WebArenaConfig, sites: list[str], auth: AuthManager | None = None) -> dict[str, str]:
    """{site: state} for the given sites whose state differs from the reset mark (or
    cannot be compared); quick, no browser: uses saved logins only."""
    auth = auth or AuthManager(config)
    marks = read_marks(config)
    out = {}
    for site in sites:
        if not config.sites.get(site):
            continue
        now = fingerprint(config, site, auth.saved(site) if auth.needs_login(site) else None)
        state = compare(now, _mark_for(marks, site, config.sites[site]))
        if state not in ("-", "unchanged"):
            out[site] = state
    return out


def format_table(rows: list[SiteStatus]) -> str:
    """The check as a fixed-width table."""
    head = ("site", "url", "reachable", "login", "state since reset")
    lines = [(r.site, r.url, ("up, " if r.reachable else "DOWN, ") + r.detail, r.login, r.state) for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *lines]) for i in range(4)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return "\n".join(fmt.format(*row) for row in [head, *lines])


def preflight(tasks: list[Any], config: WebArenaConfig | None = None, timeout_s: float = TIMEOUT_S) -> list[str]:
    """Before running `tasks`: raise InfraError when a site they need is down; return
    warnings (sites whose state changed since the reset mark). Tasks that cannot be scored
    (no judge) are `judge.scorable`'s to refuse or leave out."""
    from .config import active_config

    config = config or active_config()
    sites = sorted({s for t in tasks for s in t.sites})
    down = []
    for site in sites:
        up, detail = reach(config.url(site), timeout_s)
        if not up:
            down.append(f"{site} ({config.url(site)}: {detail})")
    if down:
        raise InfraError(f"WebArena site(s) needed by the selected tasks are down: {'; '.join(down)} "
                         "(webr1 webarena check shows every site)")
    warnings = []
    for site, state in changed_sites(config, sites).items():
        if state == "no reset mark":
            warnings.append(f"{site}: no reset mark to compare its state with (run `webr1 webarena check --mark-reset` "
                            "right after resetting the sites, and runs will warn when their state has changed)")
        else:
            warnings.append(f"{site}: state {state} since the last reset mark; reset the site and run "
                            "`webr1 webarena check --mark-reset` for comparable results")
    return warnings
