"""Small tools for writing arena experts.

An expert is a function `expert(params, obs, history) -> response text` that looks at
the current observation (the same one the model gets: URL, page text, numbered
elements) and answers with ONE action in the paper's format, with a short <think>
rationale. Experts are reactive: they work out where they are from the observation,
so they recover from pages they did not expect, and they never touch the page or the
database directly.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from ...actions import Action
from ...observation import Element, Observation


def say(thought: str, action: Action) -> str:
    """A response in the paper's output format: <think>…</think><answer>…</answer>."""
    return f"<think>{thought}</think><answer>{action.to_text()}</answer>"


def find(obs: Observation, name: str | None = None, role: str | None = None, tag: str | None = None,
         contains: str | None = None) -> Element | None:
    """The first element matching every given criterion (`name` exact, `contains` substring)."""
    for e in obs.elements:
        if name is not None and e.name.strip() != name:
            continue
        if contains is not None and contains.lower() not in e.name.lower():
            continue
        if role is not None and e.role != role:
            continue
        if tag is not None and e.tag != tag:
            continue
        return e
    return None


def path(obs: Observation) -> str:
    """The observation URL's path and query, e.g. "/product/12?x=1"."""
    parts = urlsplit(obs.url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def click(thought: str, element: Element) -> str:
    return say(thought, Action("Click", element=element.id))


def type_text(thought: str, element: Element, text: str) -> str:
    return say(thought, Action("Type", element=element.id, argument=text))


def search(thought: str, element: Element, text: str) -> str:
    return say(thought, Action("Search", element=element.id, argument=text))


def select(thought: str, element: Element, option: str) -> str:
    return say(thought, Action("Select Dropdown Option", element=element.id, argument=option))


def answer(thought: str, message: str) -> str:
    return say(thought, Action("exit", argument=message))


def scroll_down(thought: str) -> str:
    return say(thought, Action("Scroll Down"))


def go_back(thought: str) -> str:
    return say(thought, Action("go_backward"))


def click_or_scroll(obs: Observation, history: list, what: str, **criteria: Any) -> str:
    """Click the element matching `criteria`, or scroll down to look for it."""
    el = find(obs, **criteria)
    if el is not None:
        return click(f"I see {what}; click it.", el)
    if "more of the page is below" in obs.content:
        return scroll_down(f"{what} is not in view; scroll down to find it.")
    return answer(f"I cannot find {what} on this page.", "I could not find it")


def read(obs: Observation, pattern: str) -> str | None:
    """The first group of `pattern` in the page text (None if absent)."""
    m = re.search(pattern, obs.content)
    return m.group(1) if m else None


def steps_taken(history: list) -> int:
    return len(history)


def fill(obs: Observation, fields: list[tuple[str, str]], what: str = "the form") -> str | None:
    """The next action that makes each labelled field hold its value (Type into text fields,
    Select Dropdown Option on <select>s, by option text), scrolling down to fields that are
    not in view; None when every field already holds its value."""
    for label, value in fields:
        el = find(obs, name=label)
        if el is None:
            if "more of the page is below" in obs.content:
                return scroll_down(f"The {label} field of {what} is not in view; scroll down.")
            continue
        if el.tag == "select":
            if (el.value or "").strip() != value:
                return select(f"Set {label} to {value} in {what}.", el, value)
        elif (el.value or "") != value:
            return type_text(f"Enter {value} as {label} in {what}.", el, value)
    return None
