"""The forum (Postmill, after WebArena's Reddit clone) and its task templates, on real
Chromium: the seed data, every page type, 404s, form validation, escaping of hostile
text, pagination and sorting, votes, replies, subscriptions and deletion, then per
template one expert success and one plausible failure that must score 0."""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import quote

import pytest

from webr1_kit.sites.forum import data
from webr1_kit.tasks.arena_templates import forum as forum_templates

from arena_helpers import HOSTILE, do_nothing, episode, episode_db, pristine, reward_after, run_expert, site_url

TEMPLATE_IDS = [t.id for t in forum_templates.TEMPLATES]
START = "forum.comment_count"  # the template of the episodes the page tests run in
ME = forum_templates.ME


def _post_path(db: sqlite3.Connection, pid: int) -> str:
    forum = db.execute("SELECT f.name FROM posts p JOIN forums f ON f.id = p.forum_id WHERE p.id = ?", (pid,)).fetchone()[0]
    return f"/f/{forum}/{pid}"


async def _click(page: Any, selector: str) -> None:
    """Click something that loads a page, and wait until that page has loaded."""
    async with page.expect_navigation():
        await page.click(selector)


async def _submit(page: Any, forum: str, title: str, body: str) -> None:
    await page.goto(site_url("forum", "/submit"))
    if forum:
        await page.select_option("#forum", forum)
    await page.fill("#title", title)
    await page.fill("#body", body)
    await _click(page, "button:has-text('Submit post')")


# ---------------------------------------------------------------- the seed data


def test_seed_data_is_deterministic_and_realistic():
    a, b = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    data.build(a, 0)
    data.build(b, 0)
    assert list(a.iterdump()) == list(b.iterdump())
    c = sqlite3.connect(":memory:")
    data.build(c, 1)
    assert list(c.iterdump()) != list(a.iterdump())
    db = pristine("forum")
    count = lambda table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: E731
    assert count("users") == 40 and 15 <= count("forums") <= 25
    assert 300 <= count("posts") <= 450 and 900 <= count("comments") <= 1500
    assert count("post_votes") > 3000 and count("subscriptions") > 200
    # titles are unique (tasks name posts by title); no placeholder text anywhere
    assert db.execute("SELECT COUNT(DISTINCT title) FROM posts").fetchone()[0] == count("posts")
    assert not db.execute("SELECT 1 FROM posts WHERE body LIKE '%lorem%' OR title LIKE '%{%'").fetchall()
    # cached scores are the sums of the votes
    assert not db.execute("SELECT id FROM posts p WHERE score != (SELECT COALESCE(SUM(value), 0)"
                          " FROM post_votes v WHERE v.post_id = p.id)").fetchall()
    assert not db.execute("SELECT id FROM comments c WHERE score != (SELECT COALESCE(SUM(value), 0)"
                          " FROM comment_votes v WHERE v.comment_id = c.id)").fetchall()
    # replies nest exactly one level, within their own post, after their parent
    assert not db.execute("SELECT r.id FROM comments r JOIN comments c ON c.id = r.parent_id"
                          " WHERE c.parent_id IS NOT NULL OR c.post_id != r.post_id OR r.created < c.created").fetchall()
    assert db.execute("SELECT COUNT(*) FROM comments WHERE parent_id IS NOT NULL").fetchone()[0] > 100
    # comments come after their post; the logged-in user has posts for "my post" tasks
    assert not db.execute("SELECT c.id FROM comments c JOIN posts p ON p.id = c.post_id WHERE c.created < p.created").fetchall()
    assert db.execute("SELECT COUNT(*) FROM posts WHERE user_id = ?", (data.ME,)).fetchone()[0] >= 28
    assert db.execute("SELECT u.username FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.site = 'forum'"
                      ).fetchone()[0] == ME


