"""Helpers shared by the admin's pages: keyword filters and the signed-in admin user."""

from __future__ import annotations

from typing import Any

from flask import g


def like(word: str) -> str:
    """A LIKE pattern matching `word` literally (its % and _ escaped; use with ESCAPE '\\')."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def keyword_filter(q: str, columns: list[str]) -> tuple[str, list[str]]:
    """SQL (" AND (...)" per word) requiring every word of `q` in at least one of `columns`.

    `columns` are fixed SQL expressions written in the code, never request text; the
    words go in as parameters."""
    sql, params = "", []
    for word in q.split()[:8]:
        sql += " AND (" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in columns) + ")"
        params += [like(word)] * len(columns)
    return sql, params


def current_admin() -> Any:
    """The signed-in admin user's row, or None when the admin session is logged out."""
    row = g.db.execute("SELECT user_id FROM sessions WHERE site = 'admin'").fetchone()
    if row is None:
        return None
    return g.db.execute("SELECT * FROM admin_users WHERE id = ?", (row[0],)).fetchone()
