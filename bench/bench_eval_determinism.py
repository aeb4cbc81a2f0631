"""Does evaluating the same adapter twice give the same episodes, and what does it cost?

Three ways to run greedy evaluation of one policy, each run twice on the same pages:
- "free": batches form from whatever requests are pending (the timing of the browsers
  decides which episodes share a batch) with bfloat16 prefill on CPUs that have it;
- "lockstep": `Generator.lockstep`, what `policy.evaluating()` turns on: each round waits for
  every running episode and decodes their requests in a fixed order and fixed chunks;
- "float32": free batching with CPU autocast off (exact float32 arithmetic).

For each it prints the wall time of both runs and how many episodes differ between them
(different tokens anywhere, and different success).

    python bench/bench_eval_determinism.py --adapter runs/<run>/sft/adapter --tasks click-button,click-link \\
        --episodes 12 [--max-new-tokens 64] [--concurrency 8] > bench/results/eval_determinism.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from webr1_kit.policy import load_policy
from webr1_kit.rollout import run_episodes
from webr1_kit.tasks import load_tasks


async def evaluate(policy, tasks, args, mode: str):
    base = policy.model.get_base_model()
    autocast = getattr(base, "webr1_autocast", None)
    if mode == "float32" and autocast is not None:
        del base.webr1_autocast
    policy.generator.lockstep = mode == "lockstep"
    policy.generator.invalidate_cache()  # the prefix cache was computed under the other arithmetic
    try:
        t0 = time.perf_counter()
        res = await run_episodes(policy, tasks, episodes=args.episodes, concurrency=args.concurrency,
                                 max_turns=args.max_turns, max_invalid=3, seed=args.seed)
        return res, time.perf_counter() - t0
    finally:
        if autocast is not None:
            base.webr1_autocast = autocast
        policy.generator.lockstep = False
        policy.generator.invalidate_cache()


def differences(a, b) -> dict[str, int]:
    tokens = sum(1 for x, y in zip(a.trajectories, b.trajectories)
                 if [t.completion_ids for t in x.turns] != [t.completion_ids for t in y.turns])
    success = sum(1 for x, y in zip(a.trajectories, b.trajectories) if x.success != y.success)
    return {"episodes": len(a.trajectories), "different_tokens": tokens, "different_success": success}


async def main_async(args) -> dict:
    from webr1_kit.config import SamplingConfig

    policy = load_policy("embedded", lora=None, adapter=args.adapter,
                         sampling=SamplingConfig(temperature=0.0, max_new_tokens=args.max_new_tokens))
    tasks = load_tasks("miniwob", names=args.tasks.split(","))
    out = {"adapter": args.adapter, "tasks": args.tasks, "episodes_per_task": args.episodes,
           "concurrency": args.concurrency, "autocast": str(getattr(policy.model.get_base_model(), "webr1_autocast",
                                                                        None))}
    for mode in args.modes.split(","):
        (a, ta), (b, tb) = [await evaluate(policy, tasks, args, mode) for _ in range(2)]
        out[mode] = {"seconds": [round(ta, 1), round(tb, 1)], "success": [a.metrics["success_rate"],
                                                                          b.metrics["success_rate"]],
                     **differences(a, b)}
        print(json.dumps({mode: out[mode]}), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", required=True, help="a saved LoRA adapter (e.g. a BC adapter)")
    ap.add_argument("--tasks", default="click-button,click-link,click-checkboxes", help="MiniWoB++ tasks")
    ap.add_argument("--episodes", type=int, default=12, help="pages per task (default 12)")
    ap.add_argument("--concurrency", type=int, default=8, help="episodes at once (default 8)")
    ap.add_argument("--max-turns", type=int, default=6, help="turn limit (default 6)")
    ap.add_argument("--max-new-tokens", type=int, default=64, help="response limit (default 64)")
    ap.add_argument("--seed", type=int, default=1000003, help="page seeds (default: the pipeline's held-out stream)")
    ap.add_argument("--modes", default="free,lockstep,float32", help="which arms, in order")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main_async(args))))


if __name__ == "__main__":
    main()
