"""Task templates on the forum (__REDDIT__, a Postmill-style Reddit clone).

Information seeking (answer via exit), navigation (the final URL) and content tasks
(submit, vote, subscribe, reply, edit), whose checks read the changed state back from a
page of the site. Content tasks only use parameters whose seed state differs from the
goal (a post the user has not voted on, a forum they are not subscribed to...), so
doing nothing never passes.
"""

from __future__ import annotations

import json
import re
from itertools import combinations
from typing import Any
from urllib.parse import quote, urlsplit

from ...sites.forum.common import slugify
from ...sites.forum.corpus import EDIT_TEXTS, NEW_POSTS, REPLY_TEXTS
from ..arena import Instance, Template, World, answer_eval, page_eval, url_eval
from ._expert import answer, click, click_or_scroll, find, path, read, search, select, type_text

ME = "MarvelsGrantMan136"
POSTS = ("SELECT p.id, p.title, p.body, p.score, p.user_id, f.name AS forum, u.username AS author,"
         " (SELECT COUNT(*) FROM comments c WHERE c.post_id = p.id) AS n_comments"
         " FROM posts p JOIN forums f ON f.id = p.forum_id JOIN users u ON u.id = p.user_id")


def _post_params(r: Any) -> dict[str, Any]:
    return {"post_id": r["id"], "title": r["title"], "forum": r["forum"]}


def _post_url(p: dict[str, Any]) -> str:
    return f"__REDDIT__/f/{p['forum']}/{p['post_id']}/{slugify(p['title'])}"


# ---------------------------------------------------------------- shared routes


def _on_post(p: dict[str, Any], obs) -> bool:
    """On the post's own page (not its edit or delete page)."""
    m = re.fullmatch(rf"/f/{re.escape(p['forum'])}/{p['post_id']}(?:/([^/]*))?", urlsplit(obs.url).path)
    return m is not None and m.group(1) not in ("edit", "delete", "vote")


def _go_to_post(p: dict[str, Any], obs, history, then) -> str:
    """Search the post by its title, open it, then call `then(obs)` on its page."""
    if _on_post(p, obs):
        return then(obs)
    title = p["title"]
    link = find(obs, name=title, role="link")
    if link is not None:
        return click(f'The post "{title}" is listed; open it.', link)
    box = find(obs, role="searchbox")
    if box is not None and not (path(obs).startswith("/search") and (box.value or "") == title):
        return search("Search the forum for the post's title.", box, title)
    return click_or_scroll(obs, history, f'the post "{title}"', name=title, role="link")


def _go_to_forum(forum: str, obs, history, then) -> str:
    """Open f/<forum> (from any link to it, else through the Forums list), then `then(obs)`."""
    parts = urlsplit(obs.url).path.strip("/").split("/")
    if parts[:2] == ["f", forum] and (len(parts) == 2 or parts[2] in ("hot", "new", "top")):
        return then(obs)
    link = find(obs, name=f"f/{forum}", role="link")
    if link is not None:
        return click(f"There is a link to f/{forum}; open the forum.", link)
    if path(obs).startswith("/forums"):
        return click_or_scroll(obs, history, f"the link to f/{forum}", name=f"f/{forum}", role="link")
    return click_or_scroll(obs, history, "the Forums link", name="Forums", role="link")


# ---------------------------------------------------------------- comment count (info)


def _count_instances(world: World):
    for r in world.query("forum", POSTS + " ORDER BY p.id"):
        yield Instance(_post_params(r), answer_eval(must_include=[str(r["n_comments"])]))


def _count_expert(p, obs, history):
    def on_post(obs):
        n = read(obs, r"\b(\d+) comments?\b")
        return answer(f"The post page says it has {n} comments.", n or "unknown")

    return _go_to_post(p, obs, history, on_post)


COMMENT_COUNT = Template(
    id="forum.comment_count", sites=("forum",), kind="info",
    intent='How many comments does the post titled "{title}" have?', start="__REDDIT__/", min_steps=3,
    instances=_count_instances, expert=_count_expert,
)


# ---------------------------------------------------------------- post author (info)

_AUTHOR = r'Submitted by\s*<a id="\d+" data-text="([^"]+)"'


def _author_instances(world: World):
    for r in world.query("forum", POSTS + " ORDER BY p.id"):
        yield Instance(_post_params(r), answer_eval(must_include=[r["author"]]))


