"""Expert members of M-GRPO groups (guidance.py): the expert speaks the policy's tokens, its
success becomes the group's advantage, and nothing changes while the switches are off."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
import torch

from webr1_kit.config import GRPOConfig
from webr1_kit.grpo import build_batch
from webr1_kit.guidance import (ExpertVoice, HintedPolicy, add_expert_members, check_expert_config, is_expert,
                                pick_groups, score)
from webr1_kit.observation import Observation
from webr1_kit.prompt import build_prompt
from webr1_kit.rollout import Job, rollout, run_jobs
from webr1_kit.tasks import Task, load_tasks
from webr1_kit.training import token_logprobs
from webr1_kit.trajectory import TrajectoryGroup, pack

from test_training import make_policy, rl_traj, save_tiny_model, tokenizer  # noqa: F401  (fixture)


def group(name, *rewards):
    g = TrajectoryGroup(name, [rl_traj([1], [2], r) for r in rewards])
    for t in g.trajectories:
        t.task_id = name
    return g


async def test_the_expert_speaks_the_policys_prompt_and_tokens_scored_by_the_policy(browser, tokenizer):
    policy = make_policy(tokenizer)
    policy.set_sampling(replace(policy.sampling, temperature=0.7))
    (task,) = load_tasks("miniwob", names=["login-user"])  # three turns: history enters the prompts
    res = await run_jobs(ExpertVoice(policy), [Job(task, 11, 0, 0)], browser=browser, max_turns=6)
    (traj,) = res.trajectories
    assert traj.success and len(traj.turns) >= 2
    for j, turn in enumerate(traj.turns):
        prompt = build_prompt(tokenizer, traj.intent, traj.turns[:j], Observation.from_dict(turn.observation),
                              policy.prompt)
        assert turn.prompt_ids == prompt.ids  # the prompt the policy itself would have been given
        assert turn.completion_ids == tokenizer.encode(turn.response, add_special_tokens=False)
        assert turn.response.endswith("</answer>") and turn.finish == "stop"
    seqs = pack(traj)  # what the loss trains: exactly the expert's response tokens
    assert [i for s in seqs for i, m in zip(s.input_ids, s.loss_mask) if m] == \
        [i for t in traj.turns for i in t.completion_ids]
    # π_old is the policy's own probability of the expert's tokens, at the sampling temperature
    for s in seqs:
        with torch.no_grad():
            logp, _ = token_logprobs(policy.model, [s], temperature=0.7)
        old = torch.tensor([lp for lp, m in zip(s.old_logprobs, s.loss_mask) if m])
        assert torch.allclose(logp, old, atol=1e-5)


async def test_an_unsolved_group_gets_the_experts_success_and_its_advantage(browser, tokenizer):
    policy = make_policy(tokenizer)
    policy.set_sampling(replace(policy.sampling, temperature=0.7))
    tasks = load_tasks("miniwob", names=["click-button", "focus-text"])
    cfg = GRPOConfig(group_size=3, max_turns=1, expert_if_unsolved=True)
    groups = await rollout(policy, tasks, group_size=3, max_turns=1, browser=browser, seed=4)
    assert all(not t.success for g in groups for t in g.trajectories)  # the random model solves nothing
    before = [list(g.trajectories) for g in groups]
    done = await add_expert_members(groups, {t.task_id: t for t in tasks}, policy, cfg, random.Random(0),
                                    sample_seed=0, browser=browser, max_turns=1)
    assert (done.inserted, done.skipped) == (2, 0) and done.replaced == [b[-1] for b in before]
    for g, b in zip(groups, before):
        assert g.trajectories[:2] == b[:2] and is_expert(g.trajectories[2]) and g.trajectories[2].success
        assert g.trajectories[2].seed == b[2].seed  # the group's own page
    batch = build_batch(groups, tokenizer, cfg, policy.sampling.max_new_tokens)
    assert batch.groups == 2 and batch.equal_groups == 0
    expert_seq = batch.seqs[2]  # per group: the two failures, then the expert
    # rewards (0, 0, 1): mean 1/3, std √2/3, so +√2 for the expert and -1/√2 for each failure
    assert batch.advantages[2] == pytest.approx([2 ** 0.5] * sum(expert_seq.loss_mask), rel=1e-3)
    assert batch.advantages[0][0] == pytest.approx(-(0.5 ** 0.5), rel=1e-3)
    trained = [i for i, m in zip(expert_seq.input_ids, expert_seq.loss_mask) if m]
    assert trained == groups[0].trajectories[2].turns[0].completion_ids


async def test_an_expert_that_fails_is_skipped_and_the_group_keeps_its_episode(browser, tokenizer):
    policy = make_policy(tokenizer)
    (task,) = load_tasks("miniwob", names=["login-user"])  # three steps: one turn is not enough
    groups = [TrajectoryGroup(task.task_id, [rl_traj([1], [2], 0.0), rl_traj([1], [2], 0.0)])]
    kept = list(groups[0].trajectories)
    done = await add_expert_members(groups, {task.task_id: task}, policy, GRPOConfig(expert_rate=1.0),
                                    random.Random(0), sample_seed=0, browser=browser, max_turns=1)
    assert (done.inserted, done.skipped, done.replaced) == (0, 1, [])
    assert groups[0].trajectories == kept


def test_groups_are_chosen_by_rate_and_by_failure_and_off_chooses_none():
    groups = [group("a", 0.0, 0.0), group("b", 1.0, 0.0), group("c", 0.0, 0.0), TrajectoryGroup("d", [])]
    assert pick_groups(groups, GRPOConfig(), random.Random(1)) == []
    assert pick_groups(groups, GRPOConfig(expert_if_unsolved=True), random.Random(1)) == [0, 2]
    assert pick_groups(groups, GRPOConfig(expert_rate=1.0), random.Random(1)) == [0, 1, 2]  # never an empty group
    draws = [pick_groups(groups, GRPOConfig(expert_rate=0.5), random.Random(s)) for s in range(200)]
    assert 0.4 < sum(1 in d for d in draws) / 200 < 0.6
    assert draws[7] == pick_groups(groups, GRPOConfig(expert_rate=0.5), random.Random(7))


async def test_with_the_switches_off_no_episode_is_played_and_the_batch_is_unchanged(tokenizer):
    groups = [group("a", 0.0, 0.0), group("b", 1.0, 0.0)]
    cfg = GRPOConfig()
    before = build_batch(groups, tokenizer, cfg)
    done = await add_expert_members(groups, {}, None, cfg, random.Random(0), sample_seed=0)  # no browser, no policy
    assert (done.inserted, done.skipped, done.replaced) == (0, 0, [])
    after = build_batch(groups, tokenizer, cfg)
    assert (after.seqs, after.advantages, after.weights) == (before.seqs, before.advantages, before.weights)


def test_tasks_without_an_expert_are_refused_by_name():
    own = Task(task_id="mine/login", intent="Log in", start_url="http://127.0.0.1:1/")
    covered = load_tasks("miniwob", names=["click-button"])
    assert check_expert_config(GRPOConfig(), [own]) is False  # off: no expert needed
    assert check_expert_config(GRPOConfig(expert_rate=0.3), covered) is True
    with pytest.raises(ValueError, match="none exists for 1 of the 2 tasks: mine/login"):
        check_expert_config(GRPOConfig(expert_if_unsolved=True), covered + [own])
    with pytest.raises(ValueError, match="expert_rate must be between 0 and 1, got 1.5"):
        check_expert_config(GRPOConfig(expert_rate=1.5), covered)
    with pytest.raises(ValueError, match="grpo.hint_rate needs a scripted expert.*mine/login"):
        check_expert_config(GRPOConfig(hint_rate=0.5), covered + [own])
    assert check_expert_config(GRPOConfig(hint_rate=0.5), covered) is False  # hints alone add no members


class Spy:
    """Records the prompts the generator is fed."""

    def __init__(self, generator):
        self.generator, self.fed = generator, []

    async def generate(self, prompt_ids, seed=0):
        self.fed.append(list(prompt_ids))
        return await self.generator.generate(prompt_ids, seed=seed)


async def test_a_hinted_turn_is_generated_with_the_hint_and_recorded_without_it(browser, tokenizer):
    policy = make_policy(tokenizer)
    policy.set_sampling(replace(policy.sampling, temperature=0.7))
    spy = policy.generator = Spy(policy.generator)
    hinted = HintedPolicy(policy, rate=1.0)
    (task,) = load_tasks("miniwob", names=["click-button"])
    (traj,) = (await run_jobs(hinted, [Job(task, 3, 5, 0)], browser=browser, max_turns=1)).trajectories
    (turn,) = traj.turns
    assert hinted.hinted_turns == 1 and hinted.hint_misses == 0
    fed = tokenizer.decode(spy.fed[0])
    assert 'Hint: a good next action is do(action="Click", element=' in fed  # the model saw the hint
    plain = build_prompt(tokenizer, traj.intent, [], Observation.from_dict(turn.observation), policy.prompt)
    assert turn.prompt_ids == plain.ids and "Hint:" not in tokenizer.decode(turn.prompt_ids)  # training does not
    assert turn.logprobs == pytest.approx(score(policy, plain.ids, turn.completion_ids), abs=1e-6)


async def test_an_episode_is_hinted_by_its_seed_and_a_state_without_a_hint_plays_unhinted(browser, tokenizer):
    policy = make_policy(tokenizer)
    half = HintedPolicy(policy, rate=0.5)
    draws = [half.hinted(s) for s in range(400)]
    assert 0.4 < sum(draws) / 400 < 0.6 and draws == [half.hinted(s) for s in range(400)]
    assert not any(HintedPolicy(policy, rate=0.0).hinted(s) for s in range(100))
    spy = policy.generator = Spy(policy.generator)
    always = HintedPolicy(policy, rate=1.0)
    (task,) = load_tasks("miniwob", names=["ascending-numbers"])  # no script: the expert has no hint
    (traj,) = (await run_jobs(always, [Job(task, 3, 5, 0)], browser=browser, max_turns=1)).trajectories
    assert (always.hinted_turns, always.hint_misses) == (0, 1)
    assert spy.fed == [traj.turns[0].prompt_ids]  # played as the plain policy plays


@pytest.mark.slow
def test_m_grpo_trains_on_groups_the_policy_never_solves_once_experts_join_them(tokenizer, tmp_path, capsys):
    from webr1_kit.cli import main

    config = {
        "policy": {"model": str(save_tiny_model(tokenizer, tmp_path / "tiny")), "lora": {"r": 4, "alpha": 8}},
        "prompt": {"max_prompt_tokens": 2048},
        "sampling": {"max_new_tokens": 8, "temperature": 0.7},
        "grpo": {"steps": 1, "tasks_per_step": 2, "group_size": 2, "max_turns": 1, "eval_every": 0, "concurrency": 4},
        "tasks": {"suite": "miniwob", "names": ["click-button", "focus-text"]},
    }
    rows = {}
    arms = (("plain", {}), ("experts", {"expert_if_unsolved": True}),
            ("hints", {"expert_if_unsolved": False, "hint_rate": 1.0}))
    for name, extra in arms:
        config["grpo"].update(extra)
        (tmp_path / f"{name}.json").write_text(json.dumps(config))
        assert main(["rl", "--config", str(tmp_path / f"{name}.json"), "--out", str(tmp_path / name), "--quiet"]) == 0
        rows[name] = json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[0])
    capsys.readouterr()
    # The random model fails everywhere: plain M-GRPO has nothing to learn from.
    assert rows["plain"]["tokens_trained"] == 0 and "expert_members" not in rows["plain"]
    assert rows["experts"]["expert_members"] == 2 and rows["experts"]["tokens_trained"] > 0
    assert rows["experts"]["success_rate"] == 0.0  # the logged success is the policy's own
    steps = [json.loads(x) for x in (tmp_path / "experts" / "trajectories" / "step-1.jsonl").read_text().splitlines()]
    assert sum(bool(t["meta"].get("expert")) for t in steps) == 2
    replaced = (tmp_path / "experts" / "trajectories" / "expert-replaced-step-1.jsonl").read_text().splitlines()
    assert len(replaced) == 2
    # Hinted episodes are logged apart from the policy's unaided ones.
    assert rows["hints"]["hinted_episodes"] == 4 and rows["hints"]["hinted_turns"] >= 4
    assert rows["hints"]["first_draw_success"] is None and rows["hints"]["episodes"] == 0
    hinted = [json.loads(x) for x in (tmp_path / "hints" / "trajectories" / "step-1.jsonl").read_text().splitlines()]
    assert all(t["meta"]["hinted"] for t in hinted) and "expert_members" not in rows["hints"]
