"""The action space, defined once.

Each entry of `ACTIONS` holds an action's name, its call syntax, its documentation
and the coroutine that performs it. The system prompt's action documentation
(`action_docs()`), the parser (`parse_action`) and the executor (`execute`) all read
this one table, so they cannot drift apart.

The syntax is the paper's:
    do(action="Click", element="7")
    do(action="Type", argument="01/01/2023", element="22")
    go_backward()   go_forward()   exit(message="final answer")
optionally wrapped as `<think>...</think><answer>...</answer>`.

Model output is data. The parser reads it with `ast.parse` and accepts only string
or number literals as arguments; nothing the model writes is ever evaluated, and
typed text reaches the page as a value (Playwright's `fill`), never as script.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:  # pragma: no cover
    from .browser import BrowserEnv


class ActionError(Exception):
    """An action the environment could not carry out. This is a normal step, not a crash:
    the message goes to the agent in the next observation and `kind` is counted."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Action:
    """A parsed action. `name` is a do-action name ("Click") or "go_backward", "go_forward", "exit"."""

    name: str
    element: int | None = None
    argument: str | None = None

    def to_text(self) -> str:
        """The canonical call text, which `parse_action` reads back to an equal Action."""
        if self.name == "exit":
            return f"exit(message={_quote(self.argument or '')})"
        if self.name in ("go_backward", "go_forward"):
            return f"{self.name}()"
        parts = [f"action={_quote(self.name)}"]
        if self.argument is not None:
            parts.append(f"argument={_quote(self.argument)}")
        if self.element is not None:
            parts.append(f'element="{self.element}"')
        return f"do({', '.join(parts)})"


def _quote(s: str) -> str:
    # JSON string escapes are valid Python string escapes, and cover every control character.
    return json.dumps(s, ensure_ascii=False)


Executor = Callable[["BrowserEnv", Action], Awaitable[None]]


@dataclass(frozen=True)
class ActionSpec:
    """One action of the action space: syntax, documentation and executor."""

    name: str
    element: str
    """"required", "optional" or "none"."""
    argument: str
    """Meaning of the argument ("" if the action takes none)."""
    doc: str
    run: Executor

    @property
    def syntax(self) -> str:
        if self.name == "exit":
            return 'exit(message="<answer>")'
        if self.name in ("go_backward", "go_forward"):
            return f"{self.name}()"
        parts = [f'action="{self.name}"']
        if self.argument:
            parts.append(f'argument="<{self.argument}>"')
        if self.element == "required":
            parts.append('element="<id>"')
        return f"do({', '.join(parts)})"


# ---------------------------------------------------------------------------
# Executors. Each gets the environment and the parsed action; it raises
# ActionError for anything the agent should be told about.


async def _click(env: "BrowserEnv", a: Action, button: str = "left") -> None:
    loc = await env.locate(a.element)
    # Two phases, two limits: the trial run fails fast when the element cannot be clicked
    # (covered, disabled, moving); the real click may then wait for the navigation it
    # starts for as long as a page load may take, so a slow site on a busy machine is
    # not reported to the agent as its own timeout.
    await loc.click(button=button, trial=True, timeout=env.config.action_timeout_ms)
    await loc.click(button=button, timeout=env.config.navigation_timeout_ms)


async def _right_click(env: "BrowserEnv", a: Action) -> None:
    await _click(env, a, button="right")


async def _type(env: "BrowserEnv", a: Action) -> None:
    loc = await env.locate(a.element)
    # fill() clears the field and sets the text as a value, firing input events.
    await loc.fill(a.argument or "", timeout=env.config.action_timeout_ms)


async def _search(env: "BrowserEnv", a: Action) -> None:
    loc = await env.locate(a.element)
    await loc.fill(a.argument or "", timeout=env.config.action_timeout_ms)
    await loc.press("Enter", timeout=env.config.navigation_timeout_ms)  # may wait for the results page