def test_template_instances_are_unambiguous():
    from webr1_kit.tasks.arena import World

    world = World(0)
    for t in forum_templates.TEMPLATES:
        instances = list(t.instances(world))
        assert len(instances) >= 18, t.id
        keys = [str(sorted(i.params.items())) for i in instances]
        assert len(set(keys)) == len(keys), t.id
    subs = {r["name"]: r["n"] for r in world.query(
        "forum", "SELECT f.name, COUNT(s.user_id) AS n FROM forums f LEFT JOIN subscriptions s ON s.forum_id = f.id GROUP BY f.id")}
    for inst in forum_templates.MOST_SUBSCRIBERS.instances(world):
        counts = sorted((subs[inst.params[k]] for k in "abc"), reverse=True)
        assert counts[0] > counts[1] and subs[inst.eval["reference_answers"]["exact_match"]] == counts[0]


# ---------------------------------------------------------------- pages


async def test_every_page_type_loads_and_unknown_routes_are_404(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "forum")
        mine = db.execute("SELECT id FROM posts WHERE user_id = ? ORDER BY id LIMIT 1", (data.ME,)).fetchone()[0]
        cid = db.execute("SELECT id FROM comments WHERE parent_id IS NULL ORDER BY id LIMIT 1").fetchone()[0]
        post = _post_path(db, mine)
        pages = {"/": "All posts", "/new": "All posts", "/top?page=2": "All posts", "/forums": "Forums",
                 "/forums?sort=subscribers": "Forums", "/f/books": "f/books", "/f/books/new": "f/books",
                 "/f/books/top?page=2": "f/books", post: "Add a comment", post + "/some-slug": "Comments",
                 post + "/edit": "Edit post", post + "/delete": "Are you sure", f"/comment/{cid}/reply": "Your reply",
                 f"/user/{ME}": "Recent submissions", f"/user/{ME}/submissions?page=2": ME,
                 "/user/quiet_otter/comments": "quiet_otter", "/subscriptions": "Your subscriptions",
                 "/search?q=coffee": "Search results for", "/search": "Enter words", "/submit": "Submit a new post",
                 "/submit?forum=books": "Submit a new post", "/profile": "Your profile"}
        for path, text in pages.items():
            response = await page.goto(site_url("forum", path))
            assert response.status == 200, path
            assert text in await page.inner_text("main"), path
        assert await page.locator("link[href^='http']").count() == 0  # every asset is local
        others = db.execute("SELECT id FROM posts WHERE user_id != ? ORDER BY id LIMIT 1", (data.ME,)).fetchone()[0]
        wrong_forum = "books" if not post.startswith("/f/books/") else "movies"
        for path, status in {"/no/such/page": 404, "/f/nope": 404, "/user/nobody_here": 404, "/f/books/999999": 404,
                             f"/f/{wrong_forum}/{mine}": 404, "/f/books/hottest": 404, "/comment/999999/reply": 404,
                             _post_path(db, others) + "/edit": 403, _post_path(db, others) + "/delete": 403}.items():
            response = await page.goto(site_url("forum", path))
            assert response.status == status, path


async def test_forms_reject_bad_input_with_messages(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "forum")
        n_posts = db.execute("SELECT COUNT(*) FROM posts").fetchone()[0]
        await _submit(page, "", "   ", "A body without a title")
        main = await page.inner_text("main")
        assert "Choose a valid forum." in main and "Title is required." in main
        assert await page.input_value("#body") == "A body without a title"  # what was typed is kept
        await _submit(page, "books", "x" * 301, "")
        assert "Title must be at most 300 characters." in await page.inner_text("main")
        assert db.execute("SELECT COUNT(*) FROM posts").fetchone()[0] == n_posts
        pid = db.execute("SELECT id FROM posts ORDER BY id LIMIT 1").fetchone()[0]
        n_comments = db.execute("SELECT COUNT(*) FROM comments").fetchone()[0]
        await page.goto(site_url("forum", _post_path(db, pid)))
        async with page.expect_response(lambda r: r.request.method == "POST") as info:
            await _click(page, "button:has-text('Post comment')")
        assert (await info.value).status == 400
        assert "Comment is required." in await page.inner_text("#comment-form")
        assert db.execute("SELECT COUNT(*) FROM comments").fetchone()[0] == n_comments
        await page.goto(site_url("forum", "/profile"))
        await page.fill("#biography", "b" * 301)
        await _click(page, "button:has-text('Save profile')")
        assert "Biography must be at most 300 characters." in await page.inner_text("main")
        assert len(db.execute("SELECT biography FROM users WHERE id = ?", (data.ME,)).fetchone()[0]) < 301


