"""Expert members of M-GRPO groups (guidance.py): the expert speaks the policy's tokens, its
success becomes the group's advantage, and nothing changes while the switches are off."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
import torch

from webr1_kit.config import GRPOConfig
from webr1_kit.experts import Expert
from webr1_kit.grpo import build_batch, group_advantages
from webr1_kit.guidance import (ExpertVoice, GuidedPolicy, add_expert_members, check_expert_config, expert_lengths,
                                guided_stats, is_expert, make_actor, pick_groups, score, step_score, turn_advantages)
from webr1_kit.observation import Observation
from webr1_kit.prompt import build_prompt
from webr1_kit.rollout import Job, rollout, run_jobs
from webr1_kit.tasks import Task, load_tasks
from webr1_kit.training import token_logprobs
from webr1_kit.trajectory import TrajectoryGroup, Turn, pack

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
    (failed,) = done.failed  # kept for inspection: it says why the expert did not finish
    assert is_expert(failed) and failed.termination == "max_turns" and failed.seed == kept[-1].seed


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
    assert after.advantages == [[a] * len(x) for a, x in zip(group_advantages([1.0, 0.0]), after.advantages)]
    policy = object()
    assert make_actor(policy, cfg) is policy  # the rollouts are the policy's own, as in the paper
    assert isinstance(make_actor(policy, GRPOConfig(step_reward_coef=0.1)), GuidedPolicy)


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
    with pytest.raises(ValueError, match="grpo.prefix_max / grpo.credit_from_departure needs a scripted expert"):
        check_expert_config(GRPOConfig(prefix_max=2, credit_from_departure=True), [own])


class Spy:
    """Records the prompts the generator is fed and the seeds it samples them at."""

    def __init__(self, generator):
        self.generator, self.fed, self.seeds = generator, [], []

    async def generate(self, prompt_ids, seed=0):
        self.fed.append(list(prompt_ids))
        self.seeds.append(seed)
        return await self.generator.generate(prompt_ids, seed=seed)


async def test_a_hinted_turn_is_generated_with_the_hint_and_recorded_without_it(browser, tokenizer):
    policy = make_policy(tokenizer)
    policy.set_sampling(replace(policy.sampling, temperature=0.7))
    spy = policy.generator = Spy(policy.generator)
    hinted = GuidedPolicy(policy, hint_rate=1.0)
    (task,) = load_tasks("miniwob", names=["click-button"])
    (traj,) = (await run_jobs(hinted, [Job(task, 3, 5, 0)], browser=browser, max_turns=1)).trajectories
    (turn,) = traj.turns
    assert hinted.counts == {"hinted_turns": 1, "prefix_turns": 0, "expert_misses": 0}
    fed = tokenizer.decode(spy.fed[0])
    assert 'Hint: a good next action is do(action="Click", element=' in fed  # the model saw the hint
    plain = build_prompt(tokenizer, traj.intent, [], Observation.from_dict(turn.observation), policy.prompt)
    assert turn.prompt_ids == plain.ids and "Hint:" not in tokenizer.decode(turn.prompt_ids)  # training does not
    assert turn.logprobs == pytest.approx(score(policy, plain.ids, turn.completion_ids), abs=1e-6)
    assert f'Hint: a good next action is {turn.expert["text"]}' in fed  # the hint is kept with the turn
    await policy.act(task, traj.intent, Observation.from_dict(turn.observation), [], seed=5)
    assert spy.seeds[1] == spy.seeds[0]  # sampled at the seed the unhinted turn would have had


async def test_an_episode_is_hinted_by_its_seed_and_a_state_without_a_hint_plays_unhinted(browser, tokenizer):
    policy = make_policy(tokenizer)
    half = GuidedPolicy(policy, hint_rate=0.5)
    draws = [half.hinted(s) for s in range(400)]
    assert 0.4 < sum(draws) / 400 < 0.6 and draws == [half.hinted(s) for s in range(400)]
    assert not any(GuidedPolicy(policy).hinted(s) for s in range(100))
    spy = policy.generator = Spy(policy.generator)
    always = GuidedPolicy(policy, hint_rate=1.0)
    (task,) = load_tasks("miniwob", names=["ascending-numbers"])  # no script: the expert has no hint
    (traj,) = (await run_jobs(always, [Job(task, 3, 5, 0)], browser=browser, max_turns=1)).trajectories
    assert always.counts == {"hinted_turns": 0, "prefix_turns": 0, "expert_misses": 1}
    assert spy.fed == [traj.turns[0].prompt_ids]  # played as the plain policy plays


def tiny_rl(tokenizer, tmp_path, name, tasks, **grpo):
    """`webr1 rl` for one step of 2 groups of 2 with the tiny random model, `grpo` set, into
    tmp_path/name: its first metrics row and the step's trajectories."""
    from webr1_kit.cli import main

    model = tmp_path / "tiny"
    if not model.is_dir():
        save_tiny_model(tokenizer, model)
    config = {
        "policy": {"model": str(model), "lora": {"r": 4, "alpha": 8}},
        "prompt": {"max_prompt_tokens": 2048},
        "sampling": {"max_new_tokens": 8, "temperature": 0.7},
        "grpo": {"steps": 1, "tasks_per_step": 2, "group_size": 2, "max_turns": 1, "eval_every": 0, "concurrency": 4,
                 **grpo},
        "tasks": {"suite": "miniwob", "names": tasks},
    }
    (tmp_path / f"{name}.json").write_text(json.dumps(config))
    assert main(["rl", "--config", str(tmp_path / f"{name}.json"), "--out", str(tmp_path / name), "--quiet"]) == 0
    row = json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[0])
    steps = [json.loads(x) for x in (tmp_path / name / "trajectories" / "step-1.jsonl").read_text().splitlines()]
    return row, steps


