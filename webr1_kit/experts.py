"""Scripted experts: policies that solve tasks through the agent's own action space.

An expert sees exactly what a model sees (the intent and the Observation, whose
`elements` list is the structured form of the numbered elements) and answers with
action text, so it exercises the same parser and executor, and its episodes are
valid behaviour-cloning data. No back doors into the page.

`MiniWoBExpert` solves click-button, click-link, enter-text, focus-text and
click-checkboxes. The arena's experts live with their templates
(webr1_kit/tasks/arena_templates/); `Expert` routes each task to the right one.
All answer in the paper's format, `<think>…</think><answer>…</answer>`.
"""

from __future__ import annotations

import re
from typing import Any

from .actions import Action
from .observation import Element, Observation
from .tasks.task import Task


def respond(thought: str, action: Action) -> str:
    """A response in the paper's output format."""
    return f"<think>{thought}</think><answer>{action.to_text()}</answer>"


class MiniWoBExpert:
    """Scripted policy for five MiniWoB++ tasks, recognised by their instruction."""

    name = "scripted"
    TASKS = ("click-button", "click-link", "enter-text", "focus-text", "click-checkboxes")

    _rules = (
        (re.compile(r'^Click on the "(.*)" button\.$'), "_click_button"),
        (re.compile(r'^Click on the link "(.*)"\.$'), "_click_link"),
        (re.compile(r'^Enter "(.*)" into the text field and press Submit\.$'), "_enter_text"),
        (re.compile(r"^Focus into the textbox\.$"), "_focus_text"),
        (re.compile(r"^Select (.*) and click Submit\.$"), "_click_checkboxes"),
    )

    async def act(self, task: Task, intent: str, observation: Observation, history: list[Any], seed: int = 0) -> str:
        for pattern, method in self._rules:
            m = pattern.match(intent.strip())
            if m:
                return getattr(self, method)(m.group(1) if m.groups() else "", observation)
        return respond("I have no script for this task.", Action("exit", argument="unsupported task"))

    # Each rule picks the element from the observation and writes the action.

    def _click_button(self, label: str, obs: Observation) -> str:
        return self._click(obs.find(role="button", name=label), f'the "{label}" button')

    def _click_link(self, label: str, obs: Observation) -> str:
        return self._click([e for e in obs.elements if e.name == label], f'the link "{label}"')

    def _focus_text(self, _: str, obs: Observation) -> str:
        return self._click(obs.find(role="textbox"), "the textbox")

    def _enter_text(self, text: str, obs: Observation) -> str:
        boxes = obs.find(role="textbox")
        if boxes and boxes[0].value != text:
            return respond(f'Type "{text}" into the text field.', Action("Type", element=boxes[0].id, argument=text))
        return self._click(obs.find(role="button", name="Submit"), "Submit")

    def _click_checkboxes(self, wanted: str, obs: Observation) -> str:
        words = set() if wanted == "nothing" else {w.strip() for w in wanted.split(",")}
        for box in obs.find(role="checkbox"):
            if (box.name in words) != bool(box.checked):
                verb = "Check" if box.name in words else "Uncheck"
                return respond(f"{verb} {box.name}.", Action("Click", element=box.id))
        return self._click(obs.find(role="button", name="Submit"), "Submit")

    @staticmethod
    def _click(candidates: list[Element], what: str) -> str:
        if not candidates:
            return respond(f"I cannot see {what}.", Action("Scroll Down"))
        return respond(f"Click {what}.", Action("Click", element=candidates[0].id))


class Expert:
    """The scripted expert for any supported task: MiniWoB++ or arena."""

    name = "expert"

    def __init__(self) -> None:
        from .tasks.arena import ArenaExpert

        self.miniwob = MiniWoBExpert()
        self.arena = ArenaExpert()

    async def act(self, task: Task, intent: str, observation: Observation, history: list[Any], seed: int = 0) -> str:
        if task.suite == "arena":
            return await self.arena.act(task, intent, observation, history)
        return await self.miniwob.act(task, intent, observation, history)