def _author_expert(p, obs, history):
    def on_post(obs):
        who = read(obs, _AUTHOR)
        return answer(f"The post was submitted by {who}.", who or "unknown")

    return _go_to_post(p, obs, history, on_post)


POST_AUTHOR = Template(
    id="forum.post_author", sites=("forum",), kind="info",
    intent='Who is the author of the post titled "{title}"?', start="__REDDIT__/", min_steps=3,
    instances=_author_instances, expert=_author_expert,
)


# ---------------------------------------------------------------- most subscribers (info)


def _subs_instances(world: World):
    counts = {r["name"]: r["n"] for r in world.query(
        "forum", "SELECT f.name, COUNT(s.user_id) AS n FROM forums f LEFT JOIN subscriptions s ON s.forum_id = f.id"
                 " GROUP BY f.id ORDER BY f.name")}
    for trio in combinations(sorted(counts), 3):
        ranked = sorted(trio, key=lambda n: -counts[n])
        if counts[ranked[0]] == counts[ranked[1]]:
            continue  # a tie has no single answer
        a, b, c = trio
        # exact_match: the bare forum name, so listing every candidate cannot pass.
        yield Instance({"a": a, "b": b, "c": c}, answer_eval(exact=ranked[0]))


def _subs_expert(p, obs, history):
    names = [p["a"], p["b"], p["c"]]
    if not path(obs).startswith("/forums"):
        return click_or_scroll(obs, history, "the Forums link", name="Forums", role="link")
    if "sort=subscribers" not in path(obs):
        sorter = find(obs, name="Sort by", tag="select")
        if sorter is not None and sorter.value != "Subscribers":
            return select("Sort the forums by their number of subscribers.", sorter, "Subscribers")
        return click_or_scroll(obs, history, "the Apply button", name="Apply", role="button")
    # Sorted by subscribers: the first of the three (top to bottom) has the most.
    for e in obs.elements:
        if e.role == "link" and e.name.startswith("f/") and e.name[2:] in names:
            return answer(f"Sorted by subscribers, f/{e.name[2:]} is the highest of the three.", e.name[2:])
    return click_or_scroll(obs, history, "the three forums", name="f/" + names[0], role="link")


MOST_SUBSCRIBERS = Template(
    id="forum.most_subscribers", sites=("forum",), kind="info",
    intent="Among the forums {a}, {b} and {c}, which one has the most subscribers? Answer with its name.",
    start="__REDDIT__/", min_steps=4, instances=_subs_instances, expert=_subs_expert, held_out=True,
)


# ---------------------------------------------------------------- author's user page (nav)


def _author_page_instances(world: World):
    for r in world.query("forum", POSTS + " WHERE p.user_id != 1 ORDER BY p.id"):
        yield Instance({**_post_params(r), "author": r["author"]}, url_eval(f"__REDDIT__/user/{r['author']}"))


def _author_page_expert(p, obs, history):
    if urlsplit(obs.url).path == f"/user/{p['author']}":
        return answer("This is the user page of the post's author.", "done")

    def on_post(obs):
        return click_or_scroll(obs, history, f"the author link ({p['author']})", name=p["author"], role="link")

    return _go_to_post(p, obs, history, on_post)


AUTHOR_PAGE = Template(
    id="forum.author_page", sites=("forum",), kind="nav",
    intent='Open the user page of the author of the post titled "{title}".', start="__REDDIT__/", min_steps=4,
    instances=_author_page_instances, expert=_author_page_expert,
)


# ---------------------------------------------------------------- sorted forum listing (nav)

SORT_WORDS = {"new": ("newest", "New"), "top": ("top", "Top")}


def _sorted_instances(world: World):
    for r in world.query("forum", "SELECT name FROM forums ORDER BY name"):
        for sort, (label, _) in SORT_WORDS.items():
            yield Instance({"forum": r["name"], "sort": sort, "label": label}, url_eval(f"__REDDIT__/f/{r['name']}/{sort}"))


def _sorted_expert(p, obs, history):
    tab = SORT_WORDS[p["sort"]][1]

    def on_forum(obs):
        if urlsplit(obs.url).path.rstrip("/").endswith(f"/f/{p['forum']}/{p['sort']}"):
            return answer(f"This is f/{p['forum']} sorted by {tab}.", "done")
        return click_or_scroll(obs, history, f"the {tab} tab", name=tab, role="link")

    return _go_to_forum(p["forum"], obs, history, on_forum)


