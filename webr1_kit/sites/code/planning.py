"""Code site planning pages: a project's labels and milestones, the forms that create
them, and the milestone page with its issues."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..web import FormErrors
from .common import MAINTAINER, can, forbidden, labels_by_issue, load_project, touch
from .issues import ISSUE_SQL

COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
MILESTONE_STATES = {"opened": "AND m.state = 'active'", "closed": "AND m.state = 'closed'", "all": ""}
MILESTONE_SQL = """
SELECT m.*, COUNT(i.id) AS n_issues, COALESCE(SUM(i.state = 'closed'), 0) AS n_closed
FROM milestones m LEFT JOIN issues i ON i.milestone_id = m.id
WHERE m.project_id = ? {where} GROUP BY m.id ORDER BY m.due_date, m.title
"""


def _date(errors: FormErrors, form: Any, name: str, label: str) -> str | None:
    """An optional date field, written YYYY-MM-DD."""
    raw = (form.get(name) or "").strip()
    if not raw:
        return None
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw):
            return date.fromisoformat(raw).isoformat()
    except ValueError:  # 2024-02-30
        pass
    errors[name] = f"{label} must be a date written as YYYY-MM-DD."
    return None


def register(app: Flask) -> None:
    @app.route("/<ns>/<proj>/-/labels")
    def labels(ns: str, proj: str) -> str:
        p = load_project(ns, proj)
        rows = g.db.execute(
            "SELECT l.*, (SELECT COUNT(*) FROM issue_labels il JOIN issues i ON i.id = il.issue_id"
            "             WHERE il.label_id = l.id AND i.state = 'opened') AS open_issues"
            " FROM labels l WHERE l.project_id = ? ORDER BY l.name COLLATE NOCASE", (p["id"],)).fetchall()
        return render_template("labels.html", p=p, labels=rows, may_manage=can(p, MAINTAINER))

    @app.route("/<ns>/<proj>/-/labels/new", methods=["GET", "POST"])
    def new_label(ns: str, proj: str) -> Any:
        p = load_project(ns, proj)
        if not can(p, MAINTAINER):
            return forbidden("You need the Maintainer role to create labels.")
        errors = FormErrors()
        form: Any = {"color": "#428bca"}
        if request.method == "POST":
            form = request.form
            name = errors.text(form, "title", "Title", 50)
            description = errors.text(form, "description", "Description", 200, required=False)
            color = errors.text(form, "color", "Background color", 7)
            if "color" not in errors and not COLOR.match(color):
                errors["color"] = "Background color must be a hex colour like #1f75cb."
            if "title" not in errors and g.db.execute("SELECT 1 FROM labels WHERE project_id = ? AND name = ? COLLATE NOCASE",
                                                      (p["id"], name)).fetchone():
                errors["title"] = "A label with this title already exists."
            if not errors:
                g.db.execute("INSERT INTO labels (project_id, name, color, description) VALUES (?, ?, ?, ?)",
                             (p["id"], name, color.lower(), description))
                touch(p["id"])
                flash(f"Label {name} was created.")
                return redirect(url_for("labels", ns=ns, proj=proj))
        return render_template("label_form.html", p=p, errors=errors, form=form)

    @app.route("/<ns>/<proj>/-/milestones")
    def milestones(ns: str, proj: str) -> str:
        p = load_project(ns, proj)
        state = request.args.get("state", "opened")
        state = state if state in MILESTONE_STATES else "opened"
        rows = g.db.execute(MILESTONE_SQL.format(where=MILESTONE_STATES[state]), (p["id"],)).fetchall()
        counts = {s: len(g.db.execute(MILESTONE_SQL.format(where=w), (p["id"],)).fetchall())
                  for s, w in MILESTONE_STATES.items()}
        return render_template("milestones.html", p=p, milestones=rows, state=state, counts=counts,
                               may_manage=can(p, MAINTAINER))

    @app.route("/<ns>/<proj>/-/milestones/new", methods=["GET", "POST"])
    def new_milestone(ns: str, proj: str) -> Any:
        p = load_project(ns, proj)
        if not can(p, MAINTAINER):
            return forbidden("You need the Maintainer role to create milestones.")
        errors = FormErrors()
        form: Any = {}
        if request.method == "POST":
            form = request.form
            title = errors.text(form, "title", "Title", 100)
            description = errors.text(form, "description", "Description", 2000, required=False)
            start = _date(errors, form, "start_date", "Start date")
            due = _date(errors, form, "due_date", "Due date")
            if start and due and due < start:
                errors["due_date"] = "Due date must not be before the start date."
            if "title" not in errors and g.db.execute(
                    "SELECT 1 FROM milestones WHERE project_id = ? AND title = ? COLLATE NOCASE",
                    (p["id"], title)).fetchone():
                errors["title"] = "A milestone with this title already exists."
            if not errors:
                iid = g.db.execute("SELECT COALESCE(MAX(iid), 0) + 1 FROM milestones WHERE project_id = ?",
                                   (p["id"],)).fetchone()[0]
                g.db.execute("INSERT INTO milestones (project_id, iid, title, description, start_date, due_date, state)"
                             " VALUES (?, ?, ?, ?, ?, ?, 'active')", (p["id"], iid, title, description, start, due))
                touch(p["id"])
                flash(f"Milestone {title} was created.")
                return redirect(url_for("milestone", ns=ns, proj=proj, iid=iid))
        return render_template("milestone_form.html", p=p, errors=errors, form=form)

    @app.route("/<ns>/<proj>/-/milestones/<int:iid>", methods=["GET", "POST"])
    def milestone(ns: str, proj: str, iid: int) -> Any:
        p = load_project(ns, proj)
        m = g.db.execute("SELECT * FROM milestones WHERE project_id = ? AND iid = ?", (p["id"], iid)).fetchone()
        if m is None:
            abort(404)
        if request.method == "POST":  # close or reopen
            if not can(p, MAINTAINER):
                return forbidden("You need the Maintainer role to close milestones.")
            new_state = "closed" if m["state"] == "active" else "active"
            g.db.execute("UPDATE milestones SET state = ? WHERE id = ?", (new_state, m["id"]))
            flash(f"Milestone {m['title']} was {'closed' if new_state == 'closed' else 'reopened'}.")
            return redirect(url_for("milestone", ns=ns, proj=proj, iid=iid))
        issues = g.db.execute(ISSUE_SQL + " WHERE i.milestone_id = ? ORDER BY i.state DESC, i.iid",
                              (m["id"],)).fetchall()
        return render_template("milestone.html", p=p, m=m, issues=issues,
                               labels=labels_by_issue(i["id"] for i in issues),
                               may_manage=can(p, MAINTAINER))
