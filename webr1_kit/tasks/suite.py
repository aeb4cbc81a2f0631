"""A Suite says how an environment starts and scores the tasks of one benchmark.

The environment calls six hooks; everything else (browser, actions, observations)
is shared by all suites:

    start_url(task)              where to open the episode
    origins(task)                URL prefixes the agent may visit
    setup(context, task, seed)   before the start page loads (e.g. fresh site state)
    prepare(page, task, seed)    after the start page loads; returns the intent
    done(page, task)             whether the page itself ended the episode
    evaluate(page, ctx, task, answer) -> Verdict

The base class serves WebArena-style JSON tasks: open `start_url`, end on exit(),
score with the task's eval block.
"""

from __future__ import annotations

from typing import Any

from .evaluators import Judge, evaluate, text_judge
from .task import Task, Verdict, origin_of


class Suite:
    """WebArena-style tasks: the episode ends on exit() and the eval block scores it."""

    name = "json"
    exclude: str | None = None
    """CSS selector of page parts the agent must not see (e.g. a benchmark's own HUD)."""
    reuse_tab = False
    """Whether an environment may start the next episode in the tab of the last one (new
    document, history and storage cleared) instead of a new browser context. Only for
    suites whose pages keep no state the browser would carry over (`BrowserEnv.reset`)."""

    def __init__(self, judge: Judge = text_judge):
        self.judge = judge

    def start_url(self, task: Task) -> str:
        return task.start_url

    def origins(self, task: Task) -> tuple[str, ...]:
        if task.allowed_origins:
            return task.allowed_origins
        return (origin_of(self.start_url(task)),)

    async def setup(self, context: Any, task: Task, seed: int) -> None:
        """Prepare the browser context before the start page loads. Nothing by default."""

    async def prepare(self, page: Any, task: Task, seed: int) -> str:
        return task.intent

    async def done(self, page: Any, task: Task) -> bool:
        return False

    async def evaluate(self, page: Any, context: Any, task: Task, answer: str | None) -> Verdict:
        return await evaluate(task, answer, page, context, judge=self.judge)
