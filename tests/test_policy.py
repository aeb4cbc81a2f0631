"""Policy, prompts, the batching generator, packing and model rollouts.

Mechanics run on a tiny random Llama (2 layers, hidden size 64) with the embedded
model's real tokenizer and chat template; one slow test runs the real embedded model.
"""

from __future__ import annotations

import asyncio
import os

import pytest
import torch

from webr1_kit.config import LoRA, PolicyConfig, PromptConfig, SamplingConfig
from webr1_kit.generation import Generator
from webr1_kit.observation import Observation
from webr1_kit.models import PolicyLoadError, attach_lora, build_tiny_model, embedded_path
from webr1_kit.policy import LLMPolicy, load_policy
from webr1_kit.prompt import build_prompt, messages, placeholder
from webr1_kit.rollout import rollout, run_episodes
from webr1_kit.tasks import Task, load_tasks
from webr1_kit.trajectory import Trajectory, Turn, pack


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_path())


def tiny_model(tokenizer, seed: int = 0):
    return build_tiny_model(tokenizer, seed)


@pytest.fixture
def tiny(tokenizer):
    return tiny_model(tokenizer)


def obs(url: str, content: str, error: str | None = None) -> Observation:
    return Observation(url=url, title="t", content=content, error=error)


# ---------------------------------------------------------------- generator


def test_batched_greedy_equals_unbatched_and_logprobs_match_a_forward_pass(tiny, tokenizer):
    gen = Generator(tiny, tokenizer, SamplingConfig(temperature=0, max_new_tokens=10))
    prompts = [tokenizer.encode("Hello there, how are you"), tokenizer.encode("x"),
               tokenizer.encode("The quick brown fox jumps over the lazy dog and")]
    batched = gen.generate_batch(prompts, [1, 2, 3])
    for prompt, b, seed in zip(prompts, batched, [1, 2, 3]):
        single = gen.generate_batch([prompt], [seed])[0]
        assert b.ids == single.ids
        ids = torch.tensor([prompt + b.ids])
        with torch.no_grad():
            lp = torch.log_softmax(tiny(ids).logits.float(), -1)[0]
        ref = [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(b.ids)]
        assert max(abs(x - y) for x, y in zip(ref, b.logprobs)) < 1e-4


def test_shared_and_static_prefixes_give_the_same_tokens_and_logprobs(tiny, tokenizer):
    system = tokenizer.encode("You are a web agent. " * 12)
    prompts = [system + tokenizer.encode(f"Task {k}: buy item {k} " + "now " * k) for k in range(4)]
    plain = Generator(tiny, tokenizer, SamplingConfig(temperature=0, max_new_tokens=6))
    cached = Generator(tiny, tokenizer, SamplingConfig(temperature=0, max_new_tokens=6))
    cached.set_static_prefix(system)
    for _ in range(2):  # the second batch reuses the stored system-prompt cache
        outs = cached.generate_batch(prompts, [0, 1, 2, 3])
        for prompt, out in zip(prompts, outs):
            ids = torch.tensor([prompt + out.ids])
            with torch.no_grad():
                lp = torch.log_softmax(tiny(ids).logits.float(), -1)[0]
            ref = [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(out.ids)]
            assert max(abs(x - y) for x, y in zip(ref, out.logprobs)) < 1e-4
    assert [o.ids for o in outs] == [o.ids for o in plain.generate_batch(prompts, [0, 1, 2, 3])]
    group = plain.generate_batch([prompts[1]] * 3, [5, 5, 5])  # a GRPO group: one prompt, one prefill
    assert group[0].ids == group[1].ids == group[2].ids


def test_a_sample_depends_on_its_seed_not_on_its_batch(tiny, tokenizer):
    gen = Generator(tiny, tokenizer, SamplingConfig(temperature=1.0, max_new_tokens=8))
    p = tokenizer.encode("Sample me")
    alone = gen.generate_batch([p], [42])[0].ids
    together = gen.generate_batch([tokenizer.encode("another prompt here"), p], [7, 42])[1].ids
    assert alone == together
    assert gen.generate_batch([p], [43])[0].ids != alone


