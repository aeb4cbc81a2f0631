"""The arena suite: WebArena-style tasks on the bundled sites (webr1_kit.sites).

Tasks are generated from *templates*. A template is an intent pattern plus three
functions: `instances(world)` lists concrete parameter sets with their WebArena eval
block (computed from the world's seed data), and `expert(params, obs, history)`
solves one step through the agent's own action space. Task files hold WebArena's
placeholders (__SHOPPING__, __REDDIT__, ...) which the suite replaces with the running
sites' URLs, exactly as the real WebArena's task files are resolved.

Splits. Per template, instances are shuffled with a seed; a template marked
`held_out=True` goes wholly to the test split (templates unseen in training), and
every other template gives about a fifth of its instances (parameters held out of
training) to the test split and the rest to train.
"""

from __future__ import annotations

import functools
import json
import random
import sqlite3
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .evaluators import evaluate
from .suite import Suite
from .task import Task, Verdict

SPLITS = ("train", "test")


@dataclass(frozen=True)
class Instance:
    """One concrete task of a template: its parameters and its WebArena eval block."""

    params: dict[str, Any]
    eval: dict[str, Any]


@dataclass(frozen=True)
class Template:
    """A task template. `intent` and `start` are str.format patterns over the params."""

    id: str
    """"site.name", e.g. "shop.product_price"."""
    sites: tuple[str, ...]
    kind: str
    """"info" (answer via exit, string_match), "nav" (url_match) or "content" (program_html)."""
    intent: str
    start: str
    """Start URL pattern, with site placeholders, e.g. "__SHOPPING__/"."""
    min_steps: int
    instances: Callable[["World"], Iterable[Instance]]
    expert: Callable[[dict[str, Any], Any, list], str]
    held_out: bool = False
    """Whole template in the test split only."""
    max_instances: int = 25


