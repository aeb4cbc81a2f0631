"""Greedy held-out success of an M-GRPO run's checkpoints: when did the policy learn a task,
and when did it lose one?

For a pipeline run directory (`webr1 demo`, with `save_every: 1` or similar), this evaluates
the BC adapter and every Nth RL checkpoint the way the pipeline's own greedy evaluation does
(same turn limit, invalid-action budget, seed and lockstep batching) and prints one row per
adapter: success overall and per task, and the share of actions aimed at element ids 1, 2 and
3, so that a drift of the policy toward one id shows as a rising share.

Every checkpoint's row also compares it with BC on the same pages: episodes newly solved
and newly failed, and the exact McNemar p (`stats.compare_paired`).

With every training task (the default) the pages are the run's own held-out pages, so the
last checkpoint's row reproduces the run's RL evaluation; with --tasks the pages are that
subset's own, the same for every checkpoint. --episodes N plays N pages per task instead:
with N other than the run's own, a fresh, larger sample of held-out pages (page seeds are
drawn task after task, so only the first task's first pages are shared), which is how a
difference too small for the run's own evaluation can be resolved.

    python bench/checkpoint_curve.py runs/<name> [--every 4] [--tasks a,b,c] [--episodes 13] \\
        [--json bench/results/<name>-checkpoints.json] [--save runs/<name>-pages]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

from webr1_kit.pipeline import Pipeline, saved_config
from webr1_kit.stats import compare_paired
from webr1_kit.trajectory import write_jsonl
from webr1_kit.tasks import select_tasks

ELEMENT = re.compile(r'element="(\d+)"')


def adapters(run: Path, every: int) -> list[tuple[str, Path]]:
    """("bc", the BC adapter), then every `every`-th RL checkpoint and the last one."""
    steps = sorted(int(p.name.split("-")[1]) for p in (run / "rl" / "checkpoints").glob("step-*"))
    if not steps:
        raise SystemExit(f"{run}/rl/checkpoints holds no checkpoints")
    keep = [s for s in steps if s % every == 0 or s == steps[-1]]
    return [("bc", run / "sft" / "adapter")] + [(f"rl step {s}", run / "rl" / "checkpoints" / f"step-{s}" / "adapter")
                                                for s in keep]


def element_shares(trajectories) -> dict[str, float]:
    ids = Counter(m.group(1) for t in trajectories for turn in t.turns
                  for m in [ELEMENT.search(turn.response or "")] if m)
    n = sum(ids.values()) or 1
    return {k: ids[k] / n for k in ("1", "2", "3")}


async def curve(run: Path, every: int, names: list[str] | None, episodes: int | None,
                save: Path | None = None) -> list[dict]:
    pipe = Pipeline(saved_config(run), run, progress=False)
    tasks = select_tasks("miniwob", names=names) if names else pipe.tasks("eval")
    rows, bc = [], None
    for label, path in adapters(run, every):
        t0 = time.perf_counter()
        res = await pipe.play(path, tasks=tasks, episodes=episodes)
        if save is not None:
            write_jsonl(save / f"{label.replace(' ', '-')}.jsonl", res.trajectories)
        bc = bc if bc is not None else res.trajectories
        paired = compare_paired(bc, res.trajectories)
        per_task: dict[str, list[float]] = {}
        for t in res.trajectories:
            per_task.setdefault(t.task_id.split("/")[-1], []).append(float(t.success))
        rows.append({"adapter": label, "success": res.metrics["success_rate"], "episodes": res.metrics["evaluated"],
                     "per_task": {k: sum(v) / len(v) for k, v in per_task.items()},
                     "element_share": element_shares(res.trajectories), "seconds": time.perf_counter() - t0,
                     "vs_bc": {k: paired[k] for k in ("gained", "lost", "p_value", "difference", "difference_ci95")}})
        print(f"{label}: {res.metrics['success_rate']:.3f} over {res.metrics['evaluated']} episodes", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    tasks = list(rows[0]["per_task"])
    head = "| adapter | success | vs BC: +solved / -failed, p | " + " | ".join(tasks) + " | element 1 / 2 / 3 |"
    lines = [head, "|---" * (len(tasks) + 4) + "|"]
    for r in rows:
        e, v = r["element_share"], r["vs_bc"]
        lines.append(f"| {r['adapter']} | {r['success']:.3f} | +{v['gained']} / -{v['lost']}, p = {v['p_value']:.3g} | "
                     + " | ".join(f"{r['per_task'][t]:.2f}" for t in tasks)
                     + f" | {e['1']:.2f} / {e['2']:.2f} / {e['3']:.2f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a pipeline run directory with rl/checkpoints/step-N")
    ap.add_argument("--every", type=int, default=4, help="evaluate every Nth checkpoint (and the last)")
    ap.add_argument("--tasks", help="comma-separated MiniWoB++ tasks (default: the run's training tasks)")
    ap.add_argument("--episodes", type=int, help="pages per task (default: the run's eval_episodes)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--save", type=Path, help="also write each adapter's episodes here, as <adapter>.jsonl")
    args = ap.parse_args()
    rows = asyncio.run(curve(args.run, args.every, args.tasks.split(",") if args.tasks else None, args.episodes,
                             args.save))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