async def _hover(env: "BrowserEnv", a: Action) -> None:
    loc = await env.locate(a.element)
    await loc.hover(timeout=env.config.action_timeout_ms)


async def _press_enter(env: "BrowserEnv", a: Action) -> None:
    if a.element is not None:
        loc = await env.locate(a.element)
        await loc.press("Enter", timeout=env.config.navigation_timeout_ms)  # may submit a form
    else:
        await env.page.keyboard.press("Enter")


_SCROLL_JS = "([el, dy]) => { (el || document.scrollingElement || document.documentElement).scrollBy(0, dy); }"


async def _scroll(env: "BrowserEnv", a: Action, direction: int) -> None:
    dy = direction * int(env.config.viewport_height * 0.8)
    if a.element is not None:
        loc = await env.locate(a.element)
        handle = await loc.element_handle(timeout=env.config.action_timeout_ms)
        await env.page.evaluate(_SCROLL_JS, [handle, dy])
    else:
        await env.page.evaluate(_SCROLL_JS, [None, dy])


async def _scroll_up(env: "BrowserEnv", a: Action) -> None:
    await _scroll(env, a, -1)


async def _scroll_down(env: "BrowserEnv", a: Action) -> None:
    await _scroll(env, a, +1)


async def _select(env: "BrowserEnv", a: Action) -> None:
    loc = await env.locate(a.element)
    tag = await loc.evaluate("el => el.tagName.toLowerCase()")
    if tag != "select":
        raise ActionError("invalid_target", f"element {a.element} is a <{tag}>, not a dropdown (<select>)")
    options = await loc.evaluate("el => Array.from(el.options).map(o => [o.text.trim(), o.value])")
    want = (a.argument or "").strip()
    for text, value in options:
        if want == text or want == value:
            await loc.select_option(value=value, timeout=env.config.navigation_timeout_ms)
            return
    for text, value in options:  # forgive case differences, nothing looser
        if want.lower() == text.lower():
            await loc.select_option(value=value, timeout=env.config.navigation_timeout_ms)
            return
    listed = ", ".join(f'"{t}"' for t, _ in options[:30])
    raise ActionError("invalid_argument", f'dropdown {a.element} has no option "{want}". Options: {listed}')


async def _switch_tab(env: "BrowserEnv", a: Action) -> None:
    try:
        index = int(str(a.argument).strip())
    except ValueError:
        raise ActionError("malformed", f'Switch Tab needs a tab number as argument, got "{a.argument}"') from None
    await env.switch_tab(index)


async def _wait(env: "BrowserEnv", a: Action) -> None:
    await asyncio.sleep(env.config.wait_ms / 1000)


async def _go_backward(env: "BrowserEnv", a: Action) -> None:
    before = env.page.url
    await env.page.go_back(wait_until="load")
    if env.page.url == "about:blank" and before != "about:blank":  # the tab's blank start is not a page
        await env.page.go_forward(wait_until="load")
    if env.page.url == before:
        raise ActionError("no_history", "there is no previous page in this tab")


async def _go_forward(env: "BrowserEnv", a: Action) -> None:
    before = env.page.url
    await env.page.go_forward(wait_until="load")
    if env.page.url == before:
        raise ActionError("no_history", "there is no next page in this tab")


