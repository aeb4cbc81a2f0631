"""The code-hosting site (CodeHub, after WebArena's GitLab) and its task templates, on
real Chromium: every page type, 404s, form validation, escaping of hostile text,
pagination and filters, then per template one expert success and one plausible
failure that must score 0."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import pytest_asyncio

from webr1_kit.browser import BrowserEnv
from webr1_kit.sites.code import data
from webr1_kit.tasks.arena import tasks as arena_tasks
from webr1_kit.tasks.arena_templates import code as code_templates

from arena_helpers import HOSTILE, episode, episode_db, first_task, pristine, run_expert, site_url

TEMPLATE_IDS = [t.id for t in code_templates.TEMPLATES]
START = "code.project_stars"  # the template of the episodes the page tests run in


# ---------------------------------------------------------------- the seed data


def test_seed_data_is_deterministic_realistic_and_unique_by_title():
    dumps = []
    for seed in (0, 0, 1):
        conn = sqlite3.connect(":memory:")
        data.build(conn, seed)
        dumps.append("\n".join(conn.iterdump()))
    assert dumps[0] == dumps[1] and dumps[0] != dumps[2]
    db = pristine("code")
    count = lambda table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: E731
    assert count("users") == 40 and count("projects") == 30
    assert 400 <= count("issues") <= 900 and 120 <= count("merge_requests") <= 250
    assert count("notes") > 500 and count("stars") > 200 and count("labels") > 150 and count("milestones") > 60
    # tasks name issues, merge requests, labels and milestones by title within a project
    for table, col in (("issues", "title"), ("merge_requests", "title"), ("labels", "name"), ("milestones", "title")):
        dupes = db.execute(f"SELECT project_id, {col} FROM {table} GROUP BY project_id, {col}"
                           " HAVING COUNT(*) > 1").fetchall()
        assert not dupes, (table, dupes)
    assert db.execute("SELECT u.username FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.site = 'code'"
                      ).fetchone()[0] == "byteblaze"
    assert not db.execute("SELECT 1 FROM issues WHERE title LIKE '%lorem%' OR description LIKE '%lorem%'").fetchall()


# ---------------------------------------------------------------- pages in Chromium

PAGES = [
    ("/", "h1", "Projects"),
    ("/dashboard/projects/starred", "h1", "Projects"),
    ("/dashboard/issues", "h1", "Issues assigned to me"),
    ("/explore?q=python&sort=stars", "h1", "Explore projects"),
    ("/byteblaze", "#profile-name", "Byte Blaze"),
    ("/a11yproject", "h1", "The A11Y Project"),
    ("/a11yproject/a11yproject.com", "#project-name", "a11yproject.com"),
    ("/a11yproject/a11yproject.com/-/starrers", "h1", "Starrers"),
    ("/a11yproject/a11yproject.com/-/issues", "h1, .tabs", "Open"),
    ("/a11yproject/a11yproject.com/-/issues/1", "#issue-state", ""),
    ("/a11yproject/a11yproject.com/-/issues/new", "h1", "New issue"),
    ("/a11yproject/a11yproject.com/-/issues/1/edit", "h1", "Edit issue #1"),
    ("/a11yproject/a11yproject.com/-/merge_requests?state=all", ".tabs", "Merged"),
    ("/a11yproject/a11yproject.com/-/merge_requests/1", "#target-branch", ""),
    ("/a11yproject/a11yproject.com/-/project_members", "h1", "Project members"),
    ("/a11yproject/a11yproject.com/-/labels", "h1", "Labels"),
    ("/a11yproject/a11yproject.com/-/labels/new", "h1", "New label"),
    ("/a11yproject/a11yproject.com/-/milestones?state=all", ".tabs", "All"),
    ("/a11yproject/a11yproject.com/-/milestones/1", "#milestone-title", ""),
    ("/a11yproject/a11yproject.com/-/milestones/new", "h1", "New milestone"),
]


async def test_every_page_type_loads_and_unknown_routes_are_404(browser):
    async with episode(browser, START) as env:
        page = env.page
        hosts = set()
        page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
        for path, selector, text in PAGES:
            response = await page.goto(site_url("code", path))
            assert response.status == 200, path
            shown = (await page.locator(selector).first.inner_text()).strip()
            assert shown and text in shown, (path, shown)
        for path in ("/no-such-user", "/byteblaze/no-such-project", "/byteblaze/dotfiles/-/issues/9999",
                     "/byteblaze/dotfiles/-/merge_requests/9999", "/byteblaze/dotfiles/-/milestones/9999",
                     "/byteblaze/dotfiles/-/wiki", "/byteblaze/dotfiles/-/issues/new/extra"):
            response = await page.goto(site_url("code", path))
            assert response.status == 404, path
        assert hosts and all(h.startswith("127.0.0.1:") for h in hosts)  # all assets are local


async def test_forms_reject_bad_input_with_messages(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "code")
        n_issues = db.execute("SELECT COUNT(*) FROM issues").fetchone()[0]
        await page.goto(site_url("code", "/byteblaze/dotfiles/-/issues/new"))
        await page.fill("#title", "   ")
        await page.click("text=Create issue")
        assert "Title is required." in await page.inner_text("main form")
        assert db.execute("SELECT COUNT(*) FROM issues").fetchone()[0] == n_issues

        await page.goto(site_url("code", "/byteblaze/dotfiles/-/project_members"))
        await page.fill("#username", "no_such_person")
        await page.select_option("#role", "Developer")
        await page.click("text=Add to project")
        assert "No user with the username no_such_person." in await page.inner_text("main form")
        await page.fill("#username", "byteblaze")  # already the owner
        await page.click("text=Add to project")
        assert "already a member" in await page.inner_text("main form")

        await page.goto(site_url("code", "/byteblaze/dotfiles/-/labels/new"))
        await page.fill("#title", "needs-design")
        await page.fill("#color", "red")
        await page.click("text=Create label")
        assert "hex colour" in await page.inner_text("main form")

        await page.goto(site_url("code", "/byteblaze/dotfiles/-/milestones/new"))
        await page.fill("#title", "v9.9")
        await page.fill("#start_date", "2024-05-01")
        await page.fill("#due_date", "2024-02-30")
        await page.click("text=Create milestone")
        assert "Due date must be a date written as YYYY-MM-DD." in await page.inner_text("main form")
        await page.fill("#due_date", "2024-04-01")
        await page.click("text=Create milestone")
        assert "must not be before the start date" in await page.inner_text("main form")
        assert not db.execute("SELECT 1 FROM milestones WHERE title = 'v9.9'").fetchall()

        # the logged-in user is only a Guest or no member at all in some projects: no member form there
        other = db.execute("SELECT n.path, p.path FROM projects p JOIN namespaces n ON n.id = p.namespace_id"
                           " WHERE p.id NOT IN (SELECT project_id FROM members WHERE user_id = 1 AND role >= 40)"
                           " LIMIT 1").fetchone()
        response = await page.request.post(site_url("code", f"/{other[0]}/{other[1]}/-/project_members"),
                                           form={"username": "kkroening", "role": "Owner"})
        assert response.status == 403


async def test_hostile_text_is_stored_verbatim_and_shown_escaped(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "code")
        dialogs = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await page.goto(site_url("code", "/byteblaze/dotfiles/-/issues/new"))
        await page.fill("#title", HOSTILE)
        await page.fill("#description", HOSTILE + "\nsecond line")
        await page.locator("label.check input").first.check()
        await page.click("text=Create issue")
        assert await page.inner_text("#issue-title") == HOSTILE
        await page.fill("#comment", HOSTILE)
        await page.click("#comment-form button")
        assert (await page.locator(".note-body").last.inner_text()) == HOSTILE
        html = await page.content()
        assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        # listed and searchable (the search's LIKE treats ; - ' as plain text)
        await page.goto(site_url("code", "/byteblaze/dotfiles/-/issues?search=DROP+TABLE+x;--"))
        assert HOSTILE in await page.inner_text("ul.issues")
        assert not dialogs
        row = db.execute("SELECT id, title FROM issues WHERE title = ?", (HOSTILE,)).fetchone()
        assert row is not None
        note = db.execute("SELECT body FROM notes WHERE issue_id = ? ORDER BY id DESC", (row[0],)).fetchone()
        assert note[0] == HOSTILE


async def test_pagination_sorting_and_filters(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "code")
        pid, total = db.execute("SELECT project_id, COUNT(*) AS n FROM issues GROUP BY project_id"
                                " ORDER BY n DESC").fetchone()
        ns, proj = db.execute("SELECT n.path, p.path FROM projects p JOIN namespaces n ON n.id = p.namespace_id"
                              " WHERE p.id = ?", (pid,)).fetchone()
        assert total > 20
        await page.goto(site_url("code", f"/{ns}/{proj}/-/issues?state=all"))
        first = await page.locator("li.issue").evaluate_all("els => els.map(e => e.dataset.iid)")
        assert len(first) == 20 and f"Page 1 of {-(-total // 20)}" in await page.inner_text(".pager")
        await page.click(".pager >> text=Next")
        assert "page=2" in page.url and "state=all" in page.url
        second = await page.locator("li.issue").evaluate_all("els => els.map(e => e.dataset.iid)")
        assert second and not set(first) & set(second)
        await page.goto(site_url("code", f"/{ns}/{proj}/-/issues?state=all&page=999"))  # clamped to the last page
        assert f"Page {-(-total // 20)} of" in await page.inner_text(".pager")

        # the label filter counts what the database holds
        label, n_open = db.execute(
            "SELECT l.name, SUM(i.state = 'opened') FROM labels l JOIN issue_labels il ON il.label_id = l.id"
            " JOIN issues i ON i.id = il.issue_id WHERE l.project_id = ? GROUP BY l.id ORDER BY l.name LIMIT 1", (pid,)
        ).fetchone()
        await page.goto(site_url("code", f"/{ns}/{proj}/-/issues"))
        await page.select_option("#f-label", label)
        await page.click("text=Filter")
        assert (await page.inner_text(".tabs a.active")).split() == ["Open", str(n_open)]
        shown = await page.locator("li.issue .issue-labels").all_inner_texts()
        assert shown and all(label in s for s in shown)

        # explore: 30 projects, 10 a page, sorted by stars
        await page.goto(site_url("code", "/explore?sort=stars"))
        assert "Page 1 of 3" in await page.inner_text(".pager")
        counts = [int(t.split("★")[1].split()[0]) for t in await page.locator(".project-row").all_inner_texts()]
        assert len(counts) == 10 and counts == sorted(counts, reverse=True)


async def test_issue_edit_star_and_approve_change_what_the_pages_show(browser):
    async with episode(browser, START) as env:
        page = env.page
        await page.goto(site_url("code", "/byteblaze/dotfiles/-/issues/1/edit"))
        await page.select_option("#assignee", index=2)
        chosen = await page.locator("#assignee option:checked").inner_text()
        for box in await page.locator("label.check input").all():
            await box.uncheck()
        await page.locator("label.check input").first.check()
        first_label = (await page.locator("label.check").first.inner_text()).strip()
        await page.click("text=Save changes")
        assert chosen in await page.inner_text("#issue-assignee")
        assert (await page.inner_text("#issue-labels")).split() == first_label.split()

        await page.goto(site_url("code", "/byteblaze/dotfiles"))
        before = await page.inner_text("#star-toggle")
        count = int((await page.inner_text("#star-count")).split()[0])
        await page.click("#star-toggle")
        assert await page.inner_text("#star-toggle") == ("Unstar" if before == "Star" else "Star")
        assert int((await page.inner_text("#star-count")).split()[0]) == count + (1 if before == "Star" else -1)

        # an open merge request the signed-in user (Owner) has not approved yet
        iid = episode_db(env, "code").execute(
            "SELECT iid FROM merge_requests WHERE project_id = 1 AND state = 'opened' AND id NOT IN"
            " (SELECT mr_id FROM approvals WHERE user_id = 1) ORDER BY iid").fetchone()[0]
        await page.goto(site_url("code", f"/byteblaze/dotfiles/-/merge_requests/{iid}"))
        approvals = int(await page.inner_text("#approval-count"))
        await page.click("#approve-toggle")
        assert int(await page.inner_text("#approval-count")) == approvals + 1
        assert "Byte Blaze" in await page.inner_text(".approvals")
        assert await page.inner_text("#approve-toggle") == "Revoke approval"


# ---------------------------------------------------------------- templates: expert successes

@pytest_asyncio.fixture(scope="module")
async def expert_run(chromium):
    """The expert on one test-split instance of every code template (one batch, concurrency 3)."""
    _, result = await run_expert(chromium, TEMPLATE_IDS)
    return {t.meta["template"]: t for t in result.trajectories}


def test_templates_cover_the_three_kinds_and_hold_two_out():
    kinds = {t.kind for t in code_templates.TEMPLATES}
    assert kinds == {"info", "nav", "content"}
    assert sum(t.held_out for t in code_templates.TEMPLATES) == 2
    for t in code_templates.TEMPLATES:
        assert len([x for x in arena_tasks("all") if x.template == t.id]) >= 20, t.id


@pytest.mark.parametrize("template", TEMPLATE_IDS)
async def test_expert_solves(expert_run, template):
    traj = expert_run[template]
    assert traj.status == "done" and traj.reward == 1.0, (traj.verdict, [x.response for x in traj.turns])
    assert len(traj.turns) <= 12


# ---------------------------------------------------------------- templates: plausible failures score 0


async def _post(env: BrowserEnv, path: str, form: dict[str, str]) -> None:
    response = await env.page.request.post(site_url("code", path), form=form)
    assert response.ok, path


def _other(db: sqlite3.Connection, sql: str, params: tuple) -> Any:
    row = db.execute(sql, params).fetchone()
    assert row is not None, sql
    return row


async def _wrong_outcome(env: BrowserEnv, template: str, p: dict[str, Any]) -> str | None:
    """Do a plausible wrong thing for the task; returns the (wrong) answer to submit."""
    db = episode_db(env, "code")
    proj = f"/{p['ns']}/{p['proj']}"
    pid = db.execute("SELECT p.id FROM projects p JOIN namespaces n ON n.id = p.namespace_id"
                     " WHERE n.path = ? AND p.path = ?", (p["ns"], p["proj"])).fetchone()[0]
    if template == "code.open_issues_with_label":  # counted closed issues too (or off by one)
        n_open, n_all = db.execute(
            "SELECT SUM(i.state = 'opened'), COUNT(*) FROM issues i JOIN issue_labels il ON il.issue_id = i.id"
            " JOIN labels l ON l.id = il.label_id WHERE l.project_id = ? AND l.name = ?", (pid, p["label"])).fetchone()
        return str(n_all if n_all != n_open else n_open + 1)
    if template == "code.issue_assignee":  # named the author
        author, assignee = db.execute(
            "SELECT a.name, s.name FROM issues i JOIN users a ON a.id = i.author_id"
            " JOIN users s ON s.id = i.assignee_id WHERE i.project_id = ? AND i.iid = ?", (pid, p["iid"])).fetchone()
        return author if author != assignee else "Byte Blaze"
    if template == "code.mr_target_branch":  # named the source branch
        return db.execute("SELECT source_branch FROM merge_requests WHERE project_id = ? AND iid = ?",
                          (pid, p["iid"])).fetchone()[0]
    if template == "code.project_stars":  # off by one (counted after starring it oneself)
        n = db.execute("SELECT COUNT(*) FROM stars WHERE project_id = ?", (pid,)).fetchone()[0]
        return str(n + 1)
    if template == "code.closed_issues":  # stopped on the open issues
        await env.page.goto(site_url("code", f"{proj}/-/issues?state=opened"))
        return "done"
    if template == "code.milestone_page":  # stopped on the milestones list
        await env.page.goto(site_url("code", f"{proj}/-/milestones?state=all"))
        return "done"
    if template == "code.create_issue":  # right title, wrong label
        label = _other(db, "SELECT id FROM labels WHERE project_id = ? AND name != ?", (pid, p["label"]))[0]
        await _post(env, f"{proj}/-/issues/new", {"title": p["title"], "labels": str(label)})
        return "done"
    if template == "code.close_issue":  # closed another issue
        iid = _other(db, "SELECT iid FROM issues WHERE project_id = ? AND state = 'opened' AND iid != ?",
                     (pid, p["iid"]))[0]
        await _post(env, f"{proj}/-/issues/{iid}/state", {"action": "close"})
        return "done"
    if template == "code.star_project":  # starred another project
        ns, path = _other(db, "SELECT n.path, p.path FROM projects p JOIN namespaces n ON n.id = p.namespace_id"
                              " WHERE p.id != ? AND p.id NOT IN (SELECT project_id FROM stars WHERE user_id = 1)",
                          (pid,))
        await _post(env, f"/{ns}/{path}/-/star", {})
        return "done"
    if template == "code.add_member":  # right user, wrong role
        role = next(r for r in ("Developer", "Reporter") if r != p["role"])
        await _post(env, f"{proj}/-/project_members", {"username": p["username"], "role": role})
        return "done"
    if template == "code.comment_issue":  # commented on another issue
        iid = _other(db, "SELECT iid FROM issues WHERE project_id = ? AND iid != ?", (pid, p["iid"]))[0]
        await _post(env, f"{proj}/-/issues/{iid}", {"body": p["comment"]})
        return "done"
    if template == "code.create_milestone":  # right title, wrong due date
        await _post(env, f"{proj}/-/milestones/new", {"title": p["milestone"], "due_date": "2030-01-01"})
        return "done"
    raise AssertionError(f"no negative case for {template}")


@pytest.mark.parametrize("template", TEMPLATE_IDS)
async def test_plausible_failure_scores_zero(browser, template):
    task = first_task(template)
    async with episode(browser, template) as env:
        kind = task.meta["kind"]
        if kind == "content":  # doing nothing must not pass either
            assert (await env.evaluate("done")).reward == 0.0
        answer = await _wrong_outcome(env, template, task.meta["params"])
        verdict = await env.evaluate(answer)
        assert verdict.reward == 0.0, verdict
