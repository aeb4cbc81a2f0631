"""WebArena-style evaluators: string_match, url_match and program_html.

The reward is binary and, as in WebArena, the product of every evaluator the task
lists. Each evaluator returns a check record {"type", "passed", "reason"}; an
evaluator that cannot run (a page that will not load, a missing judge) raises
`EvaluationUnavailable`, which the rollout records as "not evaluated" and never
as reward 0.

Departures from WebArena's code:
- `fuzzy_match` calls a pluggable judge. The default judge is deterministic
  (normalised text containment), so results are reproducible without an LLM.
- An episode that ends without `exit(...)` has no answer, and string_match fails
  even when the reference is "N/A". WebArena's release gives such runs reward 1
  on "N/A" tasks (see PAPER.md, "Gaps").
- `program_html` locators prefixed with `func:` (WebArena's Python helpers) are not
  run here; such checks raise EvaluationUnavailable.
"""

from __future__ import annotations

import inspect
import re
import string
from typing import Any, Awaitable, Callable, Union
from urllib.parse import parse_qs, unquote, urlsplit

from .task import Task, Verdict

Judge = Callable[[str, str, str], Union[bool, Awaitable[bool]]]
"""judge(intent, answer, reference) -> passed. May be a coroutine function."""


class EvaluationUnavailable(RuntimeError):
    """An evaluator could not run (infrastructure, not the agent's fault)."""


_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")


def clean(text: str) -> str:
    """WebArena's answer cleaning: trim, drop one pair of surrounding quotes, lower-case
    (and, here, collapse whitespace). Punctuation is kept: "$25.99" is not "25.99"."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return " ".join(text.lower().split())


def normalize(text: str) -> str:
    """For the default fuzzy judge: clean() and also replace punctuation by spaces."""
    return " ".join(_PUNCT.sub(" ", clean(text)).split())


def text_judge(intent: str, answer: str, reference: str) -> bool:
    """Default fuzzy_match judge: the normalised reference appears in the normalised answer.

    "N/A" references (unachievable tasks) pass when the answer says N/A or "not achievable".
    """
    ref, ans = normalize(reference), normalize(answer)
    if ref in ("n a", "na"):
        return ans in ("n a", "na") or "not achievable" in ans or ans.startswith("n a ")
    return bool(ref) and (ref == ans or f" {ref} " in f" {ans} ")


def _alternatives(value: str) -> list[str]:
    """WebArena writes alternatives as "a |OR| b"."""
    return [v.strip() for v in value.split("|OR|")]


def _includes(needle: str, haystack: str) -> bool:
    return any(clean(alt) in clean(haystack) for alt in _alternatives(needle))


async def string_match(task: Task, answer: str | None, judge: Judge = text_judge) -> dict[str, Any]:
    """Check the exit message against `eval.reference_answers`."""
    refs = task.eval.get("reference_answers") or {}
    if answer is None:
        return {"type": "string_match", "passed": False, "reason": "the episode ended without exit(message=...)"}
    for kind, value in refs.items():
        if kind == "exact_match":
            if clean(answer) != clean(value):
                return {"type": "string_match", "passed": False, "reason": f"answer {answer!r} is not exactly {value!r}"}
        elif kind == "must_include":
            for needle in [value] if isinstance(value, str) else value:
                if not _includes(needle, answer):
                    return {"type": "string_match", "passed": False, "reason": f"answer {answer!r} lacks {needle!r}"}
        elif kind == "fuzzy_match":
            for ref in [value] if isinstance(value, str) else value:
                verdict = judge(task.intent, answer, ref)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
                if not verdict:
                    return {"type": "string_match", "passed": False, "reason": f"judge: answer {answer!r} does not match {ref!r}"}
    return {"type": "string_match", "passed": True, "reason": "answer matches the reference"}


def _split_url(url: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(url.strip())
    path = unquote(parts.path).rstrip("/") or "/"
    return f"{parts.netloc.lower()}{path}", parse_qs(parts.query)


def url_match(task: Task, url: str) -> dict[str, Any]:
    """The final URL matches `eval.reference_url`: same host and path, and every reference
    query parameter present with the same values. Alternatives are separated by |OR|."""
    ref = task.eval.get("reference_url", "")
    got_base, got_query = _split_url(url)
    for alt in _alternatives(ref):
        base, query = _split_url(alt)
        if base == got_base and all(sorted(got_query.get(k, [])) == sorted(v) for k, v in query.items()):
            return {"type": "url_match", "passed": True, "reason": f"{url} matches {alt}"}
    return {"type": "url_match", "passed": False, "reason": f"final URL {url} does not match {ref}"}


async def program_html(task: Task, page: Any, context: Any) -> dict[str, Any]:
    """Run each `eval.program_html` check: load the URL (or use the current page for
    "last"), evaluate the locator, and compare with `required_contents`."""
    for i, item in enumerate(task.eval.get("program_html", [])):
        url, locator = item["url"], item.get("locator", "")
        if locator.startswith("func:") or url.startswith("func:"):
            raise EvaluationUnavailable(f"program_html[{i}]: helper functions ({locator or url}) are not supported")
        content = await _read(page, context, url, locator, i)
        req = item["required_contents"]
        if "exact_match" in req and clean(content) != clean(req["exact_match"]):
            return {"type": "program_html", "passed": False,
                    "reason": f"program_html[{i}]: {content[:120]!r} is not exactly {req['exact_match']!r}"}
        for needle in req.get("must_include", []):
            if not _includes(needle, content):
                return {"type": "program_html", "passed": False,
                        "reason": f"program_html[{i}]: page content lacks {needle!r}"}
    return {"type": "program_html", "passed": True, "reason": "all required contents found"}


async def _read(page: Any, context: Any, url: str, locator: str, i: int) -> str:
    """Evaluate `locator` (JavaScript from the task file, never from the model) on `url`."""
    from playwright.async_api import Error as PlaywrightError

    script = f"() => {{ return ({locator}); }}" if locator.strip() else "() => document.body.innerText"
    own = None
    try:
        target = page
        if url != "last":
            own = await context.new_page()
            response = await own.goto(url, wait_until="load")
            if response is not None and response.status >= 500:
                raise EvaluationUnavailable(f"program_html[{i}]: {url} answered HTTP {response.status}")
            target = own
        try:
            value = await target.evaluate(script)
        except PlaywrightError:
            # WebArena's locators throw when the element is absent (e.g. querySelector(...) is null):
            # the content is then empty and the check fails, as in WebArena.
            value = ""
        return "" if value is None else str(value)
    except PlaywrightError as exc:
        raise EvaluationUnavailable(f"program_html[{i}]: could not load {url}: {str(exc).splitlines()[0]}") from None
    finally:
        if own is not None:
            await own.close()


async def evaluate(task: Task, answer: str | None, page: Any, context: Any, judge: Judge = text_judge) -> Verdict:
    """Run every evaluator in `task.eval["eval_types"]`; the reward is their product."""
    checks = []
    for kind in task.eval.get("eval_types", []):
        if kind == "string_match":
            checks.append(await string_match(task, answer, judge))
        elif kind == "url_match":
            checks.append(url_match(task, page.url))
        elif kind == "program_html":
            checks.append(await program_html(task, page, context))
    reward = 1.0 if checks and all(c["passed"] for c in checks) else 0.0
    return Verdict(reward=reward, checks=checks)
