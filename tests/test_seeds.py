"""Derived seeds are the same in every process and keep the values runs were recorded with."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from webr1_kit.seeds import derive_seed


def test_derived_seeds_keep_each_call_sites_width():
    def blake(parts, size):
        return int.from_bytes(hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=size).digest(), "little")

    parts = (3, "miniwob/click-button", 2, 5)
    assert derive_seed(*parts) == blake(parts, 8) & (2**63 - 1)  # a turn's sampling seed
    assert derive_seed(*parts, bits=31) == blake(parts, 8) & (2**31 - 1)  # an episode's sampling seed
    assert derive_seed(*parts, bits=32, digest_size=4) == blake(parts, 4)  # a training step's rollout seed
    assert derive_seed(1, 2) != derive_seed(2, 1) and derive_seed("1/2") == derive_seed(1, 2)
    with pytest.raises(ValueError, match="bits must be between 1 and 32"):
        derive_seed(1, bits=40, digest_size=4)


def test_derived_seeds_do_not_depend_on_the_process():
    code = "from webr1_kit.seeds import derive_seed; print(derive_seed(0, 'a', 1))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(s)}).stdout for s in (1, 2)}
    assert outs == {f"{derive_seed(0, 'a', 1)}\n"}
