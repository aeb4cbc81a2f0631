"""A training run's directory, and checkpoints that resume exactly.

A run directory holds everything needed to inspect, replay and resume a run:

    config.json          the resolved configs
    metrics.jsonl        one JSON object per step (and per evaluation)
    trajectories/        rollouts (JSONL per step) and evaluations
    checkpoints/step-N/  adapter, optimizer state, step, RNG states and the trainer's own state

A checkpoint is written to step-N.partial and renamed, so a run killed mid-write leaves the
previous checkpoint as the latest whole one.

In a run on several processes (`distributed`), all hold the same state and only the main one
writes; `save_checkpoint` returns on every process once the checkpoint is whole.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import distributed


@dataclass
class RunDir:
    """The files of one training run."""

    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        (self.path / "checkpoints").mkdir(parents=True, exist_ok=True)
        (self.path / "trajectories").mkdir(parents=True, exist_ok=True)

    def write_config(self, configs: dict[str, Any]) -> None:
        if distributed.is_main():
            (self.path / "config.json").write_text(json.dumps(configs, indent=1, default=str))

    def log(self, row: dict[str, Any]) -> None:
        if distributed.is_main():
            with (self.path / "metrics.jsonl").open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, default=float) + "\n")

    def write_trajectories(self, name: str, trajectories: Sequence[Any]) -> None:
        """trajectories/<name>.jsonl."""
        if distributed.is_main():
            from .trajectory import write_jsonl

            write_jsonl(self.path / "trajectories" / f"{name}.jsonl", trajectories)

    def metrics(self) -> list[dict[str, Any]]:
        p = self.path / "metrics.jsonl"
        if not p.is_file():
            return []
        rows = []
        for line in p.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a run killed mid-write: keep what is whole
                continue
        return rows

    def latest_checkpoint(self) -> Path | None:
        steps = sorted((p for p in (self.path / "checkpoints").glob("step-*") if (p / "state.json").is_file()),
                       key=lambda p: int(p.name.split("-")[1]))
        return steps[-1] if steps else None


def save_checkpoint(path: Path, policy: Any, optimizer: Any, state: dict[str, Any]) -> Path:
    """Adapter, optimizer state, step counters and RNG states, written atomically (by the
    main process; the others wait until it is whole)."""
    import torch

    if not distributed.is_main():
        distributed.barrier()
        return path
    tmp = path.with_name(path.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    policy.save_adapter(tmp / "adapter")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    rng = {"python": random.getstate(), "torch": torch.get_rng_state()}
    torch.save(rng, tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({**state, "saved": time.time()}, indent=1))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)
    distributed.barrier()
    return path


def load_checkpoint(path: Path, policy: Any, optimizer: Any) -> dict[str, Any]:
    """Restore what `save_checkpoint` wrote; returns the saved state dict."""
    import torch

    policy.load_adapter(path / "adapter")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    rng = torch.load(path / "rng.pt", weights_only=False)
    random.setstate(rng["python"])
    torch.set_rng_state(rng["torch"])
    return json.loads((path / "state.json").read_text())
