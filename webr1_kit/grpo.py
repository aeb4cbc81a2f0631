"""Multi-turn GRPO (M-GRPO), the paper's RL stage, with LoRA.

For each task, G whole trajectories are sampled against the live site; the binary
task reward is turned into a group-relative advantage

    A_i = (r_i - mean(r)) / (std(r) + eps)

that every response token of trajectory i receives, and the loss is

    -Σ_i Σ_turns Σ_tokens w · [ min(ρ·A, clip(ρ, 1-ε, 1+ε)·A) - β·KL ]

with ρ the probability ratio to the rollout policy, KL the k3 estimator
exp(ref - logp) - (ref - logp) - 1 to the policy RL started from, and w each token's
weight: the paper's w = 1/G · 1/|τ_i| · 1/|a_ij| (`loss_norm="paper"`), or by default
one fixed weight for every trained token of every step (`"constant"`, see departure 8).

Departures from the paper (read these before comparing numbers):
1. LoRA (or QLoRA) adapters instead of full fine-tuning, so the defaults are lr 5e-5
   and gradient clipping at 1.0 instead of 1e-6 and 0.01.
2. Token truth under context compression. Compression rewrites the history, so no
   single causal sequence shows every response the past it was sampled from. Each
   turn is therefore scored on exactly its own recorded prompt (trajectory.pack);
   without compression the whole trajectory is one packed sequence, as in the paper.
3. Groups whose rewards are all equal have zero advantage and are left out of the
   update (only the tiny KL term would act on them); their share is logged, and
   `dynamic_sampling` replaces them with fresh tasks (the replaced groups are counted as
   `rerolled_groups` and kept in trajectories/rerolled-step-N.jsonl).
4. Episodes that failed for infrastructure reasons are dropped from their group; a step
   where more than half failed so says (`InfraWarning`) and logs `infra_failures`.
5. An episode that never calls exit gets its evaluator's verdict; the release's
   reward-1 loophole on "N/A" tasks is closed (see tasks/evaluators.py).
6. π_old is the rollout's own log-probability of each sampled token (recorded by the
   generator), so the ratio also absorbs any numerical difference between sampling
   and training forwards; RL forwards run with dropout off, so ρ = 1 at the first
   update, as in the paper's single-update setting, up to that difference. Each step
   logs it (`old_logp_gap_mean`, `old_logp_gap_max`: |log π_θ − log π_old| per token on
   the first pass, before any optimizer step) and warns when the mean passes
   `OLD_LOGP_GAP_WARN`: a generator on another engine (vLLM) that samples from other
   weights or other numerics would otherwise pass silently for off-policy noise.
7. The KL reference is the policy RL starts from, as in the paper: a frozen copy of the
   starting adapter (the BC adapter, or a fresh one, which is the base model) kept as a
   second peft adapter on the same base weights (`LLMPolicy.freeze_reference`) and saved
   as <run>/reference, so a resumed run keeps it.
8. Loss normalisation defaults to one fixed weight per trained token, the same in every
   step: 1 / (tasks_per_step · G · max_new_tokens) (Dr. GRPO's constant). The paper's
   1/|τ|·1/|a_j| gives a long failed multi-turn trajectory's tokens several times less
   weight than a short success's (the length bias Dr. GRPO describes, worse across
   turns). DAPO's per-step token mean ("token") removes that bias but makes every
   step's update the same size, however few informative groups it had; with Adam, a step
   learning from one group then moves the adapter as far as one learning from eight. In
   the learning benchmark (docs/experiments/learning-benchmark.md), "token" drifted (KL to BC up to 0.21, up to
   48% invalid actions late in the run) where "constant", from the same BC adapter and
   seeds, did not (KL at most 0.047, invalid actions at most 14%). "paper" and "token"
   remain as `loss_norm` options.
9. Every log-probability (the generator's record, the training forward and the
   reference forward) is of the tempered distribution the tokens were sampled from,
   log_softmax(logits / T), as in TRL; at T = 1 this is the paper's.
10. The reward is the task's verdict, made stricter for learning (`episode_reward`):
   rollouts read responses strictly (GRPOConfig.strict_format), an episode ended by its
   invalid-action budget earns 0, and so does one with a response cut off at the token
   limit (GRPOConfig.truncation="penalise"; "mask" leaves those tokens out instead).
11. Optional (GRPOConfig.task_sampling="informative"; the paper's uniform drawing is the
   default): each step draws its tasks in proportion to the chance that a group of the
   task gets unequal rewards, estimated from its recent rollouts (`TaskTally`), so fewer
   groups are spent on tasks the policy always or never solves. The step's
   `first_draw_success` is then over tasks chosen for being uncertain, not over all tasks;
   held-out evaluation is the measure of the policy.
12. Optional (GRPOConfig.replay_coef > 0; 0, the paper, is the default): every update
   also lowers λ times the mean negative log-likelihood of a few expert demonstration
   turns (`update(replay=...)`), as InstructGPT's PPO-ptx does with pre-training data.
   The RL gradient moves one shared adapter, so it moves the policy on every task, and
   the tasks whose groups all got the same reward have no advantage to hold their
   behaviour in place; the demonstrations do. A step with no informative group still
   makes no update at all, so the term never trains on its own.
13. Optional, all off by default (the paper): recipes that draw signal from the scripted
   expert where the task reward is sparse (`guidance.py`, which numbers its own choices):
   expert members of groups (expert_rate, expert_if_unsolved), hinted episodes
   (hint_rate), expert prefix starts (prefix_max, prefix_from), step rewards against the
   expert's action at the policy's state (step_reward_coef), and credit from the first
   departure from it (credit_from_departure).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from . import distributed
from .config import EnvConfig, GRPOConfig, to_dict

OLD_LOGP_GAP_WARN = 0.05
"""Mean |log π_θ − log π_old| per token, on a step's first pass, above which `update` warns.
Measured with the embedded model at temperature 0.7: the kit's generator against the trainer
under CPU bfloat16 autocast, mean 0.015 (max 0.17) over 195 tokens of four ~800-token
prompts; a vLLM server in float32, mean 6e-6 (max 2e-5); in bfloat16, about 0.04. In
float32 the kit's generator agrees within 1e-4 (tests/test_training.py)."""
from .errors import InfraWarning
from .guidance import (ExpertMembers, GuidedPolicy, add_expert_members, check_expert_config, guided, guided_stats,
                       expert_lengths, make_actor, turn_advantages)