async def test_hostile_text_round_trips_escaped(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "forum")
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await _submit(page, "books", HOSTILE, HOSTILE + "\nsecond line")
        assert await page.inner_text("#post-title") == HOSTILE
        assert await page.inner_text("#post-body") == HOSTILE + "\nsecond line"
        await page.fill("#comment", HOSTILE)
        await _click(page, "button:has-text('Post comment')")
        assert HOSTILE in await page.locator("#comments .comment-body").all_inner_texts()
        row = db.execute("SELECT id, body FROM posts WHERE title = ?", (HOSTILE,)).fetchone()
        assert row["body"] == HOSTILE + "\nsecond line"
        await page.goto(site_url("forum", "/search?q=" + quote(HOSTILE)))
        assert HOSTILE in await page.inner_text("h1")
        assert await page.locator(".post-title").all_inner_texts() == [HOSTILE]
        await page.goto(site_url("forum", "/search?q=" + quote("%_")))  # LIKE wildcards are literal
        assert "0 posts found" in await page.inner_text("main")
        await page.goto(site_url("forum", f"/user/{ME}"))
        assert HOSTILE in await page.locator(".post-title").all_inner_texts()
        assert not dialogs
        assert db.execute("SELECT COUNT(*) FROM posts").fetchone()[0] > 300  # nothing was dropped


