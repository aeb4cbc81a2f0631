"""Prompts as the paper builds them, with dynamic context compression.

A prompt is a chat:

    system     the agent's instructions and the action documentation (from actions.ACTIONS)
    user       Task: <intent>
               Round 1
               <observation 1>            <- a one-line placeholder once it is in the past
    assistant  <think>…</think><answer>do(…)</answer>
    user       Round 2
               <observation 2>
    ...

Compression (the paper's): every past observation is replaced by a short placeholder
(keeping its URL and any error it reported), every past response stays verbatim, and
only the current observation appears in full. The context then grows by about one
response per turn, so long episodes fit.

`build_prompt` is the one function that turns (intent, history, observation) into
token ids; the rollout records exactly those ids, and training scores them, so no
text is ever re-tokenised to rebuild what the model saw.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Any, Sequence

from .actions import action_docs
from .config import PromptConfig

SYSTEM = """You are a web agent. You complete tasks on websites by acting on the current web page, one action per turn.

Each turn you get the page as simplified HTML (or as an accessibility tree): every element you can act on has a numeric id, e.g. <button id="6" data-text="Sign in">. Refer to elements by that id.

Actions (write exactly one per turn):
{actions}

{format}
When the task is done, or asks a question, finish with exit(message="...") and put the answer in the message."""

FORMAT_THINK = """Reply in this format:
<think>a short reasoning about the page and what to do next</think>
<answer>one action</answer>"""

FORMAT_ANSWER = """Reply with one action only, in this format:
<answer>one action</answer>"""


def system_prompt(cfg: PromptConfig) -> str:
    return SYSTEM.format(actions=action_docs(), format=FORMAT_THINK if cfg.think else FORMAT_ANSWER)


def strip_think(response: str) -> str:
    """`response` without its <think>...</think> part (for the no-thinking ablation)."""
    return re.sub(r"\s*<think>.*?</think>\s*", "", response, flags=re.S).strip()


def placeholder(obs: dict[str, Any] | Any) -> str:
    """The one-line stand-in for a past observation (the paper's compression)."""
    url = obs["url"] if isinstance(obs, dict) else obs.url
    error = obs.get("error") if isinstance(obs, dict) else obs.error
    return f"[page content omitted; URL: {url}]" + (f"\nError: {error}" if error else "")


def observation_text(obs: dict[str, Any] | Any) -> str:
    if isinstance(obs, dict):
        from .observation import Observation

        obs = Observation.from_dict(obs)
    return obs.text


@dataclass
class Prompt:
    """A built prompt: the messages and their token ids (what the model is fed)."""

    messages: list[dict[str, str]]
    ids: list[int]
    truncated: bool = False
    """Whether the current observation was cut to fit the token budget."""


def messages(intent: str, history: Sequence[Any], observation: Any, cfg: PromptConfig,
             current_text: str | None = None) -> list[dict[str, str]]:
    """The chat for the next turn. `history` holds past Turns (their `observation` dict
    and `response` text); `observation` is the current Observation."""
    msgs = [{"role": "system", "content": system_prompt(cfg)}]
    for k, turn in enumerate(history, 1):
        obs_text = placeholder(turn.observation) if cfg.compress else observation_text(turn.observation)
        msgs.append({"role": "user", "content": _user(intent, k, obs_text)})
        msgs.append({"role": "assistant", "content": turn.response})
    now = current_text if current_text is not None else observation_text(observation)
    msgs.append({"role": "user", "content": _user(intent, len(history) + 1, now)})
    return msgs


def _user(intent: str, k: int, obs_text: str) -> str:
    head = f"Task: {intent}\n\n" if k == 1 else ""
    return f"{head}Round {k}\n{obs_text}"


def encode(tokenizer: Any, msgs: list[dict[str, str]]) -> list[int]:
    """Token ids of a chat, ending with the assistant's turn opening (generation prompt)."""
    try:
        ids = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    except Exception as exc:  # some templates (e.g. Gemma's) have no system role
        if msgs and msgs[0]["role"] == "system" and "system" in str(exc).lower():
            merged = [{"role": "user", "content": msgs[0]["content"] + "\n\n" + msgs[1]["content"]}, *msgs[2:]]
            ids = tokenizer.apply_chat_template(merged, add_generation_prompt=True, tokenize=True)
        else:
            raise
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # BatchEncoding in some versions
        ids = ids["input_ids"]
    return list(ids)


def build_prompt(tokenizer: Any, intent: str, history: Sequence[Any], observation: Any, cfg: PromptConfig) -> Prompt:
    """Messages and token ids for the next turn, within `cfg.max_prompt_tokens`.

    Only the current observation is ever cut (the instruction, the task and the past
    responses are kept); the cut is marked in the text the model reads.
    """
    msgs = messages(intent, history, observation, cfg)
    ids = encode(tokenizer, msgs)
    if len(ids) <= cfg.max_prompt_tokens:
        return Prompt(msgs, ids)
    full = observation_text(observation)
    obs_ids = tokenizer.encode(full, add_special_tokens=False)
    overhead = len(ids) - len(obs_ids)
    room = cfg.max_prompt_tokens - overhead - 24  # 24: the cut marker and re-tokenisation slack
    if room <= 0:
        raise ValueError(
            f"the prompt needs {overhead} tokens before any page content, more than max_prompt_tokens="
            f"{cfg.max_prompt_tokens}; raise the budget or shorten the history"
        )
    while True:
        text = tokenizer.decode(obs_ids[:room]) + "\n[observation cut to fit the prompt budget]"
        msgs = messages(intent, history, observation, cfg, current_text=text)
        ids = encode(tokenizer, msgs)
        if len(ids) <= cfg.max_prompt_tokens or room <= 0:
            return Prompt(msgs, ids, truncated=True)
        room -= max(8, len(ids) - cfg.max_prompt_tokens)
