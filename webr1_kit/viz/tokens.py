"""The token view: a trajectory's packed training sequences, as the M-GRPO loss sees them.

The sequences come from `trajectory.pack` (the function training uses), so the view
shows the recorded prompt and sampled ids, not a re-tokenised text. Tokens with
loss_mask 1 (the responses) are coloured by the trajectory's advantage: green for
positive, red for negative, blue when the advantage is zero or not given. Tokens with
loss_mask 0 (system prompt, task, observations) are grey: the loss conditions on them
but never trains them. With `train_think=False` the <think> tokens are dropped from
the loss by `training.apply_think_mask`, exactly as `GRPOConfig(train_think=False)`
does, and shown grey and struck through.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..trajectory import Packed, Trajectory, pack
from .page import HTML, esc, new_id


def token_texts(tokenizer: Any, ids: list[int]) -> list[str]:
    """The text of each token. A character split over several byte-level tokens is
    shown on its last token (the earlier ones show as empty), so nothing is garbled."""
    out: list[str] = []
    pending: list[int] = []
    for tid in ids:
        pending.append(tid)
        text = tokenizer.decode(pending, skip_special_tokens=False)
        if text.endswith("\ufffd") and len(pending) < 4:  # an incomplete UTF-8 character so far
            out.append("")
            continue
        out.append(text)
        pending = []
    return out


def _colour(advantage: float | None) -> str:
    if not advantage:
        return "rgba(84,174,255,.35)"
    strength = 0.2 + 0.6 * min(1.0, abs(advantage) / 2.0)
    return f"rgba(45,164,78,{strength:.2f})" if advantage > 0 else f"rgba(207,34,46,{strength:.2f})"


def show_tokens(trajectory: Trajectory | Sequence[Packed], tokenizer: Any, advantage: float | None = None,
                train_think: bool = True, title: str | None = None) -> HTML:
    """The packed training sequences of a model policy's `trajectory`, token by token.

    trajectory: a model policy's Trajectory (its sequences come from `trajectory.pack`),
        or training sequences already built, e.g. `sft.examples(policy, [demo])`: what
        behaviour cloning trains on, one sequence per turn of a scripted demonstration.
    advantage: the trajectory's group advantage (show_group shows it; it is the same for
        every response token of the trajectory). train_think: as GRPOConfig.train_think.
    Each token's tooltip gives its position, id, loss mask, turn and rollout log-prob.
    Raises ValueError for a trajectory without token records (a scripted policy's; show
    its behaviour-cloning sequences instead, as above).
    """
    from ..training import apply_think_mask

    rollout = isinstance(trajectory, Trajectory)
    packed = pack(trajectory) if rollout else list(trajectory)
    name = title or (trajectory.task_id if rollout else f"{len(packed)} training sequence(s)")
    seqs = packed if train_think else [apply_think_mask(tokenizer, s, False) for s in packed]
    colour = _colour(advantage)
    parts, trained, total = [], 0, 0
    for k, (raw, seq) in enumerate(zip(packed, seqs)):
        texts = token_texts(tokenizer, seq.input_ids)
        spans = []
        for i, (tid, m, text) in enumerate(zip(seq.input_ids, seq.loss_mask, texts)):
            think = m == 0 and raw.loss_mask[i] == 1  # a response token the think mask dropped
            turn = raw.turn[i]
            tip = f"#{i} id {tid} mask {m}"
            if turn >= 0:
                tip += f" turn {turn + 1}" + (f" logp {seq.old_logprobs[i]:.3f}" if rollout else "")
            if m:
                spans.append(f"<span class='wr1-m1' data-i='{i}' data-m='1' title='{esc(tip)}' "
                             f"style='background:{colour}'>{esc(text)}</span>")
            else:
                cls = "wr1-m0 wr1-think" if think else "wr1-m0"
                spans.append(f"<span class='{cls}' data-i='{i}' data-m='0' title='{esc(tip)}'>{esc(text)}</span>")
        n1 = sum(seq.loss_mask)
        trained, total = trained + n1, total + len(seq.input_ids)
        parts.append(f"<details open><summary>sequence {k + 1} of {len(seqs)}: {len(seq.input_ids)} tokens, {n1} "
                     f"trained</summary><div class='wr1-tokens' data-seq='{k}'>{''.join(spans)}</div></details>")
    if advantage is not None:
        adv = f", advantage {advantage:+.3f}"
    else:  # behaviour-cloning sequences have no advantage: every trained token is a plain target
        adv = ", advantage not given (pass advantage=; show_group shows them)" if rollout else ""
    legend = (
        f"<div class='wr1-meta'><span style='background:{colour}'>&nbsp;trained&nbsp;</span> response tokens "
        f"(loss_mask 1){esc(adv)} &middot; <span style='color:#8c959f'>grey</span>: context, "
        "loss_mask 0, not trained"
        + (" &middot; <s>struck grey</s>: &lt;think&gt; tokens masked (train_think=False)" if not train_think else "")
        + f"</div><div class='wr1-meta'>{total} tokens in {len(seqs)} sequence(s), {trained} trained. "
        + ("A new sequence starts where context compression rewrote the history (see trajectory.pack).</div>"
           if rollout else "</div>")
    )
    body = (f"<div class='wr1' id='{new_id('tokens')}'><h3>tokens: {esc(name)}</h3>"
            f"{legend}{''.join(parts)}</div>")
    return HTML(body, title=f"webr1 tokens: {name}")
