"""WebArena-Verified's task file read into Task records.

WebArena-Verified (ServiceNow; `webarena-verified` 1.2.3 on PyPI, Apache-2.0) is WebArena's
812 tasks with revised intents and deterministic evaluators, no LLM judge, plus a 258-task
"hard" subset. Its records differ from WebArena's: `start_urls` is a list, `eval` a list of
evaluators (`AgentResponseEvaluator` on the agent's JSON answer, `NetworkEventEvaluator` on
the episode's network trace), and `revision` counts the task's revisions.

Each record becomes a Task with task_id "webarena-verified/<id>" and suite "webarena" (the
same sites, logins and start as WebArena's own tasks), its evaluators in eval["verified"]
(eval_types ["verified"]) and its other fields in meta. The kit does not score these
evaluators yet: the tasks load and list, and a run refuses them by id as unscorable
(`judge.scorable`); an episode that reaches scoring is not evaluated, never 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ..task import Task, TaskSchemaError
from .config import HOW_TO_CONFIGURE, WebArenaConfig, WebArenaConfigError


def load(config: WebArenaConfig, subset: str | None = None, names: Iterable[str] | None = None,
         tasks_file: str | None = None, sites_required: bool = True) -> list[Task]:
    """WebArena-Verified's tasks (all, or the ids of `subset`, e.g. "hard"), from `tasks_file`
    or the released file of the installed `webarena-verified` package, in id order."""
    from .released import describe_file, find, install_hint, subset_file, subset_names
    from .taskfiles import _num, read_raw, refuse_missing_sites, to_task

    if sites_required and not config.sites:
        raise WebArenaConfigError(f"no WebArena site is configured: {HOW_TO_CONFIGURE}")
    if tasks_file is None:
        found = find("webarena-verified")
        if found is None:
            raise WebArenaConfigError(f"WebArena-Verified's task file was not found: install it with {install_hint()}, "
                                      "or name it with --tasks-file")
        tasks_file = found.path
    source = describe_file(tasks_file).to_dict()
    records: dict[str, tuple[str, dict[str, Any]]] = {}
    for where, r in read_raw(tasks_file):
        wid = r.get("task_id")
        if isinstance(wid, bool) or not isinstance(wid, (int, str)) or str(wid).strip() == "":
            raise TaskSchemaError(f"{where}: missing or bad task_id {wid!r}")
        if str(wid) in records:
            raise TaskSchemaError(f"{where}: task id {wid} appears more than once")
        records[str(wid)] = (where, r)
    wanted = sorted(records, key=_num)
    if subset is not None:
        path = subset_file(subset)
        if path is None:
            raise ValueError(f"no WebArena-Verified subset {subset!r}; subsets: {', '.join(subset_names()) or 'none installed'}")
        ids = _subset_ids(path)
        unknown = [i for i in ids if i not in records]
        if unknown:
            raise WebArenaConfigError(f"{path}: {len(unknown)} id(s) not in {tasks_file}: {', '.join(unknown[:10])}")
        wanted = sorted(ids, key=_num)
    if names is not None:
        keep = {str(n).strip().removeprefix("webarena-verified/") for n in names}
        absent = keep - set(wanted)
        if absent:
            raise ValueError(f"no WebArena-Verified task(s) with id {', '.join(sorted(absent, key=_num))}"
                             + (f" in the {subset} subset" if subset else ""))
        wanted = [w for w in wanted if w in keep]
    tasks, missing_by_site = [], {}
    for wid in wanted:
        where, r = records[wid]
        task, missing = to_task(as_webarena_record(r, where), config, where,
                                {"benchmark": "webarena-verified", "task_files": [source]}, check_sites=sites_required)
        tasks.append(Task.from_dict({**task.to_dict(), "task_id": f"webarena-verified/{wid}"}, where=where))
        for s in missing:
            missing_by_site[s] = missing_by_site.get(s, 0) + 1
    if sites_required:
        refuse_missing_sites(missing_by_site, config)
    return tasks


def as_webarena_record(record: dict[str, Any], where: str) -> dict[str, Any]:
    """A Verified record in the shape `taskfiles.to_task` reads: start_urls as the start URL
    list, the evaluator list under eval.verified."""
    starts, evaluators = record.get("start_urls"), record.get("eval")
    if not isinstance(starts, list) or not starts:
        raise TaskSchemaError(f"{where}: field 'start_urls' must be a non-empty list of URLs, got {starts!r}")
    if not isinstance(evaluators, list):
        raise TaskSchemaError(f"{where}: field 'eval' must be a list of WebArena-Verified evaluators, got {evaluators!r}")
    out = {k: v for k, v in record.items() if k not in ("start_urls", "eval")}
    return {**out, "start_url": starts, "eval": {"eval_types": ["verified"], "verified": evaluators}}


def _subset_ids(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise WebArenaConfigError(f"{path}: cannot read the subset ({exc})") from None
    ids = data.get("task_ids") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not ids:
        raise WebArenaConfigError(f"{path}: a subset file holds {{\"task_ids\": [...]}}")
    return [str(i) for i in ids]
