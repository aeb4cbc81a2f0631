"""Episodes through browser servers against a local Chromium, side by side in one run.

    .venv/bin/python bench/bench_remote_browsers.py [--episodes 48] [--servers 1,2,4] [--rounds 2]

The scripted arena expert plays the same `--episodes` test-split tasks (concurrency 16),
once on a local Chromium and once through a pool of N `webr1 browser-server`s on this
machine, for each N in --servers, alternating in --rounds rounds so that a drift in the
machine's load hits every configuration alike. Reported per configuration: episodes per
minute (median over rounds), success rate and infrastructure failures. The servers run on
the same machine, so this measures what the WebSocket hop and the extra processes cost, not
what browsers on other machines would add; on a 2-core CPU more Chromium processes cannot
add compute.

Results: one JSON line per configuration on stdout and bench/results/bench_remote_browsers.json.
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

from webr1_kit.browser import Browser
from webr1_kit.browser_server import BrowserServer
from webr1_kit.config import EnvConfig
from webr1_kit.experts import Expert
from webr1_kit.rollout import run_episodes
from webr1_kit.tasks import load_tasks

HERE = Path(__file__).resolve().parent


async def play(config: EnvConfig, tasks: list) -> dict:
    async with Browser(config) as browser:
        t0 = time.perf_counter()
        result = await run_episodes(Expert(), tasks, concurrency=16, browser=browser, seed=0)
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "success_rate": result.metrics["success_rate"],
            "infra_failures": result.metrics["infra_failures"]}


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=48, help="arena test-split tasks, one episode each (default 48)")
    ap.add_argument("--servers", default="1,2,4", help="pool sizes to compare with a local browser (default 1,2,4)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    ap.add_argument("--out", default=str(HERE / "results" / "bench_remote_browsers.json"))
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    tasks = load_tasks("arena", split="test")[: args.episodes]
    sizes = [int(n) for n in args.servers.split(",")]
    servers = [BrowserServer().start() for _ in range(max(sizes))]
    configs = {"local": EnvConfig(), **{f"{n} server{'s' * (n > 1)}": EnvConfig(
        browser_endpoints=tuple(s.endpoint for s in servers[:n])) for n in sizes}}
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    try:
        await play(EnvConfig(), tasks[:4])  # warm-up: site build, page caches
        for _ in range(args.rounds):
            for name, config in configs.items():
                runs[name].append(await play(config, tasks))
    finally:
        for s in servers:
            s.stop()
    rows = []
    for name, rs in runs.items():
        row = {"config": name, "episodes": len(tasks), "rounds": len(rs),
               "episodes_per_min": round(statistics.median(len(tasks) / r["seconds"] * 60 for r in rs), 1),
               "success_rate": min(r["success_rate"] for r in rs),
               "infra_failures": sum(r["infra_failures"] for r in rs)}
        rows.append(row)
        print(json.dumps(row))
    Path(args.out).write_text(json.dumps({
        "date": dt.date.today().isoformat(), "machine": f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores", "load_before": load_before, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
