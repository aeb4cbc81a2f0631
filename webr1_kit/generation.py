"""One model, many episodes: a generator that batches whatever requests are pending.

Concurrent episodes `await generator.generate(prompt_ids, seed)`. Requests queue up;
a single worker takes as many as fit (`max_batch`, `batch_token_budget`), left-pads
them, and decodes them together in a worker thread, so the event loop keeps driving
the browsers while the model computes. That overlap, and the batching, are where
asynchronous rollouts gain on a one-episode-at-a-time loop.

Each request returns the sampled token ids, their text and their log-probabilities
under the distribution they were sampled from: log_softmax(logits / T) at sampling
temperature T (T = 1 for greedy decoding, where nothing is sampled). That is log π_old
for the importance ratio, and training scores tokens at the same T
(`training.token_logprobs(..., temperature=T)`), as TRL does: the policy M-GRPO improves
is the tempered one that acted. A top-p cut is not part of it (the ratio then sees the
untruncated tempered distribution; M-GRPO's default keeps top_p at 1).

Each request samples with its own seeded generator, so a response depends on its seed,
not on which other requests shared its batch, up to floating-point differences between
batch shapes; `lockstep` batching removes those too (evaluation uses it).
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from .config import SamplingConfig
from .cpu import compute_context, trim_memory


@dataclass
class Completion:
    """One sampled response."""

    ids: list[int]
    """Sampled token ids (including the end token, if one was sampled)."""
    text: str
    logprobs: list[float]
    """log π_T(token) = log_softmax(logits / T) at the sampling temperature T (1 when greedy), one per id."""
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
                 stop: Sequence[str] = ("</answer>",), batch_wait_ms: float = 100.0,
                 straggler_wait_ms: float = 1500.0):
        self.model, self.tokenizer = model, tokenizer
        self.cfg = cfg or SamplingConfig()
        self.stop = tuple(stop)
        self.batch_wait_ms = batch_wait_ms
        """How long the first pending request waits for others to join its batch."""
        self.straggler_wait_ms = straggler_wait_ms
        """With `expected` callers, how long a batch may wait for all of them to be pending."""
        self.expected = 1
        """How many callers are running (episodes in flight; `rollout` sets it). A batch waits,
        up to `straggler_wait_ms`, until that many requests are pending: episodes whose browser
        step ends while a batch decodes would otherwise form a second, smaller batch, and the
        two cohorts would then alternate for the rest of the run at half the batch size."""
        self.lockstep = False
        """Deterministic batches (evaluation): wait, without a deadline, until every running
        caller's request is pending, then decode that whole round in a fixed order (by request
        seed) and in fixed chunks before taking new requests. Which requests share a batch then
        depends on the episodes alone, not on timing, so the same weights and seeds give the
        same tokens under bfloat16 arithmetic too, where a row's numbers shift slightly with
        its batch-mates. Each round waits for its slowest browser step."""
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
        if self.lockstep:
            return await self._drain_rounds()
        while self._pending:
            if len(self._pending) < self.cfg.max_batch:
                await asyncio.sleep(self.batch_wait_ms / 1000)  # let other episodes join the batch
                want = min(self.expected, self.cfg.max_batch)
                deadline = time.perf_counter() + self.straggler_wait_ms / 1000
                while len(self._pending) < want and time.perf_counter() < deadline:
                    await asyncio.sleep(0.01)
            await self._run(self._take(self._pending))

    async def _drain_rounds(self) -> None:
        """The lockstep schedule (see `lockstep`): one round of every running caller at a time."""
        while self._pending:
            while len(self._pending) < self.expected:
                await asyncio.sleep(0.01)
            rnd, self._pending = sorted(self._pending, key=lambda r: (r.seed, r.prompt_ids)), []
            while rnd:
                await self._run(self._take(rnd))

    async def _run(self, batch: list[_Request]) -> None:
        """Decode `batch` in a worker thread and hand each caller its result (or the failure)."""
        try:
            results = await asyncio.to_thread(self.generate_batch, [r.prompt_ids for r in batch],
                                              [r.seed for r in batch])
        except BaseException as exc:  # hand the failure to every caller of this batch
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(exc)
            return
        for r, res in zip(batch, results):
            if not r.future.done():
                r.future.set_result(res)

    def _take(self, queue: list[_Request]) -> list[_Request]:
        """Requests from the front of `queue` (removed from it), within max_batch and the token budget."""
        batch: list[_Request] = []
        longest = 0
        for r in list(queue):
            longest_if = max(longest, len(r.prompt_ids))
            if batch and ((len(batch) + 1) * (longest_if + self.cfg.max_new_tokens) > self.cfg.batch_token_budget
                          or len(batch) >= self.cfg.max_batch):
                break
            batch.append(r)
            longest = longest_if
        del queue[: len(batch)]
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
        """Decode a batch synchronously: `_prefill` the prompts into one KV cache, then
        `_decode` with per-row seeded sampling, dropping finished rows."""
        import torch

        t0 = time.perf_counter()
        model = self.model
        gens = [torch.Generator().manual_seed(int(s) % (2**63)) for s in seeds]
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode(), compute_context(model):
                state = self._prefill(prompts)
                out_ids, out_lp, finish = self._decode(*state, gens)
        finally:
            model.train(was_training)
            trim_memory()
        results = [
            Completion(ids, self.tokenizer.decode(ids, skip_special_tokens=True), lps, fin)
            for ids, lps, fin in zip(out_ids, out_lp, finish)
        ]
        self.stats["batches"] += 1
        self.stats["requests"] += len(prompts)
        self.stats["new_tokens"] += sum(len(i) for i in out_ids)
        self.stats["seconds"] += time.perf_counter() - t0
        return results

    def _prefill(self, prompts: list[list[int]]) -> tuple[Any, Any, Any, Any]:
        """The prompts' KV cache and next-token logits, one row per prompt, with the
        attention mask and the last position of each row: (cache, logits, mask, positions).

        Identical prompts (a GRPO group's first turn) are computed once and their rows
        copied; the prefix all prompts share (the system prompt) is computed once, from a
        cache of the static system prompt kept per weights, then repeated along the batch;
        the rest of each prompt is left-padded after it, the pads masked out and skipped
        by the positions, so each row sees exactly its prompt."""
        import copy

        import torch

        model = self.model
        device = next(model.parameters()).device
        cache_kw = _cache_kwarg(model)
        # Prefill needs the logits of the last position only: computing all of them costs a
        # (tokens x vocab) matrix, about a fifth of a small model's prefill.
        last = {"logits_to_keep": 1} if _accepts(model, "logits_to_keep") else {}
        first_of: dict[tuple[int, ...], int] = {}
        row_of = [first_of.setdefault(tuple(p), len(first_of)) for p in prompts]
        uniq = [list(p) for p in first_of]
        m = len(uniq)
        shared = _common_prefix(uniq)
        cache, start = None, 0
        static = getattr(self, "_static", ())
        if static and shared >= len(static) and tuple(uniq[0][: len(static)]) == static:
            if self._static_cache is None:
                out = model(input_ids=torch.tensor([list(static)], device=device), use_cache=True, **last)
                self._static_cache = _cache_of(out)
            cache, start = copy.deepcopy(self._static_cache), len(static)
        if shared - start >= 16 or cache is not None:
            if shared > start:
                chunk = torch.tensor([uniq[0][start:shared]], device=device)
                pos = torch.arange(start, shared, device=device).unsqueeze(0)
                kw = {cache_kw: cache} if cache is not None else {}
                cache = _cache_of(model(input_ids=chunk, position_ids=pos, use_cache=True, **kw, **last))
            if m > 1:
                cache.batch_repeat_interleave(m)
        else:
            shared, cache = 0, None
        rest = [p[shared:] for p in uniq]
        width = max(len(r) for r in rest)
        input_ids = torch.full((m, width), self.pad_id, dtype=torch.long)
        rest_mask = torch.zeros((m, width), dtype=torch.long)
        for i, r in enumerate(rest):
            input_ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
            rest_mask[i, width - len(r):] = 1
        mask = torch.cat([torch.ones((m, shared), dtype=torch.long), rest_mask], dim=1).to(device)
        positions = (shared + rest_mask.cumsum(-1) - 1).clamp(min=0).to(device)
        kw = {cache_kw: cache} if cache is not None else {}
        out = model(input_ids=input_ids.to(device), attention_mask=mask, position_ids=positions,
                    use_cache=True, **kw, **last)
        cache, logits = _cache_of(out), out.logits[:, -1, :]
        positions = positions[:, -1:]
        if m < len(prompts):
            idx = torch.tensor(row_of, device=device)
            cache.batch_select_indices(idx)
            logits, mask, positions = logits[idx], mask[idx], positions[idx]
        return cache, logits, mask, positions

    def _decode(self, cache: Any, logits: Any, mask: Any, positions: Any,
                gens: list[Any]) -> tuple[list[list[int]], list[list[float]], list[str]]:
        """Sample up to max_new_tokens per row from the prefilled state; a row leaves the
        batch (and the cache) when it ends on an end token or a stop string. Returns each
        row's token ids, their log-probabilities and why it finished ("stop" or "length")."""
        import torch

        n = len(gens)
        device = logits.device
        cache_kw = _cache_kwarg(self.model)
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lp: list[list[float]] = [[] for _ in range(n)]
        finish = ["length"] * n
        # Decoding is memory-bound: under CPU autocast every step would re-cast all the
        # weights to bfloat16 (slower than float32 decoding, measured), so only the
        # compute-bound prefill runs in bfloat16 and the cache turns float32 here.
        decode_dtype = torch.float32 if _autocast_on() else None
        if not _preallocate(cache, self.cfg.max_new_tokens, decode_dtype):
            decode_dtype = None  # a cache kind that cannot convert: decode under autocast
        active = list(range(n))  # batch row k decodes request active[k]
        may_stop = self._may_stop_ids()
        for _ in range(self.cfg.max_new_tokens):
            toks, lps = self._sample_rows(logits, [gens[i] for i in active])
            keep, step = [], []
            for k, (i, tok, lp) in enumerate(zip(active, toks, lps)):
                out_ids[i].append(tok)
                out_lp[i].append(lp)
                if tok in self.end_ids or (tok in may_stop and self._hit_stop(out_ids[i])):
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
            with _no_autocast(decode_dtype):
                out = self.model(input_ids=torch.tensor(step, device=device).unsqueeze(1), attention_mask=mask,
                                 position_ids=positions, use_cache=True, **{cache_kw: cache})
            cache, logits = _cache_of(out), out.logits[:, -1, :]
        return out_ids, out_lp, finish

    def _sample_rows(self, logits: Any, gens: list[Any]) -> tuple[list[int], list[float]]:
        """One token per row, and its log-probability under the tempered distribution it
        was drawn from (T = 1 when greedy), for the whole batch at once.

        Each row draws its one uniform number from its own seeded generator and inverts
        its CDF, so a row's token depends on its seed and its logits only, never on
        its batch-mates; the softmax, the top-p cut and the search run batched."""
        import torch

        logits = logits.float()
        if self.cfg.temperature <= 0:
            toks = torch.argmax(logits, dim=-1)
        else:
            logits = logits / self.cfg.temperature  # the sampling distribution, also for the log-probs
            probs = torch.softmax(logits, dim=-1)
            u = torch.stack([torch.rand((), generator=g) for g in gens]).to(probs.device)
            if self.cfg.top_p < 1.0:
                sorted_p, order = torch.sort(probs, dim=-1, descending=True)
                sorted_p = sorted_p * (torch.cumsum(sorted_p, dim=-1) - sorted_p < self.cfg.top_p)  # keeps the top token
                cdf = torch.cumsum(sorted_p, dim=-1)
                pick = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).clamp(max=cdf.shape[1] - 1)
                toks = order.gather(1, pick).squeeze(1)
            else:
                cdf = torch.cumsum(probs, dim=-1)
                toks = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
                toks = toks.clamp(max=probs.shape[1] - 1)
        lps = logits.gather(1, toks.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=-1)
        return toks.tolist(), lps.tolist()

    def _may_stop_ids(self) -> frozenset[int] | Any:
        """Token ids that can complete a stop string (their text holds its last character).
        Only after those is the tail decoded, which saves a detokenisation per row per step."""
        if getattr(self, "_may_stop", None) is None:
            lasts = {s[-1] for s in self.stop}
            try:
                vocab = self.tokenizer.get_vocab()
                self._may_stop = frozenset(i for t, i in vocab.items() if isinstance(t, str) and any(c in t for c in lasts)
                                           or not isinstance(t, str))
            except Exception:  # a tokenizer without a string vocabulary: check after every token
                self._may_stop = _Everything()
        return self._may_stop

    def _hit_stop(self, ids: list[int]) -> bool:
        if not self.stop:
            return False
        tail = self.tokenizer.decode(ids[-8:], skip_special_tokens=True)
        return any(s in tail for s in self.stop)


