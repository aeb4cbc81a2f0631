"""The forum's reading pages: front page, forum list, forum listings, posts with their
comments, user pages, subscriptions and search. Writes live in actions.py."""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, g, render_template, request

from ..web import FormErrors, paginate, sort_clause
from .common import (COMMENTS_SQL, FORUM_SORTS, FORUMS_SQL, POST_SORTS, POSTS_SQL, SEARCH_SORTS, current_user,
                     get_forum, get_post, me_id)

SORT_NAMES = {"hot": "Hot", "new": "New", "top": "Top"}


def post_page(name: str, pid: int, errors: FormErrors | None = None, form: Any = None) -> str:
    """Render a post with its comments (also used to show the comment form's errors)."""
    post = get_post(name, pid)
    comments = g.db.execute(
        COMMENTS_SQL.format(where="c.post_id = ?", order="c.score DESC, c.created ASC, c.id ASC"), (me_id(), pid)
    ).fetchall()
    top = [c for c in comments if c["parent_id"] is None]
    replies: dict[int, list] = {}
    for c in sorted(comments, key=lambda c: (c["created"], c["id"])):
        if c["parent_id"] is not None:
            replies.setdefault(c["parent_id"], []).append(c)
    return render_template("post.html", p=post, top=top, replies=replies, errors=errors or {}, form=form or {})


def user_or_404(username: str) -> Any:
    user = g.db.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
    if user is None:
        abort(404)
    stats = g.db.execute(
        "SELECT (SELECT COUNT(*) FROM posts WHERE user_id = :u) AS n_posts,"
        " (SELECT COUNT(*) FROM comments WHERE user_id = :u) AS n_comments,"
        " (SELECT COALESCE(SUM(score), 0) FROM posts WHERE user_id = :u) AS post_karma,"
        " (SELECT COALESCE(SUM(score), 0) FROM comments WHERE user_id = :u) AS comment_karma",
        {"u": user["id"]},
    ).fetchone()
    return user, stats


USER_COMMENTS_SQL = """
SELECT c.*, p.title AS post_title, p.id AS post_id, f.name AS forum
FROM comments c JOIN posts p ON p.id = c.post_id JOIN forums f ON f.id = p.forum_id
WHERE c.user_id = ? ORDER BY c.created DESC, c.id DESC
"""


def register(app: Flask) -> None:
    @app.route("/", defaults={"sort": "hot"})
    @app.route("/<any(hot, new, top):sort>")
    def home(sort: str) -> str:
        page = paginate(g.db, POSTS_SQL.format(where="", order=POST_SORTS[sort]), (me_id(),), per_page=15)
        return render_template("front.html", page=page, sort=sort, sort_names=SORT_NAMES)

    @app.route("/forums")
    def forums() -> str:
        sort, order = sort_clause(FORUM_SORTS, "name")
        rows = g.db.execute(FORUMS_SQL.format(where="", order=order)).fetchall()
        return render_template("forums.html", forums=rows, sort=sort)

    @app.route("/f/<name>", defaults={"sort": "hot"})
    @app.route("/f/<name>/<any(hot, new, top):sort>")
    def forum(name: str, sort: str) -> str:
        f = get_forum(name)
        page = paginate(g.db, POSTS_SQL.format(where="AND p.forum_id = ?", order=POST_SORTS[sort]),
                        (me_id(), f["id"]), per_page=10)
        subscribed = g.db.execute("SELECT 1 FROM subscriptions WHERE user_id = ? AND forum_id = ?",
                                  (me_id(), f["id"])).fetchone() is not None
        return render_template("forum.html", forum=f, page=page, sort=sort, sort_names=SORT_NAMES, subscribed=subscribed)

    @app.route("/user/<username>")
    def user_page(username: str) -> str:
        user, stats = user_or_404(username)
        posts = g.db.execute(POSTS_SQL.format(where="AND p.user_id = ?", order=POST_SORTS["new"]) + " LIMIT 5",
                             (me_id(), user["id"])).fetchall()
        comments = g.db.execute(USER_COMMENTS_SQL + " LIMIT 5", (user["id"],)).fetchall()
        return render_template("user.html", user=user, stats=stats, tab="overview", posts=posts, comments=comments)

    @app.route("/user/<username>/submissions")
    def user_submissions(username: str) -> str:
        user, stats = user_or_404(username)
        page = paginate(g.db, POSTS_SQL.format(where="AND p.user_id = ?", order=POST_SORTS["new"]),
                        (me_id(), user["id"]), per_page=10)
        return render_template("user.html", user=user, stats=stats, tab="submissions", page=page)

    @app.route("/user/<username>/comments")
    def user_comments(username: str) -> str:
        user, stats = user_or_404(username)
        page = paginate(g.db, USER_COMMENTS_SQL, (user["id"],), per_page=15)
        return render_template("user.html", user=user, stats=stats, tab="comments", page=page)

    @app.route("/subscriptions")
    def subscriptions() -> str:
        rows = g.db.execute(
            FORUMS_SQL.format(where="WHERE f.id IN (SELECT forum_id FROM subscriptions WHERE user_id = ?)",
                              order="f.name"), (me_id(),)
        ).fetchall()
        return render_template("subscriptions.html", forums=rows, user=current_user())

    @app.route("/search")
    def search() -> str:
        q = request.args.get("q", "").strip()
        sort, order = sort_clause(SEARCH_SORTS, "relevance")
        page = None
        if q:
            # Every word must appear in the title or the body (LIKE with escaped wildcards).
            words = q.split()[:8]
            where = " ".join("AND (p.title LIKE ? ESCAPE '\\' OR p.body LIKE ? ESCAPE '\\')" for _ in words)
            params: list[Any] = [me_id()] + [v for w in words for v in (_like(w), _like(w))]
            if sort == "relevance":
                params.append(q)
            page = paginate(g.db, POSTS_SQL.format(where=where, order=order), params, per_page=10)
        return render_template("search.html", q=q, page=page, sort=sort)


def _like(word: str) -> str:
    """A LIKE pattern matching `word` literally (its % and _ escaped)."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
