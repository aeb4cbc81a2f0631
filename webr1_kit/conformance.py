"""Does a task suite keep the environment's contract? `check_tasks`, like Gymnasium's `check_env`.

Rollouts, training and evaluation rely on a few promises that every suite (MiniWoB++, the
arena, WebArena, a user's task file) must keep. `check_tasks` runs each task through a
real `BrowserEnv` and reports every promise broken, by task and by check:

    reset         reset(task, seed) returns an Observation with a URL, a title and content
    elements      every numbered element of the first observation is on the page, visible,
                  and its number is in the content the agent reads
    reproducible  a second reset with the same seed shows the same page
    bad_action    a malformed action is the agent's error: the step completes, says what was
                  wrong (`observation.error`, `info["error_kind"]`) and the episode goes on
    unknown_id    an element number that is not on the page is an "unknown_element" error
    verdict       evaluating the page gives a reward in [0, 1] and one check per evaluator,
                  each with a reason (or raises InfraError: "not evaluated", never reward 0)
    dead_page     once the episode's browser context is gone, a step raises InfraError,
                  so the rollout retries or drops the episode instead of learning reward 0

    problems = await check_tasks(load_tasks("my_tasks.json"))
    assert not problems, "\\n".join(map(str, problems))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import EnvConfig
from .tasks.task import Task

CHECKS = ("reset", "elements", "reproducible", "bad_action", "unknown_id", "verdict", "dead_page")
UNKNOWN_ID = 987654
"""An element number no observation hands out."""


@dataclass(frozen=True)
class Problem:
    """One broken promise: which task, which check (one of CHECKS), and what happened."""

    task_id: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.task_id}: {self.check}: {self.message}"


async def check_tasks(tasks: list[Task], browser: Any = None, config: EnvConfig | None = None, seed: int = 0,
                      elements: int = 10) -> list[Problem]:
    """Every check on every task; returns the problems found (empty: the tasks conform).

    browser: a started `Browser` to share (else one is started and closed here).
    elements: how many of the first observation's numbered elements to locate."""
    from .browser import Browser

    if browser is None:
        async with Browser(config) as own:
            return await check_tasks(tasks, own, config, seed, elements)
    problems: list[Problem] = []
    for task in tasks:
        problems += await _check_task(task, browser, config, seed, elements)
    return problems


async def _check_task(task: Task, browser: Any, config: EnvConfig | None, seed: int, elements: int) -> list[Problem]:
    from .browser import BrowserEnv
    from .errors import InfraError
    from .observation import Observation
    from .tasks.task import Verdict

    problems: list[Problem] = []

    def problem(check: str, message: str) -> None:
        problems.append(Problem(task.task_id, check, message))

    env = BrowserEnv(browser, config)
    try:
        # reset
        try:
            obs = await env.reset(task, seed=seed)
        except Exception as exc:  # nothing else can be checked without a first page
            problem("reset", f"reset raised {type(exc).__name__}: {exc}")
            return problems
        if not isinstance(obs, Observation):
            problem("reset", f"reset returned {type(obs).__name__}, not an Observation")
            return problems
        for name in ("url", "title", "content"):
            if not isinstance(getattr(obs, name), str):
                problem("reset", f"observation.{name} is {type(getattr(obs, name)).__name__}, not str")
        if not obs.url or not obs.content.strip():
            problem("reset", f"the first observation has no URL or no content (url={obs.url!r})")
        # elements
        for el in obs.elements[:elements]:
            try:
                await env.locate(el.id)
            except Exception as exc:
                problem("elements", f"element {el.id} ({el.name!r}) of the first observation: {exc}")
            if not obs.truncated and str(el.id) not in obs.content:
                problem("elements", f"element {el.id} ({el.name!r}) is not in the observation's content")
        # reproducible
        again = BrowserEnv(browser, config)
        try:
            second = await again.reset(task, seed=seed)
            if (second.url, second.title, second.content) != (obs.url, obs.title, obs.content):
                problem("reproducible", f"two resets with seed {seed} showed different pages "
                                        f"({obs.url!r}, {len(obs.content)} chars vs {second.url!r}, "
                                        f"{len(second.content)} chars)")
        except Exception as exc:
            problem("reproducible", f"a second reset raised {type(exc).__name__}: {exc}")
        finally:
            await again.close()
        # bad_action, unknown_id
        for check, text, kind in (("bad_action", "click the blue button please", None),
                                  ("unknown_id", f'do(action="Click", element="{UNKNOWN_ID}")', "unknown_element")):
            try:
                after, reward, done, info = await env.step(text)
            except Exception as exc:
                problem(check, f"step({text!r}) raised {type(exc).__name__}: {exc}")
                continue
            if not info.get("invalid_action") or not after.error or (kind and info.get("error_kind") != kind):
                problem(check, f"step({text!r}) was not reported as the agent's error (error_kind="
                               f"{info.get('error_kind')!r}, observation.error={after.error!r})")
            if done or reward:
                problem(check, f"step({text!r}) ended the episode (done={done}, reward={reward})")
        # verdict
        try:
            verdict = await env.evaluate(None)
        except InfraError:
            verdict = None  # "not evaluated" is allowed: it is never reward 0
        except Exception as exc:
            problem("verdict", f"evaluate raised {type(exc).__name__}: {exc}")
            verdict = None
        if verdict is not None:
            if not isinstance(verdict, Verdict) or not 0.0 <= float(verdict.reward) <= 1.0:
                problem("verdict", f"evaluate returned {verdict!r}, not a Verdict with a reward in [0, 1]")
            elif not verdict.checks:
                problem("verdict", "the verdict has no checks: nothing says why it passed or failed")
            else:
                for c in verdict.checks:
                    if "type" not in c or "passed" not in c or not str(c.get("reason") or "").strip():
                        problem("verdict", f"a check without type, passed and a reason: {c!r}")
        # dead_page
        try:
            await env.reset(task, seed=seed)
            await env.context.close()
        except Exception as exc:
            problem("dead_page", f"could not set up the check: {type(exc).__name__}: {exc}")
        else:
            try:
                await env.step('do(action="Scroll Down")')
                problem("dead_page", "a step after the browser context closed did not raise InfraError")
            except InfraError:
                pass
            except Exception as exc:
                problem("dead_page", f"a step after the browser context closed raised {type(exc).__name__}, "
                                     f"not InfraError: {exc}")
    finally:
        await env.close()
    return problems
