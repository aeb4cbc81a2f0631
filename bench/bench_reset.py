"""MiniWoB++ episode starts: a fresh browser context per episode vs the last episode's tab.

    .venv/bin/python bench/bench_reset.py [--resets 40] [--episodes 40]

`BrowserEnv.reset` starts a MiniWoB++ episode in the environment's last tab (storage,
cookies and history cleared; `Suite.reuse_tab`) unless the context has to be new. This
measures both ways in one run, on one Chromium, alternating the two so that a drift of the
machine falls on both:

- resets: `--resets` resets of each of the cpu preset's five tasks, serially; wall time per
  reset (median, p90) and CPU seconds per reset of this process tree (Python, Playwright's
  driver, Chromium; `_cputime`);
- episodes: `--episodes` scripted-expert episodes of the same tasks through `run_episodes`
  at concurrency 4, the way demonstrations and the test suite play them; episodes per second
  and CPU seconds per episode.

Fresh contexts are forced by `BrowserEnv.REUSE_LIMIT = 0`. Results: a table on stdout and
bench/results/bench_reset.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _cputime import become_subreaper, reap_orphans, system_busy_seconds, tree_cpu_seconds  # noqa: E402


def cpu() -> float:
    reap_orphans()
    return tree_cpu_seconds() or 0.0


async def resets(browser, tasks, n: int, reuse: bool) -> dict:
    from webr1_kit.browser import BrowserEnv

    env = BrowserEnv(browser)
    if not reuse:
        env.REUSE_LIMIT = 0
    await env.reset(tasks[0], seed=0)  # warm-up: the first start of either kind is a fresh context
    times, c0 = [], cpu()
    for i in range(n):
        t0 = time.perf_counter()
        await env.reset(tasks[i % len(tasks)], seed=1000 + i)
        times.append(time.perf_counter() - t0)
    used = cpu() - c0
    await env.close()
    times.sort()
    return {"n": n, "median_ms": round(1000 * statistics.median(times), 1),
            "p90_ms": round(1000 * times[int(0.9 * (n - 1))], 1), "cpu_s_per_reset": round(used / n, 3)}


async def episodes(browser, tasks, n: int, reuse: bool) -> dict:
    from webr1_kit.browser import BrowserEnv
    from webr1_kit.experts import MiniWoBExpert
    from webr1_kit.rollout import run_episodes

    old = BrowserEnv.REUSE_LIMIT
    BrowserEnv.REUSE_LIMIT = old if reuse else 0
    try:
        c0, t0 = cpu(), time.perf_counter()
        res = await run_episodes(MiniWoBExpert(), tasks, episodes=max(1, n // len(tasks)), concurrency=4,
                                 seed=2026, browser=browser)
        wall, used = time.perf_counter() - t0, cpu() - c0
    finally:
        BrowserEnv.REUSE_LIMIT = old
    k = len(res.trajectories)
    return {"episodes": k, "success_rate": res.metrics["success_rate"], "episodes_per_s": round(k / wall, 2),
            "cpu_s_per_episode": round(used / k, 3)}


async def main_async(args) -> dict:
    import webr1_kit as wk
    from webr1_kit.browser import Browser

    tasks = wk.load_tasks("miniwob", names=list(wk.scale_config("cpu").tasks.names))
    out = {"resets": {}, "episodes": {}}
    async with Browser() as browser:
        for reuse in (False, True, False, True):  # alternated; each kind's second round is kept
            key = "reused tab" if reuse else "fresh context"
            out["resets"][key] = await resets(browser, tasks, args.resets, reuse)
        for reuse in (False, True):
            key = "reused tab" if reuse else "fresh context"
            out["episodes"][key] = await episodes(browser, tasks, args.episodes, reuse)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resets", type=int, default=40, help="resets of each kind (default 40)")
    ap.add_argument("--episodes", type=int, default=40, help="expert episodes of each kind (default 40)")
    args = ap.parse_args()
    become_subreaper()
    busy0, t0 = system_busy_seconds(), time.perf_counter()
    out = asyncio.run(main_async(args))
    wall = time.perf_counter() - t0
    busy1 = system_busy_seconds()
    from importlib.metadata import version

    out["meta"] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                   "command": "bench/bench_reset.py " + " ".join(sys.argv[1:]), "machine": platform.processor()
                   or platform.machine(), "cpus": os.cpu_count(), "playwright": version("playwright"),
                   "machine_busy_share": round((busy1 - busy0) / wall / (os.cpu_count() or 1), 2)
                   if busy0 is not None and busy1 is not None else None}
    print(f"{'MiniWoB++ reset':16s} {'median ms':>10s} {'p90 ms':>8s} {'CPU s':>7s}")
    for k, r in out["resets"].items():
        print(f"{k:16s} {r['median_ms']:10.1f} {r['p90_ms']:8.1f} {r['cpu_s_per_reset']:7.3f}")
    print(f"{'expert episodes':16s} {'per s':>10s} {'CPU s each':>11s} {'success':>8s}")
    for k, r in out["episodes"].items():
        print(f"{k:16s} {r['episodes_per_s']:10.2f} {r['cpu_s_per_episode']:11.3f} {r['success_rate']:8.2f}")
    path = HERE / "results" / "bench_reset.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
