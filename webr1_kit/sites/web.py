"""What every arena site shares: the Flask app factory, per-request state, pagination,
form validation and the threaded server.

Each request is served from its episode's databases (see state.py): `g.db` is the
site's SQLite connection for the episode named by the request's cookie, and the
episode's lock is held for the whole request, so one episode's requests never
interleave. SQL is always parameterised (`db.execute(sql, params)`); templates are
Jinja2 with autoescaping, so any text (unicode, HTML, quotes) is stored as given and
shown escaped.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from flask import Flask, g, render_template, request
from werkzeug.serving import BaseWSGIServer, make_server

from ..config import http_url, sites_host
from ..observation import show_origin_as
from .state import EPISODE_COOKIE, SITES_COOKIE, StateStore, UnknownEpisode

HERE = Path(__file__).parent


def make_app(spec: Any, store: StateStore, urls: Callable[[], dict[str, str]]) -> Flask:
    """A Flask app for site `spec` (a SiteSpec) whose requests use the database `spec.db`
    of their episode, with the site's routes registered.

    Templates come from sites/<site>/templates and sites/templates (shared layout);
    `urls()` gives every site's base URL, for cross-site links.
    """
    site, db_name = spec.name, spec.db
    app = Flask(
        f"webr1_arena_{site}",
        template_folder=str(HERE / site / "templates"),
        static_folder=str(HERE / "static"),
        static_url_path="/static",
    )
    app.jinja_loader.searchpath.append(str(HERE / "templates"))  # type: ignore[union-attr]
    app.config["SITE"] = site
    # Flash messages live in a signed cookie; the key only has to be stable per process.
    app.secret_key = "webr1-arena-" + site

    @app.before_request
    def _episode() -> Any:
        try:
            episode = store.episode(request.cookies.get(EPISODE_COOKIE))
        except UnknownEpisode:
            return render_template("error.html", code=410, message="This episode has expired. Reset the task."), 410
        episode.lock.acquire()
        g.episode_lock = episode.lock
        g.db = episode.dbs[db_name]
        return None

    @app.teardown_request
    def _release(exc: BaseException | None) -> None:
        lock = g.pop("episode_lock", None)
        db: sqlite3.Connection | None = g.pop("db", None)
        if db is not None:
            if exc is None:
                db.commit()
            else:
                db.rollback()
        if lock is not None:
            lock.release()

    @app.errorhandler(404)
    def _not_found(_: Exception) -> Any:
        return render_template("error.html", code=404, message="Page not found."), 404

    @app.errorhandler(405)
    def _bad_method(_: Exception) -> Any:
        return render_template("error.html", code=405, message="This page does not accept that request."), 405

    @app.context_processor
    def _globals() -> dict[str, Any]:
        # Multi-site tasks (the suite lists the task's sites in a cookie) get links to the
        # task's other sites, as WebArena's homepage gives; single-site pages are unchanged.
        from . import site_specs

        wanted = [s for s in request.cookies.get(SITES_COOKIE, "").split("+") if s]
        all_urls = urls()
        linked = [(sp.title, all_urls[sp.name]) for sp in site_specs()
                  if len(wanted) > 1 and sp.name in wanted and sp.name != site and sp.name in all_urls]
        return {"site_urls": all_urls, "site": site, "site_title": spec.title, "linked_sites": linked}

    spec.register(app)
    return app


@dataclass
class Page:
    """One page of a paginated listing."""

    items: list[sqlite3.Row]
    page: int
    pages: int
    total: int
    per_page: int


def paginate(db: sqlite3.Connection, sql: str, params: tuple | list = (), per_page: int = 20) -> Page:
    """Run `sql` (without LIMIT) for the page named by ?page=N (1-based, clamped)."""
    total = db.execute(f"SELECT COUNT(*) FROM ({sql})", params).fetchone()[0]
    pages = max(1, math.ceil(total / per_page))
    try:
        page = int(request.args.get("page", 1))
    except ValueError:
        page = 1
    page = min(max(page, 1), pages)
    items = db.execute(f"{sql} LIMIT ? OFFSET ?", [*params, per_page, (page - 1) * per_page]).fetchall()
    return Page(items, page, pages, total, per_page)


def sort_clause(allowed: dict[str, str], default: str) -> tuple[str, str]:
    """ORDER BY text for ?sort=KEY, chosen from a fixed map (never from the request's text)."""
    key = request.args.get("sort", default)
    if key not in allowed:
        key = default
    return key, allowed[key]


class FormErrors(dict):
    """Field name -> error message, filled by the `require_*` checks."""

    def text(self, form: Any, name: str, label: str, max_len: int = 200, required: bool = True) -> str:
        value = (form.get(name) or "").strip()
        if required and not value:
            self[name] = f"{label} is required."
        elif len(value) > max_len:
            self[name] = f"{label} must be at most {max_len} characters."
        return value

    def integer(self, form: Any, name: str, label: str, lo: int, hi: int) -> int | None:
        raw = (form.get(name) or "").strip()
        try:
            value = int(raw)
        except ValueError:
            self[name] = f"{label} must be a whole number."
            return None
        if not lo <= value <= hi:
            self[name] = f"{label} must be between {lo} and {hi}."
            return None
        return value

    def choice(self, form: Any, name: str, label: str, options: list[str] | tuple[str, ...]) -> str:
        value = (form.get(name) or "").strip()
        if value not in options:
            self[name] = f"Choose a valid {label.lower()}."
        return value


class SiteServer:
    """A threaded WSGI server for one site, in a daemon thread, on 127.0.0.1 unless
    WEBR1_SITES_HOST names another address (`config.sites_host`)."""

    def __init__(self, app: Flask, port: int = 0):
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no per-request log lines
        self.host = sites_host()
        self.httpd: BaseWSGIServer = make_server(self.host, port, app, threaded=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=f"webr1-{app.config['SITE']}", daemon=True)
        self.thread.start()
        show_origin_as(self.url, f"http://{app.config['SITE']}.arena")  # observations name no port

    @property
    def url(self) -> str:
        return http_url(self.host, self.httpd.server_port)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
