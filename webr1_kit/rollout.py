"""Running episodes: one (`run_episode`), many at once on one browser (`run_episodes`),
and GRPO's groups of G episodes per task (`rollout`).

Concurrency is bounded by a pool of environments sharing one Chromium; a model policy
shares one batching generator, so while some episodes wait for the model, others
drive their pages. Failures are values: an episode whose browser, page or site fails
is retried once in a fresh context and, if it fails again, recorded with
`status="infra_failure"`. It never stops the other episodes, is never scored as
reward 0, and is left out of learning.

Seeds: a run's seed fixes every episode's *page* seed (the MiniWoB++ problem) and
*sampling* seed (the model's randomness), whatever the concurrency. The G members of
a group share the page seed (they face the same problem, as GRPO compares them) and
differ in sampling seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from .browser import Browser, BrowserEnv
from .config import ROLLOUT, EnvConfig
from .errors import InfraError
from .observation import Observation
from . import distributed
from .seeds import derive_seed
from .stats import summarize
from .tasks.task import Task
from .trajectory import Trajectory, TrajectoryGroup, Turn


class Policy(Protocol):
    """Anything with `async act(task, intent, observation, history, seed) -> response`.

    The response is the text, or an object with `.text` plus the token record
    (policy.Response). `intent` is the instruction as the agent should read it (for
    MiniWoB++ it comes from the page, so it can differ from `task.intent`). Scripted
    experts also read the task's parameters; a model policy reads only the intent,
    the observation and the history. `seed` is the episode's sampling seed."""

    async def act(self, task: Task, intent: str, observation: Observation, history: list[Turn], seed: int = 0) -> Any: ...


@runtime_checkable
class TrainablePolicy(Policy, Protocol):
    """What BC and M-GRPO need of a policy besides `act`: the model and tokenizer that
    score the recorded tokens, the configs a run directory records, the adapter it trains
    and saves, the frozen KL reference, and the generator whose caches go stale when the
    weights change. `policy.LLMPolicy` is the implementation; docs/ARCHITECTURE.md lists
    which trainer uses which member."""

    model: Any
    """The torch module, with trainable LoRA parameters."""
    tokenizer: Any
    config: Any
    """policy.PolicyConfig (written to config.json)."""
    prompt: Any
    """config.PromptConfig."""
    sampling: Any
    """config.SamplingConfig: its temperature is the T every log-probability is taken at."""
    generator: Any
    """Its `invalidate_cache()` is called whenever the weights change."""

    @property
    def has_adapter(self) -> bool: ...

    def save_adapter(self, path: Any) -> Any: ...

    def load_adapter(self, path: Any) -> None: ...

    def freeze_reference(self, path: Any) -> None: ...

    def reference(self) -> Any:
        """Context manager: the model with the frozen reference adapter active."""

    def adapter_off(self) -> Any:
        """Context manager: the base model without any adapter."""

    def evaluating(self, temperature: float = 0.0) -> Any:
        """Context manager: greedy (or `temperature`) lockstep batches, for evaluation."""


async def run_episode(
    env: BrowserEnv,
    task: Task,
    policy: Policy,
    seed: int,
    max_turns: int = ROLLOUT.max_turns,
    sample_seed: int | None = None,
    max_invalid: int | None = ROLLOUT.max_invalid,
    screenshots: bool | None = None,
) -> Trajectory:
    """Play one episode of `task` with `policy` in `env`. Raises InfraError on infrastructure failure.

    seed: the page seed. sample_seed: the policy's sampling seed (default: `seed`).
    max_invalid: end the episode after this many invalid actions (None: never). The
    defaults of these limits are `config.RolloutConfig`'s, as everywhere in the kit.
    """
    t0 = time.perf_counter()
    obs = await env.reset(task, seed=seed)
    sample_seed = seed if sample_seed is None else sample_seed
    traj = Trajectory(task_id=task.task_id, intent=env.intent, seed=seed, meta=task_meta(task))
    traj.meta["sample_seed"] = sample_seed
    keep_shots = env.config.screenshot if screenshots is None else screenshots
    invalid = 0
    for _ in range(max_turns):
        t_turn = time.perf_counter()
        response = await policy.act(task, env.intent, obs, traj.turns, seed=sample_seed)
        t_policy = time.perf_counter() - t_turn
        text = response if isinstance(response, str) else response.text
        step = await env.step(text)
        turn = Turn(
            observation=obs.to_dict(screenshot=keep_shots),
            response=text,
            action=step.info["action"],
            error=step.observation.error,
            error_kind=step.info["error_kind"],
            url=step.observation.url,
            seconds=time.perf_counter() - t_turn,
            policy_seconds=t_policy,
        )
        if not isinstance(response, str):  # a model's token record: what training will score
            turn.prompt_ids, turn.completion_ids = response.prompt_ids, response.completion_ids
            turn.logprobs, turn.finish = response.logprobs, response.finish
            turn.trained, turn.expert = getattr(response, "trained", True), getattr(response, "expert", None)
        traj.turns.append(turn)
        obs = step.observation
        if step.done:
            traj.status, traj.reward = "done", step.reward
            traj.termination = "exit" if step.info["answer"] is not None else "page"
            traj.answer, traj.verdict = step.info["answer"], step.info.get("verdict")
            break
        invalid += turn.error_kind is not None
        if max_invalid is not None and invalid >= max_invalid:
            verdict = await env.evaluate(None)
            traj.status, traj.termination = "truncated", "invalid_budget"
            traj.reward, traj.verdict = verdict.reward, verdict.to_dict()
            break
    else:
        verdict = await env.evaluate(None)  # the turn limit ends the episode without an answer
        traj.status, traj.termination = "truncated", "max_turns"
        traj.reward, traj.verdict = verdict.reward, verdict.to_dict()
    traj.final_observation = obs.to_dict(screenshot=keep_shots)
    traj.seconds = time.perf_counter() - t0
    return traj


