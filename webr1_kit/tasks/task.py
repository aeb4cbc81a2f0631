"""The Task record, in WebArena's JSON schema, and the Verdict an evaluation returns.

A WebArena task is an intent, a `start_url` and an `eval` block:

    {"task_id": 7, "intent": "...", "start_url": "http://...", "sites": ["shopping"],
     "intent_template_id": 12,
     "eval": {"eval_types": ["string_match"],
              "reference_answers": {"must_include": ["$25.99"]},
              "reference_url": "", "program_html": []}}

`Task.from_dict` reads that shape (plus this kit's own fields) and names the task
and the field when something is wrong. Extra WebArena keys are kept in `meta`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

EVAL_TYPES = ("string_match", "url_match", "program_html", "verified")
VERIFIED_EVALUATORS = ("AgentResponseEvaluator", "NetworkEventEvaluator")
"""WebArena-Verified's evaluators, as its task file names them (eval["verified"])."""
STRING_MATCH_KEYS = ("exact_match", "must_include", "fuzzy_match")


class TaskSchemaError(ValueError):
    """A task file or record does not follow the schema; the message names the task and field."""


@dataclass(frozen=True)
class Task:
    """One task. Serialisable: `Task.from_dict(task.to_dict()) == task`."""

    task_id: str
    """Unique id, e.g. "miniwob/click-button" or "webarena/27"."""
    intent: str
    """The instruction given to the agent. Empty when the page states it (MiniWoB++)."""
    start_url: str
    """Where the episode starts. Suites may resolve relative URLs (MiniWoB++ pages)."""
    suite: str = "json"
    """Which suite starts and scores this task: "json" (WebArena-style eval block) or "miniwob"."""
    eval: dict[str, Any] = field(default_factory=dict)
    """WebArena eval block: eval_types, reference_answers, reference_url, url_note, program_html."""
    sites: tuple[str, ...] = ()
    """Site names the task touches (for per-site results)."""
    template: str | None = None
    """Template the task was made from (WebArena's intent_template_id); held-out splits use it."""
    min_steps: int | None = None
    """Fewest actions a solution needs, when known."""
    allowed_origins: tuple[str, ...] = ()
    """URL prefixes the agent may visit. Empty: the origin of the start URL."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Anything else from the task file (e.g. WebArena's require_login, geolocation)."""

    def __hash__(self) -> int:
        # The generated frozen-dataclass hash would hash the `eval` and `meta` dicts and
        # raise TypeError; tasks are used as dict keys (per-task results), so hash the
        # identifying fields only (equal tasks still hash equal).
        return hash((self.task_id, self.suite, self.intent, self.start_url))

    def to_dict(self) -> dict[str, Any]:
        """This record as JSON-ready data; `Task.from_dict` reads it back unchanged."""
        d = asdict(self)
        d["sites"] = list(self.sites)
        d["allowed_origins"] = list(self.allowed_origins)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "") -> "Task":
        """Read one task (this kit's fields or WebArena's), validating every field."""
        if not isinstance(d, dict):
            raise TaskSchemaError(f"{where or 'task'}: expected a JSON object, got {type(d).__name__}")
        tid = d.get("task_id")
        name = f"task {tid!r}" if tid is not None else (where or "task")
        if where and tid is not None:
            name = f"{where}: task {tid!r}"

        def need(key: str, types: type | tuple[type, ...], default: Any = ...) -> Any:
            if key not in d:
                if default is ...:
                    raise TaskSchemaError(f"{name}: missing field {key!r}")
                return default
            value = d[key]
            if not isinstance(value, types) or isinstance(value, bool) and bool not in _as_tuple(types):
                tname = " or ".join(t.__name__ for t in _as_tuple(types))
                raise TaskSchemaError(f"{name}: field {key!r} must be {tname}, got {value!r}")
            return value

        if tid is None:
            raise TaskSchemaError(f"{name}: missing field 'task_id'")
        need("task_id", (str, int))
        if tid == "":
            # An empty id cannot name the task in results, splits or error messages.
            raise TaskSchemaError(f"{name}: field 'task_id' must not be empty")
        intent = need("intent", str)
        start_url = need("start_url", str)
        suite = need("suite", str, "json")
        # Deep copies: the record is frozen, so it must not change when the caller's
        # dict (e.g. a task file loaded once and edited) changes afterwards.
        ev = copy.deepcopy(need("eval", dict, {}))
        if suite == "json" or ev:  # suites that score from the page (MiniWoB++) carry no eval block
            validate_eval(ev, name)
        sites = need("sites", list, [])
        if not all(isinstance(s, str) for s in sites):
            raise TaskSchemaError(f"{name}: field 'sites' must be a list of strings, got {sites!r}")
        key = "template" if "template" in d else "intent_template_id"
        template = need(key, (str, int, type(None)), None)  # a bool is not an id
        min_steps = need("min_steps", (int, type(None)), None)
        if min_steps is not None and min_steps < 0:
            raise TaskSchemaError(f"{name}: field 'min_steps' must not be negative, got {min_steps!r}")
        allowed = need("allowed_origins", list, [])
        if not all(isinstance(o, str) and o for o in allowed):
            raise TaskSchemaError(f"{name}: field 'allowed_origins' must be a list of URL prefixes, got {allowed!r}")
        known = {"task_id", "intent", "start_url", "suite", "eval", "sites", "template", "intent_template_id",
                 "min_steps", "allowed_origins", "meta"}
        meta = copy.deepcopy(need("meta", dict, {}))
        meta.update({k: copy.deepcopy(v) for k, v in d.items() if k not in known})
        return cls(
            task_id=str(tid),
            intent=intent,
            start_url=start_url,
            suite=suite,
            eval=ev,
            sites=tuple(sites),
            template=None if template is None else str(template),
            min_steps=min_steps,
            allowed_origins=tuple(allowed),
            meta=meta,
        )


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def origin_of(url: str) -> str:
    """scheme://host[:port] of an http(s) URL; for file: URLs, the containing folder."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return "file://" + parts.path.rsplit("/", 1)[0] + "/"
    return f"{parts.scheme}://{parts.netloc}"


def validate_eval(ev: dict[str, Any], name: str) -> None:
    """Check a WebArena eval block; raise TaskSchemaError naming the task and field."""
    types = ev.get("eval_types")
    if not isinstance(types, list) or not types:
        raise TaskSchemaError(f"{name}: field 'eval.eval_types' must be a non-empty list, got {types!r}")
    for t in types:
        if t not in EVAL_TYPES:
            raise TaskSchemaError(
                f"{name}: field 'eval.eval_types' has unknown type {t!r}; known types: {', '.join(EVAL_TYPES)}"
            )
    if "string_match" in types:
        ref = ev.get("reference_answers")
        if not isinstance(ref, dict) or not ref:
            raise TaskSchemaError(f"{name}: field 'eval.reference_answers' must be an object for string_match, got {ref!r}")
        for key, value in ref.items():
            if key not in STRING_MATCH_KEYS:
                raise TaskSchemaError(
                    f"{name}: field 'eval.reference_answers.{key}' is unknown; use one of {', '.join(STRING_MATCH_KEYS)}"
                )
            ok = isinstance(value, str) or (
                key != "exact_match" and isinstance(value, list) and all(isinstance(v, str) for v in value)
            )
            if not ok:
                want = "a string" if key == "exact_match" else "a string or a list of strings"
                raise TaskSchemaError(f"{name}: field 'eval.reference_answers.{key}' must be {want}, got {value!r}")
            # must_include [] or "" (or fuzzy_match []) would pass every answer, however wrong.
            if key != "exact_match" and (value == [] or any(not v.strip() for v in _as_list(value))):
                raise TaskSchemaError(
                    f"{name}: field 'eval.reference_answers.{key}' must not be empty or hold empty strings, got {value!r}"
                )
    if "verified" in types:
        items = ev.get("verified")
        if not isinstance(items, list) or not items:
            raise TaskSchemaError(f"{name}: field 'eval.verified' must be a non-empty list of WebArena-Verified "
                                  f"evaluators, got {items!r}")
        for i, item in enumerate(items):
            kind = item.get("evaluator") if isinstance(item, dict) else None
            if kind not in VERIFIED_EVALUATORS or not isinstance(item.get("expected"), dict):
                raise TaskSchemaError(f"{name}: field 'eval.verified[{i}]' must be an object with evaluator "
                                      f"({' or '.join(VERIFIED_EVALUATORS)}) and expected (an object), got {item!r}")
    if "url_match" in types:
        ref_url = ev.get("reference_url")
        if not isinstance(ref_url, str) or not ref_url:
            raise TaskSchemaError(f"{name}: field 'eval.reference_url' must be a non-empty string for url_match, got {ref_url!r}")
    if "program_html" in types:
        items = ev.get("program_html")
        if not isinstance(items, list) or not items:
            raise TaskSchemaError(f"{name}: field 'eval.program_html' must be a non-empty list for program_html, got {items!r}")
        for i, item in enumerate(items):
            where = f"eval.program_html[{i}]"
            if not isinstance(item, dict):
                raise TaskSchemaError(f"{name}: field '{where}' must be an object, got {item!r}")
            if not isinstance(item.get("url"), str):
                raise TaskSchemaError(f"{name}: field '{where}.url' must be a string, got {item.get('url')!r}")
            if not isinstance(item.get("locator", ""), str):
                raise TaskSchemaError(f"{name}: field '{where}.locator' must be a string, got {item.get('locator')!r}")
            req = item.get("required_contents")
            if not isinstance(req, dict) or not req or set(req) - {"exact_match", "must_include", "fuzzy_match"}:
                raise TaskSchemaError(
                    f"{name}: field '{where}.required_contents' must be an object with exact_match, must_include or"
                    f" fuzzy_match, got {req!r}"
                )
            if "exact_match" in req and not isinstance(req["exact_match"], str):
                raise TaskSchemaError(f"{name}: field '{where}.required_contents.exact_match' must be a string")
            for key in ("must_include", "fuzzy_match"):
                if key in req and not (isinstance(req[key], list) and req[key]
                                       and all(isinstance(v, str) and v.strip() for v in req[key])):
                    # An empty list (or "") would pass whatever the page shows.
                    raise TaskSchemaError(
                        f"{name}: field '{where}.required_contents.{key}' must be a non-empty list of"
                        f" non-empty strings, got {req[key]!r}"
                    )
            prep = item.get("prep_actions", [])
            if not (isinstance(prep, list) and all(isinstance(v, str) for v in prep)):
                raise TaskSchemaError(f"{name}: field '{where}.prep_actions' must be a list of strings, got {prep!r}")


def load_task_file(path: str | Path) -> list[Task]:
    """Read tasks from a JSON file (a list or one object) or a JSONL file.

    Errors name the file, the task and the field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskSchemaError(f"{path}: cannot read task file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        # Not an OSError: without this a binary or Latin-1 file escaped as a bare UnicodeDecodeError.
        raise TaskSchemaError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    records: list[tuple[str, Any]]  # (where, record): JSONL errors name the line, JSON ones the index
    if path.suffix == ".jsonl":
        records = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append((f"{path}:{lineno}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise TaskSchemaError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskSchemaError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        items = data if isinstance(data, list) else [data]
        records = [(f"{path}[{i}]", r) for i, r in enumerate(items)]
    tasks = [Task.from_dict(r, where=where) for where, r in records]
    seen: set[str] = set()
    for t in tasks:
        if t.task_id in seen:
            raise TaskSchemaError(f"{path}: task id {t.task_id!r} appears more than once")
        seen.add(t.task_id)
    return tasks


@dataclass
class Verdict:
    """The outcome of evaluating an episode. `reward` is binary: 1.0 when every evaluator passed."""

    reward: float
    checks: list[dict[str, Any]] = field(default_factory=list)
    """One entry per evaluator: {"type", "passed", "reason", ...}."""

    @property
    def success(self) -> bool:
        """Whether every evaluator passed."""
        return self.reward >= 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as stored in trajectories and `info["verdict"]`."""
        return {"reward": self.reward, "success": self.success, "checks": self.checks}
