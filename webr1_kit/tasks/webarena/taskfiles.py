"""WebArena's task files and WebArena-Lite's splits, read into Task records.

Shapes read:
- WebArena's `config_files/test.raw.json`: one JSON list of the 812 task configs, URLs
  written as placeholders (__SHOPPING__, __REDDIT__, ...);
- a folder of per-task files `N.json` (what WebArena's generate_test_data.py writes; its
  URLs are already concrete, so they must point at the configured sites);
- WebArena-Lite's test raw file (THUDM/VisualAgentBench, VAB-WebArena-Lite): a list of
  the 165 human-verified tasks, renumbered 0..164, each with `old_task_id`, its original
  WebArena id;
- a split file {"train": [ids], "test": [ids]} of original WebArena task ids.

Every task is keyed by its original WebArena id: task_id "webarena/<id>". Placeholders
are replaced everywhere in a record (start_url, eval reference URLs, program_html URLs
and helper arguments, answers), as WebArena's own generator does; a `start_url` may be
one URL, several joined by " |AND| " (one tab each), or a list of URLs.
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from pathlib import Path
from typing import Any, Iterable

from ..task import Task, TaskSchemaError, origin_of
from .config import ENV_NAMES, HOW_TO_CONFIGURE, PLACEHOLDERS, SITES, SPLIT_ENV, TASKS_ENV, WebArenaConfig, WebArenaConfigError

LITE_SIZES = {"test": 165, "train": 647}
"""WebArena-Lite's split sizes (WebRL; WebAgent-R1 evaluates on the test split)."""
AND = " |AND| "
_PLACEHOLDER_RE = re.compile("|".join(re.escape(p) for p in sorted(PLACEHOLDERS.values(), key=len, reverse=True)))
_SITE_OF = {p: s for s, p in PLACEHOLDERS.items()}

SPLIT_HELP = (
    "WebArena-Lite's task file was not found. Install it with {install}, or name it with --split-file, "
    f"${SPLIT_ENV} or split_file in the config: either WebArena-Lite's own test file "
    "(VAB-WebArena-Lite/new/test_webarena_lite.raw.json in github.com/THUDM/VisualAgentBench, the "
    "165 tasks with their original ids in old_task_id; the 647 others are the training split, as in "
    "WebRL and WebAgent-R1) or a JSON file {{\"train\": [WebArena ids], \"test\": [WebArena ids]}}"
)
TASKS_HELP = (
    "no WebArena task file: install the released one with {install}, or pass --tasks-file, set "
    f"${TASKS_ENV} or tasks: in the config to WebArena's config_files/test.raw.json (or a folder of "
    "per-task N.json files)"
)


def placeholders_in(value: Any) -> set[str]:
    """Site names whose placeholder occurs anywhere in `value` (JSON-able)."""
    return {_SITE_OF[m] for m in _PLACEHOLDER_RE.findall(json.dumps(value))}


def substitute(value: Any, urls: dict[str, str]) -> Any:
    """`value` (JSON-able) with every placeholder of a site in `urls` replaced by its URL."""
    text = json.dumps(value)
    for site, url in urls.items():
        # json.dumps(url)[1:-1]: the URL as it must appear inside a JSON string.
        text = text.replace(PLACEHOLDERS[site], json.dumps(url)[1:-1])
    return json.loads(text)


def start_urls(task: Task) -> list[str]:
    """The URLs a task starts on, one per tab (WebArena joins them with " |AND| ")."""
    return [u.strip() for u in task.start_url.split(AND.strip()) if u.strip()]