def test_identical_prompts_prefilled_once_still_sample_their_own_seeds(tiny, tokenizer):
    # A GRPO group (one prompt, G seeds) mixed with other prompts, some rows ending early:
    # each row must equal that prompt sampled alone with its seed, log-probs included.
    # (A random model's distribution is nearly flat, where float differences between batch
    # shapes could flip a sample; a low temperature makes it peaked enough to compare.)
    gen = Generator(tiny, tokenizer, SamplingConfig(temperature=0.1, top_p=0.9, max_new_tokens=12))
    gen.end_ids = set(gen.end_ids) | {tokenizer.encode(" the")[0], tokenizer.encode(".")[0]}
    group = tokenizer.encode("Shared prompt of a group")
    prompts = [group, tokenizer.encode("another one"), group, group]
    seeds = [1, 2, 3, 4]
    batched = gen.generate_batch(prompts, seeds)
    for prompt, seed, b in zip(prompts, seeds, batched):
        single = gen.generate_batch([prompt], [seed])[0]
        assert b.ids == single.ids and b.finish == single.finish
        assert max(abs(x - y) for x, y in zip(b.logprobs, single.logprobs)) < 1e-4
    assert len({tuple(b.ids) for b in batched[::2] + batched[3:]}) > 1  # the seeds differ, the samples too


def test_generation_stops_at_the_end_of_the_answer(tokenizer):
    class Scripted(torch.nn.Module):
        """A 'model' that always writes the same tokens: <answer>exit()</answer> and more."""

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.script = tokenizer.encode("<answer>exit()</answer> and then some more text")

        def forward(self, input_ids, attention_mask, position_ids, use_cache=True, **kw):
            from types import SimpleNamespace

            step = attention_mask.shape[1] - self.prompt_len
            logits = torch.full((input_ids.shape[0], input_ids.shape[1], len(tokenizer)), -1e9)
            logits[:, -1, self.script[min(step, len(self.script) - 1)]] = 0
            return SimpleNamespace(logits=logits, cache=None, past_key_values=None)

    model = Scripted()
    prompt = tokenizer.encode("go")
    model.prompt_len = len(prompt)
    out = Generator(model, tokenizer, SamplingConfig(temperature=0, max_new_tokens=30)).generate_batch([prompt], [0])[0]
    assert out.finish == "stop" and out.text.endswith("</answer>") and "more" not in out.text


async def test_concurrent_requests_are_batched(tiny, tokenizer):
    gen = Generator(tiny, tokenizer, SamplingConfig(temperature=0, max_new_tokens=4, max_batch=8))
    outs = await asyncio.gather(*(gen.generate(tokenizer.encode(f"prompt {i}"), seed=i) for i in range(8)))
    assert len(outs) == 8 and all(o.ids for o in outs)
    assert gen.stats["batches"] == 1 and gen.stats["requests"] == 8


async def test_the_batch_waits_for_episodes_still_in_the_browser(tiny, tokenizer):
    # Three episodes in flight; two reach the model 0.3 s after the first (a slow page).
    async def late(gen, i):
        await asyncio.sleep(0.3)
        return await gen.generate(tokenizer.encode(f"prompt {i}"), seed=i)

    for expected, batches in ((1, 2), (3, 1)):
        gen = Generator(tiny, tokenizer, SamplingConfig(temperature=0, max_new_tokens=2, max_batch=8))
        gen.expected = expected
        await asyncio.gather(gen.generate(tokenizer.encode("prompt 0"), seed=0), late(gen, 1), late(gen, 2))
        assert gen.stats["batches"] == batches, expected


async def test_lockstep_batches_do_not_depend_on_timing(tiny, tokenizer):
    """Evaluation's batches: whichever episode is slow in the browser, the same requests share
    a batch, in the same order, so bfloat16 arithmetic gives the same tokens on every run."""
    import random

    tiny.webr1_autocast = torch.bfloat16  # batch-mates shift a row's numbers: what lockstep guards against

    async def episodes(jitter: int, lockstep: bool):
        gen = Generator(tiny, tokenizer, SamplingConfig(temperature=0.7, max_new_tokens=5, max_batch=3))
        gen.lockstep, gen.expected = lockstep, 5
        gen.batch_wait_ms, gen.straggler_wait_ms = 1, 20
        log, delays = [], random.Random(jitter)
        run = gen.generate_batch

        def logged(prompts, seeds):
            log.append(tuple(seeds))
            return run(prompts, seeds)

        gen.generate_batch = logged

        async def episode(i):
            ids, out = tokenizer.encode(f"episode {i}"), []
            for turn in range(3):  # each turn's prompt holds the previous answers, as in an episode
                await asyncio.sleep(delays.random() * 0.05)  # the browser step
                done = await gen.generate(ids, seed=100 * i + turn)
                ids, out = ids + done.ids, out + [done.ids]
            gen.expected -= 1  # the episode's worker leaves, as run_episodes tells the policy
            return out

        return await asyncio.gather(*(episode(i) for i in range(5))), log

    a, log_a = await episodes(1, True)
    b, log_b = await episodes(2, True)
    assert a == b and log_a == log_b
    assert [len(x) for x in log_a] == [3, 2] * 3  # each round of five requests, in chunks of max_batch
    _, free_a = await episodes(1, False)
    _, free_b = await episodes(2, False)
    assert free_a != free_b  # without lockstep the batches follow the timing


