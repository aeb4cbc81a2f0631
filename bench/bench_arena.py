"""Arena benchmark: how long a reset takes (state copy and whole environment reset).

    .venv/bin/python bench/bench_arena.py [--resets 200] [--env-resets 30]

Prints a table and writes bench/results/bench_arena.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def env_resets(n: int) -> dict[str, float]:
    from webr1_kit.browser import Browser, BrowserEnv
    from webr1_kit.tasks.arena import tasks

    sample = tasks("test")[:: max(1, len(tasks("test")) // n)][:n]
    async with Browser() as browser:
        env = BrowserEnv(browser)
        await env.reset(sample[0])  # warm-up: browser, sites, first page
        times = []
        for task in sample:
            t0 = time.perf_counter()
            await env.reset(task)
            times.append(time.perf_counter() - t0)
        await env.close()
    return {"n": len(times), "median_ms": 1000 * statistics.median(times), "p90_ms": 1000 * pct(times, 0.9)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resets", type=int, default=200, help="state resets to time (default 200)")
    ap.add_argument("--env-resets", type=int, default=30, help="full BrowserEnv resets to time (default 30)")
    args = ap.parse_args()

    from webr1_kit.sites import Arena

    t0 = time.perf_counter()
    arena = Arena(0).start()
    start_s = time.perf_counter() - t0
    times = []
    for _ in range(args.resets):
        t = time.perf_counter()
        ep = arena.new_episode()
        times.append(time.perf_counter() - t)
        arena.release(ep)
    sizes = {name: conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
             for name, conn in arena.store.pristine.items()}
    arena.stop()
    env = asyncio.run(env_resets(args.env_resets))
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "world_build_and_start_s": round(start_s, 2),
        "database_bytes": sizes,
        "state_reset": {"n": len(times), "median_ms": 1000 * statistics.median(times), "p90_ms": 1000 * pct(times, 0.9)},
        "env_reset": env,
    }
    out = Path(__file__).parent / "results" / "bench_arena.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"world build + site start: {start_s:.2f} s; databases: " +
          ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items()))
    print(f"state reset (copy every database): median {result['state_reset']['median_ms']:.2f} ms, "
          f"p90 {result['state_reset']['p90_ms']:.2f} ms over {len(times)}")
    print(f"BrowserEnv.reset on arena tasks (new context, fresh state, start page loaded, first observation): "
          f"median {env['median_ms']:.0f} ms, p90 {env['p90_ms']:.0f} ms over {env['n']}")


if __name__ == "__main__":
    main()