async def _exit(env: "BrowserEnv", a: Action) -> None:
    """The environment ends the episode; nothing happens in the page."""


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("Click", "required", "", "click the element", _click),
    ActionSpec("Right Click", "required", "", "right-click the element", _right_click),
    ActionSpec("Type", "required", "text", "replace the content of a text field with the text", _type),
    ActionSpec("Search", "required", "text", "type the text into a search field and press Enter", _search),
    ActionSpec("Hover", "required", "", "move the mouse over the element", _hover),
    ActionSpec("Press Enter", "optional", "", "press Enter (in the element, if given)", _press_enter),
    ActionSpec("Scroll Up", "optional", "", "scroll the page (or the element, if given) up", _scroll_up),
    ActionSpec("Scroll Down", "optional", "", "scroll the page (or the element, if given) down", _scroll_down),
    ActionSpec("Select Dropdown Option", "required", "option text", "choose an option of a <select>", _select),
    ActionSpec("Switch Tab", "none", "tab number", "make another open tab the current one", _switch_tab),
    ActionSpec("Wait", "none", "", "wait a moment for the page to change", _wait),
    ActionSpec("go_backward", "none", "", "go back to the previous page", _go_backward),
    ActionSpec("go_forward", "none", "", "go forward to the next page", _go_forward),
    ActionSpec("exit", "none", "", "finish the task; put the answer in the message if the task asks a question", _exit),
)

_BY_KEY = {re.sub(r"[\s_]+", "", s.name.lower()): s for s in ACTIONS}
_DO_NAMES = ", ".join(s.name for s in ACTIONS if s.name not in ("go_backward", "go_forward", "exit"))


def spec(name: str) -> ActionSpec:
    """The ActionSpec of an action name ("Click", "press_enter", ...), or ActionError."""
    found = _BY_KEY.get(re.sub(r"[\s_]+", "", name.lower()))
    if found is None or found.name in ("go_backward", "go_forward", "exit"):
        raise ActionError("malformed", f'unknown action "{name}". Valid actions: {_DO_NAMES}')
    return found


def action_docs() -> str:
    """Documentation of every action, for the system prompt, generated from ACTIONS."""
    lines = []
    for s in ACTIONS:
        extra = " The element is optional." if s.element == "optional" else ""
        lines.append(f"- {s.syntax}: {s.doc}.{extra}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Parsing

_CALL_START = re.compile(r"\b(do|exit|go_backward|go_forward)\s*\(")
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S)


def extract_call(text: str) -> str:
    """Find the action call in a model response; raise ActionError("malformed") if none."""
    answers = _ANSWER.findall(text)
    body = answers[-1] if answers else re.sub(r"<think>.*?(</think>|$)", " ", text, flags=re.S)
    m = _CALL_START.search(body)
    if not m:
        snippet = " ".join(text.split())[:80]
        raise ActionError(
            "malformed",
            f'no action found in "{snippet}". Write one call such as do(action="Click", element="3") '
            "inside <answer></answer>",
        )
    # Scan to the matching parenthesis, skipping over quoted strings.
    depth, i, quote = 0, m.end() - 1, None
    while i < len(body):
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return body[m.start() : i + 1]
        i += 1
    raise ActionError("malformed", f"unfinished action: {body[m.start():][:80]!r} has no closing parenthesis")


_TAG = re.compile(r"</?(?:think|answer)>")
_STRICT = re.compile(r"\s*(?:<think>(?P<think>.*?)</think>\s*)?<answer>(?P<answer>.*?)</answer>\s*", re.S)


def check_format(text: str) -> str:
    """The strict reading of a response: the call it holds, or ActionError("malformed").

    A response is well-formed when it is exactly one optional `<think>…</think>` followed
    by one `<answer>…</answer>` whose content is one action call and nothing else, and the
    text ends with `</answer>` (the generator's stop string, so a response cut off at the
    token limit never qualifies). The lenient reading (`extract_call`) takes the last
    answer's first call and forgives a missing `</answer>`, which lets a cut-off
    `<answer><think>do(...)</think><think>…` count as a click: fine for evaluating what a
    model meant, wrong for rewarding it. The think block is optional here because whether
    the model is asked to think is the prompt's choice (PromptConfig.think), which the
    environment does not see.
    """
    m = _STRICT.fullmatch(text)
    if m is None or _TAG.search(m.group("think") or "") or _TAG.search(m.group("answer")):
        snippet = " ".join(text.split())[-80:]
        raise ActionError(
            "malformed",
            f'the response "…{snippet}" is not one <think>…</think><answer>…</answer> ending with </answer>: '
            'write your reasoning in <think></think>, then one call such as do(action="Click", element="3") '
            "in <answer></answer>",
        )
    body = m.group("answer").strip()
    call = extract_call(body)
    if call != body:
        raise ActionError("malformed", f"<answer> must hold exactly one action call and nothing else, got {body[:80]!r}")
    return call


