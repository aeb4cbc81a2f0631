"""What behaviour cloning and M-GRPO share: scoring tokens, micro-batches by token
budget, masking the <think> span, the optimizer and the learning-rate schedule (their run
directories and checkpoints are in rundir.py)."""

from __future__ import annotations

from typing import Any, Sequence

from . import distributed
from .cpu import compute_context
from .trajectory import Packed


# ---------------------------------------------------------------- scoring tokens


def _body_and_head(model: Any) -> tuple[Any, Any] | None:
    """The transformer body and output head of a causal LM (through a peft wrapper), so the
    vocabulary projection can be applied to the scored positions only."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body = getattr(base, "model", None)
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    if body is None or head is None:
        return None
    return body, head


def token_logprobs(model: Any, seqs: Sequence[Packed], entropy: bool = False,
                   temperature: float = 1.0) -> tuple[Any, Any | None]:
    """log π_T(token) = log_softmax(logits / T) of every trained token (loss_mask == 1) of
    `seqs`, in order, as a 1-D tensor (with gradients when enabled). Optionally also each
    token's entropy under the same distribution (detached).

    `temperature` must be the one the tokens were sampled at (the generator records
    log-probs at that T), so that M-GRPO's ratio, gradient and KL all belong to the policy
    that acted; behaviour cloning scores at T = 1.

    Sequences are right-padded into one batch; only the positions that predict a trained
    token go through the output head, which keeps a 49k-word vocabulary affordable.
    """
    import torch

    device = next(model.parameters()).device
    width = max(len(s.input_ids) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    target = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, s in enumerate(seqs):
        n = len(s.input_ids)
        ids[i, :n] = torch.tensor(s.input_ids)
        attn[i, :n] = 1
        target[i, :n] = torch.tensor(s.loss_mask, dtype=torch.bool)
    target[:, 0] = False  # the first token has no prediction
    ids, attn, target = ids.to(device), attn.to(device), target.to(device)
    predict = torch.zeros_like(target)
    predict[:, :-1] = target[:, 1:]  # hidden state at t-1 predicts token t
    parts = _body_and_head(model)
    with compute_context(model):
        if parts is not None:
            body, head = parts
            hidden = body(input_ids=ids, attention_mask=attn).last_hidden_state
            logits = head(hidden[predict]).float()
        else:  # a model without the usual layout: full logits
            logits = model(input_ids=ids, attention_mask=attn).logits[predict].float()
    if temperature <= 0:
        raise ValueError(f"temperature must be positive to score tokens, got {temperature}")
    logp_all = torch.log_softmax(logits / temperature if temperature != 1.0 else logits, dim=-1)
    chosen = logp_all.gather(-1, ids[target].unsqueeze(-1)).squeeze(-1)
    ent = None
    if entropy:
        with torch.no_grad():
            ent = -(logp_all.exp() * logp_all).sum(-1)
    return chosen, ent


def micro_batches(seqs: Sequence[Packed], token_budget: int) -> list[list[int]]:
    """Indices of `seqs` grouped so that (count x longest) stays within `token_budget`;
    sequences are sorted by length first so batches waste little padding. A sequence
    longer than the budget gets a batch of its own."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i].input_ids))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        n = len(seqs[i].input_ids)
        if current and (len(current) + 1) * max(longest, n) > token_budget:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches


def my_micro_batches(seqs: Sequence[Packed], token_budget: int) -> list[list[int]]:
    """This process's share of `micro_batches` (all of them when the run has one process):
    every process builds the same batches and scores every size()-th one (`distributed`)."""
    batches = micro_batches(seqs, token_budget)
    return [batches[i] for i in distributed.share(batches)]


def think_mask(tokenizer: Any, ids: Sequence[int]) -> list[int]:
    """1 for the tokens that lie wholly inside a response's <think>…</think> span (tags
    included), else 0. A token straddling the span's end (e.g. "><" in "</think><answer>")
    stays trained, so the answer is never cut. Character offsets come from decoding
    growing prefixes, which works for any tokenizer."""
    text = tokenizer.decode(list(ids), skip_special_tokens=True)
    start = text.find("<think>")
    if start < 0:
        return [0] * len(ids)
    close = text.find("</think>", start)
    end = len(text) if close < 0 else close + len("</think>")
    out, prev = [], 0
    for k in range(len(ids)):
        cur = len(tokenizer.decode(list(ids[: k + 1]), skip_special_tokens=True))
        out.append(1 if start <= prev and cur <= end and cur > prev else 0)
        prev = cur
    return out


def apply_think_mask(tokenizer: Any, seq: Packed, train_think: bool) -> Packed:
    """Drop the <think> tokens of every response from the loss when `train_think` is False."""
    if train_think:
        return seq
    mask = list(seq.loss_mask)
    start = 0
    while start < len(mask):
        if mask[start] == 1:
            end = start
            while end < len(mask) and mask[end] == 1:
                end += 1
            for k, m in enumerate(think_mask(tokenizer, seq.input_ids[start:end])):
                if m:
                    mask[start + k] = 0
            start = end
        else:
            start += 1
    return Packed(seq.input_ids, mask, seq.old_logprobs, [t if m else -1 for t, m in zip(seq.turn, mask)])


# ---------------------------------------------------------------- optimizer and schedule


def seed_dropout(*parts: Any) -> None:
    """Seed torch's global generator, which LoRA dropout draws its masks from, from the
    run's seed (`parts`, through `seeds.derive_seed`). Left as the process found it, the
    generator's state depends on whatever drew from it before (a notebook cell, a library
    at import), and two runs of one config trained on other masks and ended with other
    adapters. Called before a run loads its checkpoint, whose saved state then wins, so a
    resumed run draws the masks the uninterrupted one would have."""
    import torch

    from .seeds import derive_seed

    torch.manual_seed(derive_seed(*parts))


def make_optimizer(model: Any, lr: float, betas: tuple[float, float], weight_decay: float = 0.0) -> Any:
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters: load the policy with a LoRA adapter")
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)


def lr_at(step: int, total: int, base: float, warmup: int, schedule: str) -> float:
    """Learning rate at optimizer step `step` (0-based): linear warm-up, then constant or cosine."""
    import math

    if warmup and step < warmup:
        return base * (step + 1) / warmup
    if schedule == "constant":
        return base
    progress = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
