"""fuzzy_match's LLM judge: any OpenAI-compatible chat-completions endpoint, over urllib.

As in WebArena, two questions are asked:
- fuzzy: does the answer mean the same as the reference? The reply must conclude with
  correct / incorrect / partially correct; only "correct" passes.
- unachievable ("N/A" references): an exact "N/A" answer passes without asking; any other
  answer passes when the judge finds that it reports the reason the task file gives
  (`eval.string_note`) for the task being unachievable ("same" / "different").

The prompts are this kit's own wording of WebArena's questions, so scores can differ a
little from runs with WebArena's code even with the same judge model. A judge that
cannot be reached, or whose reply has no verdict, raises EvaluationUnavailable: the
episode is reported as not evaluated, never as reward 0.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

from ..evaluators import EvaluationUnavailable, clean
from ..task import Task
from .config import JUDGE_MODEL_ENV, JUDGE_URL_ENV, JudgeConfig

NO_JUDGE = (
    f"fuzzy_match needs an LLM judge and none is configured: set {JUDGE_URL_ENV} (an OpenAI-compatible "
    f"endpoint, e.g. https://api.openai.com/v1) and {JUDGE_MODEL_ENV}, or judge: in the WebArena config"
)

FUZZY_PROMPT = """You are grading a student's answer to a question about a website.
The student may word the answer differently; decide whether it means the same as the reference answer.
The string "N/A" means "the task is not achievable".

Question: {question}
Reference answer: {reference}
Student answer: {answer}

Explain briefly, then end with exactly one verdict: correct, incorrect, or partially correct."""

UNACHIEVABLE_PROMPT = """A task on a website cannot be done, for the reason given below.
Someone attempted it, failed, and reported why. Decide whether their report gives the same reason, even if only implicitly.

Task: {question}
Actual reason it cannot be done: {reason}
Reported reason: {answer}

Explain briefly, then end with exactly one verdict: same, or different."""


class OpenAIJudge:
    """Asks a chat-completions endpoint; identical questions are asked once per process."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self._cache: dict[str, str] = {}

    async def fuzzy(self, question: str, answer: str, reference: str) -> bool:
        reply = await self.ask(FUZZY_PROMPT.format(question=question, reference=reference, answer=answer))
        if "partially correct" in reply or "incorrect" in reply:
            return False
        if "correct" in reply:
            return True
        raise EvaluationUnavailable(f"the judge's reply has no verdict (correct/incorrect): {reply[-200:]!r}")

    async def same_reason(self, question: str, answer: str, reason: str) -> bool:
        reply = await self.ask(UNACHIEVABLE_PROMPT.format(question=question, reason=reason, answer=answer))
        if "different" in reply:
            return False
        if "same" in reply:
            return True
        raise EvaluationUnavailable(f"the judge's reply has no verdict (same/different): {reply[-200:]!r}")

    async def ask(self, prompt: str) -> str:
        """The judge's reply to one user message, lower-cased."""
        if prompt not in self._cache:
            self._cache[prompt] = (await asyncio.to_thread(self._post, prompt)).lower()
        return self._cache[prompt]

    def _post(self, prompt: str) -> str:
        body = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": "You are a careful, impartial grader."},
                         {"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": 768,
        }
        headers = {"Content-Type": "application/json"}
        key = self.config.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                data: Any = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise EvaluationUnavailable(f"judge {url} answered HTTP {exc.code}: {exc.read()[:200]!r}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise EvaluationUnavailable(f"judge {url} unreachable: {getattr(exc, 'reason', exc)}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise EvaluationUnavailable(f"judge {url} did not answer JSON: {exc}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise EvaluationUnavailable(f"judge {url} answered without choices[0].message.content: {str(data)[:200]}") from None
        if not isinstance(content, str):
            raise EvaluationUnavailable(f"judge {url} answered a non-text message: {content!r}")
        return content


def judge_for(task: Task, judge: OpenAIJudge | None):
    """The string_match judge for one task, WebArena's way (see the module docstring).
    Without a configured judge, any question it would ask raises EvaluationUnavailable."""

    async def decide(intent: str, answer: str, reference: str) -> bool:
        if clean(reference) == "n/a":
            if clean(answer) == "n/a":
                return True
            if judge is None:
                raise EvaluationUnavailable(NO_JUDGE)
            return await judge.same_reason(intent, answer, str(task.eval.get("string_note") or ""))
        if judge is None:
            raise EvaluationUnavailable(NO_JUDGE)
        return await judge.fuzzy(intent, answer, reference)

    return decide


def needs_judge(task: Task) -> bool:
    """Whether scoring this task may ask the LLM judge: a fuzzy_match reference answer, or
    a program_html check whose required contents are fuzzy_match (WebArena-Lite)."""
    kinds = task.eval.get("eval_types") or []
    refs = task.eval.get("reference_answers") or {}
    if "string_match" in kinds and isinstance(refs, dict) and "fuzzy_match" in refs:
        return True
    items = (task.eval.get("program_html") or []) if "program_html" in kinds else []
    return any(isinstance(item, dict) and "fuzzy_match" in (item.get("required_contents") or {}) for item in items)


def unscorable(tasks: list[Task], config: Any) -> dict[str, str]:
    """The tasks `config` cannot score, each with the reason: those whose checks ask the LLM
    judge when no judge is configured, and WebArena-Verified's (its evaluators are not in
    the kit yet)."""
    from ..evaluators import VERIFIED_NOT_YET

    bad = {t.task_id: VERIFIED_NOT_YET for t in tasks if "verified" in (t.eval.get("eval_types") or [])}
    if getattr(config, "judge", None) is None:
        bad.update({t.task_id: "its fuzzy_match check needs the LLM judge, and none is configured"
                    for t in tasks if needs_judge(t) and t.task_id not in bad})
    return bad


def scorable(tasks: list[Task], config: Any, leave_out: bool = False) -> tuple[list[Task], list[dict[str, str]]]:
    """The tasks to run, and the ones left out ([{"task_id", "reason"}]). A task the
    configuration cannot score never silently leaves the suite: unless `leave_out` is given,
    any such task raises WebArenaConfigError naming every one and why; with it, they are left
    out and returned, for the run to report."""
    from .config import WebArenaConfigError

    bad = unscorable(tasks, config)
    if bad and not leave_out:
        by_reason: dict[str, list[str]] = {}
        for task_id, reason in bad.items():
            by_reason.setdefault(reason, []).append(task_id)
        parts = [f"{', '.join(ids[:12])}{' ...' if len(ids) > 12 else ''} ({len(ids)}): {reason}"
                 + (f". {NO_JUDGE.split(': ', 1)[1].capitalize()}" if "LLM judge" in reason else "")
                 for reason, ids in by_reason.items()]
        raise WebArenaConfigError(
            f"{len(bad)} of {len(tasks)} tasks cannot be scored: {'; '.join(parts)}. Pass --leave-out-unscorable "
            "(leave_out=True) to run the others; the run then lists the tasks left out")
    return [t for t in tasks if t.task_id not in bad], [{"task_id": i, "reason": r} for i, r in bad.items()]
