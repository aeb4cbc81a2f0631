"""Multi-site arena tasks: the other-sites bar, the experts, and plausible failures."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from webr1_kit.browser import BrowserEnv
from webr1_kit.experts import Expert
from webr1_kit.rollout import run_episodes
from webr1_kit.sites import get_arena
from webr1_kit.tasks.arena import tasks as arena_tasks


def _task(template: str, split: str = "test"):
    return next(t for t in arena_tasks(split) if t.template == template)


async def test_multi_site_pages_link_the_other_sites_and_single_site_pages_do_not(browser):
    env = BrowserEnv(browser)
    try:
        obs = await env.reset(_task("multi.price_post"))
        links = {e.name for e in obs.elements if e.role == "link"}
        assert "Postmill" in links and "CodeHub" not in links  # only the task's other site
        obs = await env.reset(_task("shop.product_price"))
        assert "Postmill" not in {e.name for e in obs.elements}
    finally:
        await env.close()


@pytest.mark.parametrize("template", ["multi.price_post", "multi.sku_issue"])
async def test_expert_solves_across_sites(browser, template):
    result = await run_episodes(Expert(), [_task(template)], max_turns=30, browser=browser)
    traj = result.trajectories[0]
    assert traj.reward == 1.0, traj.verdict
    sites = {urlsplit(t.url).hostname for t in traj.turns}
    assert sites == {f"{s}.arena" for s in traj.meta["sites"]}  # it really worked on both sites


async def test_a_wrong_price_or_doing_nothing_fails(browser):
    task = _task("multi.price_post")
    arena = get_arena(0)
    env = BrowserEnv(browser)
    try:
        await env.reset(task)
        step = await env.step('exit(message="done")')  # nothing posted
        assert step.reward == 0.0
        await env.reset(task)
        page = env.page
        await page.goto(arena.urls["forum"] + "/submit")
        await page.select_option("select[name=forum]", task.meta["params"]["forum"])
        await page.fill("input[name=title]", task.meta["params"]["title"])
        await page.fill("textarea[name=body]", "$0.01")  # the right post with a wrong price
        await page.click("button:has-text('Submit post')")
        await page.wait_for_selector("text=Your post was submitted.")
        step = await env.step('exit(message="done")')
        assert step.reward == 0.0
        assert "$0.01" in step.info["verdict"]["checks"][0]["reason"]  # the post was found; its price is wrong
    finally:
        await env.close()


def test_there_are_enough_multi_site_tasks():
    multi = [t for t in arena_tasks("all") if len(t.sites) > 1]
    assert len(multi) >= 10 and {t.meta["split"] for t in multi} == {"train", "test"}
