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
        self._static: tuple[int, ...] = ()
        self._static_cache: Any = None
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

    def set_static_prefix(self, ids: Sequence[int]) -> None:
        """Token ids that begin most prompts (the system prompt): their KV cache is computed
        once and reused by every batch whose prompts all start with them."""
        self._static = tuple(ids)
        self._static_cache = None

    def invalidate_cache(self) -> None:
        """Forget the stored prefix cache. Call it whenever the weights change (an optimizer
        step, a loaded adapter): the cache was computed with the old weights."""
        self._static_cache = None

    def generate_batch(self, prompts: list[list[int]], seeds: list[int]) -> list[Completion]:
        """Decode a batch synchronously: shared prompt prefix computed once, the rest
        left-padded, one KV cache, per-row seeded sampling, finished rows dropped."""
        import copy

        import torch

        t0 = time.perf_counter()
        cfg, model = self.cfg, self.model
        device = next(model.parameters()).device
        n = len(prompts)
        cache_kw = _cache_kwarg(model)
        gens = [torch.Generator().manual_seed(int(s) % (2**63)) for s in seeds]
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lp: list[list[float]] = [[] for _ in range(n)]
        finish = ["length"] * n
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                # 1. The prefix every prompt shares (the system prompt; a whole GRPO group's
                #    first prompt) is computed once, then repeated along the batch.
                shared = _common_prefix(prompts)
                cache, start = None, 0
                static = getattr(self, "_static", ())
                if static and shared >= len(static) and tuple(prompts[0][: len(static)]) == static:
                    if self._static_cache is None:
                        out = model(input_ids=torch.tensor([list(static)], device=device), use_cache=True)
                        self._static_cache = _cache_of(out)
                    cache, start = copy.deepcopy(self._static_cache), len(static)
                if shared - start >= 16 or cache is not None:
                    if shared > start:
                        chunk = torch.tensor([prompts[0][start:shared]], device=device)
                        pos = torch.arange(start, shared, device=device).unsqueeze(0)
                        kw = {cache_kw: cache} if cache is not None else {}
                        cache = _cache_of(model(input_ids=chunk, position_ids=pos, use_cache=True, **kw))
                    if n > 1:
                        cache.batch_repeat_interleave(n)
                else:
                    shared, cache = 0, None
                # 2. The rest of each prompt, left-padded after the shared prefix (the pads
                #    are masked out and the positions skip them, so each row sees exactly its prompt).
                rest = [p[shared:] for p in prompts]
                width = max(len(r) for r in rest)
                input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
                rest_mask = torch.zeros((n, width), dtype=torch.long)
                for i, r in enumerate(rest):
                    input_ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
                    rest_mask[i, width - len(r):] = 1
                mask = torch.cat([torch.ones((n, shared), dtype=torch.long), rest_mask], dim=1).to(device)
                positions = (shared + rest_mask.cumsum(-1) - 1).clamp(min=0).to(device)
                kw = {cache_kw: cache} if cache is not None else {}
                out = model(input_ids=input_ids.to(device), attention_mask=mask, position_ids=positions,
                            use_cache=True, **kw)
                cache, logits = _cache_of(out), out.logits[:, -1, :]
                positions = positions[:, -1:]
                active = list(range(n))  # batch row k decodes request active[k]
                for _ in range(cfg.max_new_tokens):
                    logp = torch.log_softmax(logits.float(), dim=-1)
                    keep, step = [], []
                    for k, i in enumerate(active):
                        tok = self._sample(logits[k].float(), gens[i])
                        out_ids[i].append(tok)
                        out_lp[i].append(float(logp[k, tok]))
                        if tok in self.end_ids or self._hit_stop(out_ids[i]):
                            finish[i] = "stop"
                        else:
                            keep.append(k)
                            step.append(tok)
                    if not keep:
                        break
                    if len(keep) < len(active):  # drop finished rows from the cache and the batch
                        idx = torch.tensor(keep, device=device)
                        cache.batch_select_indices(idx)
                        mask, positions = mask[idx], positions[idx]
                        active = [active[k] for k in keep]
                    mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long, device=device)], dim=1)
                    positions = positions + 1
                    out = model(input_ids=torch.tensor(step, device=device).unsqueeze(1), attention_mask=mask,
                                position_ids=positions, use_cache=True, **{cache_kw: cache})
                    cache, logits = _cache_of(out), out.logits[:, -1, :]
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


def _common_prefix(prompts: list[list[int]]) -> int:
    """Length of the prefix all prompts share, leaving every prompt at least one token of its own."""
    limit = min(len(p) for p in prompts) - 1
    first = prompts[0]
    k = 0
    while k < limit and all(p[k] == first[k] for p in prompts[1:]):
        k += 1
    return k


def _cache_of(out: Any) -> Any:
    """The KV cache of a forward's output (transformers 5.x calls it `cache`, 4.x `past_key_values`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _cache_kwarg(model: Any) -> str:
    """The forward keyword that takes a KV cache, for this transformers version."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