FORUM_SORTED = Template(
    id="forum.forum_sorted", sites=("forum",), kind="nav",
    intent="Go to the {label} posts of f/{forum}.", start="__REDDIT__/", min_steps=4,
    instances=_sorted_instances, expert=_sorted_expert,
)


# ---------------------------------------------------------------- submit a post (content)


def _submit_instances(world: World):
    taken = {r["title"] for r in world.query("forum", "SELECT title FROM posts")}
    for forum, title, body in NEW_POSTS:
        assert title not in taken, title
        # The search page lists the post with its forum, author and body (snippet).
        locator = (f"[...document.querySelectorAll('.posts .post')]"
                   f".filter(li => li.querySelector('.post-title').textContent.trim() === {json.dumps(title)})"
                   f".map(li => [li.querySelector('.forum-link').textContent.trim(), li.querySelector('.author').textContent.trim(),"
                   f" (li.querySelector('.snippet') || {{textContent: ''}}).textContent.trim()].join(' | ')).join(' || ')")
        yield Instance({"forum": forum, "title": title, "body": body},
                       page_eval((f"__REDDIT__/search?q={quote(title)}", locator, f"f/{forum} | {ME} | {body}")))


def _submit_expert(p, obs, history):
    here = path(obs)
    if re.match(rf"/f/{re.escape(p['forum'])}/\d+/", here) and "Your post was submitted." in obs.content:
        return answer("The post is submitted and shown in the forum.", "done")
    if not here.startswith("/submit"):
        return click_or_scroll(obs, history, "the Submit link", name="Submit", role="link")
    forum = find(obs, name="Forum", tag="select")
    if forum is not None and forum.value != p["forum"]:
        return select(f"Choose the forum {p['forum']}.", forum, p["forum"])
    title = find(obs, name="Title", tag="input")
    if title is not None and (title.value or "") != p["title"]:
        return type_text("Type the title.", title, p["title"])
    body = find(obs, name="Body", tag="textarea")
    if body is not None and (body.value or "") != p["body"]:
        return type_text("Type the body.", body, p["body"])
    return click_or_scroll(obs, history, "the Submit post button", name="Submit post", role="button")


SUBMIT_POST = Template(
    id="forum.submit_post", sites=("forum",), kind="content",
    intent='Create a post in f/{forum} titled "{title}" with the body "{body}".', start="__REDDIT__/", min_steps=6,
    instances=_submit_instances, expert=_submit_expert,
)


# ---------------------------------------------------------------- vote on a post (content)


def _vote_instances(world: World):
    rows = world.query("forum", POSTS + " WHERE NOT EXISTS (SELECT 1 FROM post_votes v WHERE v.post_id = p.id"
                                        " AND v.user_id = 1) AND p.user_id != 1 ORDER BY p.id")
    for k, r in enumerate(rows):
        verb, delta = ("Upvote", 1) if k % 2 == 0 else ("Downvote", -1)
        yield Instance({**_post_params(r), "verb": verb},
                       page_eval((_post_url(_post_params(r)), "document.querySelector('#post-score').textContent",
                                  str(r["score"] + delta))))


def _vote_expert(p, obs, history):
    noun = p["verb"][:-4].lower()  # "up" / "down"

    def on_post(obs):
        if find(obs, name=f"Remove {noun}vote from post") is not None:
            return answer(f"The post now shows my {noun}vote.", "done")
        return click_or_scroll(obs, history, f"the {p['verb']} button of the post", name=f"{p['verb']} post", role="button")

    return _go_to_post(p, obs, history, on_post)


VOTE_POST = Template(
    id="forum.vote_post", sites=("forum",), kind="content",
    intent='{verb} the post titled "{title}".', start="__REDDIT__/", min_steps=4,
    instances=_vote_instances, expert=_vote_expert,
)


# ---------------------------------------------------------------- (un)subscribe (content)


def _subscribe_instances(world: World):
    rows = world.query("forum", "SELECT f.name, EXISTS (SELECT 1 FROM subscriptions s WHERE s.forum_id = f.id"
                                " AND s.user_id = 1) AS mine FROM forums f ORDER BY f.name")
    for r in rows:
        verb, goal = ("Unsubscribe from", "not subscribed") if r["mine"] else ("Subscribe to", "subscribed")
        locator = (f"[...document.querySelectorAll('#subscriptions .forum-link')]"
                   f".some(a => a.textContent.trim() === {json.dumps('f/' + r['name'])}) ? 'subscribed' : 'not subscribed'")
        yield Instance({"forum": r["name"], "verb": verb}, page_eval(("__REDDIT__/subscriptions", locator, goal)))


