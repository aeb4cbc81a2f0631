"""Stand-ins for the WebArena sites and an LLM judge, for tests without the Docker images.

Each is a small Flask app on 127.0.0.1 with just what the kit touches: the login pages
and logged-in checks of WebArena's auto-login (same labels, placeholders, test ids and
paths), the Magento REST endpoints the helpers and probes read, the GitLab API and
Postmill listing pages the probes read, and pages with the structure the program_html
helpers read (tests/fixtures/webarena/). Session cookies have a different name per site
so that sites on one host do not collide (except where a test wants them to).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from flask import Flask, jsonify, make_response, redirect, request
from werkzeug.serving import make_server

PAGES = Path(__file__).parent / "fixtures" / "webarena"
TOKEN = "tok-admin-123"


class Server:
    """A Flask app served on 127.0.0.1 (free port) in a daemon thread."""

    def __init__(self, app: Flask):
        self.httpd = make_server("127.0.0.1", 0, app, threaded=True)
        # A short poll interval: shutdown() waits for the loop's next poll.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _page(title: str, body: str) -> str:
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>"


class Site:
    """Shared login bookkeeping: accounts, live sessions, login POSTs counted."""

    def __init__(self, name: str, cookie: str, username: str, password: str):
        self.name, self.cookie = name, cookie
        self.username, self.password = username, password
        self.sessions: set[str] = set()
        self.login_posts = 0
        self.rest: dict[str, Any] = {}

    def logged_in(self) -> bool:
        return request.cookies.get(self.cookie) in self.sessions

    def log_in(self, username: str, password: str, to: str):
        self.login_posts += 1
        if (username, password) != (self.username, self.password):
            return None
        sid = f"{self.name}-{len(self.sessions) + 1}-{self.login_posts}"
        self.sessions.add(sid)
        resp = make_response(redirect(to))
        resp.set_cookie(self.cookie, sid, path="/")
        return resp

    def rest_routes(self, app: Flask) -> None:
        """Magento's admin token and any /rest/V1/... read, from `self.rest` (Bearer token required)."""

        @app.post("/rest/default/V1/integration/admin/token")
        def token():
            body = request.get_json(force=True, silent=True) or {}
            if (body.get("username"), body.get("password")) != ("admin", "admin1234"):
                return jsonify({"message": "The account sign-in was incorrect"}), 401
            return jsonify(TOKEN)

        @app.get("/rest/V1/<path:what>")
        def rest(what: str):
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                return jsonify({"message": "unauthorized"}), 401
            if what not in self.rest:
                return jsonify({"message": f"no route {what}"}), 404
            return jsonify(self.rest[what])


def shop(cookie: str = "shop_session") -> tuple[Flask, Site]:
    """The storefront (emma.lopez) with Magento REST: orders, reviews, products, carts."""
    site = Site("shop", cookie, "emma.lopez@gmail.com", "Password.123")
    site.rest = {
        "orders": {"items": [{"increment_id": "000000190", "updated_at": "2023-05-01 10:00:00"}], "total_count": 309},
        "carts/search": {"items": [{"id": 7, "updated_at": "2023-05-01 10:00:00"}], "total_count": 1},
        "products/B00MXUFL0E/reviews": [
            {"nickname": "Old Reviewer", "title": "meh", "detail": "fine", "ratings": [{"rating_name": "Rating", "percent": 60}]},
            {"nickname": "Emma Lopez", "title": "Great bars", "detail": "Tasty and filling",
             "ratings": [{"rating_name": "Rating", "percent": 80}]},
        ],
        "products/NOREVIEWS/reviews": [],
        "products/MSH03": {"sku": "MSH03", "custom_attributes": [{"attribute_code": "url_key", "value": "antonia-racer-tank"}]},
    }
    app = Flask("standin-shop")
    site.rest_routes(app)

    @app.get("/")
    def home():
        who = "Welcome, Emma Lopez!" if site.logged_in() else "Default welcome msg!"
        return _page("One Stop Market", f'<p class="greet">{who}</p><a href="/a.html">Tab A</a>')

    @app.get("/customer/account/login/")
    def login_page():
        return _page("Customer Login", """
            <form method="post" action="/customer/account/loginPost/">
              <label for="email">Email</label><input id="email" name="login[username]">
              <label for="pass">Password</label><input id="pass" type="password" name="login[password]">
              <button type="submit" id="send2">Sign In</button>
            </form>""")

    @app.post("/customer/account/loginPost/")
    def login_post():
        resp = site.log_in(request.form.get("login[username]", ""), request.form.get("login[password]", ""), "/customer/account/")
        return resp or redirect("/customer/account/login/")

    @app.get("/customer/account/")
    def account():
        return _page("My Account", "My Account") if site.logged_in() else redirect("/customer/account/login/")

    @app.get("/wishlist/")
    def wishlist():
        return _page("My Wish List", "My Wish List") if site.logged_in() else redirect("/customer/account/login/")

    @app.get("/sales/order/view/order_id/<int:oid>/")
    def order(oid: int):
        if not site.logged_in():
            return redirect("/customer/account/login/")
        return (PAGES / "shop_order.html").read_text().replace("000000190", f"{oid:09d}")

    @app.get("/<name>.html")
    def product(name: str):
        if name == "antonia-racer-tank":
            return (PAGES / "shop_product.html").read_text()
        return _page(f"Page {name}", f"<h1>{name}</h1>")

    return app, site