from .rundir import RunDir, load_checkpoint, save_checkpoint
from .seeds import derive_seed
from .tasks.task import Task
from .cpu import trim_memory
from .training import apply_think_mask, lr_at, make_optimizer, my_micro_batches, seed_dropout, token_logprobs
from .trajectory import Packed, Trajectory, TrajectoryGroup, pack

if TYPE_CHECKING:
    from .rollout import TrainablePolicy


def group_advantages(rewards: Sequence[float], eps: float = 1e-4) -> list[float]:
    """(r - mean) / (std + eps) within a group; all zeros when the rewards are equal."""
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
    if std == 0:
        return [0.0] * n
    return [(r - mean) / (std + eps) for r in rewards]


@dataclass
class Batch:
    """Training sequences of one step, with each token's advantage and loss weight."""

    seqs: list[Packed] = field(default_factory=list)
    advantages: list[list[float]] = field(default_factory=list)
    """Per sequence, one value per trained token."""
    weights: list[list[float]] = field(default_factory=list)
    """Per sequence, one loss weight per trained token (the normalisation)."""
    groups: int = 0
    equal_groups: int = 0


def truncated(traj: Trajectory) -> bool:
    """Whether any response of the episode was cut off at the token limit."""
    return any(t.finish == "length" for t in traj.turns)


def episode_reward(traj: Trajectory, cfg: GRPOConfig) -> float:
    """The reward M-GRPO learns from: the task's verdict, except that an episode ended by
    its invalid-action budget earns 0 (an invalid turn costs the episode, even where the
    page happened to be in a passing state), and so does one with a cut-off response when
    `cfg.truncation` is "penalise". Evaluation reports the verdict itself."""
    if traj.termination == "invalid_budget" or (cfg.truncation == "penalise" and truncated(traj)):
        return 0.0
    return traj.reward


def _untrain_turns(seq: Packed, turns: set[int]) -> Packed:
    """`seq` with the tokens of `turns` out of the loss."""
    keep = [0 if t in turns else m for t, m in zip(seq.turn, seq.loss_mask)]
    return Packed(seq.input_ids, keep, seq.old_logprobs, [t if m else -1 for t, m in zip(seq.turn, keep)])


