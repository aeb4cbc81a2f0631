"""Training on fixed data, on however many processes this script is launched with:
tests/test_distributed.py runs it alone and under `accelerate launch`, and compares.

    python tests/dp_worker.py grpo OUT          one M-GRPO update (two passes, KL on)
    python tests/dp_worker.py sft OUT STEPS     BC up to STEPS steps in OUT/run (resumes)
    python tests/dp_worker.py cli ARGS...       the `webr1` command line ARGS (e.g. rl --config ...)
    python tests/dp_worker.py grpo OUT1 + sft OUT2 2 + ...    several jobs, one after another

Every process writes OUT/rank-R.pt (its LoRA parameters afterwards); the main one also
writes OUT/stats.json (what the step logged). Each job starts from the same seed and a new
policy, as if launched alone; several jobs in one launch pay the interpreter's start (torch,
transformers and peft imports) and the process group's set-up once.
"""

from __future__ import annotations

import json
import random
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from test_training import demo, make_policy, perturb_lora_b  # noqa: E402

from webr1_kit import distributed  # noqa: E402
from webr1_kit.config import GRPOConfig, SFTConfig  # noqa: E402
from webr1_kit.grpo import build_batch, update  # noqa: E402
from webr1_kit.sft import train_sft  # noqa: E402
from webr1_kit.training import make_optimizer  # noqa: E402
from webr1_kit.trajectory import Trajectory, TrajectoryGroup, Turn  # noqa: E402


def fixed_groups(vocab: int) -> list[TrajectoryGroup]:
    """Three groups of four one- or two-turn episodes with mixed rewards and random tokens."""
    rng = random.Random(7)
    groups = []
    for g in range(3):
        trajs = []
        for i in range(4):
            turns = []
            for _ in range(1 + (i + g) % 2):
                completion = [rng.randrange(5, vocab) for _ in range(rng.randrange(3, 9))]
                turns.append(Turn(observation={}, response="r", prompt_ids=[rng.randrange(5, vocab) for _ in range(12)],
                                  completion_ids=completion, logprobs=[-rng.uniform(8, 12) for _ in completion]))
            trajs.append(Trajectory(f"t{g}", "i", 0, turns=turns, reward=float((i + g) % 3 == 0), status="done"))
        groups.append(TrajectoryGroup(f"t{g}", trajs))
    return groups


def main() -> None:
    args, job = sys.argv[1:], []
    for arg in args + ["+"]:
        if arg != "+":
            job.append(arg)
        elif job:
            torch.manual_seed(0)
            run(job)
            job = []


def run(job: list[str]) -> None:
    from transformers import AutoTokenizer

    from webr1_kit.models import embedded_path

    if job[0] == "cli":  # as `python -m webr1_kit.cli ARGS` would run under the same launcher
        from webr1_kit.cli import main as webr1

        if webr1(job[1:]) != 0:
            raise SystemExit(f"webr1 {' '.join(job[1:])} failed")
        return
    warnings.filterwarnings("ignore", message="the generator's log-probabilities")  # made-up old log-probs
    mode, out = job[0], Path(job[1])
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(embedded_path())
    policy = make_policy(tokenizer)
    if mode == "grpo":
        perturb_lora_b(policy.model)  # seeded below: the same start on every process
        ref = out / "reference"
        if distributed.is_main():
            policy.save_adapter(ref)
        distributed.barrier()
        policy.freeze_reference(ref)
        perturb_lora_b(policy.model, 0.05)  # the policy has moved away from its reference
        if distributed.is_main():
            torch.save({n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad},
                       out / "start.pt")
        cfg = GRPOConfig(tasks_per_step=3, group_size=4, beta=0.04, updates_per_batch=2, micro_batch_tokens=40,
                         lr=1e-3)
        batch = build_batch(fixed_groups(len(tokenizer)), tokenizer, cfg, max_new_tokens=8)
        stats = update(policy, batch, cfg, make_optimizer(policy.model, cfg.lr, tuple(cfg.betas)))
    else:
        demos = [demo(k) for k in range(8)]  # 16 turns: two steps of 8
        stats = train_sft(policy, demos, SFTConfig(batch_size=8, max_steps=int(job[2]), micro_batch_tokens=300,
                                                   lr=1e-3, warmup_steps=0, save_every=1), out=out / "run",
                          progress=False)
    params = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    torch.save(params, out / f"rank-{distributed.rank()}.pt")
    if distributed.is_main():
        (out / "stats.json").write_text(json.dumps(stats))


if __name__ == "__main__":
    main()
