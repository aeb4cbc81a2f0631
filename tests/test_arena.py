"""The arena's shared machinery: per-episode state, isolation under concurrency, the suite,
splits, and the baselines. Site- and template-specific tests live in test_arena_<site>.py."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request

import pytest

import webr1_kit as wk
from webr1_kit.baselines import RandomPolicy
from webr1_kit.browser import BrowserEnv
from webr1_kit.experts import Expert
from webr1_kit.rollout import run_episodes
from webr1_kit.sites import EPISODE_COOKIE, get_arena, site_specs
from webr1_kit.sites.state import StateStore, UnknownEpisode
from webr1_kit.tasks import get_suite
from webr1_kit.tasks.arena import split_report, tasks as arena_tasks, templates


def _store() -> StateStore:
    def build(conn, seed=0):
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")

    return StateStore({"db": build}, max_episodes=3)


def test_episodes_get_independent_copies_of_the_world():
    store = _store()
    a, b = store.new_episode(), store.new_episode()
    store.episode(a).dbs["db"].execute("UPDATE t SET x = 99")
    assert store.episode(b).dbs["db"].execute("SELECT x FROM t").fetchone()[0] == 1
    assert store.pristine["db"].execute("SELECT x FROM t").fetchone()[0] == 1
    c = store.new_episode()  # a reset is a new copy of the pristine world
    assert store.episode(c).dbs["db"].execute("SELECT x FROM t").fetchone()[0] == 1


def test_old_episodes_are_evicted_and_named_in_the_error():
    store = _store()
    first = store.new_episode()
    for _ in range(3):
        store.new_episode()
    assert len(store) == 3
    with pytest.raises(UnknownEpisode):
        store.episode(first)
    store.episode(None)  # the public episode is never evicted


def test_sites_listen_on_loopback_only_and_404_unknown_routes():
    arena = get_arena(0)
    assert {s.name for s in site_specs()} == set(arena.urls)
    for name, server in arena.servers.items():
        assert server.httpd.server_address[0] == "127.0.0.1", name
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(arena.urls[name] + "/no/such/page")
        assert info.value.code == 404


def test_an_expired_episode_cookie_is_refused_not_served_shared_state():
    arena = get_arena(0)
    req = urllib.request.Request(arena.urls["shop"] + "/", headers={"Cookie": f"{EPISODE_COOKIE}=not-an-episode"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req)
    assert info.value.code == 410


def test_world_generation_is_deterministic():
    a = [t.to_dict() for t in arena_tasks("all", world_seed=0)]
    from webr1_kit.tasks import arena

    arena._generate.cache_clear()
    b = [t.to_dict() for t in arena_tasks("all", world_seed=0)]
    assert a == b
    assert [t.to_dict() for t in arena_tasks("all", world_seed=1)] != a


def test_splits_hold_out_parameters_and_templates():
    train, test = arena_tasks("train"), arena_tasks("test")
    assert not {t.task_id for t in train} & {t.task_id for t in test}
    for t in train + test:
        assert t.sites and t.template and t.min_steps and t.meta["kind"] in ("info", "nav", "content")
    by_template = {}
    for t in train:
        by_template.setdefault(t.template, set()).add(str(sorted(t.meta["params"].items())))
    for t in test:  # a test instance never repeats a training instance of its template
        assert str(sorted(t.meta["params"].items())) not in by_template.get(t.template, set())
    held_out = {t.id for t in templates() if t.held_out}
    assert not held_out & {t.template for t in train}
    report = split_report()
    assert report["test_templates_unseen_in_train"] == len(held_out)


async def test_sixteen_concurrent_episodes_each_see_only_their_own_writes(browser):
    """Every episode adds a different quantity of the same product to the cart."""
    task = next(t for t in arena_tasks("train") if t.template == "shop.add_to_cart")
    pid = task.meta["params"]["product_id"]
    suite = get_suite("arena")
    arena = get_arena(0)

    async def episode(qty: int) -> tuple[str, str]:
        env = BrowserEnv(browser)
        try:
            await env.reset(task)
            page = env.page
            slow = 60_000  # sixteen browsers on two cores: give page loads time
            await page.goto(f"{arena.urls['shop']}/product/{pid}", timeout=slow)
            await page.fill("#qty", str(qty), timeout=slow)
            await page.click("text=Add to Cart", timeout=slow)
            await asyncio.sleep(0.05 * (qty % 4))  # interleave the episodes' requests
            await page.goto(f"{arena.urls['shop']}/cart", timeout=slow)
            shown = await page.input_value(f'input[name="qty-{pid}"]', timeout=slow)
            state = suite.episode(env.context)
            db_qty = arena.db(state, "store").execute(
                "SELECT qty FROM cart_items WHERE product_id = ? AND customer_id = 1", (pid,)).fetchone()[0]
            return shown, str(db_qty)
        finally:
            await env.close()

    results = await asyncio.gather(*(episode(q) for q in range(1, 17)))
    assert results == [(str(q), str(q)) for q in range(1, 17)]
    # and the pristine world is untouched
    assert arena.store.pristine["store"].execute("SELECT COUNT(*) FROM cart_items").fetchone()[0] == 0


async def test_reset_restores_the_seed_state(browser):
    task = next(t for t in arena_tasks("train") if t.template == "shop.add_to_cart")
    env = BrowserEnv(browser)
    try:
        obs = await env.reset(task)
        expert = Expert()
        for _ in range(10):
            step = await env.step(await expert.act(task, env.intent, obs, []))
            obs = step.observation
            if step.done:
                break
        assert step.reward == 1.0
        t0 = time.perf_counter()
        await env.reset(task)
        reset_s = time.perf_counter() - t0
        await env.page.goto(get_arena(0).urls["shop"] + "/cart")
        assert "You have no items in your shopping cart." in await env.page.content()
        assert reset_s < 10  # generous: a reset is a new context and an in-memory copy, not a rebuild
    finally:
        await env.close()


async def test_verdict_is_visible_after_acting_by_hand(browser):
    task = next(t for t in arena_tasks("test") if t.template == "shop.product_price")
    env = BrowserEnv(browser)
    try:
        await env.reset(task)
        step = await env.step('exit(message="$0.01")')
        assert step.done and step.reward == 0.0
        assert step.info["verdict"]["checks"][0]["type"] == "string_match"
    finally:
        await env.close()


@pytest.mark.sweep
async def test_random_policy_rarely_succeeds(browser, sweep, record_property):
    """Random clicking and typing does not pass the evaluators: a sweep over every template
    (one test task each, about two minutes). `make test` plays one template in three,
    rotating with the commit; the per-template plausible-failure tests check each
    evaluator's strictness every run."""
    one_per_template = {t.template: t for t in arena_tasks("test")}  # every template, once
    tasks = sweep.sample(list(one_per_template.values()), 3)
    record_property("tasks", len(tasks))
    result = await run_episodes(RandomPolicy(seed=1), tasks, episodes=1, concurrency=4, max_turns=8, browser=browser)
    assert result.metrics["infra_failures"] == 0
    assert result.metrics["success_rate"] <= 0.05, result.metrics["per_template"]


def test_load_tasks_and_cli_know_the_arena(capsys):
    from webr1_kit.cli import main

    assert len(wk.load_tasks("arena", split="test")) == len(arena_tasks("test"))
    assert main(["tasks", "list", "--suite", "arena", "--split", "test", "--json"]) == 0
    import json

    listed = json.loads(capsys.readouterr().out)
    assert {t["task_id"] for t in listed} == {t.task_id for t in arena_tasks("test")}
    assert all("__" in t["start_url"] for t in listed)  # placeholders stay in task files
