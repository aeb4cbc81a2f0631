"""The WebArena suite: episodes on the user's own WebArena sites, scored as WebArena does.

Per episode:
- origins: the agent may visit the origins of the task's sites (and of any site its
  task file mentions), nothing else;
- setup: the task's sites' saved logins go into the fresh browser context (logging in
  first when needed, see auth.py). A task that needs the LLM judge when none is
  configured is refused here, before the policy runs: it is reported as not evaluated;
- start: WebArena opens one tab per URL of a " |AND| " start_url and shows the first.
  The environment loads one start page itself, so here the second URL loads first and
  the first URL opens last, as the current tab: the tabs are [2nd, 3rd, ..., 1st];
- evaluate: the kit's WebArena evaluators with the LLM judge (judge.py) and the `func:`
  helpers (helpers.py).

Results per site follow the paper's table (`paper_table`): Reddit, GitLab, CMS (the
shop's admin), Map, OSS (the shop) and the average over all tasks; multi-site tasks
form a "Multi" column of their own (the paper lists none; they count in the average).
"""

from __future__ import annotations

from typing import Any, Iterable

from ...errors import InfraError
from ..evaluators import evaluate
from ..suite import Suite
from ..task import Task, Verdict, origin_of
from .auth import AuthManager, apply_state, merged_state
from .config import WebArenaConfig, active_config
from .helpers import Helpers
from .judge import NO_JUDGE, OpenAIJudge, judge_for, needs_judge
from .taskfiles import start_urls


class WebArenaSuite(Suite):
    """Starts and scores WebArena tasks (task.suite == "webarena") with the active config."""

    name = "webarena"

    def __init__(self) -> None:
        super().__init__()
        self._for: WebArenaConfig | None = None

    def _parts(self) -> tuple[WebArenaConfig, AuthManager, OpenAIJudge | None, Helpers]:
        config = active_config()
        if config is not self._for:  # a new configuration: new logins, judge and helpers
            self._for = config
            self.auth = AuthManager(config)
            self.llm = OpenAIJudge(config.judge) if config.judge else None
            self.helpers = Helpers(config)
        return config, self.auth, self.llm, self.helpers

    def origins(self, task: Task) -> tuple[str, ...]:
        # Loading fills allowed_origins from the configured sites; a hand-made task falls
        # back to the origins of its start URLs.
        return task.allowed_origins or tuple(sorted({origin_of(u) for u in start_urls(task)}))

    def start_url(self, task: Task) -> str:
        urls = start_urls(task)
        return urls[1] if len(urls) > 1 else urls[0]

    async def setup(self, context: Any, task: Task, seed: int) -> None:
        config, auth, llm, _ = self._parts()
        if llm is None and needs_judge(task):
            raise RuntimeError(f"not evaluated: {NO_JUDGE}")
        if "verified" in (task.eval.get("eval_types") or []):
            from ..evaluators import VERIFIED_NOT_YET

            raise RuntimeError(f"not evaluated: {VERIFIED_NOT_YET}")
        missing = config.missing(task.sites)
        if missing:
            config.url(missing[0])  # raises, naming the site and its variable
        browser = context.browser

        async def new_context() -> Any:
            return await browser.new_context(service_workers="block")

        states = {s: await auth.state(s, new_context) for s in task.sites if auth.needs_login(s)}
        if states:
            await apply_state(context, merged_state(states))

    async def prepare(self, page: Any, task: Task, seed: int) -> str:

        urls = start_urls(task)
        for url in (urls[2:] + urls[:1]) if len(urls) > 1 else []:
            tab = await page.context.new_page()
            try:
                response = await tab.goto(url, wait_until="load")
            except Exception as exc:
                raise InfraError(f"{task.task_id}: start tab {url} failed to load: {str(exc).splitlines()[0][:200]}") from None
            if response is not None and response.status >= 400:
                raise InfraError(f"{task.task_id}: start tab {url} answered HTTP {response.status}")
        return task.intent

    async def evaluate(self, page: Any, context: Any, task: Task, answer: str | None) -> Verdict:
        _, _, llm, helpers = self._parts()
        return await evaluate(task, answer, page, context, judge=judge_for(task, llm), helpers=helpers)


# ---------------------------------------------------------------- results like the paper's table

PAPER_COLUMNS = (("Reddit", "reddit"), ("GitLab", "gitlab"), ("CMS", "shopping_admin"), ("Map", "map"),
                 ("OSS", "shopping"), ("Multi", "multi"))
"""(column, site) in the order of WebAgent-R1's / WebRL's WebArena-Lite table; OSS is the shop."""


def paper_column(sites: Iterable[str]) -> str:
    sites = list(sites)
    if len(sites) > 1:
        return "Multi"
    site = sites[0] if sites else ""
    return next((col for col, s in PAPER_COLUMNS if s == site), "Other")


def paper_table(trajectories: list[Any]) -> dict[str, dict[str, Any]]:
    """{column: {success_rate, successes, evaluated, not_evaluated}} per paper column and
    "Avg" (over every evaluated episode). Episodes that were not evaluated (infrastructure
    failures, no judge) are counted apart and left out of the rates."""
    table: dict[str, dict[str, Any]] = {}
    for col in [c for c, _ in PAPER_COLUMNS] + ["Other", "Avg"]:
        table[col] = {"success_rate": None, "successes": 0, "evaluated": 0, "not_evaluated": 0}
    for t in trajectories:
        for col in (paper_column(t.meta.get("sites", [])), "Avg"):
            row = table[col]
            if t.status == "infra_failure":
                row["not_evaluated"] += 1
            else:
                row["evaluated"] += 1
                row["successes"] += int(t.reward >= 1.0)
    for row in table.values():
        if row["evaluated"]:
            row["success_rate"] = row["successes"] / row["evaluated"]
    if not table["Other"]["evaluated"] and not table["Other"]["not_evaluated"]:
        del table["Other"]
    return table


def format_paper_table(table: dict[str, dict[str, Any]]) -> str:
    """Success rate in %, per column, with the episodes evaluated (and not evaluated) under it."""
    cols = list(table)
    rate = ["n/a" if table[c]["success_rate"] is None else f"{100 * table[c]['success_rate']:.1f}" for c in cols]
    count = [f"{table[c]['evaluated']}" + (f" (+{table[c]['not_evaluated']} n/e)" if table[c]["not_evaluated"] else "")
             for c in cols]
    widths = [max(len(c), len(r), len(n)) for c, r, n in zip(cols, rate, count)]
    line = lambda label, cells: f"{label:<10}" + " | ".join(f"{x:>{w}}" for x, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line("", cols), line("success %", rate), line("episodes", count)])
