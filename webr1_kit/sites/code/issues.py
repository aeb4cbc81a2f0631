"""Code site issue pages: the filtered, paginated issue list of a project, the issue
page (comments, close/reopen), the new-issue form and the edit form."""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..web import FormErrors, paginate, sort_clause
from .common import (REPORTER, current_user, forbidden, labels_by_issue, load_project, project_members, role_of,
                     touch, words_where)
from .data import TODAY

ISSUE_SORTS = {
    "created_desc": "i.created DESC, i.iid DESC",
    "created_asc": "i.created ASC, i.iid ASC",
    "updated_desc": "i.updated DESC, i.iid DESC",
    "title": "i.title COLLATE NOCASE, i.iid",
}
ISSUE_SQL = """
SELECT i.*, a.name AS author_name, a.username AS author_username,
       s.name AS assignee_name, s.username AS assignee_username, m.title AS milestone_title, m.iid AS milestone_iid
FROM issues i JOIN users a ON a.id = i.author_id LEFT JOIN users s ON s.id = i.assignee_id
LEFT JOIN milestones m ON m.id = i.milestone_id
"""


def issue_filters(p: Any, args: Any) -> tuple[str, list[Any], dict[str, str]]:
    """WHERE text and parameters for the list's filters (everything but the state), and
    the filter values as understood (unknown names filter to nothing, as on GitLab)."""
    where, params = "WHERE i.project_id = ?", [p["id"]]
    shown: dict[str, str] = {}
    label = args.get("label_name", "").strip()
    if label:
        where += (" AND i.id IN (SELECT il.issue_id FROM issue_labels il JOIN labels l ON l.id = il.label_id"
                  " WHERE l.project_id = ? AND l.name = ?)")
        params += [p["id"], label]
        shown["label_name"] = label
    milestone = args.get("milestone_title", "").strip()
    if milestone:
        where += " AND m.title = ?"
        params.append(milestone)
        shown["milestone_title"] = milestone
    assignee = args.get("assignee_username", "").strip()
    if assignee:
        where += " AND s.username = ?"
        params.append(assignee)
        shown["assignee_username"] = assignee
    search = args.get("search", "").strip()
    if search:
        extra, more = words_where("i.title", search)
        where += " " + extra
        params += more
        shown["search"] = search
    return where, params, shown


def issue_form_options(p: Any) -> dict[str, Any]:
    """The labels, milestones and possible assignees (members) of a project, for the forms."""
    return {
        "labels": g.db.execute("SELECT * FROM labels WHERE project_id = ? ORDER BY name COLLATE NOCASE",
                               (p["id"],)).fetchall(),
        "milestones": g.db.execute("SELECT * FROM milestones WHERE project_id = ? AND state = 'active' ORDER BY title",
                                   (p["id"],)).fetchall(),
        "assignees": project_members(p["id"]),
    }


def read_issue_form(p: Any, form: Any, errors: FormErrors, options: dict[str, Any]) -> dict[str, Any]:
    """Validate the new/edit issue form; returns the cleaned values."""
    title = errors.text(form, "title", "Title", 255)
    description = errors.text(form, "description", "Description", 5000, required=False)
    label_ids = {str(label["id"]): label["id"] for label in options["labels"]}
    labels = []
    for raw in form.getlist("labels"):
        if raw not in label_ids:
            errors["labels"] = "Choose labels of this project."
        else:
            labels.append(label_ids[raw])
    milestone = None
    if form.get("milestone"):
        ids = {str(m["id"]): m["id"] for m in options["milestones"]}
        milestone = ids.get(form["milestone"])
        if milestone is None:
            errors["milestone"] = "Choose an open milestone of this project."
    assignee = None
    if form.get("assignee"):
        ids = {u["username"]: u["id"] for u in options["assignees"]}
        assignee = ids.get(form["assignee"])
        if assignee is None:
            errors["assignee"] = "The assignee must be a member of this project."
    return {"title": title, "description": description, "labels": sorted(set(labels)), "milestone": milestone,
            "assignee": assignee}


