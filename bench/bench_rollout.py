"""Rollout benchmark with the embedded model (SmolLM2-135M-Instruct) on the CPU.

    .venv/bin/python bench/bench_rollout.py [--tasks 8] [--turns 3] [--new-tokens 48]

Measures, in one run:
1. generator throughput (new tokens/s) at batch sizes 1, 4 and 16 on a real arena prompt;
2. prompt tokens per turn with and without context compression, on expert trajectories;
3. trajectories per minute on arena tasks: the kit's async rollouts (concurrent episodes,
   one batching generator with a shared system-prompt cache) against a naive loop (one
   episode at a time, one Hugging Face `model.generate` call per step), same tasks, same
   prompts, same model, same limits.

Writes bench/results/bench_rollout.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def generator_throughput(policy, prompts: list[list[int]], new_tokens: int) -> dict[int, float]:
    """New tokens per second at several batch sizes (stop strings and end tokens off), on
    distinct prompts (identical ones would share their prefill), prefill included."""
    gen = policy.generator
    gen.stop, ends = (), gen.end_ids
    gen.end_ids = set()
    gen.cfg = replace(gen.cfg, max_new_tokens=new_tokens, temperature=1.0)
    out = {}
    try:
        gen.generate_batch(prompts[:1], [0])  # warm-up (and the system prompt's cache)
        for bs in (1, 4, 16):
            t0 = time.perf_counter()
            res = gen.generate_batch(prompts[:bs], list(range(bs)))
            dt = time.perf_counter() - t0
            out[bs] = {"seconds": round(dt, 2), "new_tokens_per_s": round(sum(len(r.ids) for r in res) / dt, 2)}
    finally:
        gen.stop, gen.end_ids = ("</answer>",), ends
    return out


def prompt_tokens(policy, trajectories) -> dict[str, float]:
    from webr1_kit.config import PromptConfig
    from webr1_kit.observation import Observation
    from webr1_kit.prompt import build_prompt

    sizes = {"compressed": [], "full": []}
    big = PromptConfig(max_prompt_tokens=10**6)
    for traj in trajectories:
        for j, turn in enumerate(traj.turns):
            obs = Observation.from_dict(turn.observation)
            for key, compress in (("compressed", True), ("full", False)):
                p = build_prompt(policy.tokenizer, traj.intent, traj.turns[:j], obs, replace(big, compress=compress))
                sizes[key].append((j + 1, len(p.ids)))
    out = {}
    for key, rows in sizes.items():
        by_turn: dict[int, list[int]] = {}
        for turn, n in rows:
            by_turn.setdefault(turn, []).append(n)
        out[key] = {"mean": round(statistics.mean(n for _, n in rows)),
                    "by_turn": {t: round(statistics.mean(v)) for t, v in sorted(by_turn.items()) if t <= 8}}
    return out


class NaivePolicy:
    """The loop a user writes first: the same model and prompts, one `model.generate` per step."""

    def __init__(self, policy, autocast: bool = False):
        self.policy = policy
        self.autocast = autocast  # run the whole generate call under the kit's CPU autocast

    async def act(self, task, intent, observation, history, seed=0):
        import torch

        from webr1_kit.prompt import build_prompt

        p = self.policy
        prompt = build_prompt(p.tokenizer, intent, history, observation, p.prompt)
        from webr1_kit.cpu import compute_context

        torch.manual_seed(seed + len(history))
        precision = compute_context(p.model) if self.autocast else contextlib.nullcontext()
        with torch.inference_mode(), precision:
            out = p.model.generate(torch.tensor([prompt.ids]), attention_mask=torch.ones(1, len(prompt.ids), dtype=torch.long),
                                   max_new_tokens=p.sampling.max_new_tokens, do_sample=True, temperature=1.0, top_p=1.0,
                                   top_k=0, stop_strings=["</answer>"], tokenizer=p.tokenizer,
                                   pad_token_id=p.tokenizer.pad_token_id)
        return p.tokenizer.decode(out[0, len(prompt.ids):], skip_special_tokens=True)


async def trajectories_per_minute(policy, tasks, turns: int, concurrency: int, seed: int,
                                  episodes: int = 1, grouped: bool = False,
                                  idle_pct: float | None = None, naive_autocast: bool = False) -> dict[str, float]:
    """Same jobs (tasks x episodes, same page and sampling seeds) run by a naive loop (one
    episode at a time, `NaivePolicy`) and by the kit (concurrent episodes, one batching
    generator), in the order naive, kit, kit, naive: on a shared machine, load that drifts
    during the run then weighs on both sides alike."""
    from webr1_kit.browser import Browser, BrowserEnv
    from webr1_kit.rollout import episode_seeds, run_episode, run_episodes

    async def naive_run() -> tuple[float, list]:
        env = BrowserEnv(browser)
        naive_policy = NaivePolicy(policy, naive_autocast)
        t0 = time.perf_counter()
        out = []
        for job in episode_seeds(tasks, episodes, seed, grouped):
            out.append(await run_episode(env, job.task, naive_policy, job.seed, turns, sample_seed=job.sample_seed))
        dt = time.perf_counter() - t0
        await env.close()
        return dt, out

    async def kit_run() -> tuple[float, list]:
        t0 = time.perf_counter()
        res = await run_episodes(policy, tasks, episodes=episodes, grouped=grouped, concurrency=concurrency,
                                 max_turns=turns, seed=seed, browser=browser)
        return time.perf_counter() - t0, res.trajectories

    async with Browser() as browser:
        runs = {"naive": [], "async_batched": []}
        for side in ("naive", "async_batched", "async_batched", "naive"):
            if idle_pct is not None:
                from bench_env import wait_idle  # bench/ is on sys.path when this script runs

                wait_idle(idle_pct, lambda m: print("  " + m, flush=True))
            dt, trajs = await (naive_run() if side == "naive" else kit_run())
            runs[side].append((dt, trajs))
            print(f"  {side}: {dt:.1f} s", flush=True)

    def side(name: str) -> dict[str, Any]:
        secs = [dt for dt, _ in runs[name]]
        n = sum(len(t) for _, t in runs[name])
        return {"seconds": [round(x, 1) for x in secs], "turns": sum(len(x.turns) for _, t in runs[name] for x in t),
                "trajectories_per_min": round(60 * n / sum(secs), 2)}

    naive, kit = side("naive"), side("async_batched")
    return {
        "tasks": len(tasks), "episodes_per_task": episodes, "grouped": grouped, "max_turns": turns,
        "concurrency": concurrency, "order": "naive, kit, kit, naive", "naive_autocast": naive_autocast, "naive": naive, "async_batched": kit,
        "speedup": round(kit["trajectories_per_min"] / naive["trajectories_per_min"], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=8, help="arena test tasks for the trajectories/min race (default 8)")
    ap.add_argument("--turns", type=int, default=3, help="turn limit per episode in the race (default 3)")
    ap.add_argument("--new-tokens", type=int, default=48, help="response length, tokens (default 48)")
    ap.add_argument("--concurrency", type=int, default=8, help="episodes at once for the kit (default 8)")
    ap.add_argument("--wait-idle", type=float, default=None, metavar="PCT",
                    help="before each timed run, wait until other processes use less than PCT%% of the CPU")
    ap.add_argument("--group", type=int, default=4, help="GRPO group size for the grouped race (default 4)")
    ap.add_argument("--cpu-autocast", default="auto", choices=["auto", "bfloat16", "off"],
                    help="the policy's PolicyConfig.cpu_autocast (default auto: bfloat16 prefill on CPUs with AMX/AVX512-BF16)")
    ap.add_argument("--naive-autocast", action="store_true",
                    help="run the naive loop's generate calls under the same autocast (default: float32, "
                         "which decodes faster than autocast on the CPU)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["generator", "prompts", "eval", "grpo"],
                    help="parts to leave out")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_rollout.json"),
                    help="where to write the JSON results (default bench/results/bench_rollout.json)")
    args = ap.parse_args()

    from webr1_kit.config import PromptConfig, SamplingConfig
    from webr1_kit.experts import Expert
    from webr1_kit.policy import load_policy
    from webr1_kit.prompt import build_prompt
    from webr1_kit.rollout import run_episodes
    from webr1_kit.tasks.arena import tasks as arena_tasks

    t0 = time.perf_counter()
    policy = load_policy("embedded", lora=None, prompt=PromptConfig(max_prompt_tokens=1536),
                         sampling=SamplingConfig(temperature=1.0, max_new_tokens=args.new_tokens, max_batch=16),
                         cpu_autocast=args.cpu_autocast)
    load_s = time.perf_counter() - t0
    test = arena_tasks("test")
    sample = test[:: max(1, len(test) // args.tasks)][: args.tasks]
    demos = asyncio.run(run_episodes(Expert(), test[::10], max_turns=30)).trajectories
    from webr1_kit.observation import Observation

    prompts = [build_prompt(policy.tokenizer, d.intent, [], Observation.from_dict(d.turns[0].observation),
                            PromptConfig(max_prompt_tokens=1024)).ids for d in demos[:16]]
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "model": "SmolLM2-135M-Instruct (embedded), float32 weights, CPU",
        "cpu_autocast": args.cpu_autocast,
        "autocast_active": getattr(policy.model, "webr1_autocast", None) is not None,
        "model_load_s": round(load_s, 1),
    }
    if "generator" not in args.skip:
        result["generator"] = {"prompt_tokens_mean": round(statistics.mean(map(len, prompts))),
                               "new_tokens": args.new_tokens,
                               "by_batch": generator_throughput(policy, prompts, args.new_tokens)}
        print(json.dumps(result["generator"]))
    if "prompts" not in args.skip:
        result["prompt_tokens_per_turn"] = prompt_tokens(policy, demos)
    if "eval" not in args.skip:  # evaluation-style: distinct tasks, one episode each
        result["rollouts"] = asyncio.run(trajectories_per_minute(policy, sample, args.turns, args.concurrency, seed=0,
                                                                 idle_pct=args.wait_idle, naive_autocast=args.naive_autocast))
        print(json.dumps(result["rollouts"]))
    if "grpo" not in args.skip:  # training-style: G episodes of each task (a GRPO group)
        k = max(1, args.tasks // args.group)
        result["rollouts_grouped"] = asyncio.run(trajectories_per_minute(
            policy, sample[:k], args.turns, k * args.group, seed=0, episodes=args.group, grouped=True,
            idle_pct=args.wait_idle, naive_autocast=args.naive_autocast))
        print(json.dumps(result["rollouts_grouped"]))
    out = Path(args.out)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
