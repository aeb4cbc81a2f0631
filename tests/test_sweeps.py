"""The sweeps' sample (tests/conftest.py): successive turns cover every item once, and
--verify runs them all."""

from __future__ import annotations

from conftest import Sweep


def test_successive_turns_cover_every_item_once_and_verify_takes_all():
    items = list(range(23))
    seen = [x for turn in range(10) for x in Sweep(full=False, turn=turn, commit="").sample(items, 10)]
    assert sorted(seen) == items
    assert Sweep(full=False, turn=13, commit="").sample(items, 10) == [3, 13]
    assert Sweep(full=True, turn=13, commit="").sample(items, 10) == items