@dataclass(frozen=True)
class Job:
    """One episode to run: the task, its page seed, its sampling seed and its group."""

    task: Task
    seed: int
    sample_seed: int
    group: int


def episode_seeds(tasks: list[Task], episodes: int, seed: int, grouped: bool = False,
                  samples_per_page: int = 1) -> list[Job]:
    """The jobs of a run, fixed by `seed` and independent of concurrency.

    By default every episode gets its own page seed (evaluation over many problems).
    samples_per_page=k: `episodes` pages per task, each played k times with different
    sampling seeds (a sampled policy's success per page); the pages are the same ones a
    k=1 run with the same seed plays. grouped=True: all `episodes` of a task share one page
    seed (a GRPO group), i.e. one page with `episodes` samples.
    """
    if samples_per_page < 1:
        raise ValueError(f"samples_per_page must be at least 1, got {samples_per_page}")
    pages, per_page = (1, episodes) if grouped else (episodes, samples_per_page)
    rng = random.Random(seed)
    jobs = []
    for gi, task in enumerate(tasks):
        page_seeds = [rng.randrange(2**31) for _ in range(pages)]
        for k in range(pages * per_page):  # k numbers the task's episodes: it fixes their sampling seeds
            jobs.append(Job(task, page_seeds[k // per_page], derive_seed(seed, task.task_id, gi, k, bits=31), gi))
    return jobs


@dataclass
class EvalResult:
    """Outcome of `run_episodes`: trajectories plus summary metrics."""

    trajectories: list[Trajectory]
    seconds: float
    metrics: dict[str, Any] = field(default_factory=dict)


def task_meta(task: Task) -> dict[str, Any]:
    """What a trajectory keeps about its task, for per-site and per-template results."""
    return {"template": task.template, "sites": list(task.sites)}


async def run_episodes(
    policy: Policy,
    tasks: list[Task],
    episodes: int = 1,
    concurrency: int = ROLLOUT.concurrency,
    max_turns: int = ROLLOUT.max_turns,
    seed: int = 0,
    config: EnvConfig | None = None,
    browser: Browser | None = None,
    retries: int = ROLLOUT.retries,
    progress: bool | Callable[[Trajectory], None] = False,
    grouped: bool = False,
    max_invalid: int | None = ROLLOUT.max_invalid,
    samples_per_page: int = 1,
) -> EvalResult:
    """Run `episodes` episodes of every task, `concurrency` at a time on one browser.

    Returns every trajectory (in task order) and summary metrics. Pass `browser` to
    reuse a running Chromium; otherwise one is started and closed here. grouped: the
    episodes of a task share a page seed; samples_per_page: each of the `episodes` pages
    is played that many times (see `episode_seeds`). Tasks read from a released task file
    (WebArena's) put it in the metrics as "task_files" (path, SHA-256, package, version): the
    denominator of the success rate.
    """
    from .tasks.webarena.released import task_files

    result = await run_jobs(policy, episode_seeds(tasks, episodes, seed, grouped, samples_per_page),
                            concurrency=concurrency, max_turns=max_turns, config=config, browser=browser,
                            retries=retries, progress=progress, max_invalid=max_invalid)
    if files := task_files(tasks):
        result.metrics["task_files"] = files
    return result


async def run_jobs(
    policy: Policy,
    jobs: list[Job],
    concurrency: int = ROLLOUT.concurrency,
    max_turns: int = ROLLOUT.max_turns,
    config: EnvConfig | None = None,
    browser: Browser | None = None,
    retries: int = ROLLOUT.retries,
    progress: bool | Callable[[Trajectory], None] = False,
    max_invalid: int | None = ROLLOUT.max_invalid,
) -> EvalResult:
    """Play `jobs` (task, page seed, sampling seed, group each), `concurrency` at a time on
    one browser; `run_episodes` with the pages chosen by the caller, e.g. an expert replaying
    the page of a GRPO group (`guidance`). Trajectories come back in job order.

    Under several processes (`distributed`), each plays its share of the jobs and every
    process gets all the trajectories back, so every caller sees what one process would."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    own = browser is None
    browser = browser or Browser(config)
    await browser.start()
    results: list[Trajectory | None] = [None] * len(jobs)
    mine = distributed.share(jobs)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in mine:
        queue.put_nowait(i)
    bar = _progress_bar(len(mine)) if progress is True and distributed.is_main() else None
    t0 = time.perf_counter()
    # A model policy batches the requests of concurrent episodes; telling it how many are in
    # flight lets it wait for all of them rather than decode for whichever arrived first.
    tell = getattr(policy, "running", None)
    in_flight = 0

    async def worker() -> None:
        nonlocal in_flight
        # An environment an earlier run on this browser left (its tab is reused), or a new one.
        env_config = config or browser.config
        env = browser.unpark(env_config) or BrowserEnv(browser, env_config)
        in_flight += 1
        if callable(tell):
            tell(in_flight)
        try:
            while not queue.empty():
                i = queue.get_nowait()
                results[i] = await _attempt(env, jobs[i], policy, max_turns, retries, max_invalid)
                results[i].meta["group"] = jobs[i].group
                if bar is not None:
                    bar.update(1)
                    ok = [r for r in results if r is not None and r.status != "infra_failure"]
                    bar.set_postfix(success=f"{sum(r.reward for r in ok) / max(1, len(ok)):.2f}")
                elif callable(progress):
                    progress(results[i])
        finally:
            in_flight -= 1
            if callable(tell):
                tell(in_flight)
            if own or not browser.park(env):
                await env.close()

    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(mine)))))
        seconds = time.perf_counter() - t0  # episodes only: not the browser's shutdown
    finally:
        if bar is not None:
            bar.close()
        if own:
            await browser.close()
    if distributed.size() > 1:  # in a thread: the other processes may still be playing
        results = await asyncio.to_thread(distributed.gather, {i: results[i] for i in mine}, len(jobs))
    trajectories = [r for r in results if r is not None]
    return EvalResult(trajectories, seconds, summarize(trajectories, seconds))


async def evaluate(policy: Policy, tasks: list[Task], temperature: float = 0.0, **kwargs: Any) -> EvalResult:
    """Held-out evaluation: `run_episodes(policy, tasks, **kwargs)` (episodes, samples_per_page,
    seed, limits, browser, ...) with a model policy in its evaluation mode, greedy by default
    or sampled at `temperature`, in lockstep batches, so that the same weights and seeds give
    the same episodes (`LLMPolicy.evaluating`). Scripted policies play as they are.
    `webr1 eval`, the pipeline's evaluations and M-GRPO's periodic evaluation all use it."""
    evaluating = getattr(policy, "evaluating", None)
    with evaluating(temperature) if callable(evaluating) else contextlib.nullcontext():
        return await run_episodes(policy, tasks, **kwargs)


async def rollout(
    policy: Policy,
    tasks: list[Task],
    group_size: int = 4,
    max_turns: int = ROLLOUT.max_turns,
    concurrency: int = ROLLOUT.concurrency,
    seed: int = 0,
    config: EnvConfig | None = None,
    browser: Browser | None = None,
    max_invalid: int | None = ROLLOUT.max_invalid,
    progress: bool = False,
) -> list[TrajectoryGroup]:
    """GRPO rollouts: `group_size` independent episodes per task, run concurrently,
    returned as one TrajectoryGroup per task (infrastructure failures kept but marked)."""
    result = await run_episodes(policy, tasks, episodes=group_size, concurrency=concurrency, max_turns=max_turns,
                                seed=seed, config=config, browser=browser, grouped=True, max_invalid=max_invalid,
                                progress=progress)
    groups = [TrajectoryGroup(task_id=t.task_id, trajectories=[]) for t in tasks]
    for traj in result.trajectories:
        groups[traj.meta["group"]].trajectories.append(traj)
    return groups


async def _attempt(env: BrowserEnv, job: Job, policy: Policy, max_turns: int, retries: int,
                   max_invalid: int | None) -> Trajectory:
    error = ""
    for _ in range(retries + 1):
        try:
            return await run_episode(env, job.task, policy, job.seed, max_turns, sample_seed=job.sample_seed,
                                     max_invalid=max_invalid)
        except InfraError as exc:
            error = str(exc)
            await env.browser.ensure_alive()  # if the whole browser died, start a new one for everybody
    return Trajectory(task_id=job.task.task_id, intent=env.intent or job.task.intent, seed=job.seed,
                      status="infra_failure", termination="infra", infra_error=error, meta=task_meta(job.task))


def _progress_bar(total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="episodes", unit="ep")