def build_batch(groups: Sequence[TrajectoryGroup], tokenizer: Any, cfg: GRPOConfig,
                max_new_tokens: int = 256) -> Batch:
    """Advantages, packed sequences and per-token loss weights for the informative groups.

    max_new_tokens: the response limit the rollouts ran with (the "constant" normaliser)."""
    batch = Batch()
    informative = []
    for g in groups:
        valid = g.valid
        if not valid:
            continue
        batch.groups += 1
        adv = group_advantages([episode_reward(t, cfg) for t in valid])
        per_turn = turn_advantages(valid, adv, cfg)  # the guided recipes' per-turn changes, if any
        if all(a == 0 for a in adv) and not any(v for d in per_turn for v in d.values()):
            batch.equal_groups += 1
            continue
        informative.append((valid, adv, per_turn))
    # (sequences, episode advantage, per-turn advantages where they differ, group size, group)
    per_traj: list[tuple[list[Packed], float, dict[int, float], int, int]] = []
    for gi, (valid, adv, per_turn) in enumerate(informative):
        for traj, a, turns in zip(valid, adv, per_turn):
            seqs = [apply_think_mask(tokenizer, s, cfg.train_think) for s in pack(traj)]
            if cfg.truncation == "mask":
                cut = {j for j, t in enumerate(traj.turns) if t.finish == "length"}
                seqs = [_untrain_turns(s, cut) for s in seqs] if cut else seqs
            per_traj.append((seqs, a, turns, len(valid), gi))
    n_tokens = sum(sum(s.loss_mask) for seqs, *_ in per_traj for s in seqs)
    constant = cfg.tasks_per_step * cfg.group_size * max_new_tokens
    for seqs, a, turns, size, _ in per_traj:
        turn_tokens: dict[int, int] = {}
        for s in seqs:
            for t, m in zip(s.turn, s.loss_mask):
                if m:
                    turn_tokens[t] = turn_tokens.get(t, 0) + 1
        for s in seqs:
            trained_turns = [t for t, m in zip(s.turn, s.loss_mask) if m]
            if not trained_turns:
                continue
            if cfg.loss_norm == "token":
                w = [1.0 / n_tokens] * len(trained_turns)
            elif cfg.loss_norm == "constant":
                w = [1.0 / constant] * len(trained_turns)
            else:  # the paper: 1/groups · 1/G · 1/|τ| · 1/|a_j|
                w = [1.0 / (len(informative) * size * len(turn_tokens) * turn_tokens[t]) for t in trained_turns]
            batch.seqs.append(s)
            batch.advantages.append([turns.get(t, a) for t in trained_turns])
            batch.weights.append(w)
    return batch


