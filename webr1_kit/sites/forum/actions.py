"""The forum's forms: comments and replies, votes, subscriptions, submitting, editing and
deleting posts, and the profile. Each write needs the logged-in user of this episode
(sessions table); input is validated with FormErrors and stored as typed."""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..web import FormErrors
from .common import COMMENTS_SQL, current_user, get_forum, get_post, me_id, post_url, safe_next
from .data import NOW, stamp
from .pages import post_page

LOGIN_NEEDED = "You need to be logged in to do that."


def _now() -> str:
    return stamp(NOW)


def _text(errors: FormErrors, name: str, label: str, max_len: int, required: bool = True) -> str:
    """A validated text field of the posted form, with browsers' CRLF line ends made LF."""
    return errors.text(request.form, name, label, max_len, required).replace("\r\n", "\n")


# The vote queries of posts and of comments (fixed texts; only values are parameters).
VOTE_SQL = {
    kind: {
        "get": f"SELECT value FROM {kind}_votes WHERE user_id = ? AND {kind}_id = ?",
        "delete": f"DELETE FROM {kind}_votes WHERE user_id = ? AND {kind}_id = ?",
        "set": f"INSERT INTO {kind}_votes (user_id, {kind}_id, value) VALUES (?, ?, ?)"
               f" ON CONFLICT (user_id, {kind}_id) DO UPDATE SET value = excluded.value",
        "score": f"UPDATE {kind}s SET score = score + ? WHERE id = ?",
    }
    for kind in ("post", "comment")
}


def _vote(kind: str, item_id: int, direction: str) -> None:
    """Toggle the user's vote on a post or comment: the same direction again removes it.
    Keeps the row's cached score equal to the sum of its votes."""
    value = {"up": 1, "down": -1}.get(direction)
    if value is None:
        abort(400)
    sql, uid = VOTE_SQL[kind], me_id()
    row = g.db.execute(sql["get"], (uid, item_id)).fetchone()
    old = row["value"] if row else 0
    new = 0 if old == value else value
    if new == 0:
        g.db.execute(sql["delete"], (uid, item_id))
    else:
        g.db.execute(sql["set"], (uid, item_id, new))
    g.db.execute(sql["score"], (new - old, item_id))


