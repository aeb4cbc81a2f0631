"""Tasks, evaluators and suites.

    load_tasks("miniwob")                          # every MiniWoB++ task in the package
    load_tasks("miniwob", names=["click-button"])
    load_tasks("path/to/tasks.json")               # WebArena-format JSON or JSONL
    load_tasks("webarena-lite", split="test")      # real WebArena-Lite (sites and files configured:
                                                   # see tasks/webarena/config.py)
"""

from __future__ import annotations

from pathlib import Path

from .suite import Suite
from .task import Task, TaskSchemaError, Verdict, load_task_file

SUITES = ("miniwob", "arena", "webarena", "webarena-lite", "webarena-verified")
"""Named suites `load_tasks` knows, besides task files."""

_suites: dict[str, Suite] = {}


def get_suite(name: str) -> Suite:
    """The Suite object that starts and scores tasks whose `task.suite` is `name`."""
    if name not in _suites:
        if name == "json":
            _suites[name] = Suite()
        elif name == "miniwob":
            from .miniwob import MiniWoBSuite

            _suites[name] = MiniWoBSuite()
        elif name == "arena":
            from .arena import ArenaSuite

            _suites[name] = ArenaSuite()
        elif name == "webarena":
            from .webarena import WebArenaSuite

            _suites[name] = WebArenaSuite()
        else:
            raise ValueError(f"unknown suite {name!r}; known suites: json, {', '.join(SUITES)}")
    return _suites[name]


def load_tasks(source: str, names: list[str] | None = None, split: str | None = None, **kwargs) -> list[Task]:
    """Tasks of a named suite, or from a JSON/JSONL task file.

    source: "miniwob" or a path. names: keep only these task names/ids.
    split: "train", "test" or "all" for the arena (default train) and WebArena-Lite
    (default test); MiniWoB++ and full WebArena have none.
    kwargs go to the suite's loader (for WebArena: config, config_path, tasks_file, split_file).
    """
    if source == "miniwob":
        from . import miniwob

        if split not in (None, "all"):
            raise ValueError("MiniWoB++ has no train/test split; leave split unset")
        return miniwob.tasks(names, **kwargs)
    if source == "arena":
        from . import arena

        tasks = arena.tasks(split or "train", **kwargs)
        if names is not None:
            wanted = set(names)
            tasks = [t for t in tasks if t.task_id in wanted or t.template in wanted]
        return tasks
    if source in ("webarena", "webarena-lite", "webarena-verified"):
        from . import webarena

        return webarena.tasks(source, split=split, names=names, **kwargs)
    path = Path(source)
    if path.suffix in (".json", ".jsonl") or path.exists():
        tasks = load_task_file(path)
        if names is not None:
            wanted = set(names)
            tasks = [t for t in tasks if t.task_id in wanted]
            missing = wanted - {t.task_id for t in tasks}
            if missing:
                raise ValueError(f"{path}: no task(s) with id {', '.join(sorted(missing))}")
        return tasks
    raise ValueError(f"unknown task source {source!r}: use one of {', '.join(SUITES)} or a .json/.jsonl file")


def select_tasks(source: "str | TaskSelection" = "arena", split: str | None = None, names: list[str] | None = None,
                 limit: int | None = None, seed: int | str = 0, **kwargs) -> list[Task]:
    """The tasks a run works on: `load_tasks(source, names, split)`, then, with `limit`, a
    seeded sample of that many (in the sample's order). The command line, the pipeline and
    `webr1 rl` configs all select through here, so the same settings give the same tasks.

    source: a suite name or task file, or a run config's `config.TaskSelection` section,
    whose fields then stand for the keywords; `split` is then the stage's default ("train"
    or "test"), used for an arena section that names no split. seed: any int or string;
    callers salt it ("0/train", "0/eval") so that a run's training and evaluation samples
    are drawn independently. Raises ValueError when nothing matches.
    """
    import random

    from ..config import TaskSelection

    if isinstance(source, TaskSelection):
        sel = source
        source, limit = sel.suite, sel.limit
        split = sel.split if sel.split is not None else (split if sel.suite == "arena" else None)
        names = list(sel.names) if sel.names is not None else None
    tasks = load_tasks(source, names=names, split=split, **kwargs)
    if not tasks:
        raise ValueError(f"no {source} tasks selected (split={split!r}, names={names!r})")
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if limit < len(tasks):
            tasks = random.Random(seed).sample(tasks, limit)
    return tasks


__all__ = ["Task", "TaskSchemaError", "Verdict", "Suite", "load_tasks", "load_task_file", "get_suite", "select_tasks"]
