"""Helpers shared by the arena site tests (test_arena_shop, _admin, _forum and _code).

Everything runs against world seed 0 (`get_arena(0)`). The sites' databases are named
"store" (the shop and the admin share it), "forum" and "code"; sites are named by their
key in `get_arena(0).urls` ("shop", "admin", "forum", "code").
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any, AsyncIterator, Awaitable, Callable

from webr1_kit.actions import Action
from webr1_kit.browser import BrowserEnv
from webr1_kit.rollout import EvalResult, run_episodes
from webr1_kit.sites import get_arena
from webr1_kit.tasks import get_suite
from webr1_kit.tasks.arena import ArenaExpert, tasks as arena_tasks
from webr1_kit.tasks.task import Task

HOSTILE = "<script>alert(1)</script>'; DROP TABLE x;-- ✓ 日本語"
"""Text that breaks unescaped HTML or SQL, with non-ASCII characters, for round-trip tests."""

Act = Callable[[Any, dict[str, Any], sqlite3.Connection], Awaitable[str | None]]
"""A hand-made attempt at a task: `act(page, params, db)`, returning the answer to exit
with (None for the default "done")."""


def pristine(db: str) -> sqlite3.Connection:
    """The seeded, never-modified database `db` ("store", "forum" or "code")."""
    return get_arena(0).store.pristine[db]


def first_task(template: str, split: str = "test") -> Task:
    """The first task of `template` in `split` (every template has some in each split)."""
    return next(t for t in arena_tasks(split) if t.template == template)


@contextlib.asynccontextmanager
async def episode(browser: Any, template: str) -> AsyncIterator[BrowserEnv]:
    """A fresh episode of the first test task of `template` (its own copies of the sites'
    databases), its page on the task's start page; closed on exit."""
    env = BrowserEnv(browser)
    try:
        await env.reset(first_task(template))
        yield env
    finally:
        await env.close()


def episode_db(env: BrowserEnv, db: str) -> sqlite3.Connection:
    """The episode's own copy of database `db` ("store", "forum" or "code")."""
    return get_arena(0).db(get_suite("arena").episode(env.context), db)


def site_url(site: str, path: str) -> str:
    """The absolute URL of `path` (starting with "/") on `site` ("shop", "admin", "forum", "code")."""
    return get_arena(0).urls[site] + path


async def run_expert(browser: Any, templates: list[str]) -> tuple[list[Task], EvalResult]:
    """The expert on the first test task of each template (one episode each, concurrency 3):
    the tasks, in the order of `templates`, and the run's result."""
    tasks = [first_task(t) for t in templates]
    result = await run_episodes(ArenaExpert(), tasks, episodes=1, concurrency=3, browser=browser)
    return tasks, result


async def reward_after(browser: Any, template: str, act: Act, db: str) -> float:
    """Reset the first test task of `template`, do `act(page, params, db)` by hand (with the
    episode's own database `db`), exit with its answer ("done" if None) and return the reward."""
    task = first_task(template)
    env = BrowserEnv(browser)
    try:
        await env.reset(task)
        msg = await act(env.page, task.meta["params"], episode_db(env, db))
        step = await env.step(Action("exit", argument=msg if msg is not None else "done").to_text())
        assert step.done
        return step.reward
    finally:
        await env.close()


async def do_nothing(page: Any, params: dict[str, Any], db: sqlite3.Connection) -> None:
    """An `Act` that does nothing (and so exits with "done")."""
    return None
