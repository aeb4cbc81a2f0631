"""Baseline policies that need no model.

`RandomPolicy` picks a uniformly random valid action for the current observation:
click or hover a numbered element, type a random word into a text field, choose a
random dropdown option, scroll, go back, or (rarely) exit with a random answer. It
is the floor any trained agent must clear, and a check that the tasks cannot be
passed by chance.
"""

from __future__ import annotations

import random
from typing import Any

from .actions import Action
from .observation import Observation
from .tasks.task import Task

WORDS = ("yes", "no", "done", "hello", "42", "test", "blue", "order", "price", "N/A")


class RandomPolicy:
    """Uniformly random actions; deterministic given the seed and the episode so far."""

    name = "random"

    def __init__(self, seed: int = 0, exit_prob: float = 0.05):
        self.seed = seed
        self.exit_prob = exit_prob

    async def act(self, task: Task, intent: str, observation: Observation, history: list[Any], seed: int = 0) -> str:
        rng = random.Random(f"{self.seed}/{seed}/{task.task_id}/{len(history)}/{observation.url}")
        if rng.random() < self.exit_prob:
            return Action("exit", argument=rng.choice(WORDS)).to_text()
        choices: list[Action] = [Action("Scroll Down"), Action("Scroll Up"), Action("go_backward")]
        for e in observation.elements:
            if e.disabled:
                continue
            if e.role in ("textbox", "searchbox", "spinbutton"):
                choices.append(Action("Type", element=e.id, argument=rng.choice(WORDS)))
            elif e.tag == "select" and e.options:
                choices.append(Action("Select Dropdown Option", element=e.id, argument=rng.choice(e.options)))
            else:
                choices.append(Action("Click", element=e.id))
        return rng.choice(choices).to_text()