def _autocast_on() -> bool:
    import torch

    return torch.is_autocast_enabled("cpu")


def _no_autocast(dtype: Any) -> Any:
    import contextlib

    import torch

    return torch.autocast("cpu", enabled=False) if dtype is not None else contextlib.nullcontext()


def _preallocate(cache: Any, extra: int, dtype: Any = None) -> bool:
    """Give each layer of a DynamicCache room for `extra` more tokens.

    transformers' DynamicLayer appends by torch.cat, which copies the whole cache at every
    decoding step, for every layer: at batch 16 and 1k-token prompts that copying was a sixth of
    the decode time on the CPU. A layer converted here writes into spare room instead. Layers of
    any other kind (sliding windows, static caches) are left as they are. `dtype`, if given,
    is the converted layers' new dtype. Returns whether every layer was converted."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # pragma: no cover - older transformers
        return False
    layers = list(getattr(cache, "layers", ()))
    converted = 0
    for layer in layers:
        if type(layer) is DynamicLayer and layer.is_initialized and layer.get_seq_length() > 0:
            layer.__class__ = _roomy_layer_class()
            layer.reserve(extra, dtype)
            converted += 1
    return bool(layers) and converted == len(layers)


@functools.lru_cache(maxsize=None)
def _roomy_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class RoomyLayer(DynamicLayer):
        """A DynamicLayer whose keys/values are views into buffers with spare room."""

        def reserve(self, extra: int, dtype: Any = None) -> None:
            n = self.keys.shape[-2]
            shape = (*self.keys.shape[:-2], n + extra, self.keys.shape[-1])
            self._k = self.keys.new_empty(shape, dtype=dtype or self.keys.dtype)
            self._v = self.values.new_empty(shape, dtype=dtype or self.values.dtype)
            self._k[..., :n, :] = self.keys
            self._v[..., :n, :] = self.values
            self._n = n
            self.keys, self.values = self._k[..., :n, :], self._v[..., :n, :]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            new = key_states.shape[-2]
            if self._n + new > self._k.shape[-2]:  # out of room: back to appending
                self.reserve(max(new, 64))
            self._k[..., self._n:self._n + new, :] = key_states
            self._v[..., self._n:self._n + new, :] = value_states
            self._n += new
            self.keys, self.values = self._k[..., :self._n, :], self._v[..., :self._n, :]
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            self._k, self._v = self._k[indices, ...], self._v[indices, ...]
            self.keys, self.values = self._k[..., :self._n, :], self._v[..., :self._n, :]

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._k = self._k.repeat_interleave(repeats, dim=0)
            self._v = self._v.repeat_interleave(repeats, dim=0)
            self.keys, self.values = self._k[..., :self._n, :], self._v[..., :self._n, :]

    return RoomyLayer


class _Everything:
    def __contains__(self, item: object) -> bool:
        return True


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


def _accepts(model: Any, name: str) -> bool:
    """Whether the (base) model's forward takes keyword `name`."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return name in inspect.signature(base.forward).parameters


def _cache_kwarg(model: Any) -> str:
    """The forward keyword that takes a KV cache, for this transformers version."""
    return "cache" if _accepts(model, "cache") else "past_key_values"
