"""Behaviour cloning and M-GRPO on a tiny random Llama with the embedded tokenizer."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest
import torch

from webr1_kit.config import GRPOConfig, LoRA, PolicyConfig, PromptConfig, SamplingConfig, SFTConfig
from webr1_kit.grpo import (TaskTally, build_batch, draw_tasks, group_advantages, grpo_loss, infra_warning,
                            reroll_equal_groups, update)
from webr1_kit.observation import Observation
from webr1_kit.tasks import Task
from webr1_kit.models import attach_lora, build_tiny_model, embedded_path
from webr1_kit.policy import LLMPolicy
from webr1_kit.sft import examples, step_accuracy, train_sft
from webr1_kit.training import make_optimizer, think_mask, token_logprobs
from webr1_kit.trajectory import Packed, Trajectory, TrajectoryGroup, Turn


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_path())


def make_policy(tokenizer, seed=0, r=4):
    model = attach_lora(build_tiny_model(tokenizer, seed), LoRA(r=r, alpha=2 * r, dropout=0.0))
    return LLMPolicy(model, tokenizer, PolicyConfig(lora=LoRA(r=r, alpha=2 * r, dropout=0.0)),
                     prompt=PromptConfig(max_prompt_tokens=2048), sampling=SamplingConfig(max_new_tokens=8))


def save_tiny_model(tokenizer, path):
    """The tiny random model as a local model folder, for configs that name a model."""
    make_policy(tokenizer).model.get_base_model().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def demo(k: int) -> Trajectory:
    obs = Observation(url=f"http://shop/{k}", title="t", content=f'<button id="{k}" data-text="Buy">').to_dict()
    return Trajectory(task_id=f"t{k}", intent=f"Buy item {k}", seed=0, reward=1.0, status="done", turns=[
        Turn(observation=obs, response=f'<think>Click buy.</think><answer>do(action="Click", element="{k}")</answer>'),
        Turn(observation=obs, response='<think>Done.</think><answer>exit(message="done")</answer>'),
    ])


def rl_traj(prompt, completion, reward, logprobs=None):
    turn = Turn(observation={}, response="r", prompt_ids=prompt, completion_ids=completion,
                logprobs=logprobs if logprobs is not None else [-1.0] * len(completion))
    return Trajectory("t", "i", 0, turns=[turn], reward=reward, status="done")


def perturb_lora_b(model, scale=0.02):
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, scale)


def test_the_llm_policy_is_a_trainable_policy_and_a_scripted_one_is_not(tokenizer):
    from webr1_kit.experts import Expert
    from webr1_kit.rollout import TrainablePolicy

    assert isinstance(make_policy(tokenizer), TrainablePolicy)
    assert not isinstance(Expert(), TrainablePolicy)


# ---------------------------------------------------------------- advantages and batches


def test_equal_rewards_give_zero_advantages_and_are_counted():
    assert group_advantages([1, 1, 1, 1]) == [0, 0, 0, 0]
    assert group_advantages([0, 0]) == [0, 0]
    adv = group_advantages([1, 0, 0, 0])
    assert adv[0] > 0 > adv[1] and abs(sum(adv)) < 1e-9
    groups = [TrajectoryGroup("a", [rl_traj([1, 2], [3], 1.0), rl_traj([1, 2], [4], 1.0)]),
              TrajectoryGroup("b", [rl_traj([1, 2], [3], 1.0), rl_traj([1, 2], [4], 0.0)])]
    batch = build_batch(groups, None, GRPOConfig())
    assert batch.groups == 2 and batch.equal_groups == 1 and len(batch.seqs) == 2


def test_a_step_draws_distinct_tasks_then_repeats_them_evenly():
    import random
    from collections import Counter

    from webr1_kit.tasks import load_tasks

    tasks = load_tasks("miniwob", names=["click-button", "click-link", "focus-text"])
    few = draw_tasks(random.Random(0), tasks, 2)
    assert len(few) == 2 and len({t.task_id for t in few}) == 2
    many = draw_tasks(random.Random(0), tasks, 8)  # more groups than tasks: 3 + 3 + 2
    counts = Counter(t.task_id for t in many)
    assert len(many) == 8 and set(counts) == {t.task_id for t in tasks} and sorted(counts.values()) == [2, 3, 3]
    assert [t.task_id for t in draw_tasks(random.Random(0), tasks, 8)] == [t.task_id for t in many]
    assert draw_tasks(random.Random(0), [], 4) == []


def test_weighted_drawing_follows_the_weights_without_repeats_within_a_pass():
    import random
    from collections import Counter

    from webr1_kit.tasks import load_tasks

    tasks = load_tasks("miniwob", names=["click-button", "click-link", "focus-text"])
    rng = random.Random(0)
    firsts = Counter(draw_tasks(rng, tasks, 1, [6.0, 3.0, 1.0])[0].task_id for _ in range(3000))
    shares = [firsts[t.task_id] / 3000 for t in tasks]
    assert abs(shares[0] - 0.6) < 0.04 and abs(shares[1] - 0.3) < 0.04 and abs(shares[2] - 0.1) < 0.03
    step = draw_tasks(random.Random(1), tasks, 5, [1e-6, 1.0, 1.0])  # a full pass, then the two likeliest
    assert sorted(Counter(t.task_id for t in step).values()) == [1, 2, 2] and step[2].task_id == tasks[0].task_id
    with pytest.raises(ValueError, match="2 weights for 3 tasks"):
        draw_tasks(rng, tasks, 2, [1.0, 1.0])


def test_task_tally_weighs_tasks_by_the_chance_of_an_informative_group():
    def group(name, *rewards):
        return TrajectoryGroup(name, [rl_traj([1], [2], r) for r in rewards])

    tally = TaskTally(memory=0.5)
    assert tally.weight("new", 4) == pytest.approx(1 - 2 / 5)  # Beta(1, 1): E[p^4] = 1/5
    tally.add([group("solved", 1, 1, 1, 1), group("mixed", 1, 0, 1, 0), group("failed", 0, 0, 0, 0)], lambda t: t.reward)
    w = {k: tally.weight(k, 4) for k in ("solved", "mixed", "failed", "new")}
    assert w["mixed"] > w["new"] > w["solved"] > 0 and w["solved"] == pytest.approx(w["failed"])
    # Beta(5, 1): E[p^4] = 5·6·7·8 / (6·7·8·9), E[(1-p)^4] = 1·2·3·4 / (6·7·8·9)
    assert w["solved"] == pytest.approx(1 - (5 * 6 * 7 * 8 + 24) / (6 * 7 * 8 * 9))
    assert tally.success("solved") == pytest.approx(5 / 6) and tally.success("new") == 0.5
    tally.add([], lambda t: t.reward)  # a step without the task: its evidence halves
    assert tally.successes["solved"] == 2.0 and tally.weight("solved", 4) > w["solved"]
    infra = TrajectoryGroup("solved", [Trajectory("t", "i", 0, reward=0.0, status="infra_failure")])
    tally.add([infra], lambda t: t.reward)  # infrastructure failures are not evidence
    assert tally.failures["solved"] == 0.0
    assert TaskTally.from_dict(json.loads(json.dumps(tally.to_dict()))) == tally
    tasks = [Task(task_id=k, intent="", start_url="") for k in ("solved", "mixed")]
    low, high = tally.weight("solved", 4), tally.weight("mixed", 4)
    assert tally.draw_weights(tasks, 4) == [low, high]  # no floor: the tally's own weights
    mid = (low + high) / 2
    assert low < mid < high and tally.draw_weights(tasks, 4, floor=mid) == [mid, high]  # it lifts only the low ones


def test_dynamic_sampling_replaces_only_equal_reward_groups_and_returns_them():
    import asyncio

    def group(name, *rewards):
        return TrajectoryGroup(name, [rl_traj([1], [2], r) for r in rewards])

    mixed, flat0, flat1 = group("mixed", 1.0, 0.0), group("flat0", 0.0, 0.0), group("flat1", 1.0, 1.0)
    asked = []

    async def rerun(n, round_):  # round 0 yields one still-flat group, round 1 only mixed ones
        asked.append((n, round_))
        return [group(f"r{round_}-{i}", *((0.0, 0.0) if round_ == 0 and i == 0 else (0.0, 1.0))) for i in range(n)]

    kept, replaced = asyncio.run(reroll_equal_groups([mixed, flat0, flat1], rerun, 2))
    assert asked == [(2, 0), (1, 1)]
    assert [g.task_id for g in kept] == ["mixed", "r0-1", "r1-0"]
    assert [g.task_id for g in replaced] == ["flat0", "flat1", "r0-0"]
    assert asyncio.run(reroll_equal_groups([flat0], rerun, 0)) == ([flat0], [])  # off: nothing replaced


def test_a_step_mostly_lost_to_infrastructure_failures_says_so():
    def failed(i):
        return Trajectory("miniwob/x", "i", i, status="infra_failure", infra_error="start page failed to load: Timeout")

    ok = rl_traj([1], [2], 1.0)
    assert infra_warning(3, [TrajectoryGroup("a", [ok, failed(1)])]) is None  # half is not more than half
    msg = infra_warning(3, [TrajectoryGroup("a", [ok, failed(1)]), TrajectoryGroup("b", [failed(2), failed(3)])])
    assert msg is not None and "step 3: 3 of 4 episodes" in msg and "Timeout" in msg and "learned from 1 episodes" in msg
    assert infra_warning(1, []) is None


def test_paper_normalisation_weights_turns_trajectories_and_groups():
    long = Trajectory("t", "i", 0, reward=1.0, status="done", turns=[
        Turn(observation={}, response="r", prompt_ids=[1], completion_ids=[5, 6, 7], logprobs=[-1.0] * 3),
        Turn(observation={}, response="r", prompt_ids=[2], completion_ids=[8], logprobs=[-1.0])])
    groups = [TrajectoryGroup("a", [long, rl_traj([1], [9, 9], 0.0)])]
    batch = build_batch(groups, None, GRPOConfig(loss_norm="paper"))
    # 1 group x 2 trajectories; the long one has 2 turns of 3 and 1 tokens
    assert batch.weights[0] == pytest.approx([1 / (2 * 2 * 3)] * 3)
    assert batch.weights[1] == pytest.approx([1 / (2 * 2 * 1)])
    assert batch.weights[2] == pytest.approx([1 / (2 * 1 * 2)] * 2)
    assert sum(map(sum, batch.weights)) == pytest.approx(1.0)
    tok = build_batch(groups, None, GRPOConfig(loss_norm="token"))
    assert all(w == pytest.approx(1 / 6) for ws in tok.weights for w in ws)


def test_constant_normalisation_weighs_every_token_by_the_step_budget():
    def group(task):
        return TrajectoryGroup(task, [rl_traj([1], [5, 6, 7], 1.0), rl_traj([1], [9, 9], 0.0)])

    cfg = GRPOConfig(tasks_per_step=3, group_size=2)  # "constant" is the default
    one = build_batch([group("a")], None, cfg, max_new_tokens=10)
    assert all(w == pytest.approx(1 / (3 * 2 * 10)) for ws in one.weights for w in ws)
    # the same fixed weight in a step with twice the informative groups, so that step's update
    # is twice as large; "token" would give both steps the same total weight
    two = build_batch([group("a"), group("b")], None, cfg, max_new_tokens=10)
    assert sum(map(sum, two.weights)) == pytest.approx(2 * sum(map(sum, one.weights)))
    tok = [build_batch(g, None, replace(cfg, loss_norm="token"), max_new_tokens=10) for g in ([group("a")], [group("a"), group("b")])]
    assert sum(map(sum, tok[0].weights)) == pytest.approx(sum(map(sum, tok[1].weights))) == pytest.approx(1.0)


# ---------------------------------------------------------------- the reward M-GRPO learns from


def test_invalid_budget_and_cut_off_responses_earn_nothing_and_masking_removes_cut_tokens():
    from webr1_kit.grpo import episode_reward

    ok = rl_traj([1], [5, 6], 1.0)
    ok.turns[0].finish = "stop"
    budget = rl_traj([1], [5, 6], 1.0)  # the page passed, but the episode ended on an invalid action
    budget.termination = "invalid_budget"
    cut = rl_traj([1], [7, 8, 9], 1.0)
    cut.turns[0].finish = "length"
    penalise, mask = GRPOConfig(truncation="penalise"), GRPOConfig(truncation="mask")
    assert episode_reward(ok, penalise) == 1.0 and episode_reward(budget, mask) == 0.0
    assert episode_reward(cut, penalise) == 0.0 and episode_reward(cut, mask) == 1.0
    fail = rl_traj([1], [4], 0.0)
    # penalise: the cut-off episode is a failure with a negative advantage on its tokens
    batch = build_batch([TrajectoryGroup("a", [ok, cut])], None, penalise)
    assert batch.advantages[0][0] > 0 > batch.advantages[1][0] and sum(map(len, batch.advantages)) == 5
    # mask: the cut-off response keeps its reward but trains no token
    batch = build_batch([TrajectoryGroup("a", [ok, cut, fail])], None, mask)
    assert [len(a) for a in batch.advantages] == [2, 1]
    assert [s.input_ids[-1] for s in batch.seqs] == [6, 4]


# ---------------------------------------------------------------- the loss


def test_observation_tokens_do_not_enter_the_loss(tokenizer):
    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model)

    def loss_and_grads(seq):
        policy.model.zero_grad()
        logp, _ = token_logprobs(policy.model, [seq])
        n = len(logp)
        old = torch.tensor([lp for lp, m in zip(seq.old_logprobs, seq.loss_mask) if m])
        loss, _ = grpo_loss(logp, old, None, torch.ones(n), torch.full((n,), 1 / n), GRPOConfig(beta=0.0, clip_eps=10.0))
        loss.backward()
        return float(loss.detach()), [p.grad.clone() for p in policy.model.parameters() if p.requires_grad]

    base = Packed()
    base.add([10, 11, 12, 13], trained=False)  # context
    base.add([20, 21, 22], trained=True, logprobs=[-1.0] * 3, turn=0)
    base.add([30, 31, 32], trained=False)  # an observation after the response
    changed = Packed(base.input_ids[:7] + [40, 41, 42], base.loss_mask, base.old_logprobs, base.turn)
    l1, g1 = loss_and_grads(base)
    l2, g2 = loss_and_grads(changed)
    assert l1 == pytest.approx(l2) and all(torch.equal(a, b) for a, b in zip(g1, g2))
    response_changed = Packed(base.input_ids[:5] + [99] + base.input_ids[6:], base.loss_mask, base.old_logprobs, base.turn)
    l3, _ = loss_and_grads(response_changed)
    assert l3 != pytest.approx(l1)  # and the test can tell a trained token from a masked one


def test_ratio_one_and_no_kl_is_reinforce(tokenizer):
    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model)
    seq = Packed()
    seq.add([5, 6, 7], trained=False)
    seq.add([8, 9, 10, 11], trained=True, logprobs=[0.0] * 4, turn=0)
    adv, w = torch.tensor([0.7] * 4), torch.tensor([0.25] * 4)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    logp, _ = token_logprobs(policy.model, [seq])
    loss, _ = grpo_loss(logp, logp.detach(), None, adv, w, GRPOConfig(beta=0.0))
    grads = torch.autograd.grad(loss, params)
    logp, _ = token_logprobs(policy.model, [seq])
    reinforce = torch.autograd.grad(-(w * adv * logp).sum(), params)  # -Σ w·A·∇log π
    for a, b in zip(grads, reinforce):
        assert torch.allclose(a, b, atol=1e-7)


def test_kl_is_zero_while_the_adapter_is_zero(tokenizer):
    policy = make_policy(tokenizer)  # fresh LoRA: B = 0, the adapter is the identity
    seq = Packed()
    seq.add([5, 6, 7], trained=False)
    seq.add([8, 9, 10], trained=True, logprobs=[0.0] * 3, turn=0)
    with torch.no_grad(), policy.reference() as base:
        ref, _ = token_logprobs(base, [seq])
    logp, _ = token_logprobs(policy.model, [seq])
    _, stats = grpo_loss(logp, logp.detach(), ref, torch.ones(3), torch.ones(3) / 3, GRPOConfig(beta=0.1))
    assert stats["kl_sum"] == pytest.approx(0.0, abs=1e-9)
    perturb_lora_b(policy.model, 0.5)
    logp, _ = token_logprobs(policy.model, [seq])
    _, stats = grpo_loss(logp, logp.detach(), ref, torch.ones(3), torch.ones(3) / 3, GRPOConfig(beta=0.1))
    assert stats["kl_sum"] > 1e-6


def sample_and_pack(policy, temperature=0.7):
    """Two responses sampled at `temperature` (two prompts, two seeds) with the log-probs the
    generator recorded, packed as training sequences: (prompts, outputs, sequences)."""
    gen = policy.generator
    gen.cfg = SamplingConfig(temperature=temperature, max_new_tokens=8)
    prompt = policy.tokenizer.encode("Click the button labelled Buy")
    prompts = [prompt, prompt[:-1]]
    outs = gen.generate_batch(prompts, [3, 4])
    seqs = []
    for p, o in zip(prompts, outs):
        seq = Packed()
        seq.add(p, trained=False)
        seq.add(o.ids, trained=True, logprobs=o.logprobs, turn=0)
        seqs.append(seq)
    return prompts, outs, seqs


def test_logprobs_are_of_the_tempered_distribution_when_recorded_and_when_trained(tokenizer):
    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model, 0.1)
    prompts, outs, seqs = sample_and_pack(policy)
    for p, o in zip(prompts, outs):
        with torch.no_grad():  # the definition: log_softmax(logits / T) at the sampled token
            lp = torch.log_softmax(policy.model(torch.tensor([p + o.ids])).logits.float() / 0.7, -1)[0]
        direct = [lp[len(p) - 1 + i, t].item() for i, t in enumerate(o.ids)]
        assert o.logprobs == pytest.approx(direct, abs=1e-4)
    recorded = torch.tensor([lp for o in outs for lp in o.logprobs])
    with torch.no_grad():
        trained, _ = token_logprobs(policy.model, seqs, temperature=0.7)
        untempered, _ = token_logprobs(policy.model, seqs)
    assert torch.allclose(trained, recorded, atol=1e-4)  # ρ = 1 before the update
    assert (untempered - recorded).abs().max() > 1e-2  # and T matters


def test_the_kl_reference_is_the_adapter_rl_started_from(tokenizer, tmp_path):
    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model, 0.05)  # a "BC" adapter, far from the base model
    policy.freeze_reference()
    groups = [TrajectoryGroup("a", [rl_traj([1, 2, 3], [4, 5, 6], 1.0), rl_traj([1, 2, 3], [7, 8], 0.0)])]
    batch = build_batch(groups, tokenizer, GRPOConfig())
    cfg = GRPOConfig(lr=1e-2, beta=0.1)
    opt = make_optimizer(policy.model, cfg.lr, tuple(cfg.betas))
    frozen = {n: p.detach().clone() for n, p in policy.model.named_parameters() if ".reference." in n}
    assert frozen and not any(p.requires_grad for n, p in policy.model.named_parameters() if ".reference." in n)
    first = update(policy, batch, cfg, opt)
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)  # the policy is still its reference
    second = update(policy, batch, cfg, opt)
    assert second["kl"] > 1e-7
    for n, p in policy.model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n
    with policy.adapter_off() as base, torch.no_grad():  # the untrained model is yet another one
        off, _ = token_logprobs(base, batch.seqs)
    with policy.reference() as ref, torch.no_grad():
        at_start, _ = token_logprobs(ref, batch.seqs)
    assert (off - at_start).abs().max() > 1e-3
    policy.save_adapter(tmp_path / "a")  # only the trained adapter is saved
    assert not (tmp_path / "a" / "reference").exists()


def test_one_update_changes_every_lora_parameter_and_no_base_parameter(tokenizer):
    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model)  # with B = 0 the gradient of A is exactly zero
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    groups = [TrajectoryGroup("a", [rl_traj([1, 2, 3], [4, 5, 6], 1.0), rl_traj([1, 2, 3], [7, 8], 0.0)])]
    batch = build_batch(groups, tokenizer, GRPOConfig())
    stats = update(policy, batch, GRPOConfig(lr=1e-3), make_optimizer(policy.model, 1e-3, (0.9, 0.99)))
    assert stats["grad_norm"] > 0 and stats["tokens_trained"] == 5
    for n, p in policy.model.named_parameters():
        changed = not torch.equal(p, before[n])
        assert changed == ("lora_" in n), n


def test_the_replay_term_adds_lambda_times_the_behaviour_cloning_gradient(tokenizer):
    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    groups = [TrajectoryGroup("a", [rl_traj([1, 2, 3], [4, 5, 6], 1.0), rl_traj([1, 2, 3], [7, 8], 0.0)])]
    cfg = GRPOConfig(beta=0.0, max_grad_norm=1e9)
    batch = build_batch(groups, tokenizer, cfg)
    replay = examples(policy, [demo(3)])

    def grads(c, rep):  # lr 0: the weights stay put, the gradients are left on them
        stats = update(policy, batch, c, make_optimizer(policy.model, 0.0, (0.9, 0.99)), replay=rep)
        return [p.grad.clone() for p in params], stats

    plain, stats = grads(cfg, ())
    off, off_stats = grads(cfg, replay)
    assert all(torch.equal(a, b) for a, b in zip(plain, off)) and "replay_nll" not in off_stats  # λ = 0: the paper's
    mixed, stats = grads(replace(cfg, replay_coef=0.5), replay)
    n = sum(sum(ex.loss_mask) for ex in replay)
    logp, _ = token_logprobs(policy.model, replay)
    nll = -logp.sum() / n
    bc = torch.autograd.grad(nll, params)
    assert stats["replay_nll"] == pytest.approx(float(nll.detach()), rel=1e-5)
    for m, p0, b in zip(mixed, plain, bc):
        assert torch.allclose(m, p0 + 0.5 * b, atol=1e-6)


def test_the_replay_term_without_demonstrations_is_refused_before_anything_runs(tokenizer, tmp_path, capsys):
    from webr1_kit.cli import main

    config = {"policy": {"model": str(save_tiny_model(tokenizer, tmp_path / "tiny")), "lora": {"r": 4, "alpha": 8}},
              "sampling": {"temperature": 0.7}, "grpo": {"steps": 1, "replay_coef": 0.5},
              "tasks": {"suite": "miniwob", "names": ["click-button"]}}
    (tmp_path / "rl.json").write_text(json.dumps(config))
    assert main(["rl", "--config", str(tmp_path / "rl.json"), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert "replay_coef is 0.5 but no successful demonstrations" in capsys.readouterr().err
    assert not (tmp_path / "run" / "trajectories").exists()
    assert main(["rl", "--config", str(tmp_path / "rl.json"), "--out", str(tmp_path / "run"), "--quiet",
                 "--demos", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl does not exist" in capsys.readouterr().err


def test_think_tokens_can_be_masked(tokenizer):
    ids = tokenizer.encode("<think>I will click.</think><answer>exit()</answer>", add_special_tokens=False)
    mask = think_mask(tokenizer, ids)
    assert 0 < sum(mask) < len(ids) and mask[-1] == 0
    masked = tokenizer.decode([i for i, m in zip(ids, mask) if m])
    kept = tokenizer.decode([i for i, m in zip(ids, mask) if not m])
    assert masked.startswith("<think>I will click.") and "answer" not in masked
    assert "<answer>exit()</answer>" in kept and "click" not in kept


# ---------------------------------------------------------------- behaviour cloning


def test_sft_examples_use_the_rollout_prompt_and_train_only_the_response(tokenizer):
    policy = make_policy(tokenizer)
    exs = examples(policy, [demo(3)])
    assert len(exs) == 2
    first, second = exs
    trained = tokenizer.decode([t for t, m in zip(first.input_ids, first.loss_mask) if m])
    assert trained.startswith("<think>Click buy.") and trained.endswith(tokenizer.eos_token)
    context = tokenizer.decode([t for t, m in zip(second.input_ids, second.loss_mask) if not m])
    assert "Task: Buy item 3" in context and "[page content omitted" in context  # compressed, like rollouts
    no_think = examples(policy, [demo(3)], train_think=False)[0]
    assert "<think>" not in tokenizer.decode([t for t, m in zip(no_think.input_ids, no_think.loss_mask) if m])
    # The no-thinking format (the ablation) clones answers only, in the targets and the history.
    answers = examples(policy, [demo(3)], prompt=replace(policy.prompt, think=False))
    target = tokenizer.decode([t for t, m in zip(answers[0].input_ids, answers[0].loss_mask) if m])
    assert target.startswith("<answer>") and "Click buy." not in target
    history = tokenizer.decode([t for t, m in zip(answers[1].input_ids, answers[1].loss_mask) if not m])
    assert "Click buy." not in history and '<answer>do(action="Click", element="3")</answer>' in history


def test_step_accuracy_scores_greedy_answers_at_the_demonstrations_states_against_the_experts_actions(tokenizer):
    """Every demonstration state is asked once, with BC's prompt, greedy; the answers are
    scored by the step-reward rule. The model's answers are scripted here (a random model
    writes no actions): what is checked is which prompts are asked and how answers count."""
    from webr1_kit.actions import describe, parse_action
    from webr1_kit.generation import Completion

    policy = make_policy(tokenizer)
    demos = [demo(3), demo(5)]
    for d in demos:
        d.meta["template"] = "shop.buy"
        for t in d.turns:
            t.action = describe(parse_action(t.response))
    bc_prompts = [[t for t, m in zip(ex.input_ids, ex.loss_mask) if not m] for ex in examples(policy, demos)]
    answers = {  # per state (demo 3's two turns, then demo 5's): right, right exit, wrong element, no action
        0: '<think>x</think><answer>do(action="Click", element="3")</answer>',
        1: '<think>x</think><answer>exit(message="other words")</answer>',
        2: '<think>x</think><answer>do(action="Click", element="9")</answer>',
        3: "I would click it",
    }
    asked, temperatures = [], []

    async def scripted(ids, seed=0):
        asked.append(list(ids))
        temperatures.append(policy.generator.cfg.temperature)
        k = next(i for i, p in enumerate(bc_prompts) if p == list(ids))
        return Completion(ids=[1], text=answers[k], logprobs=[0.0], finish="stop")

    policy.generator.generate = scripted
    got = asyncio.run(step_accuracy(policy, demos))
    assert sorted(asked) == sorted(bc_prompts) and len(asked) == 4
    assert temperatures == [0.0] * 4 and policy.generator.cfg.temperature == policy.sampling.temperature
    # right: 1; exit: 1 (its message is the answer); wrong element: (valid 1 + type 1 + element 0) / 3; no action: 0
    assert got["states"] == 4 and got["valid"] == 0.75 and got["exact"] == 0.5
    assert got["score"] == pytest.approx((1 + 1 + 2 / 3 + 0) / 4)
    assert got["per_template"] == {"shop.buy": [2, 4]}
    assert got["outcomes"] == [["t3", 0, 0, 1.0], ["t3", 0, 1, 1.0], ["t5", 0, 0, pytest.approx(2 / 3)], ["t5", 0, 1, 0.0]]
    asked.clear()
    two = asyncio.run(step_accuracy(policy, demos, n_states=2, seed=1))
    assert two["states"] == 2 and len(asked) == 2  # only the drawn states are asked
    assert two == asyncio.run(step_accuracy(policy, demos, n_states=2, seed=1))  # the same draw every time
    with pytest.raises(ValueError, match="no demonstration turns"):
        asyncio.run(step_accuracy(policy, []))


def test_sft_loss_falls_on_a_tiny_dataset(tokenizer, tmp_path):
    policy = make_policy(tokenizer)
    row = train_sft(policy, [demo(k) for k in range(4)], SFTConfig(epochs=10, lr=1e-2, batch_size=8, warmup_steps=0,
                                                                  save_every=1000), out=tmp_path, progress=False)
    losses = [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 10 and row["step"] == 10
    # a random 2-layer model with frozen embeddings learns slowly through a small adapter,
    # but steadily: measured 10.82 -> 10.13 over these ten steps
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3


def test_sft_resumes_to_the_same_next_step(tokenizer, tmp_path):
    import shutil

    data = [demo(k) for k in range(6)]  # 12 turns: 6 optimizer steps of 2
    cfg = SFTConfig(epochs=1, lr=1e-3, batch_size=2, warmup_steps=0, save_every=2)
    train_sft(make_policy(tokenizer, seed=1), data, cfg, out=tmp_path, progress=False)
    straight = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # the process "dies" after step 2: later checkpoints and log lines never happened
    for step in (4, 6):
        shutil.rmtree(tmp_path / "checkpoints" / f"step-{step}")
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in straight[:2]))
    train_sft(make_policy(tokenizer, seed=1), data, cfg, out=tmp_path, progress=False)  # a fresh policy resumes
    resumed = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in resumed] == [1, 2, 3, 4, 5, 6]
    assert [r["loss"] for r in resumed[2:]] == pytest.approx([r["loss"] for r in straight[2:]], rel=1e-6)


def test_sft_with_lora_dropout_gives_the_same_adapter_whatever_drew_from_torch_before(tokenizer):
    """LoRA dropout draws its masks from torch's global generator; training seeds it from
    the run's seed, so what ran before (here: draws that change the generator's state)
    does not change the adapter, and another seed does."""
    import torch

    def trained(draws: int, seed: int = 0):
        lora = LoRA(r=4, alpha=8, dropout=0.5)
        model = attach_lora(build_tiny_model(tokenizer, 1), lora)
        policy = LLMPolicy(model, tokenizer, PolicyConfig(lora=lora), prompt=PromptConfig(max_prompt_tokens=2048))
        torch.rand(draws)
        train_sft(policy, [demo(k) for k in range(2)], SFTConfig(epochs=2, lr=1e-2, batch_size=2, warmup_steps=0,
                                                                 seed=seed), progress=False)
        return torch.cat([p.detach().flatten() for n, p in model.named_parameters() if "lora_" in n])

    first = trained(draws=1)
    assert torch.equal(first, trained(draws=1000))
    assert not torch.allclose(first, trained(draws=1, seed=1))


# ---------------------------------------------------------------- the command line


@pytest.mark.slow
def test_webr1_rl_runs_a_smoke_config_and_resumes(tokenizer, tmp_path, capsys):
    from webr1_kit.cli import main

    model_dir = save_tiny_model(tokenizer, tmp_path / "tiny")
    config = {
        "policy": {"model": str(model_dir), "lora": {"r": 4, "alpha": 8}},
        "prompt": {"max_prompt_tokens": 2048},
        "sampling": {"max_new_tokens": 16, "temperature": 0.7},
        "grpo": {"steps": 2, "tasks_per_step": 2, "group_size": 2, "max_turns": 2, "eval_max_turns": 2,
                 "eval_every": 2, "eval_tasks": 2, "save_every": 1, "concurrency": 4},
        "tasks": {"suite": "miniwob", "names": ["click-button", "focus-text"]},
        "eval_tasks": {"suite": "miniwob", "names": ["click-button"]},
    }
    (tmp_path / "rl.json").write_text(json.dumps(config))
    out = tmp_path / "run"
    assert main(["rl", "--config", str(tmp_path / "rl.json"), "--out", str(out), "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 2 and len(summary["eval_success"]) == 2
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["phase"] == "train"]
    for key in ("success_rate", "first_draw_success", "first_draw_episodes", "equal_reward_frac", "rerolled_groups",
                "kl", "entropy", "clip_frac", "grad_norm", "response_tokens", "truncated_responses",
                "turns", "invalid_action_rate", "rollout_s", "update_s"):
        assert key in train[0], key
    assert train[0]["first_draw_success"] == train[0]["success_rate"] and train[0]["first_draw_episodes"] == 4
    from webr1_kit.trajectory import read_jsonl

    step = list(read_jsonl(out / "trajectories" / "step-1.jsonl"))
    assert len(step) == 4 and all(t.meta["rl_reward"] == 0.0 for t in step)  # what the update learned from
    assert {p.name for p in out.iterdir()} >= {"config.json", "metrics.jsonl", "trajectories", "checkpoints", "adapter",
                                                 "reference"}
    assert main(["rl", "--config", str(tmp_path / "rl.json"), "--out", str(out), "--quiet"]) == 2  # refuses to overwrite
    assert "--resume" in capsys.readouterr().err
    # With dynamic sampling the first draw is logged before its equal groups are replaced:
    # the random model never succeeds, so both of its groups are re-rolled, twice.
    config["grpo"].update(steps=1, dynamic_sampling=True, eval_every=0)
    (tmp_path / "ds.json").write_text(json.dumps(config))
    assert main(["rl", "--config", str(tmp_path / "ds.json"), "--out", str(tmp_path / "ds"), "--quiet"]) == 0
    (row,) = [json.loads(x) for x in (tmp_path / "ds" / "metrics.jsonl").read_text().splitlines()]
    assert row["rerolled_groups"] == 4 and row["first_draw_episodes"] == 4 and row["first_draw_success"] == 0.0
    rerolled = (tmp_path / "ds" / "trajectories" / "rerolled-step-1.jsonl").read_text().splitlines()
    assert len(rerolled) == 8  # four replaced groups of two, kept for inspection


@pytest.mark.slow
def test_informative_drawing_counts_every_step_and_resumes_its_tally(tokenizer, tmp_path, capsys):
    from webr1_kit.cli import main

    model_dir = save_tiny_model(tokenizer, tmp_path / "tiny")
    config = {
        "policy": {"model": str(model_dir), "lora": {"r": 4, "alpha": 8}},
        "prompt": {"max_prompt_tokens": 2048},
        "sampling": {"max_new_tokens": 8, "temperature": 0.7},
        "grpo": {"steps": 2, "tasks_per_step": 2, "group_size": 2, "max_turns": 1, "eval_every": 0, "save_every": 1,
                 "concurrency": 4, "task_sampling": "informative", "task_memory": 0.5},
        "tasks": {"suite": "miniwob", "names": ["click-button", "focus-text", "click-link"]},
    }
    (tmp_path / "two.json").write_text(json.dumps(config))
    assert main(["rl", "--config", str(tmp_path / "two.json"), "--out", str(tmp_path / "straight"), "--quiet"]) == 0
    config["grpo"]["steps"] = 1
    (tmp_path / "one.json").write_text(json.dumps(config))
    assert main(["rl", "--config", str(tmp_path / "one.json"), "--out", str(tmp_path / "resumed"), "--quiet"]) == 0
    assert main(["rl", "--config", str(tmp_path / "two.json"), "--out", str(tmp_path / "resumed"), "--quiet",
                 "--resume"]) == 0
    capsys.readouterr()

    def state(run, step):
        return json.loads((tmp_path / run / "checkpoints" / f"step-{step}" / "state.json").read_text())["task_tally"]

    rows = [json.loads(x) for x in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    first = state("straight", 1)
    # The random model fails every episode: each drawn task holds its group's two failures.
    assert set(first["failures"]) == set(rows[0]["drawn_tasks"]) and set(first["failures"].values()) == {2.0}
    second = state("straight", 2)
    assert sum(second["failures"].values()) == pytest.approx(0.5 * 4 + 4)  # step 1's evidence halved, then step 2's
    assert state("resumed", 2) == second
    resumed = [json.loads(x) for x in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert [r["drawn_tasks"] for r in resumed] == [r["drawn_tasks"] for r in rows]
    # The weights each step drew with are logged: an unseen task's is 1 - 2/3 at G = 2; after two
    # failures (Beta(1, 3)) it is 1 - 1·2/(4·5) - 3·4/(4·5) = 0.3.
    assert all(w == pytest.approx(1 / 3, abs=1e-4) for w in rows[0]["draw_weights"].values())
    (unseen,) = set(rows[0]["draw_weights"]) - set(rows[0]["drawn_tasks"])
    assert rows[1]["draw_weights"][unseen] == pytest.approx(1 / 3, abs=1e-4)
    assert all(rows[1]["draw_weights"][t] == pytest.approx(0.3, abs=1e-4) for t in rows[0]["drawn_tasks"])


def test_update_logs_how_far_the_generators_log_probs_are_from_the_trainers_and_warns_when_far(tokenizer):
    import warnings

    from webr1_kit.grpo import OLD_LOGP_GAP_WARN

    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model)
    prompt = [1, 2, 3, 4]
    outs = policy.generator.generate_batch([prompt, prompt], [0, 1])  # what the rollout recorded as π_old

    def stats_with(shift):
        groups = [TrajectoryGroup("a", [rl_traj(prompt, o.ids, r, [lp + shift for lp in o.logprobs])
                                        for o, r in zip(outs, (1.0, 0.0))])]
        batch = build_batch(groups, tokenizer, GRPOConfig())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stats = update(policy, batch, GRPOConfig(lr=0.0), make_optimizer(policy.model, 0.0, (0.9, 0.99)))
        return stats, [str(w.message) for w in caught if "log-probabilities differ" in str(w.message)]

    same, warned = stats_with(0.0)
    assert same["old_logp_gap_max"] < 1e-4 and not warned  # the generator's numbers are the trainer's
    off, warned = stats_with(-0.3)  # as if another engine had sampled from other weights
    assert off["old_logp_gap_mean"] == pytest.approx(0.3, abs=1e-4) and 0.3 > OLD_LOGP_GAP_WARN
    assert len(warned) == 1 and "above 0.05" in warned[0]


def test_generation_after_an_update_uses_the_new_weights(tokenizer):
    """The generator caches the system prompt's KV; an update must not leave it stale."""
    policy = make_policy(tokenizer)
    perturb_lora_b(policy.model)
    gen = policy.generator
    prompt = list(gen._static) + tokenizer.encode("Round 1\n<button id=\"3\" data-text=\"Buy\">")
    gen.cfg = SamplingConfig(temperature=0, max_new_tokens=4)
    gen.generate_batch([prompt, prompt + [5]], [0, 1])  # fills the cache with the old weights
    groups = [TrajectoryGroup("a", [rl_traj([1, 2, 3], [4, 5, 6], 1.0), rl_traj([1, 2, 3], [7, 8], 0.0)])]
    update(policy, build_batch(groups, tokenizer, GRPOConfig()), GRPOConfig(lr=5e-2),
           make_optimizer(policy.model, 5e-2, (0.9, 0.99)))
    out = gen.generate_batch([prompt, prompt + [5]], [0, 1])[0]
    with torch.no_grad():
        lp = torch.log_softmax(policy.model(torch.tensor([prompt + out.ids])).logits.float(), -1)[0]
    ref = [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(out.ids)]
    assert max(abs(x - y) for x, y in zip(ref, out.logprobs)) < 1e-4
