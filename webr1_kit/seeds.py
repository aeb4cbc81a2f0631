"""Seeds derived from other seeds: one stable hash for the whole kit.

A run has one seed; every random choice below it (a step's page seeds, an episode's
sampling seed, a turn's token draws) gets its own seed from the run's seed and the names
that identify the choice, e.g. `derive_seed(run_seed, task_id, group, k)`. Python's
`hash()` is salted per process, so it cannot serve: the same parts must give the same
seed in every process, on every machine, or a resumed run would diverge.

The parts are joined with "/" and hashed with BLAKE2b. `digest_size` and `bits` are part
of the derived values: the kit's call sites keep the widths they were written with
(episode sampling seeds 31 bits of an 8-byte digest, a turn's seed 63 bits of one, a
step's rollout seed a 4-byte digest), so runs recorded before this module existed resume
with the same seeds.
"""

from __future__ import annotations

import hashlib
from typing import Any


def derive_seed(*parts: Any, bits: int = 63, digest_size: int = 8) -> int:
    """A stable non-negative seed of at most `bits` bits from `parts` (their str() joined by "/")."""
    if not 1 <= bits <= 8 * digest_size:
        raise ValueError(f"bits must be between 1 and {8 * digest_size} for a {digest_size}-byte digest, got {bits}")
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=digest_size).digest()
    return int.from_bytes(digest, "little") & ((1 << bits) - 1)
