"""Expert guidance during M-GRPO: learning signal where the policy never succeeds.

A group whose G episodes all fail has zero advantage and teaches nothing, and a policy that
never solves a task gets only such groups. The kit has a scripted expert for every arena
template and most MiniWoB++ tasks (`experts.Expert`) that answers from the state it is
shown, through the agent's own action space. This module lets M-GRPO learn from it.

Expert members of a group (GRPOConfig.expert_rate, expert_if_unsolved): after a step's
rollouts, a chosen group's last episode is replaced by the expert's episode on the same
task and page seed, played by `ExpertVoice`. Its reward joins the group's, so a group of
three failures and one expert success has advantages (-0.58, -0.58, -0.58, +1.73): the
policy's failures are pushed down and the expert's tokens up, in one loss, with the same
normalisation as every other trajectory.

Hinted episodes (GRPOConfig.hint_rate): a share of the episodes, drawn per episode, play
with a hint in every prompt, the action the expert would take at the state the policy
reached ("Hint: a good next action is do(action=\"Click\", element=\"4\")"), played by
`HintedPolicy`. The policy still writes the response; the hint only makes success likelier.
The trained tokens are scored on the prompt without the hint, so what is learned is to act
that way unprompted, and a group's hinted successes are compared with its unhinted failures.

Departures and choices for expert members (compare LUFFY's mixed-policy GRPO and the
experience-replay recipes that put demonstrations into groups):
1. The expert speaks the policy's tokens. Each expert response is the exact prompt the
   policy would have been given at that state (`prompt.build_prompt`, with the expert's
   own earlier turns as history) and the tokenizer's encoding of the response, ending on
   the stop string `</answer>` as the policy's sampled responses do. So the trained
   tokens are what the policy would have to emit, and `trajectory.pack` and the loss treat
   the episode like any other.
2. π_old of an expert token is the rollout policy's probability of it, scored when the
   expert acted (the same weights the update starts from, at the sampling temperature),
   not the expert's own probability (1, a deterministic script). With the expert's, the
   ratio would be π_θ itself, and the tokens the policy finds least likely, the ones it
   most needs to learn, would get the smallest gradient. With the policy's, ρ = 1 at the
   first update, so the clipped objective's gradient is A · ∇log π_θ: a behaviour-cloning
   step weighted by the advantage. The samples are off-policy all the same; no importance
   correction is made for that, as in the paper's own single-update setting.
3. Only expert episodes that succeed are inserted. One that fails on a page, or fails
   for infrastructure reasons, is counted (`expert_skipped`) and the group keeps its own
   episode: the expert's failure is never learned as reward 0.
4. Experts are asked for tasks that have one; a run whose training tasks include one
   without refuses at the start (`experts.Expert.require`) rather than half-running.
5. The replaced policy episodes are kept in trajectories/expert-replaced-step-N.jsonl,
   and the task-drawing tally and first-draw success count the policy's own episodes only.

For hinted episodes (language-guided exploration):
6. π_old of a hinted response's tokens is, as for the expert's, the policy's probability
   of them without the hint. The true behaviour policy saw the hint; with its probabilities
   the ratio π_θ(no hint) / π(hint) would be far below 1 on exactly the tokens the hint made
   likely, and the clipped objective would pass almost no gradient to a hinted success. No
   importance correction is made: the hinted episodes are treated as the policy's own.
7. The hint is asked at every turn of a hinted episode, from the state the policy actually
   reached and with the policy's own turns as history. An expert that cannot answer there
   (it raises, or answers with its "no script" exit) gives no hint for that turn, and the
   turn is played without one; `hinted_turns` and `hint_misses` count both.
8. Whether an episode is hinted is drawn from its sampling seed, so a group's members
   differ and a resumed run draws the same.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from .config import GRPOConfig
from .seeds import derive_seed
from .tasks.task import Task
from .trajectory import Packed, Trajectory, TrajectoryGroup

if TYPE_CHECKING:
    from .rollout import TrainablePolicy


def check_expert_config(cfg: GRPOConfig, tasks: Sequence[Task]) -> bool:
    """Whether expert members are on; raises ValueError on a bad rate, or when expert
    members or hints are on and a task has no expert."""
    from .experts import Expert

    for name in ("expert_rate", "hint_rate"):
        if not 0.0 <= getattr(cfg, name) <= 1.0:
            raise ValueError(f"grpo.{name} must be between 0 and 1, got {getattr(cfg, name)}")
    if cfg.hint_rate > 0:
        Expert.require(list(tasks), "grpo.hint_rate")
    on = cfg.expert_rate > 0 or cfg.expert_if_unsolved
    if on:
        Expert.require(list(tasks), "grpo.expert_rate / grpo.expert_if_unsolved")
    return on


class ExpertVoice:
    """A policy that acts as the scripted expert but answers with the model policy's token
    record (`policy.Response`): the policy's prompt for the state, the response's tokens,
    and their log-probabilities under the policy at its sampling temperature (departures
    1 and 2 above)."""

    name = "expert-voice"

    def __init__(self, policy: "TrainablePolicy", expert: Any = None) -> None:
        from .experts import Expert

        self.policy = policy
        self.expert = expert or Expert()

    async def act(self, task: Task, intent: str, observation: Any, history: list, seed: int = 0) -> Any:
        from .policy import Response
        from .prompt import build_prompt, strip_think

        text = await self.expert.act(task, intent, observation, history, seed=seed)
        if not self.policy.prompt.think:  # the policy is asked for an answer alone (the ablation)
            text = strip_think(text)
        tok = self.policy.tokenizer
        prompt = build_prompt(tok, intent, history, observation, self.policy.prompt)
        ids = tok.encode(text, add_special_tokens=False)
        logprobs = await asyncio.to_thread(score, self.policy, prompt.ids, ids)
        return Response(text, prompt.ids, ids, logprobs, "stop", prompt.truncated)


def score(policy: "TrainablePolicy", prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """log π(completion | prompt) per token at the policy's sampling temperature, without
    gradients: π_old of tokens the policy did not sample from this prompt (departures 2, 6)."""
    import torch

    from .training import token_logprobs

    seq = Packed()
    seq.add(list(prompt_ids), trained=False)
    seq.add(list(completion_ids), trained=True)
    with torch.no_grad():
        logp, _ = token_logprobs(policy.model, [seq], temperature=policy.sampling.temperature)
    return [float(x) for x in logp]


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
_NO_SCRIPT = "unsupported task"


class HintedPolicy:
    """The model policy, with the expert's next action as a hint in the prompts of a
    `rate` share of the episodes (departures 6-8). Its responses carry the token record of
    the prompt without the hint, so training scores them as the policy's own."""

    name = "hinted"

    def __init__(self, policy: "TrainablePolicy", rate: float, expert: Any = None) -> None:
        from .experts import Expert

        self.policy, self.rate = policy, rate
        self.expert = expert or Expert()
        self.hinted_turns = self.hint_misses = 0

    def hinted(self, seed: int) -> bool:
        """Whether the episode with this sampling seed plays with hints (departure 8)."""
        from .seeds import derive_seed

        return self.rate > 0 and derive_seed(seed, "hint", bits=32) / 2**32 < self.rate

    def running(self, episodes: int) -> None:  # batching, as the policy's own
        self.policy.running(episodes)

    async def hint(self, task: Task, intent: str, observation: Any, history: list) -> str | None:
        """The expert's next action at this state as a hint, or None where it has none."""
        try:
            text = await self.expert.act(task, intent, observation, history)
        except Exception:  # an expert that cannot read this state: no hint, and the turn goes on
            return None
        m = _ANSWER.search(text)
        if m is None or _NO_SCRIPT in m.group(1):
            return None
        return f"Hint: a good next action is {m.group(1).strip()}"

    async def act(self, task: Task, intent: str, observation: Any, history: list, seed: int = 0) -> Any:
        from .policy import Response
        from .prompt import build_prompt, encode

        if not self.hinted(seed):
            return await self.policy.act(task, intent, observation, history, seed=seed)
        hint = await self.hint(task, intent, observation, history)
        if hint is None:
            self.hint_misses += 1
            return await self.policy.act(task, intent, observation, history, seed=seed)
        self.hinted_turns += 1
        plain = build_prompt(self.policy.tokenizer, intent, history, observation, self.policy.prompt)
        msgs = [dict(m) for m in plain.messages]
        msgs[-1]["content"] += "\n\n" + hint
        shown = encode(self.policy.tokenizer, msgs)
        turn_seed = derive_seed(getattr(self.policy, "seed", 0), seed, task.task_id, len(history))  # as LLMPolicy.act
        out = await self.policy.generator.generate(shown, seed=turn_seed)
        logprobs = await asyncio.to_thread(score, self.policy, plain.ids, out.ids)
        return Response(out.text, plain.ids, out.ids, logprobs, out.finish, plain.truncated)