@pytest.mark.slow
def test_m_grpo_trains_on_groups_the_policy_never_solves_once_experts_join_them(tokenizer, tmp_path, capsys):
    rows, trajs = {}, {}
    arms = (("plain", {}), ("experts", {"expert_if_unsolved": True}), ("hints", {"hint_rate": 1.0}),
            ("guided", {"hint_rate": 0.5, "prefix_max": 1, "step_reward_coef": 0.5, "credit_from_departure": True,
                        "max_turns": 2}))
    for name, grpo in arms:
        rows[name], trajs[name] = tiny_rl(tokenizer, tmp_path, name, ["click-button", "focus-text"], **grpo)
    capsys.readouterr()
    # The random model fails everywhere: plain M-GRPO has nothing to learn from.
    assert rows["plain"]["tokens_trained"] == 0 and "expert_members" not in rows["plain"]
    assert rows["experts"]["expert_members"] == 2 and rows["experts"]["tokens_trained"] > 0
    assert rows["experts"]["success_rate"] == 0.0  # the logged success is the policy's own
    assert sum(bool(t["meta"].get("expert")) for t in trajs["experts"]) == 2
    replaced = (tmp_path / "experts" / "trajectories" / "expert-replaced-step-1.jsonl").read_text().splitlines()
    assert len(replaced) == 2
    # Hinted episodes are logged apart from the policy's unaided ones.
    assert rows["hints"]["hinted_episodes"] == 4 and rows["hints"]["hinted_turns"] >= 4
    assert rows["hints"]["expert_misses"] == 0 and rows["hints"]["hinted_successes"] == 0
    assert 0.0 <= rows["hints"]["hint_followed"] <= 1.0
    assert rows["hints"]["first_draw_success"] is None and rows["hints"]["episodes"] == 0
    assert all(t["meta"]["hinted"] for t in trajs["hints"]) and "expert_members" not in rows["hints"]
    # Every guided recipe at once runs, logs its counts, and keeps the expert's view of each policy turn.
    guided, steps = rows["guided"], trajs["guided"]
    helped = [t for t in steps if t["meta"]["hinted"] or not all(u["trained"] for u in t["turns"])]
    assert len(steps) == 4 and guided["episodes"] == 4 - len(helped)  # the policy's own are logged apart
    assert guided["hinted_episodes"] == sum(t["meta"]["hinted"] for t in steps)
    turns = [u for t in steps for u in t["turns"]]
    assert all(u["expert"] is not None for u in turns if u["trained"])  # watched: step rewards need it
    assert sum(not u["trained"] for u in turns) == guided["prefix_turns"]


