"""Running many episodes on one browser: concurrency, seeds, and failures as values."""

from __future__ import annotations

import asyncio
import json

from webr1_kit.browser import BrowserEnv
from webr1_kit.experts import MiniWoBExpert
from webr1_kit.rollout import episode_seeds, run_episode, run_episodes
from webr1_kit.stats import summarize, wilson_interval
from webr1_kit.tasks import Task, load_tasks
from webr1_kit.trajectory import Trajectory, read_jsonl, write_jsonl


class CountingExpert(MiniWoBExpert):
    """The scripted expert, also recording how many contexts the browser has open. Its moves
    wait (up to 60 s) until `wait_for` contexts have been open at once, and no longer after:
    episodes start a few at a time (EnvConfig.max_starting), and the expert would otherwise
    finish the first ones before the last have started."""

    def __init__(self, browser, wait_for=0):
        self.browser, self.peak, self.wait_for = browser, 0, wait_for

    async def act(self, task, intent, observation, history, seed=0):
        deadline = asyncio.get_running_loop().time() + 60
        while (self.peak < self.wait_for and sum(self.browser.load().values()) < self.wait_for
               and asyncio.get_running_loop().time() < deadline):
            await asyncio.sleep(0.05)
        self.peak = max(self.peak, sum(self.browser.load().values()))
        return await super().act(task, intent, observation, history)


async def test_sixteen_concurrent_episodes_share_one_browser(browser):
    tasks = load_tasks("miniwob", names=["click-button", "enter-text"])
    policy = CountingExpert(browser, wait_for=16)
    result = await run_episodes(policy, tasks, episodes=8, concurrency=16, browser=browser, seed=5)
    assert len(result.trajectories) == 16
    assert policy.peak == 16  # sixteen isolated contexts open at once, in one Chromium
    assert browser.connected  # a browser passed in is left running
    assert result.metrics["success_rate"] == 1.0 and result.metrics["infra_failures"] == 0
    assert [t.task_id for t in result.trajectories] == ["miniwob/click-button"] * 8 + ["miniwob/enter-text"] * 8


async def test_seeds_fix_the_run_whatever_the_concurrency(browser):
    tasks = load_tasks("miniwob", names=["click-checkboxes"])
    a = await run_episodes(MiniWoBExpert(), tasks, episodes=4, concurrency=1, browser=browser, seed=3)
    b = await run_episodes(MiniWoBExpert(), tasks, episodes=4, concurrency=4, browser=browser, seed=3)
    assert [(t.seed, t.intent) for t in a.trajectories] == [(t.seed, t.intent) for t in b.trajectories]
    assert episode_seeds(tasks, 4, 3) != episode_seeds(tasks, 4, 4)


async def test_a_later_run_on_the_browser_starts_in_the_tabs_an_earlier_run_left(browser):
    """A run leaves its MiniWoB++ environments parked on the browser (`Browser.park`); the
    next run with the same config plays in their tabs and sees the pages a fresh context
    shows for the same seeds, and so does a run whose config differs only in what is read at
    each step (observation, screenshots). A run whose tabs would be opened otherwise (another
    viewport), and arena episodes (a context each), never take them; `close_idle` closes them."""
    from webr1_kit.config import EnvConfig

    tasks = load_tasks("miniwob", names=["click-checkboxes", "enter-text"])
    fresh = await run_episodes(MiniWoBExpert(), tasks, episodes=2, concurrency=2, browser=browser, seed=11)
    parked = list(browser._parked)
    assert len(parked) == 2 and sum(browser.load().values()) == 2
    again = await run_episodes(MiniWoBExpert(), tasks, episodes=2, concurrency=2, browser=browser, seed=11)
    assert {id(e) for e in browser._parked} == {id(e) for e in parked}  # the same two, taken and parked again
    # four episodes a run, all in those two tabs (a new context would have restarted its count)
    assert sum(e._episodes_here for e in parked) == 8
    assert [(t.seed, t.intent, [u.observation["content"] for u in t.turns]) for t in again.trajectories] == \
        [(t.seed, t.intent, [u.observation["content"] for u in t.turns]) for t in fresh.trajectories]
    shown = await run_episodes(MiniWoBExpert(), tasks, episodes=2, concurrency=2, browser=browser, seed=11,
                               config=EnvConfig(observation="axtree", screenshot=True))
    assert {id(e) for e in browser._parked} == {id(e) for e in parked} and sum(e._episodes_here for e in parked) == 12
    assert all(t.turns[0].observation.get("screenshot_png_b64") for t in shown.trajectories)  # the run's own config
    assert [t.intent for t in shown.trajectories] == [t.intent for t in fresh.trajectories]
    assert all(t.turns[0].observation["content"] != f.turns[0].observation["content"]
               for t, f in zip(shown.trajectories, fresh.trajectories))  # the accessibility tree, not HTML
    other = await run_episodes(MiniWoBExpert(), tasks[:1], episodes=1, browser=browser, seed=11,
                               config=EnvConfig(viewport_width=800))
    assert other.metrics["success_rate"] == 1.0 and len(browser._parked) == 3  # its own environment, parked too
    await browser.close_idle()
    assert browser._parked == [] and sum(browser.load().values()) == 0 and browser.connected