def load_issue(p: Any, iid: int) -> Any:
    row = g.db.execute(ISSUE_SQL + " WHERE i.project_id = ? AND i.iid = ?", (p["id"], iid)).fetchone()
    if row is None:
        abort(404)
    return row


def may_edit(p: Any, issue: Any) -> bool:
    user = current_user()
    return user is not None and (issue["author_id"] == user["id"] or role_of(p["id"]) >= REPORTER)


def register(app: Flask) -> None:
    @app.route("/<ns>/<proj>/-/issues")
    def issues(ns: str, proj: str) -> str:
        p = load_project(ns, proj)
        state = request.args.get("state", "opened")
        state = state if state in ("opened", "closed", "all") else "opened"
        where, params, shown = issue_filters(p, request.args)
        base = ("FROM issues i LEFT JOIN users s ON s.id = i.assignee_id"
                f" LEFT JOIN milestones m ON m.id = i.milestone_id {where}")
        counts = {"opened": 0, "closed": 0}
        for row in g.db.execute(f"SELECT i.state, COUNT(*) {base} GROUP BY i.state", params):
            counts[row[0]] = row[1]
        counts["all"] = counts["opened"] + counts["closed"]
        sort, order = sort_clause(ISSUE_SORTS, "created_desc")
        state_sql = "" if state == "all" else " AND i.state = ?"
        page = paginate(g.db, f"{ISSUE_SQL} {where}{state_sql} ORDER BY {order}",
                        params + ([] if state == "all" else [state]), per_page=20)
        return render_template("issues.html", p=p, page=page, state=state, counts=counts, sort=sort, shown=shown,
                               row_labels=labels_by_issue(i["id"] for i in page.items), **issue_form_options(p))

    @app.route("/<ns>/<proj>/-/issues/new", methods=["GET", "POST"])
    def new_issue(ns: str, proj: str) -> Any:
        p = load_project(ns, proj)
        user = current_user()
        if user is None:
            return forbidden("Sign in to open issues.")
        options = issue_form_options(p)
        errors = FormErrors()
        form: Any = {}
        if request.method == "POST":
            form = request.form
            values = read_issue_form(p, form, errors, options)
            if not errors:
                iid = g.db.execute("SELECT COALESCE(MAX(iid), 0) + 1 FROM issues WHERE project_id = ?",
                                   (p["id"],)).fetchone()[0]
                cur = g.db.execute(
                    "INSERT INTO issues (project_id, iid, title, description, state, author_id, assignee_id,"
                    " milestone_id, created, updated) VALUES (?, ?, ?, ?, 'opened', ?, ?, ?, ?, ?)",
                    (p["id"], iid, values["title"], values["description"], user["id"], values["assignee"],
                     values["milestone"], TODAY, TODAY))
                g.db.executemany("INSERT INTO issue_labels VALUES (?, ?)",
                                 [(cur.lastrowid, lid) for lid in values["labels"]])
                touch(p["id"])
                flash(f"Issue #{iid} was created.")
                return redirect(url_for("issue", ns=ns, proj=proj, iid=iid))
        return render_template("issue_form.html", p=p, errors=errors, form=form, issue=None,
                               chosen=set(form.getlist("labels")) if form else set(), **options)

    @app.route("/<ns>/<proj>/-/issues/<int:iid>", methods=["GET", "POST"])
    def issue(ns: str, proj: str, iid: int) -> Any:
        p = load_project(ns, proj)
        row = load_issue(p, iid)
        errors = FormErrors()
        if request.method == "POST":  # the comment form
            user = current_user()
            if user is None:
                return forbidden("Sign in to comment.")
            body = errors.text(request.form, "body", "Comment", 5000)
            if not errors:
                g.db.execute("INSERT INTO notes (issue_id, author_id, body, created) VALUES (?, ?, ?, ?)",
                             (row["id"], user["id"], body, TODAY))
                g.db.execute("UPDATE issues SET updated = ? WHERE id = ?", (TODAY, row["id"]))
                touch(p["id"])
                flash("Your comment was added.")
                return redirect(url_for("issue", ns=ns, proj=proj, iid=iid))
        notes = g.db.execute(
            "SELECT n.*, u.name AS author_name, u.username AS author_username FROM notes n"
            " JOIN users u ON u.id = n.author_id WHERE n.issue_id = ? ORDER BY n.created, n.id", (row["id"],)).fetchall()
        return render_template("issue.html", p=p, issue=row, notes=notes, errors=errors,
                               labels=labels_by_issue([row["id"]])[row["id"]], may_edit=may_edit(p, row),
                               draft=request.form.get("body", "") if errors else "")

    @app.route("/<ns>/<proj>/-/issues/<int:iid>/state", methods=["POST"])
    def issue_state(ns: str, proj: str, iid: int) -> Any:
        p = load_project(ns, proj)
        row = load_issue(p, iid)
        if not may_edit(p, row):
            return forbidden("You need the Reporter role to close or reopen issues.")
        action = request.form.get("action")
        if action not in ("close", "reopen"):
            abort(400)
        new_state = "closed" if action == "close" else "opened"
        if row["state"] != new_state:
            g.db.execute("UPDATE issues SET state = ?, updated = ?, closed_at = ? WHERE id = ?",
                         (new_state, TODAY, TODAY if new_state == "closed" else None, row["id"]))
            g.db.execute("INSERT INTO notes (issue_id, author_id, body, system, created) VALUES (?, ?, ?, 1, ?)",
                         (row["id"], current_user()["id"], "closed" if new_state == "closed" else "reopened", TODAY))
            touch(p["id"])
        flash(f"Issue #{iid} was {'closed' if new_state == 'closed' else 'reopened'}.")
        return redirect(url_for("issue", ns=ns, proj=proj, iid=iid))

    @app.route("/<ns>/<proj>/-/issues/<int:iid>/edit", methods=["GET", "POST"])
    def edit_issue(ns: str, proj: str, iid: int) -> Any:
        p = load_project(ns, proj)
        row = load_issue(p, iid)
        if not may_edit(p, row):
            return forbidden("You need the Reporter role to edit issues.")
        options = issue_form_options(p)
        if row["milestone_id"] and all(m["id"] != row["milestone_id"] for m in options["milestones"]):
            # a closed milestone stays choosable for the issue that already has it
            options["milestones"] = options["milestones"] + g.db.execute(
                "SELECT * FROM milestones WHERE id = ?", (row["milestone_id"],)).fetchall()
        errors = FormErrors()
        current = {str(label["id"]) for label in labels_by_issue([row["id"]])[row["id"]]}
        form: Any = {"title": row["title"], "description": row["description"],
                     "milestone": str(row["milestone_id"] or ""), "assignee": row["assignee_username"] or ""}
        chosen = current
        if request.method == "POST":
            form = request.form
            chosen = set(form.getlist("labels"))
            values = read_issue_form(p, form, errors, options)
            if not errors:
                g.db.execute("UPDATE issues SET title = ?, description = ?, assignee_id = ?, milestone_id = ?,"
                             " updated = ? WHERE id = ?", (values["title"], values["description"], values["assignee"],
                                                           values["milestone"], TODAY, row["id"]))
                g.db.execute("DELETE FROM issue_labels WHERE issue_id = ?", (row["id"],))
                g.db.executemany("INSERT INTO issue_labels VALUES (?, ?)",
                                 [(row["id"], lid) for lid in values["labels"]])
                touch(p["id"])
                flash(f"Issue #{iid} was updated.")
                return redirect(url_for("issue", ns=ns, proj=proj, iid=iid))
        return render_template("issue_form.html", p=p, errors=errors, form=form, issue=row, chosen=chosen, **options)