@dataclass
class ExpertMembers:
    """What `add_expert_members` did in one step."""

    inserted: int = 0
    skipped: int = 0
    replaced: list[Trajectory] | None = None


def pick_groups(groups: Sequence[TrajectoryGroup], cfg: GRPOConfig, rng: random.Random) -> list[int]:
    """Indices of the groups that get an expert member: each with chance `expert_rate`
    (one draw per group, always made, so the schedule does not depend on the outcomes),
    and, with `expert_if_unsolved`, every group with valid episodes none of which succeeded."""
    chosen = []
    for i, g in enumerate(groups):
        drawn = rng.random() < cfg.expert_rate
        unsolved = cfg.expert_if_unsolved and bool(g.valid) and not any(t.success for t in g.valid)
        if g.trajectories and (drawn or unsolved):
            chosen.append(i)
    return chosen


async def add_expert_members(groups: list[TrajectoryGroup], tasks: dict[str, Task], policy: "TrainablePolicy",
                             cfg: GRPOConfig, rng: random.Random, *, sample_seed: int, **run: Any) -> ExpertMembers:
    """Replace the last episode of each chosen group (`pick_groups`) by the expert's
    episode on the same task and page seed, played by `ExpertVoice`, in place. `run` goes
    to `rollout.run_jobs` (browser, config, concurrency, max_turns, max_invalid)."""
    from .rollout import Job, run_jobs

    chosen = pick_groups(groups, cfg, rng)
    out = ExpertMembers(replaced=[])
    if not chosen:
        return out
    jobs = [Job(tasks[groups[i].task_id], groups[i].trajectories[-1].seed, sample_seed, i) for i in chosen]
    res = await run_jobs(ExpertVoice(policy), jobs, **run)
    for i, traj in zip(chosen, res.trajectories):
        if not traj.success:  # departure 3: an expert's failure is not a lesson
            out.skipped += 1
            continue
        traj.meta["expert"] = True
        out.replaced.append(groups[i].trajectories[-1])
        groups[i].trajectories[-1] = traj
        out.inserted += 1
    return out


def is_expert(traj: Trajectory) -> bool:
    """Whether an episode in a group is an expert member."""
    return bool(traj.meta.get("expert"))


def guided(traj: Trajectory) -> bool:
    """Whether the expert played the episode or hinted it: not the policy's unaided work."""
    return bool(traj.meta.get("expert") or traj.meta.get("hinted"))