def register(app: Flask) -> None:
    @app.errorhandler(403)
    def _forbidden(_: Exception) -> Any:
        return render_template("error.html", code=403, message="You can only change your own posts."), 403

    @app.errorhandler(400)
    def _bad_request(_: Exception) -> Any:
        return render_template("error.html", code=400, message="The request was not understood."), 400

    @app.route("/f/<name>/<int:pid>", methods=["GET", "POST"])
    @app.route("/f/<name>/<int:pid>/<slug>", methods=["GET", "POST"])
    def post(name: str, pid: int, slug: str = "") -> Any:
        if request.method == "GET":
            return post_page(name, pid)
        p = get_post(name, pid)
        errors = FormErrors()
        text = _text(errors, "comment", "Comment", 10000)
        if current_user() is None:
            errors["comment"] = LOGIN_NEEDED
        if errors:
            return post_page(name, pid, errors, request.form), 400
        g.db.execute("INSERT INTO comments (post_id, parent_id, user_id, body, created) VALUES (?, NULL, ?, ?, ?)",
                     (pid, me_id(), text, _now()))
        flash("Your comment was posted.")
        return redirect(post_url(p))

    @app.route("/comment/<int:cid>/reply", methods=["GET", "POST"])
    def reply(cid: int) -> Any:
        comment = g.db.execute(COMMENTS_SQL.format(where="c.id = ?", order="c.id"), (me_id(), cid)).fetchone()
        if comment is None:
            abort(404)
        p = g.db.execute("SELECT p.id, p.title, f.name AS forum FROM posts p JOIN forums f ON f.id = p.forum_id"
                         " WHERE p.id = ?", (comment["post_id"],)).fetchone()
        errors = FormErrors()
        if request.method == "POST":
            text = _text(errors, "reply", "Reply", 10000)
            if current_user() is None:
                errors["reply"] = LOGIN_NEEDED
            if not errors:
                # Replies nest one level: a reply to a reply joins its parent's thread.
                parent = comment["parent_id"] or comment["id"]
                g.db.execute("INSERT INTO comments (post_id, parent_id, user_id, body, created) VALUES (?, ?, ?, ?, ?)",
                             (p["id"], parent, me_id(), text, _now()))
                flash("Your reply was posted.")
                return redirect(post_url(p))
        return render_template("reply.html", c=comment, p=p, errors=errors, form=request.form)

    @app.route("/f/<name>/<int:pid>/vote", methods=["POST"])
    def vote_post(name: str, pid: int) -> Any:
        p = get_post(name, pid)
        if current_user() is None:
            flash(LOGIN_NEEDED)
        else:
            _vote("post", pid, request.form.get("direction", ""))
        return redirect(safe_next(post_url(p)))

    @app.route("/comment/<int:cid>/vote", methods=["POST"])
    def vote_comment(cid: int) -> Any:
        c = g.db.execute("SELECT c.id, p.id AS pid, p.title, f.name AS forum FROM comments c JOIN posts p ON p.id = c.post_id"
                         " JOIN forums f ON f.id = p.forum_id WHERE c.id = ?", (cid,)).fetchone()
        if c is None:
            abort(404)
        if current_user() is None:
            flash(LOGIN_NEEDED)
        else:
            _vote("comment", cid, request.form.get("direction", ""))
        return redirect(safe_next(post_url({"id": c["pid"], "title": c["title"], "forum": c["forum"]})))

    @app.route("/f/<name>/subscribe", methods=["POST"])
    def subscribe(name: str) -> Any:
        f = get_forum(name)
        action = request.form.get("action", "")
        if current_user() is None:
            flash(LOGIN_NEEDED)
        elif action == "subscribe":
            g.db.execute("INSERT OR IGNORE INTO subscriptions VALUES (?, ?)", (me_id(), f["id"]))
            flash(f"You are now subscribed to f/{name}.")
        elif action == "unsubscribe":
            g.db.execute("DELETE FROM subscriptions WHERE user_id = ? AND forum_id = ?", (me_id(), f["id"]))
            flash(f"You have unsubscribed from f/{name}.")
        else:
            abort(400)
        return redirect(safe_next(url_for("forum", name=name)))

    @app.route("/submit", methods=["GET", "POST"])
    def submit() -> Any:
        names = [r["name"] for r in g.db.execute("SELECT name FROM forums ORDER BY name")]
        errors = FormErrors()
        form: Any = {"forum": request.args.get("forum", "")}
        if request.method == "POST":
            form = request.form
            forum = errors.choice(form, "forum", "Forum", names)
            title = _text(errors, "title", "Title", 300)
            body = _text(errors, "body", "Body", 10000, required=False)
            if current_user() is None:
                errors["title"] = LOGIN_NEEDED
            if not errors:
                fid = g.db.execute("SELECT id FROM forums WHERE name = ?", (forum,)).fetchone()[0]
                cur = g.db.execute("INSERT INTO posts (forum_id, user_id, title, body, created) VALUES (?, ?, ?, ?, ?)",
                                   (fid, me_id(), title, body, _now()))
                flash("Your post was submitted.")
                return redirect(post_url({"id": cur.lastrowid, "title": title, "forum": forum}))
        return render_template("submit.html", names=names, errors=errors, form=form, editing=None)

    def own_post(name: str, pid: int) -> Any:
        p = get_post(name, pid)
        if p["user_id"] != me_id():
            abort(403)
        return p

    @app.route("/f/<name>/<int:pid>/edit", methods=["GET", "POST"])
    def edit_post(name: str, pid: int) -> Any:
        p = own_post(name, pid)
        errors = FormErrors()
        form: Any = {"title": p["title"], "body": p["body"]}
        if request.method == "POST":
            form = request.form
            title = _text(errors, "title", "Title", 300)
            body = _text(errors, "body", "Body", 10000, required=False)
            if not errors:
                g.db.execute("UPDATE posts SET title = ?, body = ?, edited = ? WHERE id = ?", (title, body, _now(), pid))
                flash("Your post was updated.")
                return redirect(post_url({"id": pid, "title": title, "forum": name}))
        return render_template("submit.html", names=[name], errors=errors, form=form, editing=p)

    @app.route("/f/<name>/<int:pid>/delete", methods=["GET", "POST"])
    def delete_post(name: str, pid: int) -> Any:
        p = own_post(name, pid)
        if request.method == "POST":
            g.db.execute("DELETE FROM posts WHERE id = ?", (pid,))
            flash("Your post was deleted.")
            return redirect(url_for("forum", name=name))
        return render_template("delete.html", p=p)

    @app.route("/profile", methods=["GET", "POST"])
    def profile() -> Any:
        user = current_user()
        if user is None:
            return render_template("error.html", code=403, message=LOGIN_NEEDED), 403
        errors = FormErrors()
        form: Any = {"biography": user["biography"]}
        if request.method == "POST":
            form = request.form
            bio = _text(errors, "biography", "Biography", 300, required=False)
            if not errors:
                g.db.execute("UPDATE users SET biography = ? WHERE id = ?", (bio, user["id"]))
                flash("Your profile was saved.")
                return redirect(url_for("profile"))
        return render_template("profile.html", user=user, errors=errors, form=form)