# ---------------------------------------------------------------- prompts


def test_compression_keeps_responses_and_drops_old_observations(tokenizer):
    history = [
        Turn(observation=obs("http://a/1", "<p>FIRST PAGE BODY</p>").to_dict(), response="<answer>do(action=\"Click\", element=\"3\")</answer>"),
        Turn(observation=obs("http://a/2", "<p>SECOND PAGE BODY</p>", error="element 9 is hidden").to_dict(), response="<think>hm</think><answer>go_backward()</answer>"),
    ]
    now = obs("http://a/3", "<p>CURRENT PAGE BODY</p>")
    text = "\n".join(m["content"] for m in messages("Buy milk", history, now, PromptConfig(compress=True)))
    assert "FIRST PAGE BODY" not in text and "SECOND PAGE BODY" not in text
    assert placeholder(history[0].observation) in text and "element 9 is hidden" in text
    assert "CURRENT PAGE BODY" in text and "go_backward()" in text and 'element=\\"3\\"' not in text
    assert text.count("Task: Buy milk") == 1 and "Round 3" in text
    full = "\n".join(m["content"] for m in messages("Buy milk", history, now, PromptConfig(compress=False)))
    assert "FIRST PAGE BODY" in full and "SECOND PAGE BODY" in full
    roles = [m["role"] for m in messages("Buy milk", history, now, PromptConfig())]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]


def test_the_token_budget_cuts_the_observation_never_the_instruction(tokenizer):
    big = obs("http://a/1", " ".join(f"<p>item {i}</p>" for i in range(3000)))
    cfg = PromptConfig(max_prompt_tokens=1200)
    prompt = build_prompt(tokenizer, "Find item 7 and report its name", [], big, cfg)
    assert prompt.truncated and len(prompt.ids) <= 1200
    text = tokenizer.decode(prompt.ids)
    assert "Find item 7 and report its name" in text and "observation cut to fit" in text
    assert 'do(action="Click", element="<id>")' in text  # the action documentation is intact
    small = build_prompt(tokenizer, "x", [], obs("http://a", "<p>hi</p>"), cfg)
    assert not small.truncated


def test_thinking_format_can_be_switched_off(tokenizer):
    on = messages("t", [], obs("u", "c"), PromptConfig(think=True))[0]["content"]
    off = messages("t", [], obs("u", "c"), PromptConfig(think=False))[0]["content"]
    assert "<think>" in on and "<think>" not in off and "<answer>" in off


# ---------------------------------------------------------------- packing


def _model_turn(prompt, completion):
    return Turn(observation={}, response="r", prompt_ids=prompt, completion_ids=completion,
                logprobs=[-0.5] * len(completion))


def test_packing_masks_exactly_the_response_tokens():
    # compressed history: turn 2's prompt does not extend turn 1's sequence
    traj = Trajectory("t", "i", 0, turns=[_model_turn([1, 2, 3], [10, 11]), _model_turn([1, 2, 7, 8], [12])])
    seqs = pack(traj)
    assert [s.input_ids for s in seqs] == [[1, 2, 3, 10, 11], [1, 2, 7, 8, 12]]
    assert [s.loss_mask for s in seqs] == [[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]]
    assert seqs[1].turn == [-1, -1, -1, -1, 1] and seqs[0].old_logprobs[3:] == [-0.5, -0.5]
    # append-only history: one packed sequence, environment tokens masked
    traj = Trajectory("t", "i", 0, turns=[_model_turn([1, 2], [10, 11]), _model_turn([1, 2, 10, 11, 5, 6], [12])])
    (seq,) = pack(traj)
    assert seq.input_ids == [1, 2, 10, 11, 5, 6, 12] and seq.loss_mask == [0, 0, 1, 1, 0, 0, 1]
    with pytest.raises(ValueError, match="no token record"):
        pack(Trajectory("t", "i", 0, turns=[Turn(observation={}, response="x")]))