def test_samples_per_page_replay_the_same_pages_and_old_schedules_are_kept():
    tasks = load_tasks("miniwob", names=["click-button", "click-link"])
    once = episode_seeds(tasks, 3, 7)
    thrice = episode_seeds(tasks, 3, 7, samples_per_page=2)
    assert [j.seed for j in thrice] == [j.seed for j in once for _ in range(2)]  # the same held-out pages
    assert len({(j.task.task_id, j.sample_seed) for j in thrice}) == 12  # each play samples anew
    # Runs recorded before sampled evaluation existed keep their schedules (this was the rule):
    import hashlib
    import random

    def _mix(*parts):  # the sampling seed's rule, written out
        return int.from_bytes(hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest(),
                              "little") & (2**31 - 1)

    rng, old = random.Random(7), []
    for gi, task in enumerate(tasks):
        first = rng.randrange(2**31)
        old += [(first if k == 0 else rng.randrange(2**31), _mix(7, task.task_id, gi, k)) for k in range(3)]
    assert [(j.seed, j.sample_seed) for j in once] == old
    group = episode_seeds(tasks, 4, 7, grouped=True)
    assert [j.seed for j in group] == [once[0].seed] * 4 + [group[4].seed] * 4
    assert [j.sample_seed for j in group[:3]] == [j.sample_seed for j in once[:3]]


async def test_infrastructure_failures_are_recorded_not_scored(browser, fixture_server):
    dead = Task(task_id="dead-site", intent="x", start_url="http://127.0.0.1:9/",
                eval={"eval_types": ["url_match"], "reference_url": "http://127.0.0.1:9/"})
    tasks = load_tasks("miniwob", names=["click-button"]) + [dead]
    result = await run_episodes(MiniWoBExpert(), tasks, episodes=2, concurrency=4, browser=browser)
    m = result.metrics
    assert m["episodes"] == 4 and m["infra_failures"] == 2 and m["evaluated"] == 2
    assert m["success_rate"] == 1.0  # the failed episodes do not count as reward 0
    failed = [t for t in result.trajectories if t.status == "infra_failure"]
    assert all("failed to load" in t.infra_error and not t.success for t in failed)


async def test_turn_limit_truncates_and_scores_without_an_answer(browser):
    class Idle:
        async def act(self, task, intent, observation, history, seed=0):
            return 'do(action="Scroll Down")'

    env = BrowserEnv(browser)
    try:
        traj = await run_episode(env, load_tasks("miniwob", names=["click-button"])[0], Idle(), seed=1, max_turns=3)
    finally:
        await env.close()
    assert traj.status == "truncated" and len(traj.turns) == 3 and traj.reward == 0.0
    assert traj.answer is None and traj.verdict["checks"][0]["passed"] is False


async def test_trajectories_record_every_turn_and_survive_jsonl(browser, tmp_path):
    result = await run_episodes(MiniWoBExpert(), load_tasks("miniwob", names=["enter-text"]), episodes=2,
                                concurrency=2, browser=browser, seed=9)
    traj = result.trajectories[0]
    assert [t.action["name"] for t in traj.turns] == ["Type", "Click"]
    assert traj.turns[0].response.startswith("<think>") and "<answer>do(" in traj.turns[0].response
    assert traj.turns[0].observation["url"].endswith("enter-text.html")
    path = tmp_path / "t.jsonl"
    write_jsonl(path, result.trajectories)
    back = list(read_jsonl(path))
    assert [t.to_dict() for t in back] == [t.to_dict() for t in result.trajectories]
    # a truncated file (a run killed mid-write) still yields the complete records, with a warning
    path.write_text(path.read_text()[:-40])
    import pytest

    with pytest.warns(UserWarning, match=r"t\.jsonl:2: not a valid trajectory"):
        assert len(list(read_jsonl(path))) == 1
    with pytest.raises(ValueError, match=r"t\.jsonl:2: not a valid trajectory"):
        list(read_jsonl(path, strict=True))
    json.loads(path.read_text().splitlines()[0])  # the first line is untouched
    assert Trajectory.from_dict(back[0].to_dict()).success


def test_summary_breaks_success_down_by_site_and_template_with_intervals():
    def traj(site, template, reward, status="done"):
        return Trajectory(f"arena/{template}/0", "intent", 0, reward=reward, status=status,
                          meta={"sites": [site], "template": template})

    runs = [traj("shop", "shop.a", 1.0), traj("shop", "shop.a", 0.0), traj("shop", "shop.b", 1.0),
            traj("forum", "forum.c", 0.0), traj("forum", "forum.c", 0.0, status="infra_failure")]
    m = summarize(runs, seconds=1.0)
    assert m["per_site"] == {"forum": 0.0, "shop": 2 / 3}
    assert m["per_site_n"] == {"forum": 1, "shop": 3}  # the infra failure is not evaluated
    assert m["per_template"] == {"forum.c": 0.0, "shop.a": 0.5, "shop.b": 1.0}
    assert m["per_template_n"] == {"forum.c": 1, "shop.a": 2, "shop.b": 1}
    assert m["per_site_ci95"]["shop"] == wilson_interval(2, 3)
    lo, hi = m["per_template_ci95"]["shop.a"]
    assert 0.0 < lo < 0.5 < hi < 1.0
    assert m["success_ci95"] == wilson_interval(2, 4) and m["infra_failures"] == 1