async def test_pagination_and_sorting(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "forum")
        forum, n = db.execute("SELECT f.name, COUNT(*) AS n FROM posts p JOIN forums f ON f.id = p.forum_id"
                              " GROUP BY f.id HAVING n > 10 ORDER BY n DESC LIMIT 1").fetchone()
        await page.goto(site_url("forum", f"/f/{forum}/new"))
        first = await page.locator(".posts .post-title").all_inner_texts()
        await _click(page, "a:has-text('Next')")
        assert "page=2" in page.url and "/new" in page.url
        second = await page.locator(".posts .post-title").all_inner_texts()
        assert len(first) == 10 and len(first) + len(second) == min(n, 20) and not set(first) & set(second)
        newest = [r[0] for r in db.execute("SELECT p.title FROM posts p JOIN forums f ON f.id = p.forum_id WHERE f.name = ?"
                                           " ORDER BY p.created DESC, p.id DESC LIMIT 20", (forum,))]
        assert first + second == newest[: len(first) + len(second)]
        await page.goto(site_url("forum", f"/f/{forum}/top"))
        scores = [int(s) for s in await page.locator(".posts .score").all_inner_texts()]
        assert scores == sorted(scores, reverse=True) and len(scores) == 10
        await page.goto(site_url("forum", "/forums?sort=subscribers"))
        subs = [int(s) for s in await page.locator("table.forums tr td:nth-child(3)").all_inner_texts()]
        assert subs == sorted(subs, reverse=True) and len(subs) == db.execute("SELECT COUNT(*) FROM forums").fetchone()[0]
        await page.goto(site_url("forum", "/?page=999"))  # out of range pages clamp to the last page
        pages = -(-db.execute("SELECT COUNT(*) FROM posts").fetchone()[0] // 15)
        assert await page.inner_text(".pager span") == f"Page {pages} of {pages}"
        assert await page.locator(".pager a:has-text('Next')").count() == 0


# ---------------------------------------------------------------- writes


async def test_votes_toggle_and_replies_nest(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "forum")
        pid, score = db.execute("SELECT id, score FROM posts WHERE user_id != ? AND id NOT IN"
                                " (SELECT post_id FROM post_votes WHERE user_id = ?) ORDER BY id LIMIT 1",
                                (data.ME, data.ME)).fetchone()
        await page.goto(site_url("forum", _post_path(db, pid)))
        await _click(page, "button[aria-label='Upvote post']")
        assert await page.inner_text("#post-score") == str(score + 1)
        await _click(page, "button[aria-label='Remove upvote from post']")
        assert await page.inner_text("#post-score") == str(score)
        await _click(page, "button[aria-label='Downvote post']")
        await _click(page, "button[aria-label='Upvote post']")  # switching sides moves the score by two
        assert await page.inner_text("#post-score") == str(score + 1)
        assert db.execute("SELECT value FROM post_votes WHERE post_id = ? AND user_id = ?", (pid, data.ME)).fetchone()[0] == 1
        # a reply lands under its parent comment, one level deep
        cid = db.execute("SELECT id FROM comments WHERE post_id = ? AND parent_id IS NULL LIMIT 1", (pid,)).fetchone()
        if cid is None:  # give the post a comment to reply to
            await page.fill("#comment", "A first comment")
            await _click(page, "button:has-text('Post comment')")
            cid = db.execute("SELECT id FROM comments WHERE post_id = ? AND parent_id IS NULL LIMIT 1", (pid,)).fetchone()
        await _click(page, f"#comment-{cid[0]} a:has-text('Reply')")
        await page.fill("#reply", "A nested reply")
        await _click(page, "button:has-text('Post reply')")
        reply = page.locator(f"#comment-{cid[0]} .comment[data-depth='1']", has_text="A nested reply")
        assert await reply.count() == 1
        # the vote form's "next" only redirects within the site
        response = await page.request.post(site_url("forum", f"{_post_path(db, pid)}/vote"), form={"direction": "down", "next": "//example.com/"},
                                           max_redirects=0)
        assert response.status == 302 and response.headers["location"].startswith("/f/")


async def test_subscriptions_and_deleting_a_post(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "forum")
        name = db.execute("SELECT name FROM forums WHERE id NOT IN (SELECT forum_id FROM subscriptions"
                          " WHERE user_id = ?) ORDER BY name LIMIT 1", (data.ME,)).fetchone()[0]
        await page.goto(site_url("forum", f"/f/{name}"))
        before = int((await page.inner_text("#subscriber-count")).split()[0])
        await _click(page, "button:has-text('Subscribe')")
        assert await page.inner_text("#subscriber-count") == f"{before + 1} subscribers"
        await page.goto(site_url("forum", "/subscriptions"))
        assert f"f/{name}" in await page.locator("#subscriptions .forum-link").all_inner_texts()
        await _click(page, f"button[aria-label='Unsubscribe from f/{name}']")
        assert f"f/{name}" not in await page.locator("#subscriptions .forum-link").all_inner_texts()
        # deleting my post removes it and its comments
        pid = db.execute("SELECT p.id FROM posts p WHERE user_id = ? AND EXISTS (SELECT 1 FROM comments c"
                         " WHERE c.post_id = p.id) ORDER BY id LIMIT 1", (data.ME,)).fetchone()[0]
        path = _post_path(db, pid)
        await page.goto(site_url("forum", path))
        await _click(page, "a:has-text('Delete')")
        await _click(page, "button:has-text('Delete post')")
        assert "Your post was deleted." in await page.inner_text(".flash")
        assert (await page.goto(site_url("forum", path))).status == 404
        assert db.execute("SELECT COUNT(*) FROM comments WHERE post_id = ?", (pid,)).fetchone()[0] == 0
        assert pristine("forum").execute("SELECT COUNT(*) FROM posts WHERE id = ?", (pid,)).fetchone()[0] == 1


# ---------------------------------------------------------------- templates: the expert succeeds


async def test_expert_solves_one_instance_of_every_template(browser):
    tasks, result = await run_expert(browser, TEMPLATE_IDS)
    rewards = {t.task_id.split("/")[1]: t.reward for t in result.trajectories}
    assert rewards == {t: 1.0 for t in TEMPLATE_IDS}, [
        (t.task_id, t.verdict) for t in result.trajectories if t.reward != 1.0]
    for traj, task in zip(result.trajectories, tasks):
        assert len(traj.turns) >= task.min_steps - 1, task.task_id  # min_steps is honest
        assert all("<think>" in turn.response for turn in traj.turns)


# ---------------------------------------------------------------- templates: plausible failures score 0


async def _one_comment_off(page, p, db):
    n = db.execute("SELECT COUNT(*) FROM comments WHERE post_id = ?", (p["post_id"],)).fetchone()[0]
    return str(n + 1)


async def _a_commenter(page, p, db):
    return db.execute("SELECT username FROM users WHERE id != (SELECT user_id FROM posts WHERE id = ?)"
                      " ORDER BY id LIMIT 1", (p["post_id"],)).fetchone()[0]


async def _all_three_forums(page, p, db):
    return f"{p['a']}, {p['b']} or {p['c']}"


async def _my_own_user_page(page, p, db):
    await page.goto(site_url("forum", f"/user/{ME}"))


async def _other_sort(page, p, db):
    await page.goto(site_url("forum", f"/f/{p['forum']}/{'top' if p['sort'] == 'new' else 'new'}"))


async def _post_in_another_forum(page, p, db):
    await _submit(page, "books" if p["forum"] != "books" else "movies", p["title"], p["body"])


async def _vote_the_other_way(page, p, db):
    await page.goto(site_url("forum", _post_path(db, p["post_id"])))
    await _click(page, "button[aria-label='Downvote post']" if p["verb"] == "Upvote" else "button[aria-label='Upvote post']")


async def _toggle_another_forum(page, p, db):
    await page.goto(site_url("forum", "/f/books" if p["forum"] != "books" else "/f/movies"))
    await _click(page, "form button[name='action']")


async def _reply_to_a_comment(page, p, db):
    await page.goto(site_url("forum", _post_path(db, p["post_id"])))
    link = page.locator("#comments a:has-text('Reply')").first
    if await link.count() == 0:  # no comment to answer: comment on another post instead
        await page.goto(site_url("forum", _post_path(db, p["post_id"] % 300 + 1)))
        await page.fill("#comment", p["text"])
        await _click(page, "button:has-text('Post comment')")
        return
    await link.click()
    await page.fill("#reply", p["text"])
    await _click(page, "button:has-text('Post reply')")


async def _append_to_the_body(page, p, db):
    await page.goto(site_url("forum", _post_path(db, p["post_id"]) + "/edit"))
    await page.fill("#body", (await page.input_value("#body")) + " " + p["text"])
    await _click(page, "button:has-text('Save changes')")


NEGATIVES = {
    "forum.comment_count": _one_comment_off,
    "forum.post_author": _a_commenter,
    "forum.most_subscribers": _all_three_forums,
    "forum.author_page": _my_own_user_page,
    "forum.forum_sorted": _other_sort,
    "forum.submit_post": _post_in_another_forum,
    "forum.vote_post": _vote_the_other_way,
    "forum.subscribe": _toggle_another_forum,
    "forum.reply_post": _reply_to_a_comment,
    "forum.edit_post": _append_to_the_body,
}
CONTENT = [t.id for t in forum_templates.TEMPLATES if t.kind == "content"]


def test_every_template_has_a_negative_case():
    assert set(NEGATIVES) == set(TEMPLATE_IDS)


@pytest.mark.parametrize("template", TEMPLATE_IDS)
async def test_plausible_failure_scores_zero(browser, template):
    assert await reward_after(browser, template, NEGATIVES[template], "forum") == 0.0


@pytest.mark.parametrize("template", CONTENT)
async def test_doing_nothing_scores_zero(browser, template):
    assert await reward_after(browser, template, do_nothing, "forum") == 0.0