async def test_a_prefix_start_hands_the_policy_the_state_the_expert_reached(browser, tokenizer):
    from webr1_kit.experts import MiniWoBExpert

    (task,) = load_tasks("miniwob", names=["login-user"])  # username, password, then the button
    (alone,) = (await run_jobs(MiniWoBExpert(), [Job(task, 21, 0, 0)], browser=browser, max_turns=6)).trajectories
    assert alone.success and len(alone.turns) == 3
    policy = make_policy(tokenizer)
    guided = GuidedPolicy(policy, prefix_max=2)

    def k_at(r):
        guided.round = r
        return guided.prefix(task, alone.intent)

    guided.round = next(r for r in range(100) if k_at(r) == 2)
    (traj,) = (await run_jobs(guided, [Job(task, 21, 0, 0)], browser=browser, max_turns=3)).trajectories
    assert [t.trained for t in traj.turns[:2]] == [False, False] and guided.counts["prefix_turns"] == 2
    assert [t.response for t in traj.turns[:2]] == [t.response for t in alone.turns[:2]]
    handed = traj.turns[2]  # the policy's first turn: the page as the expert left it after two steps
    assert handed.trained and handed.observation["url"] == alone.turns[2].observation["url"]
    assert handed.observation["content"] == alone.turns[2].observation["content"]
    trained = [i for s in pack(traj) for i, m in zip(s.input_ids, s.loss_mask) if m]
    assert trained == handed.completion_ids  # the prefix is context: only the policy's turn is trained
    # The members of a group share k (same task and page), and k moves with the step.
    assert len({GuidedPolicy(policy, prefix_max=3).prefix(task, alone.intent) for _ in range(5)}) == 1
    assert {k_at(r) for r in range(40)} == {0, 1, 2}


async def test_a_prefix_from_the_goal_leaves_the_policy_the_experts_last_turns_on_each_page(browser, tokenizer):
    (task,) = load_tasks("miniwob", names=["login-user"])  # username, password, then the button
    lengths = await expert_lengths([task, task], group_size=2, seed=7, browser=browser, max_turns=6)
    groups = await rollout(Expert(), [task, task], group_size=2, seed=7, browser=browser, max_turns=6)
    pages = {(g.task_id, t.intent) for g in groups for t in g.trajectories}
    assert lengths == {page: 3 for page in pages} and len(pages) == 2  # measured on the pages the groups play
    policy = make_policy(tokenizer)
    guided = GuidedPolicy(policy, prefix_max=2, prefix_from="goal")
    guided.lengths = lengths
    ks = {}
    for r in range(40):
        guided.round = r
        ks.update({(r, page): guided.prefix(task, page[1]) for page in pages})
    assert set(ks.values()) == {1, 2}  # all but the last 1 or 2 of the expert's 3 turns
    guided.round = next(r for (r, page), k in ks.items() if k == 2)
    played = await rollout(guided, [task, task], group_size=2, seed=7, browser=browser, max_turns=6)
    for g in played:
        k = guided.prefix(task, g.trajectories[0].intent)
        for t in g.trajectories:  # the members of a group start from the same state
            assert [u.trained for u in t.turns[:k + 1]] == [False] * k + [True]
    assert guided.prefix(task, "a page the expert did not finish") == 0  # no length: no prefix
    assert GuidedPolicy(policy, prefix_max=2, prefix_from="goal").counts["prefix_unmeasured"] == 0
    with pytest.raises(ValueError, match="prefix_from='goal'.*needs grpo.prefix_max >= 1, got 0"):
        check_expert_config(GRPOConfig(prefix_from="goal"), [task])


@pytest.mark.slow
def test_m_grpo_from_the_goal_measures_each_page_and_starts_the_policy_at_its_last_turn(tokenizer, tmp_path, capsys):
    # login-user: the expert takes 3 turns on every page
    row, steps = tiny_rl(tokenizer, tmp_path, "goal", ["login-user"], max_turns=4, prefix_max=1, prefix_from="goal")
    capsys.readouterr()
    assert row["prefix_unmeasured"] == 0 and row["prefix_episodes"] == len(steps) == 4
    assert row["prefix_turns"] == 2 * 4  # the expert played 2 of its 3 turns on every page
    assert all([u["trained"] for u in t["turns"][:3]] == [False, False, True] for t in steps)


def expert_turn(mine, theirs, trained=True):
    def act(name, element=None, argument=None):
        return {"name": name, "element": element, "argument": argument, "text": ""}
    return Turn(observation={}, response="r", action=None if mine is None else act(*mine), expert=act(*theirs),
                prompt_ids=[1], completion_ids=[2, 3], logprobs=[-1.0, -1.0], trained=trained)