def admin(cookie: str = "admin_session") -> tuple[Flask, Site]:
    """The shop's admin (Magento backend at /admin): login by placeholders, "Dashboard" when in."""
    site = Site("admin", cookie, "admin", "admin1234")
    site.rest = {name: {"items": [{"id": 1, "updated_at": "2023-01-01 00:00:00"}], "total_count": 1}
                 for name in ("orders", "products", "cmsPage/search", "customers/search")}
    app = Flask("standin-admin")
    site.rest_routes(app)
    form = """<form method="post" action="/admin/login">
        <input name="login[username]" placeholder="user name"><input name="login[password]" type="password" placeholder="password">
        <button class="action-login" type="submit">Sign in</button></form>"""

    @app.get("/admin")
    @app.get("/admin/")
    def root():
        return _page("Dashboard / Magento Admin", "<h1>Dashboard</h1>") if site.logged_in() else _page("Magento Admin", form)

    @app.post("/admin/login")
    def login_post():
        resp = site.log_in(request.form.get("login[username]", ""), request.form.get("login[password]", ""), "/admin/dashboard")
        return resp or redirect("/admin")

    @app.get("/admin/dashboard")
    def dashboard():  # Magento shows the login form at the same URL when signed out
        return _page("Dashboard / Magento Admin", "<h1>Dashboard</h1>") if site.logged_in() else _page("Magento Admin", form)

    return app, site


def reddit(cookie: str = "reddit_session") -> tuple[Flask, Site]:
    """Postmill: "Log in" link, labelled form, account page with "Delete", listings with ids."""
    site = Site("reddit", cookie, "MarvelsGrantMan136", "test1234")
    site.rest = {"posts": [120, 121], "comments": [900, 901]}
    app = Flask("standin-reddit")

    @app.get("/")
    def home():
        return _page("Postmill", '<a href="/login">Log in</a>')

    @app.get("/login")
    def login_page():
        return _page("Log in", """<form method="post" action="/login_check">
            <label for="u">Username</label><input id="u" name="_username">
            <label for="p">Password</label><input id="p" type="password" name="_password">
            <button type="submit">Log in</button></form>""")

    @app.post("/login_check")
    def login_post():
        return site.log_in(request.form.get("_username", ""), request.form.get("_password", ""), "/") or redirect("/login")

    @app.get("/user/<name>/account")
    def account(name: str):
        if not site.logged_in():
            return redirect("/login")
        return _page("Account", "<button>Delete account</button>")

    @app.get("/all/new")
    def new():
        if not site.logged_in():
            return redirect("/login")
        links = "".join(f'<a href="/f/books/{i}/title-{i}">post {i}</a>' for i in site.rest["posts"])
        return _page("New", f'{links}<input type="hidden" name="token" value="{len(site.sessions)}-csrf">')

    @app.get("/comments")
    def comments():
        links = "".join(f'<a href="/f/books/120/-/comment/{i}">c</a>' for i in site.rest["comments"])
        return _page("Comments", links)

    @app.get("/f/<forum>/<int:pid>/")
    @app.get("/f/<forum>/<int:pid>/<slug>")
    @app.get("/f/<forum>/<int:pid>/<slug>/comment/<int:cid>")
    def post(forum: str, pid: int, slug: str = "", cid: int = 0):
        return (PAGES / "reddit_post.html").read_text()

    return app, site