# ---------------------------------------------------------------- raw files


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskSchemaError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise TaskSchemaError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise TaskSchemaError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def read_raw(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, record) for every task config in a file (a list or one object) or a folder of N.json."""
    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted((p for p in path.iterdir() if re.fullmatch(r"\d+\.json", p.name)), key=lambda p: int(p.stem))
        if not files:
            raw = path / "test.raw.json"
            if raw.is_file():
                return read_raw(raw)
            raise TaskSchemaError(f"{path}: no per-task files (0.json, 1.json, ...) and no test.raw.json in this folder")
        out = []
        for f in files:
            data = _read_json(f)
            if not isinstance(data, dict):
                raise TaskSchemaError(f"{f}: expected one task object, got {type(data).__name__}")
            out.append((str(f), data))
        return out
    if not path.exists():
        raise TaskSchemaError(f"{path}: no such task file or folder")
    data = _read_json(path)
    items = data if isinstance(data, list) else [data]
    for i, r in enumerate(items):
        if not isinstance(r, dict):
            raise TaskSchemaError(f"{path}[{i}]: expected a task object, got {type(r).__name__}")
    return [(f"{path}[{i}]", r) for i, r in enumerate(items)]


def webarena_id(record: dict[str, Any], where: str) -> str:
    """The original WebArena id of a record: `old_task_id` in WebArena-Lite's files, else `task_id`."""
    wid = record.get("old_task_id", record.get("task_id"))
    if isinstance(wid, bool) or not isinstance(wid, (int, str)) or str(wid).strip() == "":
        raise TaskSchemaError(f"{where}: missing or bad task_id {wid!r}")
    return str(wid).strip()


def to_task(record: dict[str, Any], config: WebArenaConfig, where: str,
            meta: dict[str, Any] | None = None, check_sites: bool = True) -> tuple[Task, list[str]]:
    """One WebArena record as a Task with the configured URLs; also the sites it needs that
    have no URL (their placeholders stay in the record until they are configured)."""
    wid = webarena_id(record, where)
    sites = record.get("sites", [])
    if not isinstance(sites, list) or not all(isinstance(s, str) for s in sites):
        raise TaskSchemaError(f"{where}: task {wid}: field 'sites' must be a list of strings, got {sites!r}")
    unknown = [s for s in sites if s not in SITES]
    if unknown:
        raise TaskSchemaError(f"{where}: task {wid}: unknown site(s) {unknown}; WebArena sites: {', '.join(SITES)}")
    needed = list(dict.fromkeys(sites + sorted(placeholders_in(record) - set(sites))))
    missing = config.missing(needed)
    urls = {s: config.sites[s] for s in needed if s not in missing}
    rec = substitute(copy.deepcopy(record), urls)
    start = rec.get("start_url")
    if isinstance(start, list):  # several tabs as a list: the " |AND| " form WebArena's env reads
        if not start or not all(isinstance(u, str) and u.strip() for u in start):
            raise TaskSchemaError(f"{where}: task {wid}: field 'start_url' must be a URL or a non-empty list of URLs")
        start = AND.join(u.strip() for u in start)
    meta = {**(rec.get("meta") or {}), **(meta or {}), "webarena_id": wid}
    if "old_task_id" in rec:
        meta["lite_task_id"] = rec.get("task_id")
    rec.pop("old_task_id", None)
    out = {**rec, "task_id": f"webarena/{wid}", "suite": "webarena", "start_url": start, "meta": meta,
           "sites": needed, "allowed_origins": sorted({origin_of(u) for u in urls.values()})}
    task = Task.from_dict(out, where=where)
    if not missing and check_sites:
        _check_on_sites(task, where)
    return task, missing


def _check_on_sites(task: Task, where: str) -> None:
    """Per-task files carry concrete URLs: they must lie on the configured sites."""
    for url in start_urls(task):
        if not url.startswith(("http://", "https://")) or origin_of(url) not in task.allowed_origins:
            raise WebArenaConfigError(
                f"{where}: task {task.meta['webarena_id']}: start URL {url} is on none of the configured sites "
                f"({', '.join(task.allowed_origins) or 'none'}). Per-task files hold the URLs they were generated "
                "for; load WebArena's test.raw.json (placeholders) instead, or configure those URLs."
            )


# ---------------------------------------------------------------- splits