def _subscribe_expert(p, obs, history):
    want, done = ("Subscribe", "Unsubscribe") if p["verb"] == "Subscribe to" else ("Unsubscribe", "Subscribe")

    def on_forum(obs):
        if find(obs, name=done, role="button") is not None:
            return answer(f"The forum page now offers to {done.lower()}, so the change is made.", "done")
        return click_or_scroll(obs, history, f"the {want} button", name=want, role="button")

    return _go_to_forum(p["forum"], obs, history, on_forum)


SUBSCRIBE = Template(
    id="forum.subscribe", sites=("forum",), kind="content",
    intent="{verb} f/{forum}.", start="__REDDIT__/", min_steps=4,
    instances=_subscribe_instances, expert=_subscribe_expert,
)


# ---------------------------------------------------------------- reply to a post (content)

_MY_TOP_COMMENTS = (
    "[...document.querySelectorAll('#comments .comment[data-depth=\"0\"]')]"
    f".filter(c => c.querySelector(':scope > .comment-meta .comment-author').textContent.trim() === {json.dumps(ME)})"
    ".map(c => c.querySelector(':scope > .comment-body').textContent.trim()).join(' | ')"
)


def _reply_instances(world: World):
    rows = world.query("forum", POSTS + " WHERE NOT EXISTS (SELECT 1 FROM comments c WHERE c.post_id = p.id"
                                        " AND c.user_id = 1 AND c.parent_id IS NULL) ORDER BY p.id")
    for k, r in enumerate(rows):
        text = REPLY_TEXTS[k % len(REPLY_TEXTS)]
        yield Instance({**_post_params(r), "text": text}, page_eval((_post_url(_post_params(r)), _MY_TOP_COMMENTS, text)))


def _reply_expert(p, obs, history):
    def on_post(obs):
        if "Your comment was posted." in obs.content:
            return answer("My comment is posted on the post.", "done")
        box = find(obs, name="Add a comment", tag="textarea")
        if box is not None and (box.value or "") != p["text"]:
            return type_text("Write the comment.", box, p["text"])
        return click_or_scroll(obs, history, "the Post comment button", name="Post comment", role="button")

    return _go_to_post(p, obs, history, on_post)


REPLY_POST = Template(
    id="forum.reply_post", sites=("forum",), kind="content",
    intent='Reply to the post titled "{title}" with the comment "{text}".', start="__REDDIT__/", min_steps=5,
    instances=_reply_instances, expert=_reply_expert,
)


# ---------------------------------------------------------------- edit my post (content)


def _edit_instances(world: World):
    rows = world.query("forum", POSTS + " WHERE p.user_id = 1 ORDER BY p.id")
    for k, r in enumerate(rows):
        text = EDIT_TEXTS[k % len(EDIT_TEXTS)]
        yield Instance({**_post_params(r), "text": text},
                       page_eval((_post_url(_post_params(r)), "document.querySelector('#post-body').textContent", text)))


def _edit_expert(p, obs, history):
    if path(obs).startswith(f"/f/{p['forum']}/{p['post_id']}/edit"):
        body = find(obs, name="Body", tag="textarea")
        if body is not None and (body.value or "") != p["text"]:
            return type_text("Replace the body with the new text.", body, p["text"])
        return click_or_scroll(obs, history, "the Save changes button", name="Save changes", role="button")

    def on_post(obs):
        if "Your post was updated." in obs.content:
            return answer("The post now shows the new body.", "done")
        return click_or_scroll(obs, history, "the Edit link", name="Edit", role="link")

    return _go_to_post(p, obs, history, on_post)


EDIT_POST = Template(
    id="forum.edit_post", sites=("forum",), kind="content",
    intent='Edit my post titled "{title}" so that its body reads "{text}".', start="__REDDIT__/", min_steps=6,
    instances=_edit_instances, expert=_edit_expert, held_out=True,
)

TEMPLATES = [COMMENT_COUNT, POST_AUTHOR, MOST_SUBSCRIBERS, AUTHOR_PAGE, FORUM_SORTED, SUBMIT_POST, VOTE_POST,
             SUBSCRIBE, REPLY_POST, EDIT_POST]