# ---------------------------------------------------------------- loading


def test_embedded_model_is_cached_as_safetensors():
    path = embedded_path()
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()


def test_missing_models_and_offline_hub_ids_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(PolicyLoadError, match="does not exist"):
        load_policy(str(tmp_path / "nowhere" / "model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyLoadError, match="no config.json"):
        load_policy(str(tmp_path / "empty"))
    # Offline mode as a user without network sets it (the constant is read at import, so
    # patch it too): the Hub is never contacted, and the error says what to do instead.
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PolicyLoadError, match="local path"):
        load_policy("someone/no-such-model-webr1")


def test_lora_targets_every_linear_layer_and_adapters_round_trip(tiny, tokenizer, tmp_path):
    model = attach_lora(tiny, LoRA(r=4, alpha=8))
    lora_modules = {n.split(".lora_A")[0].rsplit(".", 1)[-1] for n, _ in model.named_parameters() if "lora_A" in n}
    assert lora_modules == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)
    policy = LLMPolicy(model, tokenizer, PolicyConfig(lora=LoRA(r=4, alpha=8)))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.add_(0.01)
    policy.save_adapter(tmp_path / "adapter")
    other = LLMPolicy(attach_lora(tiny_model(tokenizer), LoRA(r=4, alpha=8)), tokenizer)
    other.load_adapter(tmp_path / "adapter")
    a = dict(model.named_parameters())
    for n, p in other.model.named_parameters():
        if "lora_" in n:
            assert torch.equal(p, a[n]), n
    x = torch.tensor([[1, 2, 3]])
    with policy.reference() as ref, torch.no_grad():  # the adapter switched off = the base model
        base_out = ref(x).logits
    with torch.no_grad():
        assert not torch.allclose(model(x).logits, base_out)


# ---------------------------------------------------------------- rollouts with a model


async def test_model_rollouts_record_tokens_and_exclude_infra_failures(tiny, tokenizer, browser):
    policy = LLMPolicy(tiny, tokenizer, sampling=SamplingConfig(temperature=1.0, max_new_tokens=12),
                       prompt=PromptConfig(max_prompt_tokens=2048))
    dead = Task(task_id="dead", intent="x", start_url="http://127.0.0.1:9/",
                eval={"eval_types": ["url_match"], "reference_url": "http://127.0.0.1:9/"})
    tasks = load_tasks("miniwob", names=["click-button"]) + [dead]
    groups = await rollout(policy, tasks, group_size=3, max_turns=2, concurrency=6, browser=browser, seed=1)
    assert [g.task_id for g in groups] == ["miniwob/click-button", "dead"]
    assert len(groups[0].valid) == 3 and groups[1].valid == []  # the failures are kept apart, not scored 0
    members = groups[0].trajectories
    assert len({t.seed for t in members}) == 1  # a group faces one problem...
    assert len({t.meta["sample_seed"] for t in members}) == 3  # ...with different sampling
    for t in members:
        for turn in t.turns:
            assert turn.prompt_ids and turn.completion_ids and len(turn.logprobs) == len(turn.completion_ids)
            assert tokenizer.decode(turn.completion_ids, skip_special_tokens=True) == turn.response
        assert pack(t)


async def test_sixteen_concurrent_model_episodes_complete(tiny, tokenizer, browser):
    policy = LLMPolicy(tiny, tokenizer, sampling=SamplingConfig(temperature=1.0, max_new_tokens=8))
    tasks = load_tasks("miniwob", names=["click-button", "focus-text"])
    result = await run_episodes(policy, tasks, episodes=8, concurrency=16, max_turns=2, browser=browser)
    assert result.metrics["episodes"] == 16 and result.metrics["infra_failures"] == 0
    assert policy.generator.stats["requests"] == sum(len(t.turns) for t in result.trajectories)
    assert policy.generator.stats["batches"] < policy.generator.stats["requests"]  # requests were batched


@pytest.mark.slow
async def test_the_embedded_model_plays_an_arena_episode(browser):
    policy = load_policy("embedded", lora=None, sampling=SamplingConfig(temperature=0, max_new_tokens=96))
    task = load_tasks("arena", split="test")[0]
    result = await run_episodes(policy, [task], max_turns=2, browser=browser)
    traj = result.trajectories[0]
    assert traj.status != "infra_failure" and traj.turns
    assert all(t.completion_ids and t.response for t in traj.turns)
    assert result.metrics["success_rate"] is not None


