"""Running episodes: one at a time (`run_episode`) or many at once on one browser (`run_episodes`).

Concurrency is bounded by a pool of environments sharing one Chromium. Failures are
values: an episode whose browser, page or site fails is retried once in a fresh
context and, if it fails again, recorded with status "infra_failure". It never
stops the other episodes and is never scored as reward 0.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from .browser import Browser, BrowserEnv, InfraError
from .config import EnvConfig
from .observation import Observation
from .tasks.task import Task
from .trajectory import Trajectory, Turn


class Policy(Protocol):
    """Anything with `async act(task, intent, observation, history) -> response text`.

    `intent` is the instruction as the agent should read it (for MiniWoB++ it comes from
    the page, so it can differ from `task.intent`). Scripted experts also read the task's
    parameters; a model policy uses only the intent, the observation and the history."""

    async def act(self, task: Task, intent: str, observation: Observation, history: list[Turn]) -> str: ...


async def run_episode(
    env: BrowserEnv,
    task: Task,
    policy: Policy,
    seed: int,
    max_turns: int = 15,
    screenshots: bool | None = None,
) -> Trajectory:
    """Play one episode of `task` with `policy` in `env`. Raises InfraError on infrastructure failure."""
    t0 = time.perf_counter()
    obs = await env.reset(task, seed=seed)
    traj = Trajectory(task_id=task.task_id, intent=env.intent, seed=seed, meta=task_meta(task))
    keep_shots = env.config.screenshot if screenshots is None else screenshots
    for _ in range(max_turns):
        t_turn = time.perf_counter()
        response = await policy.act(task, env.intent, obs, traj.turns)
        step = await env.step(response)
        traj.turns.append(
            Turn(
                observation=obs.to_dict(screenshot=keep_shots),
                response=response,
                action=step.info["action"],
                error=step.observation.error,
                error_kind=step.info["error_kind"],
                url=step.observation.url,
                seconds=time.perf_counter() - t_turn,
            )
        )
        obs = step.observation
        if step.done:
            traj.status, traj.reward = "done", step.reward
            traj.answer, traj.verdict = step.info["answer"], step.info.get("verdict")
            break
    else:
        verdict = await env.evaluate(None)  # the turn limit ends the episode without an answer
        traj.status, traj.reward, traj.verdict = "truncated", verdict.reward, verdict.to_dict()
    traj.final_observation = obs.to_dict(screenshot=keep_shots)
    traj.seconds = time.perf_counter() - t0
    return traj


def episode_seeds(tasks: list[Task], episodes: int, seed: int) -> list[tuple[Task, int]]:
    """The (task, seed) list of a run: fixed by `seed`, independent of concurrency."""
    rng = random.Random(seed)
    return [(task, rng.randrange(2**31)) for task in tasks for _ in range(episodes)]


@dataclass
class EvalResult:
    """Outcome of `run_episodes`: trajectories plus summary metrics."""

    trajectories: list[Trajectory]
    seconds: float
    metrics: dict[str, Any] = field(default_factory=dict)


def task_meta(task: Task) -> dict[str, Any]:
    """What a trajectory keeps about its task, for per-site and per-template results."""
    return {"template": task.template, "sites": list(task.sites)}


def site_key(sites: list[str] | tuple[str, ...]) -> str:
    """The per-site bucket of a task: its site, or "multi" for multi-site tasks (as WebArena-Lite reports)."""
    return sites[0] if len(sites) == 1 else ("multi" if sites else "unknown")


def _rates(trajectories: list[Trajectory], key: Any) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for t in trajectories:
        groups.setdefault(key(t), []).append(t.reward)
    return {k: sum(v) / len(v) for k, v in sorted(groups.items())}


def summarize(trajectories: list[Trajectory], seconds: float) -> dict[str, Any]:
    """Success rate over evaluated episodes; infrastructure failures are counted apart."""
    ok = [t for t in trajectories if t.status != "infra_failure"]
    steps = sum(len(t.turns) for t in ok)
    return {
        "success_rate": sum(t.reward for t in ok) / len(ok) if ok else None,
        "episodes": len(trajectories),
        "evaluated": len(ok),
        "infra_failures": len(trajectories) - len(ok),
        "invalid_action_rate": sum(t.invalid_actions for t in ok) / steps if steps else 0.0,
        "mean_turns": steps / len(ok) if ok else 0.0,
        "truncated": sum(1 for t in ok if t.status == "truncated"),
        "per_site": _rates(ok, lambda t: site_key(t.meta.get("sites", []))),
        "per_template": _rates(ok, lambda t: str(t.meta.get("template"))),
        "per_task": _rates(ok, lambda t: t.task_id),
        "seconds": round(seconds, 2),
        "episodes_per_s": round(len(trajectories) / seconds, 3) if seconds > 0 else None,
    }


async def run_episodes(
    policy: Policy,
    tasks: list[Task],
    episodes: int = 1,
    concurrency: int = 8,
    max_turns: int = 15,
    seed: int = 0,
    config: EnvConfig | None = None,
    browser: Browser | None = None,
    retries: int = 1,
    progress: bool | Callable[[Trajectory], None] = False,
) -> EvalResult:
    """Run `episodes` episodes of every task, `concurrency` at a time on one browser.

    Returns every trajectory (in task order) and summary metrics. Pass `browser` to
    reuse a running Chromium; otherwise one is started and closed here.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    jobs = episode_seeds(tasks, episodes, seed)
    own = browser is None
    browser = browser or Browser(config)
    await browser.start()
    results: list[Trajectory | None] = [None] * len(jobs)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(jobs)):
        queue.put_nowait(i)
    bar = _progress_bar(len(jobs)) if progress is True else None
    t0 = time.perf_counter()

    async def worker() -> None:
        env = BrowserEnv(browser, config or browser.config)
        try:
            while not queue.empty():
                i = queue.get_nowait()
                task, ep_seed = jobs[i]
                results[i] = await _attempt(env, task, policy, ep_seed, max_turns, retries)
                if bar is not None:
                    bar.update(1)
                elif callable(progress):
                    progress(results[i])
        finally:
            await env.close()

    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(jobs)))))
    finally:
        if bar is not None:
            bar.close()
        if own:
            await browser.close()
    seconds = time.perf_counter() - t0
    trajectories = [r for r in results if r is not None]
    return EvalResult(trajectories, seconds, summarize(trajectories, seconds))


async def _attempt(env: BrowserEnv, task: Task, policy: Policy, seed: int, max_turns: int, retries: int) -> Trajectory:
    error = ""
    for _ in range(retries + 1):
        try:
            return await run_episode(env, task, policy, seed, max_turns)
        except InfraError as exc:
            error = str(exc)
            await env.browser.ensure_alive()  # if the whole browser died, start a new one for everybody
    return Trajectory(task_id=task.task_id, intent=env.intent or task.intent, seed=seed, status="infra_failure",
                      infra_error=error, meta=task_meta(task))


def _progress_bar(total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="episodes", unit="ep")
