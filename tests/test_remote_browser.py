"""Episodes on browsers that run elsewhere: real Playwright browser servers (`webr1
browser-server`, Playwright's launch-server with the kit's Chromium), a pool of them, and a
server lost in the middle of a run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from webr1_kit.browser import Browser, InfraError
from webr1_kit.browser_server import BrowserServer
from webr1_kit.config import EnvConfig
from webr1_kit.experts import Expert, MiniWoBExpert
from webr1_kit.rollout import run_episodes
from webr1_kit.tasks import load_tasks


@pytest.fixture(scope="module")
def servers():
    started = [BrowserServer().start(), BrowserServer().start()]
    yield started
    for s in started:
        s.stop()


def played(result):
    """What a run did, episode by episode: everything but timings."""
    return [(t.task_id, t.seed, t.status, t.reward, [(u.response, u.observation["content"]) for u in t.turns])
            for t in result.trajectories]


async def test_contexts_spread_over_the_servers_and_episodes_equal_a_local_browsers(servers, browser):
    config = EnvConfig(browser_endpoints=tuple(s.endpoint for s in servers))
    tasks = load_tasks("miniwob", names=["click-button", "enter-text"])
    async with Browser(config) as pool:
        assert pool.version == browser.version  # the same Chromium, served
        contexts = [await pool.new_context() for _ in range(4)]
        assert pool.load() == {s.endpoint: 2 for s in servers}  # each to the least-loaded server
        for c in contexts:
            await c.close()
        remote = await run_episodes(MiniWoBExpert(), tasks, episodes=3, concurrency=6, browser=pool, seed=4)
        arena = load_tasks("arena", split="test")[:3]
        remote_arena = await run_episodes(Expert(), arena, concurrency=3, browser=pool, seed=4)
    local = await run_episodes(MiniWoBExpert(), tasks, episodes=3, concurrency=6, browser=browser, seed=4)
    local_arena = await run_episodes(Expert(), arena, concurrency=3, browser=browser, seed=4)
    assert remote.metrics["success_rate"] == 1.0 and remote_arena.metrics["success_rate"] == 1.0
    assert played(remote) == played(local) and played(remote_arena) == played(local_arena)


class SlowExpert(MiniWoBExpert):
    """The scripted expert, a second per move: episodes are still running when a server goes."""

    async def act(self, task, intent, observation, history, seed=0):
        await asyncio.sleep(1.0)
        return await super().act(task, intent, observation, history)


async def test_a_server_lost_mid_run_fails_its_episodes_as_infrastructure_and_they_finish_elsewhere():
    doomed, spare = BrowserServer().start(), BrowserServer().start()
    try:
        config = EnvConfig(browser_endpoints=(doomed.endpoint, spare.endpoint))
        tasks = load_tasks("miniwob", names=["click-checkboxes"])
        async with Browser(config) as pool:
            run = asyncio.ensure_future(run_episodes(SlowExpert(), tasks, episodes=6, concurrency=6, browser=pool,
                                                     seed=2, retries=2))
            while not pool.load().get(doomed.endpoint) and not run.done():
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.5)  # mid-episode
            doomed.stop()
            result = await run
            assert doomed.endpoint not in pool.load() and spare.endpoint in pool.load()
    finally:
        doomed.stop()
        spare.stop()
    statuses = [t.status for t in result.trajectories]
    assert len(statuses) == 6
    # every episode either finished (on the spare) or is an infrastructure failure: none scored as the agent's
    assert all(t.success or t.status == "infra_failure" for t in result.trajectories), statuses
    assert sum(t.success for t in result.trajectories) >= 3, [t.infra_error for t in result.trajectories]


async def test_bad_endpoints_are_named_and_unreachable_servers_are_infrastructure_failures():
    with pytest.raises(ValueError, match="browser_endpoints must be a list of ws:// or wss:// URLs"):
        Browser(EnvConfig(browser_endpoints=("http://127.0.0.1:1",)))
    with pytest.raises(ValueError, match="browser_endpoints"):
        Browser(EnvConfig(browser_endpoints="ws://127.0.0.1:1/x"))
    with pytest.raises(InfraError, match="could not connect to any browser server: ws://127.0.0.1:9/none"):
        await Browser(EnvConfig(browser_endpoints=("ws://127.0.0.1:9/none",), navigation_timeout_ms=3000)).start()


def test_the_command_prints_its_endpoint_and_stops_on_sigterm():
    p = subprocess.Popen([sys.executable, "-m", "webr1_kit.cli", "browser-server"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        header = p.stdout.readline()
        endpoint = p.stdout.readline().strip()
        assert header.startswith("browser server (Playwright ") and endpoint.startswith("ws://127.0.0.1:")
        os.kill(p.pid, signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    with pytest.warns(UserWarning, match="listens on 0.0.0.0: anyone who can reach"):
        server = BrowserServer(host="0.0.0.0")
        try:
            server.start()
        finally:
            server.stop()
