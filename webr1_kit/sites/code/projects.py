"""Code site pages about projects and people: the dashboard, explore, user and group
pages, the project overview, stars and the members page."""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..web import FormErrors, paginate, sort_clause
from .common import (MAINTAINER, OWNER, PROJECT_SQL, current_user, forbidden, like, load_project, project_members,
                     role_of, touch)
from .data import ROLE_IDS, TODAY

# Columns of the wrapped PROJECT_SQL: ns is the namespace path, path the project's.
EXPLORE_SORTS = {
    "name": "ns COLLATE NOCASE, path COLLATE NOCASE",
    "stars": "stars DESC, ns COLLATE NOCASE, path COLLATE NOCASE",
    "updated": "last_activity DESC, ns COLLATE NOCASE, path COLLATE NOCASE",
}


def _listing(where: str, order: str) -> str:
    """Projects (PROJECT_SQL wrapped, so WHERE and ORDER BY can use its computed columns).
    `where` and `order` are fixed SQL text from this module; values go in as parameters."""
    return f"SELECT * FROM ({PROJECT_SQL}) AS q WHERE 1 = 1 {where} ORDER BY {order}"


def register(app: Flask) -> None:
    @app.route("/")
    def home() -> str:
        user = current_user()
        uid = user["id"] if user else -1
        page = paginate(g.db, _listing("AND id IN (SELECT project_id FROM members WHERE user_id = ?)",
                                       EXPLORE_SORTS["updated"]), (uid,), per_page=20)
        roles = {r["project_id"]: r["role"] for r in g.db.execute("SELECT * FROM members WHERE user_id = ?", (uid,))}
        return render_template("dashboard.html", page=page, roles=roles, tab="yours")

    @app.route("/dashboard/projects/starred")
    def starred() -> str:
        user = current_user()
        uid = user["id"] if user else -1
        page = paginate(g.db, _listing("AND id IN (SELECT project_id FROM stars WHERE user_id = ?)",
                                       EXPLORE_SORTS["name"]), (uid,), per_page=20)
        return render_template("dashboard.html", page=page, roles={}, tab="starred")

    @app.route("/dashboard/issues")
    def my_issues() -> str:
        user = current_user()
        state = request.args.get("state", "opened")
        state = state if state in ("opened", "closed", "all") else "opened"
        where = "" if state == "all" else "AND i.state = ?"
        params: list[Any] = [user["id"] if user else -1] + ([] if state == "all" else [state])
        sql = ("SELECT i.*, p.path AS proj, n.path AS ns FROM issues i JOIN projects p ON p.id = i.project_id"
               f" JOIN namespaces n ON n.id = p.namespace_id WHERE i.assignee_id = ? {where}"
               " ORDER BY i.updated DESC, i.id DESC")
        page = paginate(g.db, sql, params, per_page=20)
        return render_template("my_issues.html", page=page, state=state)

    @app.route("/explore")
    def explore() -> str:
        q = request.args.get("q", "").strip()
        sort, order = sort_clause(EXPLORE_SORTS, "name")
        where, params = "", []
        if q:
            # every word in the path ("ns/project") or the description
            words = q.split()[:8]
            clause = "AND (ns || '/' || path LIKE ? ESCAPE '\\' OR description LIKE ? ESCAPE '\\')"
            where = " ".join(clause for _ in words)
            params = [v for w in words for v in (like(w), like(w))]
        page = paginate(g.db, _listing(where, order), params, per_page=10)
        return render_template("explore.html", page=page, q=q, sort=sort)

    @app.route("/<ns>")
    def namespace(ns: str) -> str:
        row = g.db.execute("SELECT * FROM namespaces WHERE path = ?", (ns,)).fetchone()
        if row is None:
            abort(404)
        projects = g.db.execute(_listing("AND namespace_id = ?", EXPLORE_SORTS["name"]), (row["id"],)).fetchall()
        if row["kind"] == "group":
            return render_template("group.html", group=row, projects=projects)
        user = g.db.execute("SELECT * FROM users WHERE id = ?", (row["user_id"],)).fetchone()
        member_of = g.db.execute(
            _listing("AND id IN (SELECT project_id FROM members WHERE user_id = ?) AND namespace_id != ?",
                     EXPLORE_SORTS["name"]), (user["id"], row["id"])).fetchall()
        starred_n = g.db.execute("SELECT COUNT(*) FROM stars WHERE user_id = ?", (user["id"],)).fetchone()[0]
        return render_template("user.html", person=user, projects=projects, member_of=member_of, starred_n=starred_n)

    @app.route("/<ns>/<proj>")
    def project(ns: str, proj: str) -> str:
        p = load_project(ns, proj)
        user = current_user()
        starred_by_me = user is not None and g.db.execute(
            "SELECT 1 FROM stars WHERE project_id = ? AND user_id = ?", (p["id"], user["id"])).fetchone() is not None
        members = project_members(p["id"])
        return render_template("project.html", p=p, starred_by_me=starred_by_me, members=members,
                               my_role=role_of(p["id"]))

    @app.route("/<ns>/<proj>/-/star", methods=["POST"])
    def star(ns: str, proj: str) -> Any:
        p = load_project(ns, proj)
        user = current_user()
        if user is None:
            flash("Sign in to star projects.")
            return redirect(url_for("project", ns=ns, proj=proj))
        if g.db.execute("DELETE FROM stars WHERE project_id = ? AND user_id = ?", (p["id"], user["id"])).rowcount == 0:
            g.db.execute("INSERT INTO stars VALUES (?, ?, ?)", (p["id"], user["id"], TODAY))
            flash(f"You starred {ns}/{proj}.")
        else:
            flash(f"You unstarred {ns}/{proj}.")
        return redirect(url_for("project", ns=ns, proj=proj))

    @app.route("/<ns>/<proj>/-/starrers")
    def starrers(ns: str, proj: str) -> str:
        p = load_project(ns, proj)
        page = paginate(g.db, "SELECT u.*, s.created AS starred FROM stars s JOIN users u ON u.id = s.user_id"
                              " WHERE s.project_id = ? ORDER BY u.name COLLATE NOCASE", (p["id"],), per_page=20)
        return render_template("starrers.html", p=p, page=page)

    @app.route("/<ns>/<proj>/-/project_members", methods=["GET", "POST"])
    def members(ns: str, proj: str) -> Any:
        p = load_project(ns, proj)
        my_role = role_of(p["id"])
        errors = FormErrors()
        form: Any = {}
        if request.method == "POST":
            if my_role < MAINTAINER:
                return forbidden("You need the Maintainer role to add members.")
            form = request.form
            username = errors.text(form, "username", "Username", 60).lstrip("@")
            role = errors.choice(form, "role", "Role", list(ROLE_IDS))
            person = None
            if "username" not in errors:
                person = g.db.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
                if person is None:
                    errors["username"] = f"No user with the username {username}."
                elif role_of(p["id"], person):
                    errors["username"] = f"{person['name']} is already a member of this project."
            if "role" not in errors and ROLE_IDS[role] == OWNER and my_role < OWNER:
                errors["role"] = "Only an Owner can add another Owner."
            if not errors and person is not None:
                g.db.execute("INSERT INTO members VALUES (?, ?, ?, ?)", (p["id"], person["id"], ROLE_IDS[role], TODAY))
                touch(p["id"])
                flash(f"Added {person['name']} to {ns}/{proj} as {role}.")
                return redirect(url_for("members", ns=ns, proj=proj))
        return render_template("members.html", p=p, members=project_members(p["id"]), my_role=my_role,
                               errors=errors, form=form, roles=list(ROLE_IDS))

