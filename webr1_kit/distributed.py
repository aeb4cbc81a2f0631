"""Data parallelism: one training run on several processes (`accelerate launch`), each
holding a whole copy of the policy.

One rule makes the processes one run: **every process holds the same state; only the work
is split.**

- Episodes. The jobs of a rollout or an evaluation are fixed by the seed before anything
  runs (`rollout.episode_seeds`), the same on every process. Each process plays every
  `size`-th job (`share`) and the trajectories are gathered, in job order, onto every
  process (`gather`), inside `rollout.run_jobs`. So groups, advantages, task tallies,
  expert members and logs are computed from the same trajectories everywhere, the
  advantages stay per group, and a run with the same seed plays the same jobs whatever the
  number of processes.
- Updates. Every process builds the same batch; each scores every `size`-th micro-batch
  and the gradients are summed across processes (`sum_gradients`) before clipping. The
  loss weights are constants of the whole step's batch (`grpo.build_batch`, BC's token
  count), so the sum is the one-process gradient up to float summation order, and AdamW,
  given the same gradient, keeps the adapters identical without sending weights. (Summed,
  not averaged: the weights already divide by the whole batch.)
- Files. Only the main process writes the run directory (`RunDir`, checkpoints, the
  reference adapter); the others wait at a `barrier` where they must read what it wrote.
  A checkpoint holds the whole state, so a run resumes on any number of processes.

Nothing here imports torch unless the run really has several processes: `WORLD_SIZE`, set
by `accelerate launch` (or torchrun), decides. The process group is started by accelerate's
`PartialState` (gloo on CPUs, NCCL on GPUs; each process on GPU `LOCAL_RANK`).
"""

from __future__ import annotations

import os
from typing import Any, Sequence, TypeVar

T = TypeVar("T")


def size() -> int:
    """How many processes share the run (1 unless launched by accelerate or torchrun)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        raise ValueError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number of processes") from None


def rank() -> int:
    """This process's number, 0 for the main one."""
    return int(os.environ.get("RANK", "0")) if size() > 1 else 0


def local_rank() -> int:
    """This process's number on its machine: the GPU it trains on."""
    return int(os.environ.get("LOCAL_RANK", "0")) if size() > 1 else 0


def is_main() -> bool:
    """Whether this process writes the run directory and prints results."""
    return rank() == 0


def _group() -> Any:
    """torch.distributed, with the process group started (once) by accelerate."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        from accelerate import PartialState

        PartialState(cpu=not torch.cuda.is_available())
    return dist


def share(items: Sequence[T]) -> list[int]:
    """The indices of `items` this process works on: every size()-th, from rank()."""
    return list(range(rank(), len(items), size()))


def gather(mine: dict[int, T], n: int) -> list[T]:
    """Every process's {index: result} for its `share` of n items, as one list in index
    order, on every process."""
    if size() == 1:
        return [mine[i] for i in range(n)]
    parts: list[Any] = [None] * size()
    _group().all_gather_object(parts, mine)
    merged = {i: r for part in parts for i, r in part.items()}
    missing = [i for i in range(n) if i not in merged]
    if missing:
        raise RuntimeError(f"the processes returned no result for items {missing[:10]} of {n}")
    return [merged[i] for i in range(n)]


def sum_gradients(params: Sequence[Any]) -> None:
    """Replace each parameter's gradient by its sum over the processes (one all-reduce of
    the flattened gradients; a process that scored nothing contributes zeros)."""
    if size() == 1:
        return
    import torch

    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    _group().all_reduce(flat)
    offset = 0
    for p, g in zip(params, grads):
        p.grad = flat[offset:offset + g.numel()].view_as(g).clone()
        offset += g.numel()


def sum_values(values: Sequence[float], maxima: Sequence[float] = ()) -> tuple[list[float], list[float]]:
    """(the sums of `values`, the maxima of `maxima`) over the processes: the statistics a
    step logs, each process having seen its share of the batch."""
    if size() == 1:
        return list(values), list(maxima)
    import torch

    dist = _group()
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    s = torch.tensor(list(values), dtype=torch.float64, device=device)
    dist.all_reduce(s)
    m = torch.tensor(list(maxima) or [0.0], dtype=torch.float64, device=device)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    return s.tolist(), m.tolist()[:len(maxima)]


def barrier() -> None:
    """Wait until every process gets here (after the main one wrote what the others read)."""
    if size() > 1:
        _group().barrier()
