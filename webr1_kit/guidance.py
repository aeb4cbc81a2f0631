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
`GuidedPolicy`. The policy still writes the response; the hint only makes success likelier.
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
   for infrastructure reasons, is counted (`expert_skipped`), kept in
   trajectories/expert-failed-step-N.jsonl, and the group keeps its own episode: the
   expert's failure is never learned as reward 0.
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
   turn is played without one; `hinted_turns` and `expert_misses` count both.
8. Whether an episode is hinted is drawn from its sampling seed, so a group's members
   differ and a resumed run draws the same.

For prefix starts, step rewards and credit (`GuidedPolicy`, `turn_advantages`):
9. Prefix starts (SOLAR-RL's semi-online rollouts, as a reverse curriculum): the expert
   plays the first k turns and the policy the rest. k is drawn per group, not per
   episode, so that the G members start from the same state and their comparison is fair;
   it changes from step to step. The prefix turns are history the policy reads, never
   trained (`Turn.trained` False), and the episode's reward is the task's verdict as usual.
   Counted from the start (k in 0..prefix_max) or from the goal (`prefix_from` "goal": k =
   L - r, r in 1..prefix_max, L the expert's episode length on the page, measured by
   letting the expert play the page once first, `expert_lengths`). The reverse curriculum
   of SOLAR-RL and its kin moves the start back as the policy improves; here r is drawn
   afresh each step instead, so every distance up to prefix_max is practised throughout.
10. Step rewards (WorkForceAgent-R1's rule rewards, simplified): the expert is asked at the
   state the policy reached, with the policy's own turns as history, and a turn scores the
   share of the checks it passes (valid action, type, element, typed text). The step
   advantage is added to the episode's with weight λ; WorkForceAgent-R1 rewards single
   steps against labelled data instead of an expert at the live state.
11. Credit from the first departure: a failed episode's negative advantage is taken off the
   turns before the first one where the policy's action differed from the expert's; a
   failed episode that matched the expert throughout is blamed nowhere.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
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
    if cfg.prefix_max < 0 or cfg.step_reward_coef < 0:
        raise ValueError(f"grpo.prefix_max and grpo.step_reward_coef must be >= 0, got {cfg.prefix_max} and "
                         f"{cfg.step_reward_coef}")
    if cfg.prefix_from == "goal" and cfg.prefix_max < 1:
        raise ValueError("grpo.prefix_from='goal' lets the policy play the last 1..prefix_max turns, so it needs "
                         f"grpo.prefix_max >= 1, got {cfg.prefix_max}")
    guides = [n for n, on in (("hint_rate", cfg.hint_rate > 0), ("prefix_max", cfg.prefix_max > 0),
                              ("step_reward_coef", cfg.step_reward_coef > 0),
                              ("credit_from_departure", cfg.credit_from_departure)) if on]
    if guides:
        Expert.require(list(tasks), " / ".join(f"grpo.{n}" for n in guides))
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
        text = await self.expert.act(task, intent, observation, history, seed=seed)
        return await spoken(self.policy, text, intent, history, observation, trained=True)


async def spoken(policy: "TrainablePolicy", text: str, intent: str, history: list, observation: Any,
                 trained: bool) -> Any:
    """The expert's response `text` as the policy's token record (departure 1): the
    policy's prompt for this state and the response's tokens, scored by the policy when
    `trained` (departure 2), else left as context (a prefix turn, departure 9)."""
    from .policy import Response
    from .prompt import build_prompt, strip_think

    if not policy.prompt.think:  # the policy is asked for an answer alone (the ablation)
        text = strip_think(text)
    prompt = build_prompt(policy.tokenizer, intent, history, observation, policy.prompt)
    ids = policy.tokenizer.encode(text, add_special_tokens=False)
    logprobs = await asyncio.to_thread(score, policy, prompt.ids, ids) if trained else [0.0] * len(ids)
    return Response(text, prompt.ids, ids, logprobs, "stop", prompt.truncated, trained=trained)


def score(policy: "TrainablePolicy", prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """log π(completion | prompt) per token at the policy's sampling temperature, without
    gradients: π_old of tokens the policy did not sample from this prompt (departures 2, 6)."""
    import torch

    from .training import token_logprobs

    seq = Packed()
    seq.add(list(prompt_ids), trained=False)
    seq.add(list(completion_ids), trained=True)
    policy.model.eval()  # dropout off, as when the generator samples and when the update scores
    with torch.no_grad():
        logp, _ = token_logprobs(policy.model, [seq], temperature=policy.sampling.temperature)
    return [float(x) for x in logp]


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
_NO_SCRIPT = "unsupported task"


class GuidedPolicy:
    """The model policy, consulting the scripted expert at the states it reaches, for the
    recipes that need the expert's view of a state the policy is in (GRPOConfig):

    - `prefix_max` > 0: the expert plays the first k turns of every episode of a group
      (k drawn per group: 0..prefix_max from the start, or all but the last 1..prefix_max
      of the expert's `lengths` turns from the goal), as context the policy reads but is
      not trained on (`Turn.trained` False), so the policy practises the last steps first
      (departure 9);
    - `hint_rate` > 0: that share of the episodes show the expert's next action as a hint
      in every prompt, and record the prompt without it and the hint (`Turn.expert`), so a
      run shows how often the policy took the hint (`guided_stats`; departures 6-8);
    - `watch`: every turn the policy plays records the expert's action at that state
      (`Turn.expert`), for step rewards and credit from the first departure.

    The expert is asked once per turn at most; where it cannot answer (it raises, or it has
    no script) the turn is the policy's own, without hint or record (departure 7)."""

    name = "guided"

    def __init__(self, policy: "TrainablePolicy", hint_rate: float = 0.0, prefix_max: int = 0, watch: bool = False,
                 expert: Any = None, prefix_from: str = "start") -> None:
        from .experts import Expert

        self.policy, self.hint_rate, self.prefix_max, self.watch = policy, hint_rate, prefix_max, watch
        self.prefix_from = prefix_from
        self.expert = expert or Expert()
        self.round = 0
        """Set by the trainer every step, so that a task's prefix length changes from step to step."""
        self.lengths: dict[tuple[str, str], int] = {}
        """(task id, instruction) -> the expert's episode length on that page, for prefixes
        from the goal; set by the trainer before the rollouts (`expert_lengths`)."""
        self.counts = {"hinted_turns": 0, "prefix_turns": 0, "expert_misses": 0,
                       **({"prefix_unmeasured": 0} if prefix_from == "goal" else {})}

    def hinted(self, seed: int) -> bool:
        """Whether the episode with this sampling seed plays with hints (departure 8)."""
        return self.hint_rate > 0 and derive_seed(seed, "hint", bits=32) / 2**32 < self.hint_rate

    def prefix(self, task: Task, intent: str) -> int:
        """How many turns the expert plays first in this step's group of `task` on the page
        whose instruction is `intent` (the members of a group share both, so they share k).
        From the goal, a page whose length the expert did not give gets none."""
        if self.prefix_max <= 0:
            return 0
        drawn = derive_seed(self.round, task.task_id, intent, "prefix", bits=32)
        if self.prefix_from == "start":
            return drawn % (self.prefix_max + 1)
        length = self.lengths.get((task.task_id, intent))
        return 0 if length is None else max(length - 1 - drawn % self.prefix_max, 0)

    def running(self, episodes: int) -> None:  # batching, as the policy's own
        self.policy.running(episodes)

    async def ask(self, task: Task, intent: str, observation: Any, history: list) -> tuple[str, Any] | None:
        """The expert's response and parsed action at this state, or None where it has none."""
        from .actions import parse_action

        try:
            text = await self.expert.act(task, intent, observation, history)
            m = _ANSWER.search(text)
            if m is None or _NO_SCRIPT in m.group(1):
                raise ValueError("no script for this state")
            return text, parse_action(text)
        except Exception:  # an expert that cannot read this state: the turn goes on without it
            self.counts["expert_misses"] += 1
            return None

    async def act(self, task: Task, intent: str, observation: Any, history: list, seed: int = 0) -> Any:
        from dataclasses import replace as with_

        from .actions import describe

        hinted = self.hinted(seed)
        in_prefix = len(history) < self.prefix(task, intent)
        if not (hinted or in_prefix or self.watch):
            return await self.policy.act(task, intent, observation, history, seed=seed)
        asked = await self.ask(task, intent, observation, history)
        if asked is not None and in_prefix:  # the expert plays; the policy will read it
            self.counts["prefix_turns"] += 1
            return await spoken(self.policy, asked[0], intent, history, observation, trained=False)
        if asked is not None and hinted:
            self.counts["hinted_turns"] += 1
            response = await self._hinted(task, intent, observation, history, seed, asked[1])
        else:
            response = await self.policy.act(task, intent, observation, history, seed=seed)
        if asked is not None and (self.watch or hinted):
            response = with_(response, expert=describe(asked[1]))
        return response

    async def _hinted(self, task: Task, intent: str, observation: Any, history: list, seed: int, action: Any) -> Any:
        """The policy's response to the prompt with the hint, recorded on the prompt without it."""
        from .policy import Response
        from .prompt import build_prompt, encode

        plain = build_prompt(self.policy.tokenizer, intent, history, observation, self.policy.prompt)
        msgs = [dict(m) for m in plain.messages]
        msgs[-1]["content"] += f"\n\nHint: a good next action is {action.to_text()}"
        shown = encode(self.policy.tokenizer, msgs)
        out = await self.policy.sample(shown, task, history, seed)
        logprobs = await asyncio.to_thread(score, self.policy, plain.ids, out.ids)
        return Response(out.text, plain.ids, out.ids, logprobs, out.finish, plain.truncated)


@dataclass
class ExpertMembers:
    """What `add_expert_members` did in one step: the policy episodes the experts replaced,
    and the expert episodes that failed and were skipped (kept so that a run shows why: a
    task the script cannot finish within the turn limit ends "max_turns")."""

    inserted: int = 0
    skipped: int = 0
    replaced: list[Trajectory] = field(default_factory=list)
    failed: list[Trajectory] = field(default_factory=list)


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
    out = ExpertMembers()
    if not chosen:
        return out
    jobs = [Job(tasks[groups[i].task_id], groups[i].trajectories[-1].seed, sample_seed, i) for i in chosen]
    res = await run_jobs(ExpertVoice(policy), jobs, **run)
    for i, traj in zip(chosen, res.trajectories):
        traj.meta["expert"] = True
        if not traj.success:  # departure 3: an expert's failure is not a lesson
            out.skipped += 1
            out.failed.append(traj)
            continue
        out.replaced.append(groups[i].trajectories[-1])
        groups[i].trajectories[-1] = traj
        out.inserted += 1
    return out


def step_score(turn: Any) -> float | None:
    """How far a turn the policy played agrees with the expert's action at the same state,
    in [0, 1] (departure 10): the mean of the checks that apply, each 1 or 0: the response
    held a valid action; its type is the expert's; its element is the expert's (where the
    expert's action has one); its typed text is the expert's (where the expert types).
    A response without a valid action scores 0. None where there is nothing to compare:
    an expert prefix turn, or a state the expert had no answer for."""
    if not turn.trained or turn.expert is None:
        return None
    mine, theirs = turn.action, turn.expert
    if mine is None:
        return 0.0
    checks = [1.0, float(mine["name"].lower() == theirs["name"].lower())]
    if theirs.get("element") is not None:
        checks.append(float(mine.get("element") == theirs["element"]))
    if theirs.get("argument") is not None and theirs["name"] != "exit":
        checks.append(float((mine.get("argument") or "").strip() == theirs["argument"].strip()))
    return sum(checks) / len(checks)


def guided_stats(groups: Sequence[TrajectoryGroup]) -> dict[str, Any]:
    """What the guided episodes of a step did, logged beside the policy's unaided ones:
    how many were hinted or began with an expert prefix, how many of each the task's verdict
    passed (the successes these recipes exist to create; as in `success_rate`, the verdict,
    though an episode ended by its invalid-action budget still earns 0 in training), and
    `hint_followed`, the share of hinted turns whose action was the hinted one (None without
    hinted turns). A policy that cannot take a hint it is shown gains nothing from hints."""
    trajs = [t for g in groups for t in g.trajectories if not is_expert(t)]
    hinted = [t for t in trajs if t.meta.get("hinted")]
    prefixed = [t for t in trajs if any(not turn.trained for turn in t.turns)]
    scores = [step_score(turn) for t in hinted for turn in t.turns]
    scores = [s for s in scores if s is not None]
    return {"hinted_episodes": len(hinted), "hinted_successes": sum(t.success for t in hinted),
            "hint_followed": sum(s == 1.0 for s in scores) / len(scores) if scores else None,
            "prefix_episodes": len(prefixed), "prefix_successes": sum(t.success for t in prefixed)}


def first_departure(traj: Trajectory) -> int | None:
    """The first turn the policy played that did not do what the expert would have done
    there (or that the expert could not judge); None when every turn matched."""
    for j, turn in enumerate(traj.turns):
        if turn.trained and step_score(turn) != 1.0:
            return j
    return None


def turn_advantages(trajs: Sequence[Trajectory], episode_adv: Sequence[float], cfg: GRPOConfig) -> list[dict[int, float]]:
    """Per trajectory, each policy turn's advantage, where the guided recipes make it differ
    from the episode's (a turn not listed keeps the episode's advantage):

    - step rewards (`step_reward_coef` λ > 0): A_ij = A_i + λ · Â_ij, with Â the step
      scores (`step_score`) normalised over every scored turn of the group as the episode
      rewards are, (s - mean) / (std + eps); a group whose episodes all failed can then
      still say which turns were nearer the expert's (departure 10);
    - credit from the first departure (`credit_from_departure`): in an episode with a
      negative advantage, the turns before its first departure from the expert get none of
      it, since they did what the expert would have done (departure 11)."""
    from .grpo import group_advantages

    out: list[dict[int, float]] = [{} for _ in trajs]
    if cfg.step_reward_coef:
        scored = [(i, j, s) for i, t in enumerate(trajs) for j, turn in enumerate(t.turns)
                  if (s := step_score(turn)) is not None]
        for (i, j, _), a in zip(scored, group_advantages([s for *_, s in scored])):
            out[i][j] = episode_adv[i] + cfg.step_reward_coef * a
    if cfg.credit_from_departure:
        for i, t in enumerate(trajs):
            if episode_adv[i] < 0:
                d = first_departure(t)
                for j in range(len(t.turns) if d is None else d):
                    out[i][j] = out[i].get(j, episode_adv[i]) - episode_adv[i]
    return out


def is_expert(traj: Trajectory) -> bool:
    """Whether an episode in a group is an expert member."""
    return bool(traj.meta.get("expert"))


def guided(traj: Trajectory) -> bool:
    """Whether the expert played, hinted or began the episode: not the policy's unaided work."""
    return bool(traj.meta.get("expert") or traj.meta.get("hinted") or any(not t.trained for t in traj.turns))


def make_actor(policy: "TrainablePolicy", cfg: GRPOConfig) -> Any:
    """Who plays M-GRPO's rollouts: the policy, or a GuidedPolicy around it when a recipe
    needs the expert at the policy's states."""
    watch = cfg.step_reward_coef > 0 or cfg.credit_from_departure
    if cfg.hint_rate > 0 or cfg.prefix_max > 0 or watch:
        return GuidedPolicy(policy, hint_rate=cfg.hint_rate, prefix_max=cfg.prefix_max, watch=watch,
                            prefix_from=cfg.prefix_from)
    return policy


async def expert_lengths(tasks: Sequence[Task], group_size: int, seed: int, expert: Any = None,
                         **run: Any) -> dict[tuple[str, str], int]:
    """The scripted expert's episode length on the page of each group that `rollout.rollout`
    (tasks, group_size, seed) will play, keyed by (task id, instruction), for prefixes from
    the goal: the expert plays each page once (`run` goes to `rollout.run_jobs`). A page the
    expert did not finish, for any reason, is left out, so its group plays without a prefix
    rather than from a state the expert never reached."""
    from .experts import Expert
    from .rollout import episode_seeds, run_jobs

    jobs = episode_seeds(list(tasks), group_size, seed, grouped=True)[::group_size]  # one per group: its page
    res = await run_jobs(expert or Expert(), jobs, **run)
    return {(t.task_id, t.intent): len(t.turns) for t in res.trajectories if t.success}
