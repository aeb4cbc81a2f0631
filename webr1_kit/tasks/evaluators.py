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
  on "N/A" tasks, which rewards an agent for giving up.
- `program_html` checks that call WebArena's Python helpers (`func:` URLs or locators)
  run only when the caller passes `helpers` (the WebArena suite does: see
  tasks/webarena/helpers.py); without it they raise EvaluationUnavailable.
- `must_include` needles match on word boundaries: "2" is not found in "12" (nor
  "25.99" in "125.99"). WebArena gets the same protection by tokenising single-word
  references with NLTK; plain substring containment would reward an agent that
  answers "0123456789" on every counting task.
- `program_html` pages other than "last" open in a separate browser context that
  carries the agent's cookies and local storage, so the check neither appears as
  a tab of the agent nor passes through the agent's URL sandbox, and the agent's
  page stays where it is for url_match. An empty locator reads the page's visible
  text (WebArena reads its HTML).
- `url_match` requires the same host and path (trailing slash aside); WebArena's
  "GOLD in PRED" rule passes any URL whose host+path merely contains the reference's
  (so "/f/books" also matched "/f/booksclub").
- A task whose eval block cannot score anything (no reference answers, an unknown
  evaluator) raises EvaluationUnavailable instead of passing every answer.
- A `program_html` check's `required_contents` with several kinds (exact_match,
  must_include, fuzzy_match) must pass all of them; WebArena-Lite's evaluator reads
  only the first kind it finds. The released files give each check one kind.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Awaitable, Callable, Protocol, Union
from urllib.parse import parse_qs, unquote, urlsplit

from .task import Task, Verdict

EVAL_NAVIGATION_TIMEOUT_MS = 15_000
"""How long a program_html page may take to load before the check counts as unavailable."""

Judge = Callable[[str, str, str], Union[bool, Awaitable[bool]]]
"""judge(intent, answer, reference) -> passed. May be a coroutine function."""


class EvaluationUnavailable(RuntimeError):
    """An evaluator could not run (infrastructure, not the agent's fault)."""


# Any character that is neither a letter, a digit nor whitespace: ASCII punctuation and
# also the Unicode kind language models write ("’", "–", "™", "“").
_PUNCT = re.compile(r"[^\w\s]|_")


def clean(text: str) -> str:
    """WebArena's answer cleaning: trim, drop one pair of surrounding quotes, lower-case
    (and, here, collapse whitespace). Punctuation is kept: "$25.99" is not "25.99"."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return " ".join(text.lower().split())


def normalize(text: str) -> str:
    """For the default fuzzy judge: clean() and also replace punctuation and symbols
    (ASCII or Unicode, e.g. "’", "™") by spaces."""
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


def _alnum(ch: str) -> bool:
    # ASCII only: scripts written without spaces (Chinese, Japanese) keep plain containment.
    return ch.isascii() and ch.isalnum()


def contains(needle: str, haystack: str) -> bool:
    """Whether cleaned `needle` occurs in cleaned `haystack`, not glued to letters or digits.

    A needle that starts (ends) with a letter or digit must not be preceded (followed) by
    one: "2" is not in "12", "$25.99" is in "costs $25.99.", "Alice" is in "Alice's".
    """
    needle, haystack = clean(needle), clean(haystack)
    if not needle:
        return False  # an empty alternative ("a |OR| ") must not pass everything
    left = "(?<![0-9a-z])" if _alnum(needle[0]) else ""
    right = "(?![0-9a-z])" if _alnum(needle[-1]) else ""
    return re.search(left + re.escape(needle) + right, haystack) is not None


def _includes(needle: str, haystack: str) -> bool:
    return any(contains(alt, haystack) for alt in _alternatives(needle))


async def string_match(task: Task, answer: str | None, judge: Judge = text_judge) -> dict[str, Any]:
    """Check the exit message against `eval.reference_answers`.

    `answer` is None when the episode ended without exit(...): that always fails, even
    on "N/A" tasks. `judge(intent, answer, reference)` decides fuzzy_match; it may be a
    coroutine function. Raises EvaluationUnavailable when the task has no usable reference.
    """
    refs = task.eval.get("reference_answers") or {}
    # Without a reference every answer would pass; task files are validated, but Task
    # records built in code are not.
    if not isinstance(refs, dict) or not refs:
        raise EvaluationUnavailable(f"task {task.task_id}: string_match has no reference_answers")
    unknown = sorted(set(refs) - {"exact_match", "must_include", "fuzzy_match"})
    if unknown:
        raise EvaluationUnavailable(f"task {task.task_id}: unknown string_match reference(s) {', '.join(unknown)}")
    empty = sorted(k for k, v in refs.items() if k != "exact_match" and not v)
    if empty:  # an empty must_include / fuzzy_match list would pass every answer
        raise EvaluationUnavailable(f"task {task.task_id}: empty string_match reference(s) {', '.join(empty)}")
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
    # keep_blank_values: a reference "?q=" (an empty search) must not accept "?q=anything".
    return f"{parts.netloc.lower()}{path}", parse_qs(parts.query, keep_blank_values=True)


def url_match(task: Task, url: str) -> dict[str, Any]:
    """The final URL matches `eval.reference_url`: same host and path, and every reference
    query parameter present with the same values. Alternatives are separated by |OR|."""
    ref = task.eval.get("reference_url", "")
    if not isinstance(ref, str) or not ref.strip():
        raise EvaluationUnavailable(f"task {task.task_id}: url_match has no reference_url")
    got_base, got_query = _split_url(url)
    for alt in _alternatives(ref):
        base, query = _split_url(alt)
        if base == got_base and all(sorted(got_query.get(k, [])) == sorted(v) for k, v in query.items()):
            return {"type": "url_match", "passed": True, "reason": f"{url} matches {alt}"}
    return {"type": "url_match", "passed": False, "reason": f"final URL {url} does not match {ref}"}


class Helpers(Protocol):
    """Resolves WebArena's `func:` expressions (the text after "func:")."""

    async def url(self, expr: str, page: Any) -> str:
        """The URL a `url: "func:..."` check loads; `page` is the agent's page (its URL is __last_url__)."""

    async def locate(self, expr: str, page: Any) -> str:
        """The content a `locator: "func:..."` check reads on `page`, the loaded check page."""


