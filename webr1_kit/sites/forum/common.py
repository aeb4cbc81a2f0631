"""What the forum's page and form routes share: the logged-in user, the post listing
query, the fixed sort orders, URLs of posts, and safe redirects."""

from __future__ import annotations

from typing import Any

from flask import abort, g, request, url_for

# ORDER BY texts, chosen by key from these fixed maps (never from request text).
# "hot" mixes score and age: every five days of age weigh as much as one point.
POST_SORTS = {
    "hot": "(p.score + (julianday(p.created) - 2459580.5) / 5.0) DESC, p.id DESC",
    "new": "p.created DESC, p.id DESC",
    "top": "p.score DESC, p.created DESC, p.id DESC",
}
SEARCH_SORTS = {
    # The exact title first: a search for a post's title finds that post on page 1.
    "relevance": "(lower(p.title) = lower(?)) DESC, p.score DESC, p.id DESC",
    "new": POST_SORTS["new"],
    "top": POST_SORTS["top"],
}
FORUM_SORTS = {
    "name": "f.name ASC",
    "subscribers": "subscribers DESC, f.name ASC",
    "posts": "n_posts DESC, f.name ASC",
}

# Posts with their forum, author, comment count and the logged-in user's vote (first
# parameter: that user's id, 0 when logged out).
POSTS_SQL = """
SELECT p.*, f.name AS forum, u.username AS author,
       (SELECT COUNT(*) FROM comments c WHERE c.post_id = p.id) AS n_comments,
       COALESCE((SELECT v.value FROM post_votes v WHERE v.post_id = p.id AND v.user_id = ?), 0) AS my_vote
FROM posts p JOIN forums f ON f.id = p.forum_id JOIN users u ON u.id = p.user_id
WHERE 1 = 1 {where}
ORDER BY {order}
"""
FORUMS_SQL = """
SELECT f.*, (SELECT COUNT(*) FROM subscriptions s WHERE s.forum_id = f.id) AS subscribers,
       (SELECT COUNT(*) FROM posts p WHERE p.forum_id = f.id) AS n_posts
FROM forums f {where} ORDER BY {order}
"""
COMMENTS_SQL = """
SELECT c.*, u.username AS author,
       COALESCE((SELECT v.value FROM comment_votes v WHERE v.comment_id = c.id AND v.user_id = ?), 0) AS my_vote
FROM comments c JOIN users u ON u.id = c.user_id
WHERE {where} ORDER BY {order}
"""


def current_user() -> Any:
    """The logged-in user's row (from this episode's sessions table), or None."""
    row = g.db.execute("SELECT user_id FROM sessions WHERE site = 'forum'").fetchone()
    if row is None:
        return None
    return g.db.execute("SELECT * FROM users WHERE id = ?", (row[0],)).fetchone()


def me_id() -> int:
    user = current_user()
    return user["id"] if user is not None else 0


def slugify(text: str) -> str:
    """URL slug of a title: lower-case words joined by hyphens ("-" when none)."""
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(part for part in out.split("-") if part)[:80].strip("-") or "-"


def post_url(post: Any) -> str:
    """/f/<forum>/<id>/<slug> for a row with id, title and forum (name)."""
    return url_for("post", name=post["forum"], pid=post["id"], slug=slugify(post["title"]))


def get_forum(name: str) -> Any:
    forum = g.db.execute(FORUMS_SQL.format(where="WHERE f.name = ?", order="f.id"), (name,)).fetchone()
    if forum is None:
        abort(404)
    return forum


def get_post(name: str, pid: int) -> Any:
    """The post `pid` of forum `name` (404 if either is wrong)."""
    post = g.db.execute(POSTS_SQL.format(where="AND p.id = ? AND f.name = ?", order="p.id"),
                        (me_id(), pid, name)).fetchone()
    if post is None:
        abort(404)
    return post


def here() -> str:
    """The current path and query, for "come back here" form fields."""
    return request.full_path if request.query_string else request.path


def safe_next(default: str) -> str:
    """The form's `next` path when it is a local path on this site, else `default`."""
    nxt = request.form.get("next", "")
    if nxt.startswith("/") and not nxt.startswith("//") and "\\" not in nxt:
        return nxt
    return default
