"""Starting many episodes at once: infrastructure failures and time, by EnvConfig.max_starting.

    .venv/bin/python bench/bench_starts.py [--episodes 32] [--limits 32,0]

An M-GRPO step starts all its episodes together (8 tasks x 4 samples = 32 in the learning
benchmark). Each start opens a browser context, loads the MiniWoB++ start page and sets
the task up; on a 2-core CPU that is CPU-bound work for Chromium's renderers. This
starts `--episodes` episodes of jQuery-UI-heavy MiniWoB++ tasks concurrently on one
browser, once per start limit (0 = the default, twice the CPU count), and reports
infrastructure failures (start page not loaded within navigation_timeout_ms) and the
time until every episode had started, in two conditions:

- idle: nothing else running;
- decoding: the embedded model (SmolLM2-135M-Instruct) decodes batches of 8 in a thread
  of the same process, as the batching generator does while episodes start.

Results: one JSON line per configuration on stdout and bench/results/bench_starts.json.
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
import threading
import time
from pathlib import Path
from typing import Any

from webr1_kit.browser import Browser, BrowserEnv
from webr1_kit.config import EnvConfig
from webr1_kit.errors import InfraError
from webr1_kit.tasks import miniwob

HERE = Path(__file__).resolve().parent
# The training tasks whose pages load jQuery UI: the slowest starts, and the ones that failed.
TASKS = ("use-autocomplete", "use-spinner", "click-tab", "click-tab-2", "click-dialog", "click-option",
         "click-collapsible", "click-widget")


class Decoding:
    """The embedded model decoding batches of 8 long prompts in a thread until stopped."""

    def __init__(self) -> None:
        from webr1_kit import load_policy

        self.policy = load_policy("embedded")
        self.ids = self.policy.tokenizer("hello " * 600)["input_ids"]
        self.stop, self.batches = threading.Event(), 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.policy.generator.generate_batch([self.ids[: 500 + i] for i in range(8)], list(range(8)))
            self.batches += 1

    def __enter__(self) -> "Decoding":
        self.thread.start()
        time.sleep(3)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()


async def start_all(episodes: int, limit: int) -> dict[str, Any]:
    """Start `episodes` episodes at once with max_starting=`limit` (0: the default)."""
    tasks = miniwob.tasks(list(TASKS))
    config = EnvConfig(max_starting=limit or None)
    times: list[float] = []
    errors: list[str] = []
    async with Browser(config) as browser:
        async def one(i: int) -> None:
            env = BrowserEnv(browser)
            t0 = time.perf_counter()
            try:
                await env.reset(tasks[i % len(tasks)], seed=i)
                times.append(time.perf_counter() - t0)
            except InfraError as exc:
                errors.append(str(exc))
            finally:
                await env.close()

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(episodes)))
        wall = time.perf_counter() - t0
        limit_used = browser.max_starting
    return {"max_starting": limit_used, "episodes": episodes, "infra_failures": len(errors),
            "all_started_s": round(wall, 1), "median_start_s": round(statistics.median(times), 2) if times else None,
            "first_error": errors[0][:160] if errors else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=32, help="episodes started at once (default 32)")
    ap.add_argument("--limits", default="32,0", help="comma-separated max_starting values; 0 = the default (default 32,0)")
    ap.add_argument("--out", default=str(HERE / "results" / "bench_starts.json"))
    args = ap.parse_args()
    limits = [int(x) for x in args.limits.split(",")]
    rows = []
    for condition in ("idle", "decoding"):
        for limit in limits:
            before = os.getloadavg()
            if condition == "decoding":
                with Decoding():
                    row = asyncio.run(start_all(args.episodes, limit))
            else:
                row = asyncio.run(start_all(args.episodes, limit))
            row = {"condition": condition, **row, "loadavg_before": [round(x, 2) for x in before]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    out = {"date": dt.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "tasks": list(TASKS), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