async def program_html(task: Task, page: Any, context: Any, helpers: Helpers | None = None,
                       judge: Judge = text_judge) -> dict[str, Any]:
    """Run each `eval.program_html` check: read the locator on the agent's current page
    ("last") or on a freshly loaded URL, and compare with `required_contents`:
    `exact_match`, `must_include` (each needle, "a |OR| b" alternatives), or `fuzzy_match`
    (WebArena-Lite's: `judge(intent, content, reference)` with the list joined by ", " as
    one reference, as VisualAgentBench's evaluator asks its LLM judge).

    A locator that throws (the element is missing) reads as "" and the check fails, as in
    WebArena. Raises EvaluationUnavailable when a page cannot be loaded (network error,
    HTTP 5xx, timeout), for `func:` helpers when no `helpers` are given, and for locators
    that are not valid JavaScript.
    """
    items = task.eval.get("program_html") or []
    if not items:
        raise EvaluationUnavailable(f"task {task.task_id}: program_html has no checks")
    reader = _Reader(page, context)
    try:
        for i, item in enumerate(items):
            url, locator = item["url"], item.get("locator", "")
            prep = item.get("prep_actions", [])
            if locator.startswith("func:") or url.startswith("func:"):
                if helpers is None:
                    raise EvaluationUnavailable(f"program_html[{i}]: helper functions ({locator or url}) are not supported")
                if url.startswith("func:"):
                    url = await helpers.url(url[len("func:"):], page)
            if locator.startswith("func:"):
                content = await helpers.locate(locator[len("func:"):], await reader.open(url, prep, i))
            else:
                content = await reader.read(url, locator, prep, i)
            req = item["required_contents"]
            if "exact_match" in req and clean(content) != clean(req["exact_match"]):
                return {"type": "program_html", "passed": False,
                        "reason": f"program_html[{i}]: {content[:120]!r} is not exactly {req['exact_match']!r}"}
            for needle in req.get("must_include", []):
                if not _includes(needle, content):
                    return {"type": "program_html", "passed": False,
                            "reason": f"program_html[{i}]: page content lacks {needle!r}"}
            if req.get("fuzzy_match"):
                reference = ", ".join(req["fuzzy_match"])
                verdict = judge(task.intent, content, reference)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
                if not verdict:
                    return {"type": "program_html", "passed": False,
                            "reason": f"program_html[{i}]: judge: {content[:120]!r} does not match {reference!r}"}
    finally:
        await reader.close()
    return {"type": "program_html", "passed": True, "reason": "all required contents found"}


# Runtime errors in the locator (querySelector(...) is null) are caught in the page and
# read as empty content; a locator that does not parse fails the whole evaluate() call
# and is reported as unavailable (the task file is wrong, not the agent).
_LOCATOR_JS = "() => {{ try {{ return {{value: ({expr})}}; }} catch (e) {{ return {{error: String(e)}}; }} }}"
_PAGE_TEXT_JS = "document.body ? document.body.innerText : ''"


