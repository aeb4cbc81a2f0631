"""Behaviour cloning (the SFT warm-up): learn the experts' responses, turn by turn.

Each turn of a demonstration becomes one example: the prompt the policy would have
seen at that point (built by prompt.build_prompt, so with the same context
compression and token budget as at rollout time) followed by the expert's response
and the end-of-turn token. Only the response tokens are trained. Examples are
shuffled with the seed, grouped into micro-batches by token budget, and gradients
accumulate to `batch_size` examples per optimizer step under a cosine schedule.

Checkpoints (adapter, optimizer, step, RNG) go to `<out>/checkpoints/`; calling
`train_sft` again with the same `out` resumes after the last one.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from .config import PromptConfig, SFTConfig, to_dict
from .observation import Observation
from .prompt import build_prompt, strip_think
from .rundir import RunDir, load_checkpoint, save_checkpoint
from .cpu import trim_memory
from . import distributed
from .training import apply_think_mask, lr_at, make_optimizer, my_micro_batches, seed_dropout, token_logprobs
from .trajectory import Packed, Trajectory

if TYPE_CHECKING:
    from .rollout import TrainablePolicy


def examples(policy: TrainablePolicy, demos: Iterable[Trajectory], prompt: PromptConfig | None = None,
             train_think: bool = True) -> list[Packed]:
    """One training example per demonstration turn: prompt ids (masked) + response ids (trained).

    With the thinking format off (`prompt.think=False`, the ablation), the demonstrations'
    <think> parts are dropped from the targets and from the history, so the model is
    cloned into the format its prompt asks for."""
    tok = policy.tokenizer
    out = []
    for traj, j, ids in demo_prompts(policy, demos, prompt):
        target = tok.encode(traj.turns[j].response, add_special_tokens=False) + [tok.eos_token_id]
        ex = Packed()
        ex.add(ids, trained=False)
        ex.add(target, trained=True, turn=j)
        out.append(apply_think_mask(tok, ex, train_think))
    return out


def demo_prompts(policy: TrainablePolicy, demos: Iterable[Trajectory],
                 prompt: PromptConfig | None = None) -> Iterator[tuple[Trajectory, int, list[int]]]:
    """(demonstration, turn j, prompt ids) for every demonstration turn: the prompt the
    policy reads at that state, with the expert's turns before it as the history.

    With the thinking format off (`prompt.think=False`, the ablation), the demonstrations'
    <think> parts are dropped from their responses and so from the history."""
    prompt = prompt or policy.prompt
    if not prompt.think:
        demos = [replace(t, turns=[replace(u, response=strip_think(u.response)) for u in t.turns]) for t in demos]
    for traj in demos:
        for j, turn in enumerate(traj.turns):
            p = build_prompt(policy.tokenizer, traj.intent, traj.turns[:j], Observation.from_dict(turn.observation),
                             prompt)
            yield traj, j, p.ids


async def step_accuracy(policy: TrainablePolicy, demos: Sequence[Trajectory], strict: bool = False,
                        n_states: int | None = None, seed: int = 0) -> dict[str, Any]:
    """How often the policy, greedy, does what the expert did, at every state of `demos`
    (the step accuracy of offline web-agent benchmarks such as Mind2Web).

    Each state is given as BC sees it (the expert's own turns as the history), so every
    policy is judged on the same states whatever it would have done before them. A response
    is read as the rollouts read it (`strict`: `EnvConfig.action_format == "strict"`; the
    default reads leniently, as EnvConfig does) and scored by `guidance.step_score` against
    the expert's action there. Held-out success is
    all-or-nothing over a whole episode; this says whether training moved single decisions
    towards the expert's where no episode succeeds yet.

    `n_states`: score at most this many states, drawn with `seed` (the same ones for every
    policy given the same demonstrations): each costs about a greedy turn of an evaluation.

    Returns {"states", "valid" (share of responses holding an action), "exact" (share with
    step score 1: right type, element and text), "score" (mean step score), "per_template":
    {template: [exact, states]}, "outcomes": [[task_id, page seed, turn, step score], ...]
    (for paired comparisons between policies)}."""
    import asyncio

    from .actions import ActionError, describe, parse_action
    from .guidance import step_score
    from .trajectory import Turn

    states = list(demo_prompts(policy, demos))
    if not states:
        raise ValueError("no demonstration turns to score the policy on")
    if n_states is not None and len(states) > n_states:
        states = [states[i] for i in sorted(random.Random(seed).sample(range(len(states)), n_states))]
    with policy.evaluating(0.0):
        policy.running(len(states))
        outs = await asyncio.gather(*(policy.generator.generate(ids, seed=i) for i, (_, _, ids) in enumerate(states)))
    valid = exact = 0
    score = 0.0
    per_template: dict[str, list[int]] = {}
    outcomes = []
    for (traj, j, _), out in zip(states, outs):
        try:
            mine = describe(parse_action(out.text, strict=strict))
        except ActionError:
            mine = None
        s = step_score(Turn(observation={}, response=out.text, action=mine, expert=traj.turns[j].action)) or 0.0
        valid += mine is not None
        exact += s == 1.0
        score += s
        c = per_template.setdefault(traj.meta.get("template", traj.task_id), [0, 0])
        c[0] += s == 1.0
        c[1] += 1
        outcomes.append([traj.task_id, traj.seed, j, s])
    n = len(states)
    return {"states": n, "valid": valid / n, "exact": exact / n, "score": score / n, "per_template": per_template,
            "outcomes": outcomes}


def train_sft(policy: TrainablePolicy, demos: list[Trajectory], cfg: SFTConfig | None = None, out: str | Path | None = None,
              progress: bool = True) -> dict[str, Any]:
    """Behaviour-clone `demos` into `policy`'s adapter. Returns the last metrics row.

    With `out`, the run writes config.json, metrics.jsonl and checkpoints there, and a
    second call resumes where the first stopped.
    """
    import torch

    cfg = cfg or SFTConfig()
    if not demos:
        raise ValueError("no demonstrations to train on")
    if not policy.has_adapter:
        raise ValueError("the policy has no LoRA adapter to train; load it with lora=LoRA()")
    data = examples(policy, demos, train_think=cfg.train_think)
    steps_per_epoch = math.ceil(len(data) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    if cfg.max_steps is not None:
        total = min(total, cfg.max_steps)
    model = policy.model
    optimizer = make_optimizer(model, cfg.lr, (0.9, 0.999))
    run = RunDir(Path(out)) if out is not None else None
    step = 0
    seed_dropout(cfg.seed, "sft")
    if run is not None:
        run.write_config({"sft": to_dict(cfg), "policy": to_dict(policy.config), "prompt": to_dict(policy.prompt),
                          "demonstrations": len(demos), "examples": len(data)})
        ckpt = run.latest_checkpoint()
        if ckpt is not None:
            step = load_checkpoint(ckpt, policy, optimizer)["step"]
    bar = _bar(total, step) if progress and distributed.is_main() else None
    row: dict[str, Any] = {}
    model.train()
    while step < total:
        epoch, k = divmod(step, steps_per_epoch)
        order = list(range(len(data)))
        random.Random(f"{cfg.seed}/{epoch}").shuffle(order)  # the same order after a resume
        batch = [data[i] for i in order[k * cfg.batch_size:(k + 1) * cfg.batch_size]]
        t0 = time.perf_counter()
        lr = lr_at(step, total, cfg.lr, cfg.warmup_steps, "cosine")
        for group in optimizer.param_groups:
            group["lr"] = lr
        n_tokens = sum(sum(ex.loss_mask) for ex in batch)
        loss_sum = 0.0
        optimizer.zero_grad(set_to_none=True)
        for idx in my_micro_batches(batch, cfg.micro_batch_tokens):  # this process's share (`distributed`)
            logp, _ = token_logprobs(model, [batch[i] for i in idx])
            loss = -logp.sum() / max(1, n_tokens)
            loss.backward()
            loss_sum += float(loss.detach())
        distributed.sum_gradients([p for p in model.parameters() if p.requires_grad])
        (loss_sum,), _ = distributed.sum_values([loss_sum])
        grad_norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], cfg.max_grad_norm)
        optimizer.step()
        trim_memory()
        policy.generator.invalidate_cache()  # the weights changed
        step += 1
        row = {"phase": "sft", "step": step, "epoch": epoch, "loss": loss_sum, "lr": lr, "tokens": n_tokens,
               "grad_norm": float(grad_norm), "seconds": time.perf_counter() - t0}
        if run is not None:
            run.log(row)
            if step % cfg.save_every == 0 or step == total:
                save_checkpoint(run.path / "checkpoints" / f"step-{step}", policy, optimizer, {"step": step})
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss_sum:.3f}")
    if bar is not None:
        bar.close()
    return row


def _bar(total: int, done: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="sft", unit="step")