def parse_action(text: str, strict: bool = False) -> Action:
    """Parse a model response (bare call or <think>/<answer> format) into an Action.

    strict=False reads leniently (the first call of the last answer, a missing
    `</answer>` forgiven); strict=True demands the well-formed response of
    `check_format` (EnvConfig.action_format chooses; RL rollouts use strict).
    Raises ActionError(kind="malformed") with a message for the agent if the text
    holds no valid call.
    """
    call_text = check_format(text) if strict else extract_call(text)
    try:
        node = ast.parse(call_text, mode="eval").body
    except SyntaxError:
        raise ActionError("malformed", f"could not read the action {call_text[:80]!r}: check quotes and commas") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ActionError("malformed", f"{call_text[:80]!r} is not an action call")
    func = node.func.id
    kwargs: dict[str, str] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ActionError("malformed", "write arguments as name=\"value\"")
        kwargs[kw.arg] = _literal(kw.value, kw.arg)
    positional = [_literal(arg, "argument") for arg in node.args]

    if func in ("go_backward", "go_forward"):
        if positional or kwargs:
            raise ActionError("malformed", f"{func}() takes no arguments")
        return Action(func)
    if func == "exit":
        unknown = set(kwargs) - {"message"}
        if unknown or len(positional) > 1 or (positional and kwargs):
            raise ActionError("malformed", 'write exit(message="your answer")')
        message = kwargs.get("message", positional[0] if positional else "")
        return Action("exit", argument=message)

    # do(...)
    if positional:
        raise ActionError("malformed", 'do() takes named arguments, e.g. do(action="Click", element="3")')
    unknown = set(kwargs) - {"action", "element", "argument"}
    if unknown:
        raise ActionError("malformed", f"unknown argument(s) {', '.join(sorted(unknown))}: do() takes action, element and argument")
    if "action" not in kwargs:
        raise ActionError("malformed", 'do() needs action="...". Valid actions: ' + _DO_NAMES)
    s = spec(kwargs["action"])
    element = None
    if "element" in kwargs:
        if s.element == "none":
            raise ActionError("malformed", f"{s.name} takes no element")
        raw = kwargs["element"].strip()
        if not re.fullmatch(r"\d+", raw):
            raise ActionError("malformed", f'element must be an element id number, got "{raw}"')
        element = int(raw)
    elif s.element == "required":
        raise ActionError("malformed", f'{s.name} needs element="<id>"')
    argument = kwargs.get("argument")
    if s.argument and argument is None:
        raise ActionError("malformed", f'{s.name} needs argument="<{s.argument}>"')
    if not s.argument and argument is not None:
        raise ActionError("malformed", f"{s.name} takes no argument")
    return Action(s.name, element=element, argument=argument)


def _literal(node: ast.AST, name: str) -> str:
    """A string or number literal as text; anything else (names, calls, ...) is refused."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)) and not isinstance(node.value, bool):
        return str(node.value)
    raise ActionError("malformed", f"{name} must be a quoted string")


async def execute(env: "BrowserEnv", action: Action) -> None:
    """Perform `action` in `env` with the executor from ACTIONS."""
    run = _BY_KEY[re.sub(r"[\s_]+", "", action.name.lower())].run
    await run(env, action)


def describe(action: Action) -> dict[str, Any]:
    """A JSON-ready description of an action."""
    return {"name": action.name, "element": action.element, "argument": action.argument, "text": action.to_text()}