class World:
    """Read access to a world's pristine databases, for generating tasks (no servers needed)."""

    def __init__(self, seed: int = 0):
        from ..sites import _databases

        self.seed = seed
        self.dbs: dict[str, sqlite3.Connection] = {}
        for name, build in _databases().items():
            conn = sqlite3.connect(":memory:")
            conn.row_factory = sqlite3.Row
            build(conn, seed=seed)
            conn.commit()
            self.dbs[name] = conn

    def query(self, db: str, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        return self.dbs[db].execute(sql, tuple(params)).fetchall()

    def one(self, db: str, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row:
        rows = self.query(db, sql, params)
        if not rows:
            raise LookupError(f"no row for {sql} {params}")
        return rows[0]


# ---------------------------------------------------------------- eval block helpers


def answer_eval(must_include: list[str] | None = None, exact: str | None = None, fuzzy: list[str] | None = None) -> dict:
    """A string_match eval block."""
    ref: dict[str, Any] = {}
    if exact is not None:
        ref["exact_match"] = exact
    if must_include:
        ref["must_include"] = list(must_include)
    if fuzzy:
        ref["fuzzy_match"] = list(fuzzy)
    return {"eval_types": ["string_match"], "reference_answers": ref, "reference_url": "", "program_html": []}


def url_eval(url: str) -> dict:
    """A url_match eval block (the URL keeps its placeholder)."""
    return {"eval_types": ["url_match"], "reference_answers": None, "reference_url": url, "program_html": []}


def page_eval(*checks: tuple[str, str, list[str] | str]) -> dict:
    """A program_html eval block from (url, locator, must_include list or exact string) checks."""
    items = []
    for url, locator, required in checks:
        req = {"exact_match": required} if isinstance(required, str) else {"must_include": list(required)}
        items.append({"url": url, "locator": locator, "required_contents": req})
    return {"eval_types": ["program_html"], "reference_answers": None, "reference_url": "", "program_html": items}


# ---------------------------------------------------------------- templates and tasks


def templates() -> list[Template]:
    """Every arena template, in a fixed order."""
    from .arena_templates import ALL

    ids = [t.id for t in ALL]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"duplicate template ids: {sorted(dupes)}")
    return list(ALL)


def template(template_id: str) -> Template:
    for t in templates():
        if t.id == template_id:
            return t
    raise KeyError(f"unknown arena template {template_id!r}")


@functools.lru_cache(maxsize=4)
def _generate(world_seed: int) -> dict[str, tuple[Task, ...]]:
    world = World(world_seed)
    out: dict[str, list[Task]] = {"train": [], "test": []}
    for t in templates():
        instances = list(t.instances(world))
        if not instances:
            raise ValueError(f"template {t.id} produced no instances")
        random.Random(f"{t.id}/{world_seed}").shuffle(instances)
        instances = instances[: t.max_instances]
        n_test = len(instances) if t.held_out else max(1, round(len(instances) * 0.2))
        for k, inst in enumerate(instances):
            split = "test" if k < n_test else "train"
            out[split].append(
                Task(
                    task_id=f"arena/{t.id}/{k}",
                    intent=t.intent.format(**inst.params),
                    start_url=t.start.format(**inst.params),
                    suite="arena",
                    eval=inst.eval,
                    sites=t.sites,
                    template=t.id,
                    min_steps=t.min_steps,
                    meta={"params": inst.params, "world_seed": world_seed, "kind": t.kind, "split": split},
                )
            )
    return {k: tuple(v) for k, v in out.items()}


def tasks(split: str = "train", world_seed: int = 0) -> list[Task]:
    """The arena tasks of a split ("train", "test" or "all") for a world seed."""
    if split not in (*SPLITS, "all"):
        raise ValueError(f"arena split must be one of train, test, all; got {split!r}")
    gen = _generate(world_seed)
    return list(gen["train"] + gen["test"]) if split == "all" else list(gen[split])


def split_report(world_seed: int = 0) -> dict[str, Any]:
    """Sizes of the splits and how many test templates are wholly unseen in training."""
    train, test = tasks("train", world_seed), tasks("test", world_seed)
    train_templates = {t.template for t in train}
    test_templates = {t.template for t in test}
    return {
        "train_tasks": len(train),
        "test_tasks": len(test),
        "templates": len(train_templates | test_templates),
        "test_templates": len(test_templates),
        "test_templates_unseen_in_train": len(test_templates - train_templates),
        "multi_site_tasks": {s: sum(1 for t in ts if len(t.sites) > 1) for s, ts in (("train", train), ("test", test))},
    }


# ---------------------------------------------------------------- the suite


def resolve(text: str, placeholders: dict[str, str]) -> str:
    for key, url in placeholders.items():
        text = text.replace(key, url)
    return text


class ArenaSuite(Suite):
    """Arena tasks: a fresh copy of the sites' state per episode, WebArena evaluators."""

    name = "arena"

    def __init__(self) -> None:
        super().__init__()
        self._episodes: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    @staticmethod
    def arena(task: Task) -> Any:
        from ..sites import get_arena

        return get_arena(int(task.meta.get("world_seed", 0)))

    def start_url(self, task: Task) -> str:
        return resolve(task.start_url, self.arena(task).placeholders)

    def origins(self, task: Task) -> tuple[str, ...]:
        urls = self.arena(task).urls
        missing = [s for s in task.sites if s not in urls]
        if missing:
            raise ValueError(f"{task.task_id}: unknown arena site(s) {missing}; sites: {sorted(urls)}")
        return tuple(urls[s] for s in task.sites)

    async def setup(self, context: Any, task: Task, seed: int) -> None:
        """Give the episode fresh copies of every site database, named by a cookie."""
        from ..sites.state import EPISODE_COOKIE, SITES_COOKIE

        arena = self.arena(task)
        episode = arena.new_episode()
        self._episodes[context] = episode
        # Cookies are per host, not per port, so one cookie reaches every arena site.
        url = next(iter(arena.urls.values()))
        await context.add_cookies([{"name": EPISODE_COOKIE, "value": episode, "url": url},
                                   {"name": SITES_COOKIE, "value": "+".join(task.sites), "url": url}])

    def episode(self, context: Any) -> str | None:
        """The state id of the episode running in `context` (for tests and tools)."""
        return self._episodes.get(context)

    async def evaluate(self, page: Any, context: Any, task: Task, answer: str | None) -> Verdict:
        placeholders = self.arena(task).placeholders
        resolved = Task.from_dict({**task.to_dict(), "eval": json.loads(resolve(json.dumps(task.eval), placeholders))})
        return await evaluate(resolved, answer, page, context, judge=self.judge)


# ---------------------------------------------------------------- the expert policy


@dataclass
class ArenaExpert:
    """The scripted expert for every arena template: it reads the task's parameters and
    acts only through the agent's action space (see each template's `expert`)."""

    name: str = "expert"
    _cache: dict[str, Template] = field(default_factory=dict)

    async def act(self, task: Task, intent: str, observation: Any, history: list, seed: int = 0) -> str:
        t = self._cache.get(task.template or "")
        if t is None:
            t = self._cache[task.template] = template(task.template)
        return t.expert(task.meta["params"], observation, history)
