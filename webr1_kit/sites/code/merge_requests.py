"""Code site merge request pages: the list of a project's merge requests (by state,
searchable, paginated) and the merge request page (branches, status, approvals)."""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..web import paginate
from .common import DEVELOPER, current_user, forbidden, load_project, role_of, touch, words_where

MR_SQL = """
SELECT r.*, a.name AS author_name, a.username AS author_username,
       s.name AS assignee_name, s.username AS assignee_username,
       (SELECT COUNT(*) FROM approvals ap WHERE ap.mr_id = r.id) AS n_approvals
FROM merge_requests r JOIN users a ON a.id = r.author_id LEFT JOIN users s ON s.id = r.assignee_id
"""
STATES = ("opened", "merged", "closed", "all")


def load_mr(p: Any, iid: int) -> Any:
    row = g.db.execute(MR_SQL + " WHERE r.project_id = ? AND r.iid = ?", (p["id"], iid)).fetchone()
    if row is None:
        abort(404)
    return row


def register(app: Flask) -> None:
    @app.route("/<ns>/<proj>/-/merge_requests")
    def merge_requests(ns: str, proj: str) -> str:
        p = load_project(ns, proj)
        state = request.args.get("state", "opened")
        state = state if state in STATES else "opened"
        search = request.args.get("search", "").strip()
        where, params = words_where("r.title", search)
        counts = {s: 0 for s in STATES}
        for row in g.db.execute(f"SELECT r.state, COUNT(*) FROM merge_requests r WHERE r.project_id = ? {where}"
                                " GROUP BY r.state", [p["id"], *params]):
            counts[row[0]] = row[1]
        counts["all"] = sum(counts[s] for s in STATES[:3])
        state_sql = "" if state == "all" else " AND r.state = ?"
        page = paginate(g.db, f"{MR_SQL} WHERE r.project_id = ? {where}{state_sql} ORDER BY r.created DESC, r.iid DESC",
                        [p["id"], *params, *([] if state == "all" else [state])], per_page=20)
        return render_template("merge_requests.html", p=p, page=page, state=state, counts=counts, search=search)

    @app.route("/<ns>/<proj>/-/merge_requests/<int:iid>")
    def merge_request(ns: str, proj: str, iid: int) -> str:
        p = load_project(ns, proj)
        mr = load_mr(p, iid)
        approvers = g.db.execute("SELECT u.* FROM approvals ap JOIN users u ON u.id = ap.user_id WHERE ap.mr_id = ?"
                                 " ORDER BY u.name COLLATE NOCASE", (mr["id"],)).fetchall()
        notes = g.db.execute(
            "SELECT n.*, u.name AS author_name, u.username AS author_username FROM notes n"
            " JOIN users u ON u.id = n.author_id WHERE n.mr_id = ? ORDER BY n.created, n.id", (mr["id"],)).fetchall()
        user = current_user()
        approved = user is not None and any(a["id"] == user["id"] for a in approvers)
        may_approve = mr["state"] == "opened" and role_of(p["id"]) >= DEVELOPER
        return render_template("merge_request.html", p=p, mr=mr, approvers=approvers, notes=notes,
                               approved=approved, may_approve=may_approve)

    @app.route("/<ns>/<proj>/-/merge_requests/<int:iid>/approve", methods=["POST"])
    def approve(ns: str, proj: str, iid: int) -> Any:
        p = load_project(ns, proj)
        mr = load_mr(p, iid)
        user = current_user()
        if mr["state"] != "opened" or role_of(p["id"]) < DEVELOPER:
            return forbidden("You need the Developer role to approve open merge requests.")
        if g.db.execute("DELETE FROM approvals WHERE mr_id = ? AND user_id = ?", (mr["id"], user["id"])).rowcount:
            flash("You revoked your approval.")
        else:
            g.db.execute("INSERT INTO approvals VALUES (?, ?)", (mr["id"], user["id"]))
            flash("You approved this merge request.")
        touch(p["id"])
        return redirect(url_for("merge_request", ns=ns, proj=proj, iid=iid))