def read_split(path: str | Path) -> tuple[dict[str, list[str]], list[tuple[str, dict[str, Any]]]]:
    """A WebArena-Lite split: ({"train": ids, "test": ids}, Lite task records or []).

    Accepts {"train": [...], "test": [...]} (either list may be missing; ids are WebArena's)
    or WebArena-Lite's test raw file (a list of task records with `old_task_id`), whose
    records are returned too: their eval blocks are Lite's human-verified ones.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise WebArenaConfigError(f"WebArena-Lite split file {path} does not exist. {SPLIT_HELP}")
    data = _read_json(path)
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"train", "test", "note"})
        if unknown or not ({"train", "test"} & set(data)):
            raise WebArenaConfigError(f"{path}: a split file holds \"train\" and/or \"test\" lists of WebArena task ids"
                                      + (f"; unknown key(s) {', '.join(unknown)}" if unknown else ""))
        split: dict[str, list[str]] = {}
        for name in ("train", "test"):
            if name not in data:
                continue
            ids = data[name]
            if not isinstance(ids, list) or not all(isinstance(i, (int, str)) and not isinstance(i, bool) for i in ids):
                raise WebArenaConfigError(f"{path}: {name!r} must be a list of task ids, got {str(ids)[:80]}")
            split[name] = _unique([str(i).strip() for i in ids], f"{path}: {name}")
        both = set(split.get("train", [])) & set(split.get("test", []))
        if both:
            raise WebArenaConfigError(f"{path}: task id(s) in both train and test: {', '.join(sorted(both, key=_num)[:10])}")
        return split, []
    if isinstance(data, list):
        records = read_raw(path)
        missing_old = [w for w, r in records if "old_task_id" not in r]
        if missing_old:
            raise WebArenaConfigError(f"{missing_old[0]}: a WebArena-Lite task file needs old_task_id (the original "
                                      "WebArena id) in every record; for a plain id list use {\"test\": [...]}")
        ids = _unique([webarena_id(r, w) for w, r in records], str(path))
        return {"test": ids}, records
    raise WebArenaConfigError(f"{path}: expected a JSON object {{\"train\": [...], \"test\": [...]}} or a list of Lite tasks")


def _unique(ids: list[str], where: str) -> list[str]:
    seen: set[str] = set()
    dup = [i for i in ids if i in seen or seen.add(i)]  # type: ignore[func-returns-value]
    if dup:
        raise WebArenaConfigError(f"{where}: task id(s) listed more than once: {', '.join(dup[:10])}")
    return ids


def _num(i: str) -> tuple[int, str]:
    return (int(i), i) if i.isdigit() else (1 << 30, i)


# ---------------------------------------------------------------- the loader


def load(config: WebArenaConfig, lite: bool, split: str | None = None, names: Iterable[str] | None = None,
         sites_required: bool = True) -> list[Task]:
    """WebArena (lite=False: every task; split must be None or "all") or WebArena-Lite
    (split "test" (default), "train" or "all") tasks, in WebArena id order.

    Files the config does not name are the released ones, from the installed packages
    (`released.py`). Every task carries the files it was read from in meta["task_files"]
    (path, SHA-256, package and version).

    names: keep only these ids ("27" or "webarena/27"). Raises WebArenaConfigError naming
    what is missing: the task file, the split file, or the sites the selected tasks need.
    sites_required=False lists tasks without sites: URLs stay placeholders (__REDDIT__, ...),
    so such tasks can be read but not played.
    """
    from .released import describe_file, install_hint, with_released

    if sites_required and not config.sites:
        raise WebArenaConfigError(f"no WebArena site is configured: {HOW_TO_CONFIGURE}")
    if not lite and split not in (None, "all"):
        raise WebArenaConfigError(f"WebArena has no {split!r} split; use --suite webarena-lite for its train/test split")
    split = split or ("test" if lite else "all")
    if split not in ("train", "test", "all"):
        raise WebArenaConfigError(f"WebArena-Lite split must be train, test or all; got {split!r}")
    config = with_released(config, lite)
    if lite and not config.split_file:
        raise WebArenaConfigError(SPLIT_HELP.format(install=install_hint()))
    if not lite and not config.tasks:
        raise WebArenaConfigError(TASKS_HELP.format(install=install_hint()))
    records: dict[str, tuple[str, dict[str, Any]]] = {}
    ids: dict[str, list[str]] = {}
    lite_ids: set[str] = set()
    if config.tasks:
        for where, r in read_raw(config.tasks):
            wid = webarena_id(r, where)
            if wid in records:
                raise TaskSchemaError(f"{where}: task id {wid} appears more than once")
            records[wid] = (where, r)
    wanted: list[str] | None = None
    if lite:
        ids, lite_records = read_split(config.split_file)
        for where, r in lite_records:  # Lite's verified eval blocks replace WebArena's
            records[webarena_id(r, where)] = (where, r)
            lite_ids.add(webarena_id(r, where))
        if "test" not in ids and split in ("test", "all"):
            raise WebArenaConfigError(f"{config.split_file}: no \"test\" list")
        if "train" not in ids and split in ("train", "all"):
            if not config.tasks:
                raise WebArenaConfigError(
                    "WebArena-Lite's training split is every WebArena task outside its test split, so it needs "
                    f"WebArena's task file (config_files/test.raw.json): install it with {install_hint()}, or pass "
                    f"--tasks-file, set ${TASKS_ENV} or tasks: in the config")
            test = set(ids["test"])
            ids["train"] = sorted((w for w in records if w not in test), key=_num)
        wanted = ids["test"] + ids["train"] if split == "all" else ids[split]
        _warn_sizes(ids, config.split_file)
    if wanted is None:
        wanted = sorted(records, key=_num)
    unknown = [w for w in wanted if w not in records]
    if unknown:
        src = config.tasks or config.split_file
        raise WebArenaConfigError(f"{len(unknown)} task id(s) of the {split} split are not in {src}: "
                                  f"{', '.join(sorted(unknown, key=_num)[:10])}{' ...' if len(unknown) > 10 else ''}")
    if names is not None:
        keep = {str(n).strip().removeprefix("webarena/") for n in names}
        absent = keep - set(wanted)
        if absent:
            raise ValueError(f"no WebArena task(s) with id {', '.join(sorted(absent, key=_num))} in the {split} split")
        wanted = [w for w in wanted if w in keep]
    tasks, missing_by_site = [], {}
    test_ids = set(ids.get("test", []))
    read = {p: describe_file(p).to_dict() for p in (config.tasks, config.split_file if lite else None) if p}
    for wid in sorted(wanted, key=_num):
        where, r = records[wid]
        extra = {"split": "test" if wid in test_ids else "train"} if lite else {}
        source = config.split_file if lite and wid in lite_ids else config.tasks
        extra["task_files"] = [read[source]]
        task, missing = to_task(r, config, where, extra, check_sites=sites_required)
        tasks.append(task)
        for s in missing:
            missing_by_site[s] = missing_by_site.get(s, 0) + 1
    if sites_required:
        refuse_missing_sites(missing_by_site, config)
    return tasks


def refuse_missing_sites(missing_by_site: dict[str, int], config: WebArenaConfig) -> None:
    """Raise WebArenaConfigError naming each unconfigured site the selected tasks need, with
    its variable and how many tasks need it (nothing when none is missing)."""
    if not missing_by_site:
        return
    which = ", ".join(f"{s} ({ENV_NAMES[s]}; {n} task{'s' if n > 1 else ''})" for s, n in sorted(missing_by_site.items()))
    raise WebArenaConfigError(f"the selected tasks need WebArena site(s) that are not configured: {which}. "
                              f"Configured: {', '.join(sorted(config.sites)) or 'none'} (from {config.source}); "
                              "set the missing URLs, or pick tasks with --tasks")


def _warn_sizes(ids: dict[str, list[str]], path: str) -> None:
    for name, want in LITE_SIZES.items():
        if name in ids and len(ids[name]) != want:
            warnings.warn(f"{path}: the WebArena-Lite {name} split has {len(ids[name])} tasks, not {want}", stacklevel=3)
