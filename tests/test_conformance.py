"""The environment contract (webr1_kit.conformance) on every bundled suite and a user's task
file, and the check itself catching a suite that breaks it. The WebArena stand-ins are
checked in test_webarena.py, beside their fixtures."""

from __future__ import annotations

import json

import pytest

from webr1_kit.conformance import CHECKS, check_tasks
from webr1_kit.tasks import Task, Verdict, load_tasks
from webr1_kit.tasks import _suites as suites
from webr1_kit.tasks.suite import Suite


@pytest.mark.slow
async def test_miniwob_and_the_arena_keep_the_contract(browser):
    miniwob = load_tasks("miniwob", names=["click-button", "enter-text", "click-tab", "login-user"])
    one_per_site = {tuple(t.sites): t for t in reversed(load_tasks("arena", split="train"))}
    assert len(one_per_site) >= 5  # four sites and multi-site tasks
    problems = await check_tasks(miniwob + list(one_per_site.values()), browser)
    assert problems == []


async def test_a_user_task_file_keeps_the_contract(browser, fixture_server, tmp_path):
    record = {"task_id": "mine/1", "intent": "Open page two", "start_url": fixture_server.url + "/form.html",
              "eval": {"eval_types": ["url_match"], "reference_url": fixture_server.url + "/page2.html"}}
    (tmp_path / "tasks.json").write_text(json.dumps([record]))
    assert await check_tasks(load_tasks(str(tmp_path / "tasks.json")), browser) == []


class UnexplainedSuite(Suite):
    """Scores every episode 1 and gives no reason."""

    name = "unexplained"

    async def evaluate(self, page, context, task, answer):
        return Verdict(1.0, [])


async def test_the_check_reports_a_page_that_changes_and_a_verdict_without_reasons(browser, fixture_server,
                                                                                    monkeypatch):
    monkeypatch.setitem(suites, "unexplained", UnexplainedSuite())
    task = Task(task_id="broken/1", intent="Draw", start_url=fixture_server.url + "/random.html", suite="unexplained")
    problems = await check_tasks([task], browser)
    assert {p.check for p in problems} == {"reproducible", "verdict"}, problems
    assert all(p.task_id == "broken/1" and p.check in CHECKS for p in problems)
    assert "no checks" in str(next(p for p in problems if p.check == "verdict"))


async def test_a_start_page_that_does_not_load_is_reported_by_reset(browser):
    task = Task(task_id="gone/1", intent="x", start_url="http://127.0.0.1:9/",
                eval={"eval_types": ["url_match"], "reference_url": "http://127.0.0.1:9/"})
    (problem,) = await check_tasks([task], browser)
    assert problem.check == "reset" and "InfraError" in problem.message