def gitlab(cookie: str = "_gitlab_session") -> tuple[Flask, Site]:
    """GitLab: sign-in by data-testid, /-/profile redirects when signed out, API by session cookie."""
    site = Site("gitlab", cookie, "byteblaze", "hello1234")
    site.rest = {"events": [{"id": 5001, "action_name": "pushed to"}],
                 "projects": [{"id": 1, "last_activity_at": "2023-03-01T00:00:00Z", "star_count": 3}]}
    app = Flask("standin-gitlab")

    @app.get("/users/sign_in")
    def login_page():
        return _page("Sign in · GitLab", """<form method="post" action="/users/sign_in">
            <input data-testid="username-field" name="user[login]">
            <input data-testid="password-field" type="password" name="user[password]">
            <button data-testid="sign-in-button" type="submit">Sign in</button></form>""")

    @app.post("/users/sign_in")
    def login_post():
        return site.log_in(request.form.get("user[login]", ""), request.form.get("user[password]", ""), "/") or redirect("/users/sign_in")

    @app.get("/")
    def home():
        return _page("Projects · GitLab", "Projects") if site.logged_in() else redirect("/users/sign_in")

    @app.get("/-/profile")
    def profile():
        return _page("Profile · GitLab", "Edit profile") if site.logged_in() else redirect("/users/sign_in")

    @app.get("/api/v4/<what>")
    def api(what: str):
        if not site.logged_in():
            return jsonify({"message": "401 Unauthorized"}), 401
        return jsonify(site.rest.get(what, []))

    @app.get("/byteblaze/dotfiles/-/project_members")
    def members():
        return (PAGES / "gitlab_members.html").read_text() if site.logged_in() else redirect("/users/sign_in")

    return app, site


class Judge:
    """An OpenAI-compatible chat-completions stand-in. It reads the student's answer back
    from the prompt and replies by rule: PARTIAL -> "partially correct", NOVERDICT -> no
    verdict, HTTP500 -> HTTP 500, an answer containing the reference -> "correct", else
    "incorrect"; for unachievable-task prompts, "same" when the reported reason contains
    the actual one, else "different"."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        app = Flask("standin-judge")

        @app.post("/v1/chat/completions")
        def complete():
            body = request.get_json(force=True)
            self.requests.append({"body": body, "auth": request.headers.get("Authorization")})
            prompt = body["messages"][-1]["content"]
            fields = dict(line.split(": ", 1) for line in prompt.splitlines() if ": " in line)
            if "Reported reason" in fields:
                same = fields["Actual reason it cannot be done"].lower() in fields["Reported reason"].lower()
                reply = "The reasons match. same" if same else "They differ. different"
            else:
                answer, reference = fields.get("Student answer", ""), fields.get("Reference answer", "")
                if "HTTP500" in answer:
                    return "boom", 500
                if "PARTIAL" in answer:
                    reply = "Some parts match. partially correct"
                elif "NOVERDICT" in answer:
                    reply = "I cannot tell."
                else:
                    reply = "Correct." if reference.lower() in answer.lower() else "The answer differs: incorrect"
            return jsonify({"id": "x", "object": "chat.completion",
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]})

        self.app = app


def task_record(task_id: int, sites: list[str], start_url: Any, ev: dict[str, Any], intent: str = "Do it") -> dict:
    """A WebArena raw task config."""
    return {"sites": sites, "task_id": task_id, "require_login": True, "storage_state": None, "start_url": start_url,
            "geolocation": None, "intent_template": intent, "instantiation_dict": {}, "intent": intent,
            "require_reset": False, "eval": {"reference_answers": None, "reference_url": "", "program_html": [],
                                             "string_note": "", **ev},
            "intent_template_id": 100 + task_id}


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path