# ---------------------------------------------------------------- CPU autocast


def test_a_new_adapter_is_drawn_from_its_seed_and_leaves_the_global_stream_alone(tokenizer):
    def lora_a(seed, global_seed):
        model = tiny_model(tokenizer)
        torch.manual_seed(global_seed)  # whatever ran before in the process
        model = attach_lora(model, LoRA(r=4, alpha=8), seed=seed)
        after = torch.rand(3)
        return torch.cat([p.flatten() for n, p in model.named_parameters() if "lora_A" in n]), after

    first, after = lora_a(0, global_seed=123)
    assert torch.equal(lora_a(0, global_seed=456)[0], first)
    assert not torch.equal(lora_a(1, global_seed=123)[0], first)
    torch.manual_seed(123)  # drawing the adapter took nothing from the global stream
    assert torch.equal(torch.rand(3), after)


def test_cpu_autocast_keeps_weights_float32_and_logprobs_close_to_training():
    """With cpu_autocast the prefill runs in bfloat16 and decoding in float32; the recorded
    log-probs must still agree with the training pass (also under autocast) closely enough
    that M-GRPO's importance ratios stay near 1."""
    from webr1_kit.trajectory import Packed
    from webr1_kit.training import token_logprobs

    policy = load_policy("tiny", lora=LoRA(r=4, alpha=8), cpu_autocast="bfloat16",
                         sampling=SamplingConfig(temperature=1.0, max_new_tokens=10))
    base = policy.model.get_base_model()
    assert base.webr1_autocast is torch.bfloat16
    assert all(p.dtype == torch.float32 for p in policy.model.parameters())
    prompts = [list(range(100, 160)), list(range(300, 340))]
    outs = policy.generator.generate_batch(prompts, [1, 2])
    seqs = []
    for p, o in zip(prompts, outs):
        assert o.ids and len(o.logprobs) == len(o.ids)
        seqs.append(Packed(input_ids=p + o.ids, loss_mask=[0] * len(p) + [1] * len(o.ids)))
    with torch.no_grad():
        again, _ = token_logprobs(policy.model, seqs)
    recorded = torch.tensor([lp for o in outs for lp in o.logprobs])
    assert again.dtype == torch.float32
    assert (again - recorded).abs().max() < 0.05

    off = load_policy("tiny", lora=None, cpu_autocast="off")
    assert getattr(off.model, "webr1_autocast", None) is None


def test_bad_cpu_autocast_value_is_named():
    with pytest.raises((ValueError, TypeError), match="cpu_autocast|float16"):
        load_policy("tiny", lora=None, cpu_autocast="float16")


def test_load_policy_takes_a_policy_config():
    """A run config's policy section loads as it is; keywords stay a convenience, not a second way to mix in."""
    policy = load_policy(PolicyConfig(model="tiny", lora=LoRA(r=4, alpha=8), cpu_autocast="off"))
    assert policy.config.lora.r == 4 and policy.config.cpu_autocast == "off"
    assert getattr(policy.model.get_base_model(), "webr1_autocast", None) is None
    with pytest.raises(TypeError, match="not both"):
        load_policy(PolicyConfig(model="tiny"), dtype="float32")


def test_loading_a_model_without_the_train_extra_names_it(monkeypatch):
    """The base install runs rollouts without torch and friends; loading a model then says what to install."""
    import sys

    monkeypatch.setitem(sys.modules, "peft", None)  # as if it were not installed
    with pytest.raises(PolicyLoadError, match=r"needs peft.*webr1_kit\[train\]"):
        load_policy("tiny")


def test_loading_a_model_prints_no_bitsandbytes_kernel_download_warning():
    """On CPUs with AVX512-BF16, importing bitsandbytes (through peft) tries an optional
    kernel download and warns when it fails; the kit never downloads at run time, so the
    warning is silenced before peft is first imported (a fresh interpreter checks it)."""
    import subprocess
    import sys

    code = ("from webr1_kit.config import PolicyConfig\nfrom webr1_kit.models import load_model\n"
            "load_model(PolicyConfig(model='tiny'))\nprint('loaded')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "loaded" in r.stdout, r.stderr[-2000:]
    assert "kernels-community" not in r.stderr
