"""Where the views get trajectories: records in memory, a JSONL file, or a run directory.

Reading is lenient, like `trajectory.read_jsonl`: a corrupt or truncated line is
skipped, and the views say which lines were lost instead of failing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..trajectory import Trajectory, TrajectoryGroup


@dataclass
class Loaded:
    """Trajectories plus what could not be read, and where relative screenshot files live."""

    trajectories: list[Trajectory] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    base: Path | None = None
    """Folder that relative `screenshot_file` paths are resolved against (the JSONL's folder)."""
    source: str = ""


def _step_number(p: Path) -> int:
    m = re.search(r"(\d+)", p.stem)
    return int(m.group(1)) if m else -1


def trajectory_file(path: str | Path) -> Path:
    """The JSONL file that `path` names: the file itself, or in a directory
    `trajectories.jsonl` (a `webr1 eval --out` folder), else the latest rollout
    `trajectories/step-N.jsonl` of a training run, else its latest `eval-step-N.jsonl`.
    Raises FileNotFoundError saying what was looked for."""
    p = Path(path)
    if p.is_file():
        return p
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    if (p / "trajectories.jsonl").is_file():
        return p / "trajectories.jsonl"
    folder = p / "trajectories"
    for pattern in ("step-*.jsonl", "eval-step-*.jsonl"):
        found = sorted(folder.glob(pattern), key=_step_number)
        if found:
            return found[-1]
    raise FileNotFoundError(
        f"{p} holds no trajectories: expected trajectories.jsonl, or trajectories/step-N.jsonl "
        "(a training run), or pass a .jsonl file"
    )


def read_trajectories(path: str | Path) -> Loaded:
    """Every readable trajectory of `path` (a file or a run directory, see `trajectory_file`);
    unreadable lines become notes. Raises FileNotFoundError, or ValueError for a file with
    no readable trajectory at all."""
    file = trajectory_file(path)
    trajs: list[Trajectory] = []
    notes: list[str] = []
    # trajectory.read_jsonl's leniency, widened to any malformed record (a JSON string or
    # list, a turn with unknown fields) and to bytes that are not UTF-8.
    with file.open(encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                trajs.append(Trajectory.from_dict(json.loads(line)))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                notes.append(f"{file.name} line {lineno}: not a valid trajectory record, skipped "
                             f"({type(exc).__name__}: {str(exc)[:120]})")
    if not trajs:
        why = f": {len(notes)} corrupt line(s)" if notes else ": the file is empty"
        raise ValueError(f"{file} holds no readable trajectory{why}")
    return Loaded(trajs, notes, file.parent, str(file))


def load(source: Any) -> Loaded:
    """Trajectories from a Trajectory, a TrajectoryGroup, a list of either, an EvalResult
    or GRPORun (their `.trajectories`), a path (JSONL file or run directory), or a Loaded."""
    from ..grpo import GRPORun
    from ..rollout import EvalResult

    if isinstance(source, Loaded):
        return source
    if isinstance(source, (str, Path)):
        return read_trajectories(source)
    if isinstance(source, Trajectory):
        return Loaded([source])
    if isinstance(source, TrajectoryGroup):
        return Loaded(list(source.trajectories))
    if isinstance(source, (EvalResult, GRPORun)):
        base = Path(source.path) / "trajectories" if isinstance(source, GRPORun) else None
        return Loaded(list(source.trajectories), base=base)
    if isinstance(source, Sequence):
        out: list[Trajectory] = []
        for item in source:
            if isinstance(item, Trajectory):
                out.append(item)
            elif isinstance(item, TrajectoryGroup):
                out.extend(item.trajectories)
            else:
                raise TypeError(f"expected Trajectory or TrajectoryGroup items, got {type(item).__name__}")
        return Loaded(out)
    raise TypeError(f"cannot show a {type(source).__name__}: pass a Trajectory, a list of them, "
                    "a TrajectoryGroup, an EvalResult, a GRPORun, or a JSONL file / run directory path")


def select(trajectories: list[Trajectory], which: Sequence[int | str] | None = None,
           limit: int | None = None) -> list[Trajectory]:
    """Pick trajectories by position (an int, or a string of digits; negative counts from
    the end) or by task id (every trajectory of that task), in the order asked; then keep
    at most `limit`. Raises ValueError naming a selector that matches nothing."""
    picked: list[Trajectory] = []
    if which:
        for w in which:
            text = str(w).strip()
            if re.fullmatch(r"-?\d+", text):
                k = int(text)
                if not -len(trajectories) <= k < len(trajectories):
                    raise ValueError(f"select {k}: there are only {len(trajectories)} trajectories (0-based)")
                picked.append(trajectories[k])
            else:
                hits = [t for t in trajectories if t.task_id == text]
                if not hits:
                    known = sorted({t.task_id for t in trajectories})
                    raise ValueError(f"no trajectory of task {text!r}; tasks here: {', '.join(known[:10])}"
                                     + (" ..." if len(known) > 10 else ""))
                picked.extend(hits)
    else:
        picked = list(trajectories)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        picked = picked[:limit]
    return picked


def groups_of(trajectories: Sequence[Trajectory]) -> list[TrajectoryGroup]:
    """Regroup GRPO rollouts read back from JSONL: the members of a group share task id
    and page seed (rollout.episode_seeds), in order of first appearance."""
    groups: dict[tuple[str, int], TrajectoryGroup] = {}
    for t in trajectories:
        groups.setdefault((t.task_id, t.seed), TrajectoryGroup(t.task_id)).trajectories.append(t)
    return list(groups.values())


SCREENSHOT_FILE_KEY = "screenshot_file"
"""An observation may name its screenshot as a file instead of embedding it
(`screenshot_png_b64`): a path, relative to the trajectory file's folder."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def screenshot(observation: dict[str, Any] | None, base: Path | None = None) -> tuple[bytes | None, str | None]:
    """The PNG of an observation record, or (None, why it is not there)."""
    import base64
    import binascii

    obs = observation or {}
    embedded, file = obs.get("screenshot_png_b64"), obs.get(SCREENSHOT_FILE_KEY)
    if embedded:
        try:
            data = base64.b64decode(embedded, validate=True)
        except (binascii.Error, ValueError, TypeError):
            return None, "screenshot data is corrupt"
    elif file:
        p = Path(file)
        if not p.is_absolute() and base is not None:
            p = base / p
        if not p.is_file():
            return None, f"screenshot file {file} is missing"
        data = p.read_bytes()
    else:
        return None, "no screenshot recorded"
    if not data.startswith(PNG_SIGNATURE) or len(data) < 24:
        return None, "screenshot is not a readable PNG"
    return data, None


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its header."""
    import struct

    return struct.unpack(">II", data[16:24])