def grpo_loss(logp: Any, old_logp: Any, ref_logp: Any | None, adv: Any, weight: Any, cfg: GRPOConfig) -> tuple[Any, dict]:
    """The clipped-ratio objective minus β·KL, weighted per token; returns (loss, stats)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps)
    objective = torch.minimum(ratio * adv, clipped * adv)
    if ref_logp is not None and cfg.beta:
        diff = ref_logp - logp
        kl = torch.exp(diff) - diff - 1
        objective = objective - cfg.beta * kl
    else:
        kl = torch.zeros_like(logp)
    loss = -(weight * objective).sum()
    with torch.no_grad():
        stats = {
            "kl_sum": float(kl.sum()),
            "clipped": float(((ratio - clipped).abs() > 1e-8).float().sum()),
            "ratio_sum": float(ratio.sum()),
        }
    return loss, stats


def update(policy: TrainablePolicy, batch: Batch, cfg: GRPOConfig, optimizer: Any, temperature: float = 1.0,
           replay: Sequence[Packed] = ()) -> dict[str, float]:
    """`cfg.updates_per_batch` optimizer steps on one batch of rollouts sampled at `temperature`.

    replay: demonstration turns (`sft.examples`) whose mean negative log-likelihood, at
    T = 1 as in behaviour cloning, joins the loss with weight `cfg.replay_coef` (departure 12)."""
    import torch

    model = policy.model
    n_tok = sum(len(a) for a in batch.advantages)
    stats = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "ratio": 0.0, "grad_norm": 0.0,
             "tokens_trained": n_tok}
    replay = list(replay) if cfg.replay_coef else []
    n_replay = sum(sum(ex.loss_mask) for ex in replay)
    if not batch.seqs:
        return stats
    model.eval()  # dropout off: ρ = 1 on the first update (see departure 6)
    params = [p for p in model.parameters() if p.requires_grad]
    gap_sum = gap_n = gap_max = 0.0
    for n_pass in range(cfg.updates_per_batch):
        optimizer.zero_grad(set_to_none=True)
        loss_sum = kl_sum = ent_sum = clip_sum = ratio_sum = 0.0
        for idx in my_micro_batches(batch.seqs, cfg.micro_batch_tokens):  # this process's share
            seqs = [batch.seqs[i] for i in idx]
            ref = None
            if cfg.beta:
                with torch.no_grad(), policy.reference() as base:
                    ref, _ = token_logprobs(base, seqs, temperature=temperature)
            logp, ent = token_logprobs(model, seqs, entropy=True, temperature=temperature)
            device = logp.device
            old = torch.tensor([lp for s in seqs for lp, m in zip(s.old_logprobs, s.loss_mask) if m], device=device)
            adv = torch.tensor([a for i in idx for a in batch.advantages[i]], device=device)
            w = torch.tensor([x for i in idx for x in batch.weights[i]], device=device)
            if n_pass == 0:  # the weights that sampled: the gap is the generator's numerics (departure 6)
                gap = (logp.detach() - old).abs()
                gap_sum, gap_n, gap_max = gap_sum + float(gap.sum()), gap_n + gap.numel(), max(gap_max, float(gap.max()))
            loss, st = grpo_loss(logp, old, ref, adv, w, cfg)
            loss.backward()
            loss_sum += float(loss.detach())
            kl_sum += st["kl_sum"]
            clip_sum += st["clipped"]
            ratio_sum += st["ratio_sum"]
            ent_sum += float(ent.sum())
        replay_nll = 0.0
        for idx in my_micro_batches(replay, cfg.micro_batch_tokens):
            logp, _ = token_logprobs(model, [replay[i] for i in idx])
            nll = -logp.sum() / n_replay
            (cfg.replay_coef * nll).backward()
            replay_nll += float(nll.detach())
        distributed.sum_gradients(params)  # the whole batch's gradient on every process
        (loss_sum, kl_sum, ent_sum, clip_sum, ratio_sum, replay_nll), _ = distributed.sum_values(
            [loss_sum, kl_sum, ent_sum, clip_sum, ratio_sum, replay_nll])
        if replay:
            stats["replay_nll"] = replay_nll
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        optimizer.step()
        trim_memory()
        policy.generator.invalidate_cache()  # the weights changed
        stats.update(loss=loss_sum, kl=kl_sum / n_tok, entropy=ent_sum / n_tok, clip_frac=clip_sum / n_tok,
                     ratio=ratio_sum / n_tok, grad_norm=float(grad_norm))
    (gap_sum, gap_n), (gap_max,) = distributed.sum_values([gap_sum, gap_n], [gap_max])
    stats.update(old_logp_gap_mean=gap_sum / max(gap_n, 1), old_logp_gap_max=gap_max)
    if stats["old_logp_gap_mean"] > OLD_LOGP_GAP_WARN:
        warnings.warn(f"the generator's log-probabilities differ from the trainer's by {stats['old_logp_gap_mean']:.3g} "
                      f"per token on average (max {stats['old_logp_gap_max']:.3g}), above {OLD_LOGP_GAP_WARN}: the "
                      "rollouts were sampled from other weights or other numerics than the trainer's (a vLLM server "
                      "in bfloat16, or one still serving an old adapter?)", stacklevel=2)
    return stats


async def reroll_equal_groups(groups: list[TrajectoryGroup], rerun: Any, rounds: int,
                              reward: Any = None) -> tuple[list[TrajectoryGroup], list[TrajectoryGroup]]:
    """Dynamic sampling: up to `rounds` times, replace the groups whose valid episodes all
    got the same reward (zero advantage, nothing to learn) by `await rerun(n, round)` fresh
    groups. `reward(trajectory)` is the reward learned from (default: the verdict's).
    Returns (the groups to train on, the groups replaced)."""
    reward = reward or (lambda t: t.reward)
    replaced: list[TrajectoryGroup] = []
    for extra in range(rounds):
        flat = [g for g in groups if len({reward(t) for t in g.valid}) <= 1]
        if not flat:
            break
        replaced += flat
        groups = [g for g in groups if not any(g is f for f in flat)] + list(await rerun(len(flat), extra))
    return groups, replaced


@dataclass
class GRPORun:
    """A finished (or interrupted) run: where it lives and what it logged."""

    path: Path
    metrics: list[dict[str, Any]]
    groups: list[TrajectoryGroup] = field(default_factory=list)
    """The last step's rollouts."""

    @property
    def trajectories(self) -> list[Any]:
        return [t for g in self.groups for t in g.trajectories]


def _mark_hinted(groups: Sequence[TrajectoryGroup], actor: Any) -> None:
    """Mark the episodes GuidedPolicy played with hints (`meta["hinted"]`)."""
    if isinstance(actor, GuidedPolicy) and actor.hint_rate > 0:
        for t in (t for g in groups for t in g.trajectories):
            t.meta["hinted"] = actor.hinted(t.meta.get("sample_seed", t.seed))


def _rollout_stats(groups: Sequence[TrajectoryGroup], cfg: GRPOConfig) -> dict[str, Any]:
    """The policy's unaided episodes in `groups` (expert members and hinted episodes are
    logged apart)."""
    own = [t for g in groups for t in g.trajectories if not guided(t)]
    trajs = [t for t in own if t.status != "infra_failure"]
    turns = [turn for t in trajs for turn in t.turns]
    return {
        "success_rate": sum(t.reward for t in trajs) / len(trajs) if trajs else None,
        "reward_mean": sum(episode_reward(t, cfg) for t in trajs) / len(trajs) if trajs else None,
        "truncated_responses": sum(1 for t in turns if t.finish == "length"),
        "episodes": len(own),
        "infra_failures": len(own) - len(trajs),
        "turns": len(turns) / len(trajs) if trajs else 0.0,
        "response_tokens": sum(len(t.completion_ids or []) for t in turns) / len(turns) if turns else 0.0,
        "invalid_action_rate": sum(1 for t in turns if t.error_kind) / len(turns) if turns else 0.0,
    }


def infra_warning(step: int, groups: Sequence[TrajectoryGroup], threshold: float = 0.5) -> str | None:
    """A message when more than `threshold` of a step's episodes failed for infrastructure
    reasons, else None. Those episodes are left out of the update (departure 4), so such a
    step trains on little or nothing while it still advances the schedule; the usual cause
    on a small machine is CPU contention making page loads time out."""
    trajs = [t for g in groups for t in g.trajectories]
    failed = [t for t in trajs if t.status == "infra_failure"]
    if not trajs or len(failed) <= threshold * len(trajs):
        return None
    return (f"M-GRPO step {step}: {len(failed)} of {len(trajs)} episodes failed for infrastructure reasons "
            f"(first: {failed[0].infra_error or 'no message'}); they are left out of the update, so the step "
            f"learned from {len(trajs) - len(failed)} episodes. Page loads time out on an overloaded machine: "
            "stop other jobs or lower grpo.concurrency.")


def draw_tasks(rng: random.Random, tasks: list[Task], k: int, weights: Sequence[float] | None = None) -> list[Task]:
    """k tasks for one step's groups: without repeats while there are enough tasks, then
    whole fresh passes. A repeated task still gets its own page seed per group (see
    `rollout.episode_seeds`), which on MiniWoB++ is a different problem; this is what lets
    a few MiniWoB++ tasks fill more groups per step. Arena tasks do not depend on the page
    seed, so there a repeat is a second group of the same problem.

    weights (one per task, all > 0): each pass draws in proportion to them, without
    replacement (Efraimidis and Spirakis: the n largest of u ** (1 / w)); None draws
    uniformly."""
    if weights is not None and len(weights) != len(tasks):
        raise ValueError(f"{len(weights)} weights for {len(tasks)} tasks")
    out: list[Task] = []
    while len(out) < k and tasks:
        n = min(k - len(out), len(tasks))
        if weights is None:
            out += rng.sample(tasks, n)
        else:
            keys = [rng.random() ** (1.0 / max(w, 1e-12)) for w in weights]
            out += [tasks[i] for i in sorted(range(len(tasks)), key=lambda i: -keys[i])[:n]]
    return out


@dataclass
class TaskTally:
    """Each training task's recent rollout outcomes: the evidence "informative" task
    drawing (GRPOConfig.task_sampling) weighs tasks by.

    A task's success rate p has the posterior Beta(1 + s, 1 + f), with s and f its
    successes and failures, each step's older evidence counting `memory` times less. Its
    weight is the chance that a group of G of its episodes is informative (rewards not all
    equal), averaged over that posterior:

        w = 1 - E[p^G] - E[(1-p)^G],   E[p^G] = Π_{i<G} (1+s+i) / (2+s+f+i)

    An unseen task has w = 1 - 2/(G+1) (0.6 at G = 4); a task solved or failed every time
    falls towards 0 but never reaches it, so it is still drawn now and then and a change in
    the policy is noticed; a task solved about half the time rises towards 1 - 2^(1-G).
    """

    memory: float = 0.9
    successes: dict[str, float] = field(default_factory=dict)
    failures: dict[str, float] = field(default_factory=dict)

    def add(self, groups: Sequence[TrajectoryGroup], reward: Any) -> None:
        """Age the evidence one step, then count `groups` (reward(trajectory) in [0, 1])."""
        for d in (self.successes, self.failures):
            for k in d:
                d[k] *= self.memory
        for g in groups:
            for t in g.valid:
                r = float(reward(t))
                self.successes[g.task_id] = self.successes.get(g.task_id, 0.0) + r
                self.failures[g.task_id] = self.failures.get(g.task_id, 0.0) + 1.0 - r

    def success(self, task_id: str) -> float:
        """Posterior mean success rate."""
        s, f = self.successes.get(task_id, 0.0), self.failures.get(task_id, 0.0)
        return (1 + s) / (2 + s + f)

    def weight(self, task_id: str, group_size: int) -> float:
        """The chance that a group of `group_size` episodes has unequal rewards."""
        s, f = self.successes.get(task_id, 0.0), self.failures.get(task_id, 0.0)
        all_pass = all_fail = 1.0
        for i in range(group_size):
            all_pass *= (1 + s + i) / (2 + s + f + i)
            all_fail *= (1 + f + i) / (2 + s + f + i)
        return max(1.0 - all_pass - all_fail, 1e-9)

    def draw_weights(self, tasks: Sequence[Task], group_size: int, floor: float = 0.0) -> list[float]:
        """Each task's `weight`, raised to `floor` where it is lower (GRPOConfig.task_floor)."""
        return [max(self.weight(t.task_id, group_size), floor) for t in tasks]

    def to_dict(self) -> dict[str, Any]:
        return {"memory": self.memory, "successes": self.successes, "failures": self.failures}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TaskTally":
        return cls(float(d["memory"]), dict(d["successes"]), dict(d["failures"]))


async def train_grpo(policy: TrainablePolicy, train_tasks: list[Task], cfg: GRPOConfig | None = None,
                     eval_tasks: list[Task] | None = None, out: str | Path | None = None,
                     env_config: EnvConfig | None = None, resume: bool = True, progress: bool = True,
                     demos: Sequence[Trajectory] | None = None, browser: Any = None) -> GRPORun:
    """Alternate grouped rollouts and M-GRPO updates for `cfg.steps` steps.

    demos: expert demonstrations for the behaviour-cloning term (`cfg.replay_coef`).
    browser: a started `Browser` to play on, which the caller closes (e.g. the pipeline's,
    shared by its stages); None: the run starts one of its own and closes it at the end.

    Every step appends a metrics row to <out>/metrics.jsonl and its rollouts to
    <out>/trajectories/step-N.jsonl; held-out evaluations run before training and every
    `eval_every` steps; checkpoints every `save_every` steps resume exactly (step,
    optimizer, RNG and the task/seed schedule, which is a function of the step).
    """
    from .browser import Browser
    from .rollout import evaluate as evaluate_rollouts
    from .rollout import rollout

    cfg = cfg or GRPOConfig()
    if not train_tasks:
        raise ValueError("no training tasks")
    if policy.config.lora is None and not policy.has_adapter:
        raise ValueError("the policy has no LoRA adapter to train; load it with lora=LoRA()")
    replay_pool = _replay_pool(policy, demos, cfg)
    experts_on = check_expert_config(cfg, train_tasks)
    actor = make_actor(policy, cfg)  # who plays the rollouts: the policy, or the policy guided by the expert
    by_id = {t.task_id: t for t in train_tasks}
    temperature = policy.sampling.temperature
    if temperature <= 0:
        raise ValueError(f"M-GRPO samples its groups: the sampling temperature must be above 0, got {temperature} "
                         "(the paper samples at 1.0)")
    env_config = env_config or EnvConfig()
    train_env = replace(env_config, action_format="strict") if cfg.strict_format else env_config
    run = RunDir(Path(out) if out is not None else Path("runs") / time.strftime("rl-%Y%m%d-%H%M%S"))
    run.write_config({"grpo": to_dict(cfg), "policy": to_dict(policy.config), "prompt": to_dict(policy.prompt),
                      "sampling": to_dict(policy.sampling), "env": to_dict(env_config),
                      "train_tasks": len(train_tasks), "eval_tasks": len(eval_tasks or [])})
    ckpt = run.latest_checkpoint() if resume else None
    # The KL reference is the policy as the run first started (departure 7), kept on disk.
    reference = run.path / "reference"
    have_reference = (reference / "adapter_model.safetensors").is_file()
    distributed.barrier()  # every process has looked before the main one writes it
    if not have_reference:
        if ckpt is not None:
            raise ValueError(f"{run.path} has checkpoints but no reference adapter ({reference}); it was written "
                             "by an older version of the kit: start a new run directory")
        if distributed.is_main():
            policy.save_adapter(reference)
        distributed.barrier()
    policy.freeze_reference(reference)
    optimizer = make_optimizer(policy.model, cfg.lr, tuple(cfg.betas))
    start = 0
    tally = TaskTally(cfg.task_memory)
    seed_dropout(cfg.seed, "grpo")
    if ckpt is not None:
        state = load_checkpoint(ckpt, policy, optimizer)
        start = state["step"]
        if "task_tally" in state:
            tally = TaskTally.from_dict(state["task_tally"])
    held_out = list(eval_tasks or [])
    if cfg.eval_tasks is not None and len(held_out) > cfg.eval_tasks:
        held_out = random.Random(f"{cfg.seed}/eval").sample(held_out, cfg.eval_tasks)
    bar = _bar(cfg.steps, start) if progress and distributed.is_main() else None
    groups: list[TrajectoryGroup] = []
    async with (Browser(env_config) if browser is None else nullcontext(browser)) as browser:

        async def evaluate(step: int) -> None:
            t0 = time.perf_counter()
            res = await evaluate_rollouts(policy, held_out, max_turns=cfg.eval_max_turns, concurrency=cfg.concurrency,
                                          seed=cfg.seed, browser=browser, config=env_config)
            run.write_trajectories(f"eval-step-{step}", res.trajectories)
            m = res.metrics
            run.log({"phase": "eval", "step": step, "success_rate": m["success_rate"], "success_ci95": m["success_ci95"],
                     "evaluated": m["evaluated"], "infra_failures": m["infra_failures"], "turns": m["mean_turns"],
                     "invalid_action_rate": m["invalid_action_rate"], "per_site": m["per_site"],
                     "seconds": time.perf_counter() - t0})

        if held_out and cfg.eval_every and start == 0:
            await evaluate(0)

        async def play(tasks: list[Task], seed: int) -> list[TrajectoryGroup]:
            """The groups of `tasks`, played by the actor (after the expert, for prefixes
            from the goal, has played each group's page once to measure its length)."""
            run_args = dict(concurrency=cfg.concurrency, browser=browser, config=train_env, max_invalid=cfg.max_invalid)
            if isinstance(actor, GuidedPolicy) and actor.prefix_from == "goal" and actor.prefix_max > 0:
                actor.lengths = await expert_lengths(tasks, cfg.group_size, seed, max_turns=cfg.max_turns, **run_args)
                actor.counts["prefix_unmeasured"] += len(tasks) - len(actor.lengths)
            return await rollout(actor, tasks, group_size=cfg.group_size, max_turns=cfg.max_turns, seed=seed, **run_args)

        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            rng = random.Random(f"{cfg.seed}/tasks/{step}")
            weights = (tally.draw_weights(train_tasks, cfg.group_size, cfg.task_floor)
                       if cfg.task_sampling == "informative" else None)
            tasks = draw_tasks(rng, train_tasks, cfg.tasks_per_step, weights)
            if isinstance(actor, GuidedPolicy):
                actor.round, actor.counts = step, dict.fromkeys(actor.counts, 0)
            groups = await play(tasks, derive_seed(cfg.seed, step, bits=32, digest_size=4))
            _mark_hinted(groups, actor)
            # What the policy does before any re-roll: dynamic sampling keeps mixed groups,
            # whose success sits near 0.5 by construction, so only this draw shows learning.
            first = _rollout_stats(groups, cfg)
            if (alarm := infra_warning(step + 1, groups)) is not None:
                warnings.warn(alarm, InfraWarning, stacklevel=2)

            async def rerun(n: int, extra: int) -> list[TrajectoryGroup]:  # called within this step only
                return await play(draw_tasks(rng, train_tasks, n, weights),
                                  derive_seed(cfg.seed, step, extra, bits=32, digest_size=4))

            groups, rerolled = await reroll_equal_groups(groups, rerun, 2 if cfg.dynamic_sampling else 0,
                                                         reward=lambda t: episode_reward(t, cfg))
            _mark_hinted(groups, actor)
            tally.add([*groups, *rerolled], lambda t: episode_reward(t, cfg))  # the policy's own episodes
            experts = ExpertMembers()
            if experts_on:  # after the tally: it measures the policy, not the expert
                experts = await add_expert_members(
                    groups, by_id, policy, cfg, random.Random(f"{cfg.seed}/experts/{step}"),
                    sample_seed=derive_seed(cfg.seed, step, "expert", bits=31), browser=browser, config=train_env,
                    concurrency=cfg.concurrency, max_turns=cfg.max_turns, max_invalid=cfg.max_invalid)
            rollout_s = time.perf_counter() - t0
            for t in (t for g in [*groups, *rerolled] for t in g.trajectories):
                t.meta["rl_reward"] = episode_reward(t, cfg)  # what the update learns from (replays show it)
            run.write_trajectories(f"step-{step + 1}", [t for g in groups for t in g.trajectories])
            if rerolled:  # kept for inspection; not trained on
                run.write_trajectories(f"rerolled-step-{step + 1}", [t for g in rerolled for t in g.trajectories])
            if experts.replaced:  # the policy episodes the expert members took the place of
                run.write_trajectories(f"expert-replaced-step-{step + 1}", experts.replaced)
            if experts.failed:  # the expert episodes skipped because they failed, for inspection
                run.write_trajectories(f"expert-failed-step-{step + 1}", experts.failed)
            lr = lr_at(step, cfg.steps, cfg.lr, cfg.warmup_steps, "constant")
            for g in optimizer.param_groups:
                g["lr"] = lr
            t1 = time.perf_counter()
            batch = build_batch(groups, policy.tokenizer, cfg, policy.sampling.max_new_tokens)
            # in a worker thread, so the event loop stays free
            replay = (random.Random(f"{cfg.seed}/replay/{step}").sample(replay_pool, min(cfg.replay_turns, len(replay_pool)))
                      if replay_pool else [])
            stats = await asyncio.to_thread(update, policy, batch, cfg, optimizer, temperature, replay)
            row = {"phase": "train", "step": step + 1, "first_draw_success": first["success_rate"],
                   "first_draw_reward": first["reward_mean"], "first_draw_episodes": first["episodes"],
                   "drawn_tasks": [t.task_id for t in tasks],
                   "draw_weights": (None if weights is None else
                                    {t.task_id: round(w, 4) for t, w in zip(train_tasks, weights)}),
                   **_rollout_stats(groups, cfg),
                   "equal_reward_frac": batch.equal_groups / batch.groups if batch.groups else None,
                   "rerolled_groups": len(rerolled),
                   **({"expert_members": experts.inserted, "expert_skipped": experts.skipped} if experts_on else {}),
                   **({**guided_stats(groups), **actor.counts} if isinstance(actor, GuidedPolicy) else {}),
                   **stats, "lr": lr, "rollout_s": rollout_s, "update_s": time.perf_counter() - t1}
            run.log(row)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(first_draw=f"{row['first_draw_success'] or 0:.2f}", kl=f"{row['kl']:.4f}")
            if (step + 1) % cfg.save_every == 0 or step + 1 == cfg.steps:
                save_checkpoint(run.path / "checkpoints" / f"step-{step + 1}", policy, optimizer,
                                {"step": step + 1, "task_tally": tally.to_dict()})
            if held_out and cfg.eval_every and (step + 1) % cfg.eval_every == 0:
                await evaluate(step + 1)
    if bar is not None:
        bar.close()
    return GRPORun(run.path, run.metrics(), groups)


def _replay_pool(policy: TrainablePolicy, demos: Sequence[Trajectory] | None, cfg: GRPOConfig) -> list[Packed]:
    """The demonstration turns the behaviour-cloning term draws from (none when it is off)."""
    from .sft import examples

    if not cfg.replay_coef:
        return []
    if cfg.replay_coef < 0 or cfg.replay_turns < 1:
        raise ValueError(f"grpo.replay_coef must be >= 0 and grpo.replay_turns >= 1, got {cfg.replay_coef} and "
                         f"{cfg.replay_turns}")
    good = [t for t in demos or [] if t.success]
    if not good:
        raise ValueError(f"grpo.replay_coef is {cfg.replay_coef} but no successful demonstrations were given: pass "
                         "train_grpo(demos=...) or `webr1 rl --demos FILE`, or set replay_coef to 0")
    return examples(policy, good, train_think=cfg.train_think)


def _bar(total: int, done: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="m-grpo", unit="step")
