"""The scripted MiniWoB++ expert on every task it supports, in a real Chromium.

Expert demonstrations are behaviour-cloning data and the reference a trained policy is
compared with, so each expert is held to 98% success over 100 page seeds. That is a sweep
(a browser episode per seed, about 30 CPU-minutes in all): `make verify` runs all 100 seeds
of every task; `make test` runs 10 of them a task (every tenth, starting where the commit's
turn says, so ten consecutive commits cover the 100) and allows one miss in ten. The sample
catches an expert that no longer solves its task, or fails on more than about one page in
ten; a rarer failure (a few pages in 100) is left to `make verify`.
"""

from __future__ import annotations

import pytest

from webr1_kit.experts import MiniWoBExpert
from webr1_kit.rollout import episode_seeds, run_jobs
from webr1_kit.tasks import load_tasks, miniwob

ORIGINAL = ("click-button", "click-link", "enter-text", "focus-text", "click-checkboxes")
SEEDS = 100
EVERY = 10  # make test: one seed in ten
CONCURRENCY = 4


def _failures(result) -> str:
    """The failed episodes, each with its seed, intent and responses, for the assertion message."""
    lines = []
    for t in result.trajectories:
        if t.status == "infra_failure":
            lines.append(f"{t.task_id} seed {t.seed}: infrastructure failure: {t.infra_error}")
        elif t.reward < 1:
            lines.append(f"{t.task_id} seed {t.seed}: {t.intent!r} ended by {t.termination}")
            lines += [f"    {turn.response}  [{turn.error or 'ok'}]" for turn in t.turns[:6]]
    return "\n".join(lines)


def test_the_split_covers_every_supported_task_once():
    train, heldout = miniwob.MINIWOB_TRAIN_TASKS, miniwob.MINIWOB_HELDOUT_TASKS
    assert train[:5] == ORIGINAL  # the tasks demonstrations and benchmarks already use
    assert not set(train) & set(heldout)
    assert MiniWoBExpert.TASKS == train + heldout
    assert len(set(MiniWoBExpert.TASKS)) == len(MiniWoBExpert.TASKS) >= 25
    assert set(MiniWoBExpert.TASKS) <= set(miniwob.task_names())
    assert 0.2 <= len(heldout) / len(MiniWoBExpert.TASKS) <= 0.35


@pytest.mark.slow
@pytest.mark.sweep
@pytest.mark.parametrize("name", MiniWoBExpert.TASKS)
async def test_expert_solves_98_percent_of_100_seeds(browser, sweep, record_property, name):
    jobs = sweep.sample(episode_seeds(load_tasks("miniwob", names=[name]), SEEDS, 2026), EVERY)
    result = await run_jobs(MiniWoBExpert(), jobs, concurrency=CONCURRENCY, browser=browser)
    m = result.metrics
    record_property("success", f"{sum(t.reward >= 1 for t in result.trajectories)}/{len(jobs)}")
    assert m["episodes"] == len(jobs) and m["infra_failures"] == 0, _failures(result)
    # 98% of 100 seeds; in a sample of ten, one miss (an expert at the threshold, two
    # failing seeds in 100, fails a sample only when both fall in the same ten)
    need = 0.98 if sweep.full else 1 - 1 / EVERY
    assert m["success_rate"] >= need, f"{name}: {m['success_rate']:.2f}\n{_failures(result)}"
