"""CPU speed work, in one place and applied explicitly.

Two things make a 2-core CPU usable for training a 135M model
(docs/experiments/cpu-arithmetic.md): glibc's malloc policy, fixed so freed tensor memory
goes back to the system (`fix_malloc_threshold`, `trim_memory`), and bfloat16 matrix products under autocast
where the CPU has native bfloat16, with float32 weights and a float32 output head
(`native_bf16_cpu`, `autocast_dtype`, `float32_head`, `compute_context`). Nothing here
runs at import: `models.load_model` fixes the malloc threshold and marks the model, the
generator and the training loops enter `compute_context` and call `trim_memory`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import PolicyConfig


# ---------------------------------------------------------------- memory


_LIBC: Any = None  # the glibc handle once looked up; False where there is none


def _libc() -> Any:
    """glibc, or None (not Linux, or another C library): the malloc policy below is glibc's."""
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        if sys.platform == "linux":
            try:
                import ctypes

                lib = ctypes.CDLL("libc.so.6")
                if hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim"):  # glibc only
                    _LIBC = lib
            except OSError:
                pass
    return _LIBC or None



def fix_malloc_threshold() -> None:
    """Keep freed tensor memory from piling up in the process (Linux, glibc).

    glibc serves large blocks with mmap and returns them on free, but raises that size
    threshold (up to 32 MB) and the heap's trim threshold with it each time such a block is
    freed. After that, the many short-lived 1-32 MB tensors of generation and training come
    from heap arenas that are not given back: an M-GRPO run on the CPU grew past 23 GB this
    way. Fixing the threshold turns the adjustment off; `trim_memory` (after every generation
    batch and optimizer step) hands the freed heap back. A 1 MiB threshold also bounded the
    memory but mmap-ed every activation, which put 28% of the CPU time in the kernel
    (docs/experiments/cpu-arithmetic.md). `models.load_model` calls this before it loads any weights."""
    lib = _libc()
    if lib is not None:
        lib.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD = 32 MiB, fixed


def trim_memory() -> None:
    """Return freed heap memory to the OS (glibc malloc_trim; elsewhere nothing)."""
    lib = _libc()
    if lib is not None:
        lib.malloc_trim(0)


# ---------------------------------------------------------------- autocast


def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AMX or AVX512-BF16; Linux flags).
    Elsewhere the answer is False and PolicyConfig.cpu_autocast="bfloat16" opts in."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def autocast_dtype(cfg: PolicyConfig, device: str, dtype: Any) -> Any:
    """bfloat16 when CPU autocast applies (see PolicyConfig.cpu_autocast), else None."""
    import torch

    if cfg.cpu_autocast == "off" or device != "cpu" or dtype != torch.float32 or cfg.quantization == "4bit":
        return None
    if cfg.cpu_autocast == "bfloat16" or native_bf16_cpu():
        return torch.bfloat16
    return None


def float32_head(model: Any) -> None:
    """Compute the output head in float32 even under autocast: bfloat16 logits would shift
    log-probs by a few hundredths, enough to move M-GRPO's importance ratios."""
    import torch

    head = model.get_output_embeddings()
    if head is None:
        return
    forward = head.forward

    def exact(hidden: Any) -> Any:
        with torch.autocast("cpu", enabled=False):
            return forward(hidden.float())

    head.forward = exact


def compute_context(model: Any) -> Any:
    """The autocast context that `models.load_model` chose for this model (see
    PolicyConfig.cpu_autocast), or a no-op. Training enters it for every pass and the
    generator for its prefill (it decodes in float32, which is faster on the CPU); the output
    head is float32 throughout, so recorded and recomputed log-probs stay within a few
    hundredths (tests/test_policy.py checks the bound)."""
    import contextlib

    import torch

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    dtype = getattr(base, "webr1_autocast", None)
    return torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()