def test_step_scores_count_the_checks_that_match_the_experts_action():
    assert step_score(expert_turn(("Click", 4), ("Click", 4))) == 1.0
    assert step_score(expert_turn(("click", 5), ("Click", 4))) == pytest.approx(2 / 3)  # valid, type; not element
    assert step_score(expert_turn(("Type", 2, "abd"), ("Type", 2, "abc"))) == pytest.approx(3 / 4)
    assert step_score(expert_turn(("exit", None, "42"), ("exit", None, "41"))) == 1.0  # an answer is the verdict's
    assert step_score(expert_turn(None, ("Click", 4))) == 0.0  # no valid action
    assert step_score(expert_turn(("Click", 4), ("Click", 4), trained=False)) is None  # an expert's prefix turn
    no_answer = expert_turn(("Click", 4), ("Click", 4))
    no_answer.expert = None
    assert step_score(no_answer) is None


def test_guided_stats_count_the_guided_episodes_their_successes_and_the_hints_taken():
    from webr1_kit.trajectory import Trajectory

    def episode(*turns, reward=0.0, **meta):
        return Trajectory("miniwob/x", "i", 0, turns=list(turns), reward=reward, status="done", meta=meta)

    took, missed = expert_turn(("Click", 4), ("Click", 4)), expert_turn(("Click", 5), ("Click", 4))
    unhinted = expert_turn(("Click", 5), ("Click", 4))
    unhinted.expert = None  # the expert had no hint for this state
    prefix = expert_turn(("Click", 4), ("Click", 4), trained=False)
    groups = [TrajectoryGroup("miniwob/x", [
        episode(took, missed, unhinted, reward=1.0, hinted=True),
        episode(missed, hinted=True),
        episode(prefix, took, reward=1.0),
        episode(took),  # the policy's own, watched for step rewards: not a hinted turn
        episode(took, reward=1.0, hinted=True, expert=True),  # an expert member is not the policy's
    ])]
    assert guided_stats(groups) == {"hinted_episodes": 2, "hinted_successes": 1, "hint_followed": pytest.approx(1 / 3),
                                    "prefix_episodes": 1, "prefix_successes": 1}
    none = guided_stats([TrajectoryGroup("miniwob/x", [episode(took)])])
    assert none["hint_followed"] is None and none["hinted_episodes"] == 0


def test_step_rewards_and_departure_credit_give_the_documented_turn_advantages(tokenizer):
    from webr1_kit.trajectory import Trajectory

    def episode(*turns, reward=0.0):
        return Trajectory("miniwob/x", "i", 0, turns=list(turns), reward=reward, status="done")

    right, wrong = expert_turn(("Click", 4), ("Click", 4)), expert_turn(("Click", 5), ("Click", 4))
    a, b = episode(right, wrong), episode(wrong, wrong)  # both failed: no episode advantage
    cfg = GRPOConfig(step_reward_coef=0.5)
    # scores 1, 2/3 | 2/3, 2/3: mean 3/4, std √3/12, so +√3 for the right step and -1/√3 for the others
    (da, db) = turn_advantages([a, b], [0.0, 0.0], cfg)
    assert da[0] == pytest.approx(0.5 * 3 ** 0.5, rel=1e-3) and da[1] == pytest.approx(-0.5 / 3 ** 0.5, rel=1e-3)
    assert db == {0: da[1], 1: da[1]}
    batch = build_batch([TrajectoryGroup("miniwob/x", [a, b])], tokenizer, cfg)
    assert batch.equal_groups == 0  # one sequence per turn here, two tokens each
    assert batch.advantages[:2] == [[da[0]] * 2, [da[1]] * 2]
    assert build_batch([TrajectoryGroup("miniwob/x", [a, b])], tokenizer, GRPOConfig()).equal_groups == 1
    # Credit from the first departure: the matching first turn of a failure takes no blame.
    won = episode(right, right, reward=1.0)
    credit = GRPOConfig(credit_from_departure=True)
    (dw, da2) = turn_advantages([won, a], [1.0, -1.0], credit)
    assert dw == {} and da2 == {0: 0.0}  # turn 1 keeps the episode's -1
    (dn,) = turn_advantages([episode(right, right)], [-1.0], credit)
    assert dn == {0: 0.0, 1: 0.0}  # matched the expert throughout: blamed nowhere
    assert turn_advantages([won, a], [1.0, -1.0], GRPOConfig()) == [{}, {}]  # off: the episode's advantage
