"""One model, many episodes: a generator that batches whatever requests are pending.

Concurrent episodes `await generator.generate(prompt_ids, seed)`. Requests queue up;
a single worker takes as many as fit (`max_batch`, `batch_token_budget`), left-pads
them, and decodes them together in a worker thread, so the event loop keeps driving
the browsers while the model computes. That overlap, and the batching, are where
asynchronous rollouts gain on a one-episode-at-a-time loop.

Each request returns the sampled token ids, their text and their log-probabilities.
The log-probabilities are those of the model's own distribution (temperature 1, no
top-p), i.e. log π_old(token) for the importance ratio, whatever the sampling
temperature. Each request samples with its own seeded generator, so a response
depends on its seed, not on which other requests shared its batch (up to floating
point differences between batch shapes).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from .config import SamplingConfig


@dataclass
class Completion:
    """One sampled response."""

    ids: list[int]
    """Sampled token ids (including the end token, if one was sampled)."""
    text: str
    logprobs: list[float]
    """log π(token) under the model's raw distribution, one per id."""
    finish: str
    """"stop" (end token or stop string) or "length" (max_new_tokens reached)."""


@dataclass
class _Request:
    prompt_ids: list[int]
    seed: int
    future: asyncio.Future
    t_submit: float = field(default_factory=time.perf_counter)


class Generator:
    """Batched sampling from one model for many concurrent callers."""

    def __init__(self, model: Any, tokenizer: Any, cfg: SamplingConfig | None = None,
                 stop: Sequence[str] = ("</answer>",), batch_wait_ms: float = 100.0):
        self.model, self.tokenizer = model, tokenizer
        self.cfg = cfg or SamplingConfig()
        self.stop = tuple(stop)
        self.batch_wait_ms = batch_wait_ms
        """How long the first pending request waits for others to join its batch."""
        self._pending: list[_Request] = []
        self._worker: asyncio.Task | None = None
        self.stats = {"batches": 0, "requests": 0, "new_tokens": 0, "seconds": 0.0}
        ends = {tokenizer.eos_token_id}
        for tok in ("<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<end_of_turn>"):
            tid = tokenizer.convert_tokens_to_ids(tok) if tok in tokenizer.get_vocab() else None
            if tid is not None:
                ends.add(tid)
        self.end_ids = {t for t in ends if t is not None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    async def generate(self, prompt_ids: Sequence[int], seed: int = 0) -> Completion:
        """Sample one response to `prompt_ids` (batched with whatever else is pending)."""
        loop = asyncio.get_running_loop()
        req = _Request(list(prompt_ids), seed, loop.create_future())
        self._pending.append(req)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await req.future

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < self.cfg.max_batch:
                await asyncio.sleep(self.batch_wait_ms / 1000)  # let other episodes join the batch
            batch = self._take()
            try:
                results = await asyncio.to_thread(self.generate_batch, [r.prompt_ids for r in batch],
                                                  [r.seed for r in batch])
            except BaseException as exc:  # hand the failure to every caller of this batch
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(exc)
                continue
            for r, res in zip(batch, results):
                if not r.future.done():
                    r.future.set_result(res)

    def _take(self) -> list[_Request]:
        """Pending requests, oldest first, within max_batch and the token budget."""
        batch: list[_Request] = []
        longest = 0
        for r in list(self._pending):
            longest_if = max(longest, len(r.prompt_ids))
            if batch and ((len(batch) + 1) * (longest_if + self.cfg.max_new_tokens) > self.cfg.batch_token_budget
                          or len(batch) >= self.cfg.max_batch):
                break
            batch.append(r)
            longest = longest_if
        for r in batch:
            self._pending.remove(r)
        return batch

    # ------------------------------------------------------------------ the decoding loop

    def generate_batch(self, prompts: list[list[int]], seeds: list[int]) -> list[Completion]:
        """Decode a batch synchronously (left padding, one KV cache, per-row seeded sampling)."""
        import torch

        t0 = time.perf_counter()
        cfg, model = self.cfg, self.model
        device = next(model.parameters()).device
        n, width = len(prompts), max(len(p) for p in prompts)
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            input_ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        gens = [torch.Generator().manual_seed(int(s) % (2**63)) for s in seeds]
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lp: list[list[float]] = [[] for _ in range(n)]
        finish = ["length"] * n
        done = [False] * n
        was_training = model.training
        cache_kw = _cache_kwarg(model)
        model.eval()
        try:
            with torch.inference_mode():
                out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
                past, logits = _cache_of(out), out.logits[:, -1, :]
                for _ in range(cfg.max_new_tokens):
                    logp = torch.log_softmax(logits.float(), dim=-1)
                    step = torch.full((n, 1), self.pad_id, dtype=torch.long)
                    for i in range(n):
                        if done[i]:
                            continue
                        tok = self._sample(logits[i].float(), gens[i])
                        out_ids[i].append(tok)
                        out_lp[i].append(float(logp[i, tok]))
                        step[i, 0] = tok
                        if tok in self.end_ids or self._hit_stop(out_ids[i]):
                            done[i], finish[i] = True, "stop"
                    if all(done):
                        break
                    mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long, device=device)], dim=1)
                    positions = positions[:, -1:] + 1
                    out = model(input_ids=step.to(device), attention_mask=mask, position_ids=positions,
                                use_cache=True, **{cache_kw: past})
                    past, logits = _cache_of(out), out.logits[:, -1, :]
        finally:
            model.train(was_training)
        results = [
            Completion(ids, self.tokenizer.decode(ids, skip_special_tokens=True), lps, fin)
            for ids, lps, fin in zip(out_ids, out_lp, finish)
        ]
        self.stats["batches"] += 1
        self.stats["requests"] += n
        self.stats["new_tokens"] += sum(len(i) for i in out_ids)
        self.stats["seconds"] += time.perf_counter() - t0
        return results

    def _sample(self, logits: Any, gen: Any) -> int:
        import torch

        if self.cfg.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / self.cfg.temperature, dim=-1)
        if self.cfg.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < self.cfg.top_p  # always keeps the top token
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
            probs = probs / probs.sum()
        return int(torch.multinomial(probs.cpu(), 1, generator=gen))

    def _hit_stop(self, ids: list[int]) -> bool:
        if not self.stop:
            return False
        tail = self.tokenizer.decode(ids[-8:], skip_special_tokens=True)
        return any(s in tail for s in self.stop)


def _cache_of(out: Any) -> Any:
    """The KV cache of a forward's output (transformers 5.x calls it `cache`, 4.x `past_key_values`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _cache_kwarg(model: Any) -> str:
    """The forward keyword that takes a KV cache, for this transformers version."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
