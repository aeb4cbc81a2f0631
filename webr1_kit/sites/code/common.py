"""What the code site's route modules share: the logged-in user, loading a project by
its path, roles and permissions, and small query helpers.

Permissions follow GitLab's in spirit: anyone signed in may star, comment and open
issues; closing and editing issues needs Reporter (or being the author); approving
merge requests needs Developer; members, labels and milestones need Maintainer.
"""

from __future__ import annotations

from typing import Any, Iterable

from flask import abort, g, render_template

from .data import ROLES, TODAY

REPORTER, DEVELOPER, MAINTAINER, OWNER = 20, 30, 40, 50

PROJECT_SQL = """
SELECT p.*, n.path AS ns, n.name AS ns_name, n.kind AS ns_kind,
       (SELECT COUNT(*) FROM stars s WHERE s.project_id = p.id) AS stars,
       (SELECT COUNT(*) FROM issues i WHERE i.project_id = p.id AND i.state = 'opened') AS open_issues,
       (SELECT COUNT(*) FROM merge_requests m WHERE m.project_id = p.id AND m.state = 'opened') AS open_mrs
FROM projects p JOIN namespaces n ON n.id = p.namespace_id
"""


def current_user() -> Any:
    """The signed-in user's row (from this episode's sessions table), or None."""
    if "code_user" not in g:
        g.code_user = g.db.execute(
            "SELECT u.* FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.site = 'code'"
        ).fetchone()
    return g.code_user


def load_project(ns: str, proj: str) -> Any:
    """The project at /<ns>/<proj>, or a 404."""
    row = g.db.execute(PROJECT_SQL + " WHERE n.path = ? AND p.path = ?", (ns, proj)).fetchone()
    if row is None:
        abort(404)
    return row


def role_of(project_id: int, user: Any = None) -> int:
    """The user's role number in a project (0: not a member)."""
    user = user if user is not None else current_user()
    if user is None:
        return 0
    row = g.db.execute("SELECT role FROM members WHERE project_id = ? AND user_id = ?",
                       (project_id, user["id"])).fetchone()
    return row[0] if row else 0


def can(project: Any, min_role: int) -> bool:
    return role_of(project["id"]) >= min_role


def role_name(role: int) -> str:
    return ROLES.get(role, "")


def touch(project_id: int) -> None:
    """Mark the project as active today (the explore page sorts by last activity)."""
    g.db.execute("UPDATE projects SET last_activity = ? WHERE id = ?", (TODAY, project_id))


def like(word: str) -> str:
    """A LIKE pattern matching `word` literally (its % and _ escaped)."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def words_where(column: str, text: str) -> tuple[str, list[str]]:
    """SQL requiring every word of `text` in `column` (escaped LIKE), with its parameters."""
    words = text.split()[:8]
    return " ".join(f"AND {column} LIKE ? ESCAPE '\\'" for _ in words), [like(w) for w in words]


def labels_by_issue(issue_ids: Iterable[int]) -> dict[int, list[Any]]:
    """Issue id -> its label rows (name order), for a page of issues."""
    ids = list(issue_ids)
    out: dict[int, list[Any]] = {i: [] for i in ids}
    if not ids:
        return out
    marks = ",".join("?" * len(ids))  # only placeholders are formatted in, never values
    for row in g.db.execute(
        f"SELECT il.issue_id, l.* FROM issue_labels il JOIN labels l ON l.id = il.label_id"
        f" WHERE il.issue_id IN ({marks}) ORDER BY l.name COLLATE NOCASE", ids
    ):
        out[row["issue_id"]].append(row)
    return out


def project_members(project_id: int) -> list[Any]:
    """Members of a project with their user rows, highest role first."""
    return g.db.execute(
        "SELECT u.*, m.role, m.since FROM members m JOIN users u ON u.id = m.user_id"
        " WHERE m.project_id = ? ORDER BY m.role DESC, u.name COLLATE NOCASE", (project_id,)
    ).fetchall()


def args_without(args: Any, *drop: str) -> dict[str, str]:
    """The request's query arguments minus `drop` (for links that change one filter)."""
    return {k: v for k, v in args.items() if k not in drop and v}


def forbidden(message: str) -> tuple[str, int]:
    """A 403 page saying what role the action needs."""
    return render_template("error.html", code=403, message=message), 403
