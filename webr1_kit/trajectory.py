"""Turn and Trajectory: the plain, serialisable records that rollouts produce and
training, evaluation and replays consume. JSONL I/O lives here too.

A Turn is one observation -> response -> action step. A Trajectory is one episode.
An episode that failed for infrastructure reasons keeps `status="infra_failure"` and
its error; it carries no reward and must not be trained on.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator


@dataclass
class Turn:
    """One step of an episode."""

    observation: dict[str, Any]
    """The observation the agent acted on (Observation.to_dict())."""
    response: str
    """The agent's full response text (thought and action)."""
    action: dict[str, Any] | None = None
    """The parsed action, or None when the response held no valid action."""
    error: str | None = None
    """What went wrong with the action, as the agent is told in the next observation."""
    error_kind: str | None = None
    url: str = ""
    """The page URL after the action."""
    seconds: float = 0.0
    """Wall time of the step (policy + environment)."""
    policy_seconds: float = 0.0
    """Of which the policy (model) took this long, waiting in its batch included."""
    prompt_ids: list[int] | None = None
    """Token ids the model was fed (a model policy's turns only)."""
    completion_ids: list[int] | None = None
    """Token ids the model sampled; `response` is their text."""
    logprobs: list[float] | None = None
    """log π_old of each sampled token, at sampling time."""
    finish: str | None = None
    """"stop" or "length" (the response hit max_new_tokens)."""
    trained: bool = True
    """False for a turn the scripted expert played as the episode's prefix
    (`guidance.GuidedPolicy`): the policy's context, never trained on."""
    expert: dict[str, Any] | None = None
    """What the scripted expert would have done at this state (`actions.describe`), where a
    guided recipe asked it (step rewards, credit from the first departure); else None."""


@dataclass
class Trajectory:
    """One episode of one task."""

    task_id: str
    intent: str
    seed: int
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    """Binary task success (1.0 or 0.0). Meaningless when status is "infra_failure"."""
    status: str = "running"
    """"done" (the agent exited or the page ended the episode), "truncated" (turn limit),
    or "infra_failure" (browser, page or site failed; not the agent's fault)."""
    termination: str | None = None
    """Why it ended: "exit", "page" (the page ended it), "max_turns", "invalid_budget" or "infra"."""
    answer: str | None = None
    verdict: dict[str, Any] | None = None
    infra_error: str | None = None
    final_observation: dict[str, Any] | None = None
    seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.status != "infra_failure" and self.reward >= 1.0

    @property
    def invalid_actions(self) -> int:
        return sum(1 for t in self.turns if t.error_kind is not None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        d = dict(d)
        d["turns"] = [Turn(**t) for t in d.get("turns", [])]
        return cls(**d)


def write_jsonl(path: str | Path, trajectories: Iterable[Trajectory], append: bool = False) -> None:
    """Write trajectories, one JSON object per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as f:
        for t in trajectories:
            f.write(json.dumps(t.to_dict(), ensure_ascii=False) + "\n")


def read_jsonl(path: str | Path, strict: bool = False) -> Iterator[Trajectory]:
    """Read trajectories. A corrupt line raises with its line number when `strict`;
    otherwise it is skipped with a warning, so a truncated file still yields what it has."""
    import warnings

    path = Path(path)
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Trajectory.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError, KeyError) as exc:
                msg = f"{path}:{lineno}: not a valid trajectory record ({exc})"
                if strict:
                    raise ValueError(msg) from None
                warnings.warn(msg, stacklevel=2)


@dataclass
class TrajectoryGroup:
    """The G trajectories of one task that GRPO compares with each other."""

    task_id: str
    trajectories: list[Trajectory] = field(default_factory=list)

    @property
    def valid(self) -> list[Trajectory]:
        """Members that can be learned from (infrastructure failures are left out)."""
        return [t for t in self.trajectories if t.status != "infra_failure"]

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.valid]


@dataclass
class Packed:
    """One training sequence: token ids, which of them the loss sees, and their rollout log-probs.

    `turn` gives, for every token, the index of the turn whose response it belongs to
    (-1 for context: system prompt, task, observations, placeholders), so the loss can
    be normalised per turn as in the paper.
    """

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    old_logprobs: list[float] = field(default_factory=list)
    turn: list[int] = field(default_factory=list)

    def add(self, ids: list[int], trained: bool, logprobs: list[float] | None = None, turn: int = -1) -> None:
        self.input_ids.extend(ids)
        self.loss_mask.extend([1 if trained else 0] * len(ids))
        self.old_logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.turn.extend([turn if trained else -1] * len(ids))


def pack(traj: Trajectory) -> list[Packed]:
    """The training sequences of a model's trajectory, built from its recorded token ids.

    Each turn is scored on exactly the prompt the model was fed and the tokens it
    sampled (no text is re-tokenised). When a turn's prompt extends the previous
    sequence (no compression), it is appended to it, so the whole trajectory is one
    packed sequence as in the paper; when compression rewrote the history, the turn
    starts a new sequence of its own, because one causal sequence cannot show the
    same response two different pasts.
    """
    sequences: list[Packed] = []
    current: Packed | None = None
    for j, turn in enumerate(traj.turns):
        if turn.prompt_ids is None or turn.completion_ids is None or turn.logprobs is None:
            raise ValueError(
                f"{traj.task_id}: turn {j} has no token record (a scripted policy's trajectory?); "
                "only a model policy's trajectories can be packed for RL"
            )
        ctx = turn.prompt_ids
        if current is not None and ctx[: len(current.input_ids)] == current.input_ids:
            current.add(ctx[len(current.input_ids):], trained=False)
        else:
            current = Packed()
            current.add(list(ctx), trained=False)
            sequences.append(current)
        if turn.trained:
            current.add(list(turn.completion_ids), trained=True, logprobs=list(turn.logprobs), turn=j)
        else:  # an expert's prefix turn: what the policy read, not what it wrote
            current.add(list(turn.completion_ids), trained=False)
    return sequences
