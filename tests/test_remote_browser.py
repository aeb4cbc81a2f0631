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


# ---------------------------------------------------------------- the kit's sites for browsers elsewhere


def test_the_sites_listen_on_loopback_unless_told_and_never_on_a_wildcard(monkeypatch):
    from webr1_kit.config import SITES_HOST_VAR, http_url, sites_host

    monkeypatch.delenv(SITES_HOST_VAR, raising=False)
    assert sites_host() == "127.0.0.1"
    monkeypatch.setenv(SITES_HOST_VAR, "0.0.0.0")
    with pytest.raises(ValueError, match="not a wildcard"):
        sites_host()
    monkeypatch.setenv(SITES_HOST_VAR, "10.1.2.3")
    with pytest.warns(UserWarning, match="listen on 10.1.2.3.*no authentication"):
        assert sites_host() == "10.1.2.3"
    assert http_url("::1", 80) == "http://[::1]:80" and http_url("10.1.2.3", 80) == "http://10.1.2.3:80"


def test_sites_serve_host_listens_on_the_address_its_urls_name():
    import re
    import urllib.error
    import urllib.request

    # Ctrl-C's signal, with its default disposition even where this suite runs in the background
    # of a script (which starts its children with SIGINT ignored, and Python then keeps it so)
    proc = subprocess.Popen([sys.executable, "-m", "webr1_kit.cli", "sites", "serve", "--host", "127.0.0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = []
        while not lines or "Ctrl-C" not in lines[-1]:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()[-2000:]
            lines.append(line)
        assert "serving on 127.0.0.2" in lines[0]
        urls = re.findall(r"http://[\d.]+:\d+", "".join(lines))
        assert len(urls) == 4 and all(u.startswith("http://127.0.0.2:") for u in urls)
        assert urllib.request.urlopen(urls[0] + "/", timeout=10).status == 200
        with pytest.raises(urllib.error.URLError):  # not on 127.0.0.1
            urllib.request.urlopen(urls[0].replace("127.0.0.2", "127.0.0.1") + "/", timeout=10)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # no server left behind by a failing test
            raise


def test_episodes_on_a_browser_server_play_sites_served_on_the_sites_host(tmp_path):
    """A separate process (the kit's sites are process-wide): arena and MiniWoB++ episodes of
    the scripted experts on a browser server, against sites listening on 127.0.0.2 only."""
    script = tmp_path / "play.py"
    script.write_text("""
import asyncio, json, sys
from webr1_kit.browser_server import BrowserServer
from webr1_kit.config import EnvConfig
from webr1_kit.experts import Expert
from webr1_kit.rollout import run_episodes
from webr1_kit.tasks import load_tasks

server = BrowserServer().start()
try:
    tasks = load_tasks("arena", split="train")[:2] + load_tasks("miniwob", names=["click-button"])
    res = asyncio.run(run_episodes(Expert(), tasks, config=EnvConfig(browser_endpoints=(server.endpoint,))))
    from webr1_kit.sites import get_arena
    from webr1_kit.tasks import miniwob

    served = list(get_arena(0).urls.values()) + [miniwob.server().url]
    print(json.dumps([[(t.task_id, t.reward) for t in res.trajectories], served]))
finally:
    server.stop()
""")
    env = {**os.environ, "WEBR1_SITES_HOST": "127.0.0.2"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    played, served = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(played) == 3 and all(reward == 1.0 for _, reward in played), played
    assert all(url.startswith("http://127.0.0.2:") for url in served), served