class _Reader:
    """Evaluates program_html locators; opens at most one evaluation page per evaluation."""

    def __init__(self, page: Any, context: Any):
        self.page, self.context = page, context
        self.own_context: Any = None
        self.own_page: Any = None

    async def _fresh_page(self) -> Any:
        if self.own_page is None:
            browser = getattr(self.context, "browser", None)
            if browser is not None:
                # A context of its own: a page opened in the agent's context would show up
                # as a new tab of the agent (and be closed under it) and would be subject
                # to the agent's URL sandbox. storage_state carries the login (cookies,
                # local storage) so the check sees the site as the agent's user.
                state = await self.context.storage_state()
                self.own_context = await browser.new_context(storage_state=state, service_workers="block")
                self.own_context.set_default_navigation_timeout(EVAL_NAVIGATION_TIMEOUT_MS)
                self.own_context.set_default_timeout(EVAL_NAVIGATION_TIMEOUT_MS)
                self.own_page = await self.own_context.new_page()
            else:  # a persistent context has no separate browser to open another context in
                self.own_page = await self.context.new_page()
        return self.own_page

    async def open(self, url: str, prep_actions: list[str], i: int) -> Any:
        """The page to check: the agent's ("last") or `url` loaded in the evaluation page,
        after the task file's prep actions."""
        from playwright.async_api import Error as PlaywrightError

        try:
            target = self.page
            if url != "last":
                target = await self._fresh_page()
                response = await target.goto(url, wait_until="load")
                if response is not None and response.status >= 500:
                    raise EvaluationUnavailable(f"program_html[{i}]: {url} answered HTTP {response.status}")
        except PlaywrightError as exc:
            raise EvaluationUnavailable(f"program_html[{i}]: could not load {url}: {_first_line(exc)}") from None
        for prep in prep_actions:
            # WebArena runs these (e.g. open a collapsed panel) and ignores their failures.
            try:
                await target.evaluate(f"() => {{ {prep} }}")
            except PlaywrightError:
                pass
        return target

    async def read(self, url: str, locator: str, prep_actions: list[str], i: int) -> str:
        """Evaluate `locator` (JavaScript from the task file, never from the model) on `url`."""
        from playwright.async_api import Error as PlaywrightError

        expr = locator.strip().rstrip(";").strip() or _PAGE_TEXT_JS
        target = await self.open(url, prep_actions, i)
        try:
            result = await target.evaluate(_LOCATOR_JS.format(expr=expr))
        except PlaywrightError as exc:
            raise EvaluationUnavailable(
                f"program_html[{i}]: locator {locator!r} could not run on {url}: {_first_line(exc)}"
            ) from None
        value = result.get("value") if isinstance(result, dict) else None
        return "" if value is None else str(value)

    async def close(self) -> None:
        """Close the evaluation page (and its context), whatever happened."""
        try:
            if self.own_context is not None:
                await self.own_context.close()
            elif self.own_page is not None:
                await self.own_page.close()
        except Exception:  # the browser is already gone; nothing left to clean up
            pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


VERIFIED_NOT_YET = ("WebArena-Verified's evaluators (the agent's JSON answer, the episode's network trace) "
                    "are not implemented in the kit yet: its tasks load and list, but cannot be scored")


async def evaluate(task: Task, answer: str | None, page: Any, context: Any, judge: Judge = text_judge,
                   helpers: Helpers | None = None) -> Verdict:
    """Run every evaluator in `task.eval["eval_types"]`; the reward is their product.

    `page` is the agent's current page (url_match, program_html "last"), `context` its
    browser context (for program_html pages, which see the agent's login); `helpers`
    resolve WebArena's `func:` expressions in program_html checks. Every
    evaluator runs, so `checks` lists each one's verdict. Raises EvaluationUnavailable
    when any evaluator cannot run or the task names none.
    """
    kinds = task.eval.get("eval_types") or []
    if not kinds:
        raise EvaluationUnavailable(f"task {task.task_id}: the eval block names no evaluator")
    checks = []
    for kind in kinds:
        if kind == "string_match":
            checks.append(await string_match(task, answer, judge))
        elif kind == "url_match":
            checks.append(url_match(task, page.url))
        elif kind == "program_html":
            checks.append(await program_html(task, page, context, helpers, judge))
        elif kind == "verified":
            raise EvaluationUnavailable(f"task {task.task_id}: {VERIFIED_NOT_YET}")
        else:
            # Skipping it would let the remaining evaluators alone decide the reward.
            raise EvaluationUnavailable(f"task {task.task_id}: unknown evaluator {kind!r}")
    reward = 1.0 if all(c["passed"] for c in checks) else 0.0
    return Verdict(reward=reward, checks=checks)
