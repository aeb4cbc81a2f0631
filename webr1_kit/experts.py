"""Scripted experts: policies that solve tasks through the agent's own action space.

An expert sees exactly what a model sees (the intent, the Observation, whose
`elements` list is the structured form of the numbered elements, and the history of
its own turns) and answers with action text, so it exercises the same parser and
executor, and its episodes are valid behaviour-cloning data. No back doors into the
page.

`MiniWoBExpert` solves the MiniWoB++ tasks listed in `MiniWoBExpert.TASKS` (split into
training and held-out tasks in `tasks.miniwob`). The arena's experts live with their
templates (webr1_kit/tasks/arena_templates/); `Expert` routes each task to the right
one. All answer in the paper's format, `<think>…</think><answer>…</answer>`.
"""

from __future__ import annotations

import re
from typing import Any

from .actions import Action
from .observation import Element, Observation
from .tasks.miniwob import MINIWOB_HELDOUT_TASKS, MINIWOB_TRAIN_TASKS
from .tasks.task import Task


def respond(thought: str, action: Action) -> str:
    """A response in the paper's output format."""
    return f"<think>{thought}</think><answer>{action.to_text()}</answer>"


_TAG = re.compile(r"<[^>]*>")
_ELEMENT_LINE = re.compile(r'^<\w+ id="(\d+)"')
_ORDINAL = {"1st": 0, "2nd": 1, "3rd": 2}
_WIDGET = {"radio": ("input", "radio"), "checkbox": ("input", "checkbox"), "text": ("input", "input"),
           "textarea": ("textarea", ""), "button": ("button", "")}
"""click-widget's widget kinds, as (tag, type) of the element that shows them."""


class MiniWoBExpert:
    """Scripted policy for MiniWoB++ tasks, recognised by their instruction.

    One table, `_rules`, maps an instruction pattern to a handler; the first pattern that
    matches wins, so a specific pattern comes before a general one that would also match
    ("Select X from the list and click Submit." before "Select X and click Submit.").
    Several tasks share a rule when their instructions and pages are alike (click-option
    and click-checkboxes-transfer use click-checkboxes' rule). A handler is called every
    turn with the groups of its pattern and answers with the next action *from the
    current state*: it reads what is already done from the observation (a field's value,
    a box's tick, an open section) and falls back on its own past turns only where the
    page shows nothing (which button of a sequence was clicked, which tab was visited).
    """

    name = "scripted"
    TASKS = MINIWOB_TRAIN_TASKS + MINIWOB_HELDOUT_TASKS
    """Every task the rules solve: the training tasks (the original five first), then the held-out ones."""

    _rules = (
        # The original five: recorded demonstrations hold their responses, so these stay as they are.
        (re.compile(r'^Click on the "(.*)" button\.$'), "_click_button"),  # also unicode-test
        (re.compile(r'^Click on the link "(.*)"\.$'), "_click_link"),
        # also enter-text-dynamic:
        (re.compile(r'^Enter "(.*)" into the text field and press Submit\.$'), "_enter_text"),
        (re.compile(r"^Focus into the textbox\.$"), "_focus_text"),
        (re.compile(r"^Select (.*) from the list and click Submit\.$"), "_choose_list"),  # the next would match it too
        (re.compile(r"^Select (.*) and click Submit\.$"), "_click_checkboxes"),  # also click-option, -transfer
        # single clicks
        (re.compile(r"^Click the button\.$"), "_click_test"),
        (re.compile(r"^Click button (\w+)\.$"), "_press_button"),  # click-test-2, click-test-transfer
        (re.compile(r'^Click on a "(\w+)" widget\.$'), "_click_widget"),
        (re.compile(r"^Click on (Tab #\d+)\.$"), "_click_tab"),
        (re.compile(r"^Click on the grid coordinate \((-?\d+),(-?\d+)\)\.$"), "_grid_coordinate"),
        (re.compile(r"^Focus into the (1st|2nd|3rd) input textbox\.$"), "_focus_nth"),
        (re.compile(r'^Close the dialog box by clicking the "(x)"\.$'), "_dialog_button"),
        (re.compile(r'^Click the button in the dialog box labeled "(.*)"\.$'), "_dialog_button"),
        # several steps
        (re.compile(r"^Click button (\w+), then click button (\w+)\.$"), "_click_sequence"),
        (re.compile(r"^Expand the section below and click submit\.$"), "_expand_and_submit"),
        (re.compile(r'^Expand the sections below, to find and click on the link "(.*)"\.$'), "_find_in_sections"),
        (re.compile(r'^Switch between the tabs to find and click on the link "(.*)"\.$'), "_find_in_tabs"),
        # typing
        (re.compile(r'^Type "(.*)" in all (upper|lower) case letters in the text input and press Submit\.$'),
         "_enter_case"),
        (re.compile(r'^Enter the password "(.*)" into both text fields and press submit\.$'), "_enter_password"),
        (re.compile(r'^Enter the username "(.*)" and the password "(.*)" into the text fields and press login\.$'),
         "_login"),  # also login-user-popup
        (re.compile(r"^Search for (.*) movies directed by (.*) from year (\d+)\.$"), "_movie_search"),
        (re.compile(r"^Select (-?\d+) with the spinner and hit Submit\.$"), "_spinner"),
        (re.compile(r'^Enter an item that starts with "(.*?)"(?: and ends with "(.*?)")?\.$'), "_autocomplete"),
    )

    async def act(self, task: Task, intent: str, observation: Observation, history: list[Any], seed: int = 0) -> str:
        for pattern, method in self._rules:
            m = pattern.match(intent.strip())
            if m:
                return getattr(self, method)(observation, history, *m.groups())
        return respond("I have no script for this task.", Action("exit", argument="unsupported task"))

    # Each rule picks the element from the observation and writes the action.

    def _click_button(self, obs: Observation, history: list[Any], label: str) -> str:
        return self._click(obs.find(role="button", name=label), f'the "{label}" button')

    def _click_link(self, obs: Observation, history: list[Any], label: str) -> str:
        return self._click([e for e in obs.elements if e.name == label], f'the link "{label}"')

    def _focus_text(self, obs: Observation, history: list[Any]) -> str:
        return self._click(obs.find(role="textbox"), "the textbox")

    def _enter_text(self, obs: Observation, history: list[Any], text: str) -> str:
        boxes = obs.find(role="textbox")
        return self._fill_then_click([(boxes[:1], text, "the text field")],
                                     obs.find(role="button", name="Submit"), "Submit")

    def _click_checkboxes(self, obs: Observation, history: list[Any], wanted: str) -> str:
        words = set() if wanted == "nothing" else {w.strip() for w in wanted.split(",")}
        for box in obs.elements:
            if box.role == "checkbox" and (box.name in words) != bool(box.checked):
                verb = "Check" if box.name in words else "Uncheck"
                return respond(f"{verb} {box.name}.", Action("Click", element=box.id))
            if box.role == "radio" and box.name in words and not box.checked:  # click-option
                return respond(f"Choose {box.name}.", Action("Click", element=box.id))
        return self._click(obs.find(role="button", name="Submit"), "Submit")

    def _choose_list(self, obs: Observation, history: list[Any], item: str) -> str:
        lists = obs.find(role="combobox")
        if lists and lists[0].value != item:
            return respond(f'Choose "{item}" in the list.',
                           Action("Select Dropdown Option", element=lists[0].id, argument=item))
        return self._click(obs.find(role="button", name="Submit"), "Submit")

    def _click_test(self, obs: Observation, history: list[Any]) -> str:
        return self._click(obs.find(role="button"), "the button")

    def _click_widget(self, obs: Observation, history: list[Any], kind: str) -> str:
        widgets = [e for e in obs.elements if (e.tag, e.type) == _WIDGET.get(kind)]
        return self._click(widgets, f'a "{kind}" widget')

    def _click_tab(self, obs: Observation, history: list[Any], tab: str) -> str:
        return self._click(obs.find(name=tab, tag="a"), tab)

    def _grid_coordinate(self, obs: Observation, history: list[Any], x: str, y: str) -> str:
        # The origin is the middle point; x grows to the right and y upwards.
        points = obs.find(tag="circle")
        cols = sorted({p.box[0] for p in points})
        rows = sorted({p.box[1] for p in points})
        col, row = len(cols) // 2 + int(x), len(rows) // 2 - int(y)
        hit = [p for p in points if 0 <= col < len(cols) and 0 <= row < len(rows)
               and (p.box[0], p.box[1]) == (cols[col], rows[row])]
        return self._click(hit, f"the point ({x},{y})")

    def _focus_nth(self, obs: Observation, history: list[Any], nth: str) -> str:
        boxes = obs.find(role="textbox")[_ORDINAL[nth]:]
        return self._click(boxes[:1], f"the {nth} textbox")

    def _dialog_button(self, obs: Observation, history: list[Any], label: str) -> str:
        # The dialog's "x" is an icon button whose accessible name is its title, "Close".
        name = "Close" if label == "x" else label
        return self._click(obs.find(role="button", name=name), f'the dialog\'s "{label}" button')

    def _press_button(self, obs: Observation, history: list[Any], label: str) -> str:
        return self._click_or_press(obs, obs.find(role="button", name=label), f'the "{label}" button')

    def _click_sequence(self, obs: Observation, history: list[Any], first: str, second: str) -> str:
        # Clicking a button leaves no trace on this page: only the history tells what was done.
        label = second if first in self._clicked(history) else first
        return self._click_or_press(obs, obs.find(role="button", name=label), f'the "{label}" button')

    def _expand_and_submit(self, obs: Observation, history: list[Any]) -> str:
        headers = obs.find(role="tab", tag="h3")
        if headers and not self._opened(obs, headers[0]):
            return self._click(headers[:1], f'"{headers[0].name}" to expand it')
        return self._click(obs.find(role="button", name="Submit"), "Submit")

    def _find_in_sections(self, obs: Observation, history: list[Any], word: str) -> str:
        # An accordion starts closed; the open section, if any, is the one showing text.
        sections = obs.find(role="tab")
        current = next((i for i, s in enumerate(sections) if self._opened(obs, s)), -1)
        return self._find_link(obs, word, sections, current, "section")

    def _find_in_tabs(self, obs: Observation, history: list[Any], word: str) -> str:
        # Tabs start on the first; the tab shown is the last one clicked.
        tabs = obs.find(role="presentation", tag="a")
        clicked = [n for n in self._clicked(history) if n in {t.name for t in tabs}]
        current = next((i for i, t in enumerate(tabs) if clicked and t.name == clicked[-1]), 0)
        return self._find_link(obs, word, tabs, current, "tab")

    def _enter_case(self, obs: Observation, history: list[Any], text: str, case: str) -> str:
        boxes = obs.find(role="textbox")
        text = text.upper() if case == "upper" else text.lower()
        return self._fill_then_click([(boxes[:1], text, "the text input")],
                                     obs.find(role="button", name="Submit"), "Submit")

    def _enter_password(self, obs: Observation, history: list[Any], password: str) -> str:
        fields = [([box], password, f'the "{label}" field') for box, label in self._fields(obs)]
        return self._fill_then_click(fields, obs.find(role="button", name="Submit"), "Submit")

    def _login(self, obs: Observation, history: list[Any], user: str, password: str) -> str:
        # login-user-popup: a popup may ask "Exit to home page?"; Cancel keeps the form.
        cancel = obs.find(role="button", name="Cancel")
        if cancel:
            return self._click(cancel, "Cancel to close the popup")
        fields = [(self._field(obs, "username"), user, "the username field"),
                  (self._field(obs, "password"), password, "the password field")]
        # login-user-popup's login button says "OK".
        login = obs.find(role="button", name="Login") or obs.find(role="button", name="OK")
        return self._fill_then_click(fields, login, f'"{login[0].name}"' if login else "the login button")

    def _movie_search(self, obs: Observation, history: list[Any], genre: str, director: str, year: str) -> str:
        fields = [(self._field(obs, "genre"), genre, "the genre field"),
                  (self._field(obs, "director"), director, "the director field"),
                  (self._field(obs, "year", "date"), year, "the year field")]
        submit = [e for e in obs.elements if e.role != "textbox" and e.name in ("Submit", "Search", "Go!")]
        return self._fill_then_click(fields, submit, f'"{submit[0].name}"' if submit else "the search button")

    def _spinner(self, obs: Observation, history: list[Any], number: str) -> str:
        return self._fill_then_click([(obs.find(role="spinbutton"), number, "the spinner")],
                                     obs.find(role="button", name="Submit"), "Submit")

    def _autocomplete(self, obs: Observation, history: list[Any], start: str, end: str | None) -> str:
        # Type the start, wait for the suggestions, pick one that fits, then submit. A value
        # equal to the start counts as picked only once a suggestion was clicked (the start
        # can be a whole item).
        boxes = obs.find(role="textbox")
        value = (boxes[0].value or "") if boxes else ""
        fits = lambda s: s.startswith(start) and s.endswith(end or "")  # noqa: E731
        if fits(value) and (value != start or value in self._clicked(history)):
            return self._click(obs.find(role="button", name="Submit"), "Submit")
        suggestions = [e for e in obs.elements if e.role == "listitem" and fits(e.name)]
        if suggestions:
            return self._click(suggestions[:1], f'the suggestion "{suggestions[0].name}"')
        if boxes and value == start:  # the suggestions appear a moment after typing
            return respond("Wait for the suggestions.", Action("Wait"))
        return self._fill_then_click([(boxes[:1], start, "the text field")], [], "")

    # Shared helpers.

    @staticmethod
    def _click(candidates: list[Element], what: str) -> str:
        if not candidates:
            return respond(f"I cannot see {what}.", Action("Scroll Down"))
        return respond(f"Click {what}.", Action("Click", element=candidates[0].id))

    def _click_or_press(self, obs: Observation, candidates: list[Element], what: str) -> str:
        """Click; but when the last click on it failed because another element covers it (buttons
        placed at random can overlap), press Enter on it: a focused button takes Enter as a click."""
        error = obs.error or ""
        if candidates and error.startswith(f"Click on element {candidates[0].id} ") and "covers it" in error:
            return respond(f"Another element covers {what}: press Enter on it instead.",
                           Action("Press Enter", element=candidates[0].id))
        return self._click(candidates, what)

    def _fill_then_click(self, fields: list[tuple[list[Element], str, str]], button: list[Element], what: str) -> str:
        """Type each (candidates, text, description) field that does not hold its text yet, then click."""
        for boxes, text, where in fields:
            if boxes and boxes[0].value != text:
                return respond(f'Type "{text}" into {where}.', Action("Type", element=boxes[0].id, argument=text))
        return self._click(button, what)

    def _find_link(self, obs: Observation, word: str, panels: list[Element], current: int, kind: str) -> str:
        """Click the link `word` if it shows, else open the panel after the `current` one."""
        links = [e for e in obs.elements if e.name == word and e.role not in ("tab", "presentation")]
        if links:
            return self._click(links, f'the link "{word}"')
        later = panels[current + 1:]
        if not later:
            return respond(f'No {kind} shows the link "{word}".', Action("exit", argument="link not found"))
        return respond(f'"{word}" is not here: open the next {kind}, "{later[0].name}".',
                       Action("Click", element=later[0].id))

    @staticmethod
    def _clicked(history: list[Any]) -> list[str]:
        """Names of the elements this episode's earlier turns clicked (or pressed Enter on) without error, in order."""
        names = []
        for turn in history:
            action = getattr(turn, "action", None) or {}
            if action.get("name") not in ("Click", "Press Enter") or getattr(turn, "error_kind", None):
                continue
            seen = getattr(turn, "observation", None) or {}
            names += [e["name"] for e in seen.get("elements", []) if e.get("id") == action.get("element")]
        return names

    @staticmethod
    def _opened(obs: Observation, header: Element) -> bool:
        """Whether the collapsible section under `header` is open: some content lies between it and the next header."""
        lines = obs.content.splitlines()
        headers = {f'id="{e.id}"' for e in obs.elements if e.role == "tab"}
        start = next((i for i, ln in enumerate(lines) if ln.startswith(f'<{header.tag} id="{header.id}"')), None)
        if start is None:
            return False
        following = lines[start + 1:start + 2]
        return bool(following) and not any(h in following[0] for h in headers)

    @staticmethod
    def _fields(obs: Observation) -> list[tuple[Element, str]]:
        """Each text field with its label: its accessible name, else the text next to it on the page.

        Forms put labels before their fields, or (some layouts) after them; which one is
        read off the first field: if text comes right before it, labels precede."""
        boxes = {e.id: e for e in obs.elements if e.role == "textbox"}
        tokens: list[tuple[str, Any]] = []  # ("field", Element) or ("text", str)
        for line in obs.content.splitlines():
            m = _ELEMENT_LINE.match(line)
            if m:
                if int(m.group(1)) in boxes:
                    tokens.append(("field", boxes[int(m.group(1))]))
                continue
            text = _TAG.sub("", line).strip().rstrip(":")
            if text:
                tokens.append(("text", text))
        at = [i for i, (kind, _) in enumerate(tokens) if kind == "field"]
        step = -1 if at and at[0] > 0 and tokens[at[0] - 1][0] == "text" else 1
        out = []
        for i in at:
            box, j = tokens[i][1], i + step
            beside = tokens[j][1] if 0 <= j < len(tokens) and tokens[j][0] == "text" else ""
            out.append((box, box.name or beside))
        return out

    def _field(self, obs: Observation, *words: str) -> list[Element]:
        """The text field whose label holds one of `words` (any case), as a list of at most one."""
        return [box for box, label in self._fields(obs) if any(w in label.lower() for w in words)][:1]


class Expert:
    """The scripted expert for any supported task: MiniWoB++ or arena."""

    name = "expert"

    def __init__(self) -> None:
        from .tasks.arena import ArenaExpert

        self.miniwob = MiniWoBExpert()
        self.arena = ArenaExpert()

    @staticmethod
    def covers(task: Task) -> bool:
        """Whether a script solves `task`: every arena template has one, MiniWoB++ the
        tasks in `MiniWoBExpert.TASKS`; WebArena and a user's own task files have none."""
        if task.suite == "arena":
            return task.template is not None and "params" in task.meta
        return task.suite == "miniwob" and task.task_id.removeprefix("miniwob/") in MiniWoBExpert.TASKS

    @classmethod
    def require(cls, tasks: list[Task], what: str) -> None:
        """Raise ValueError naming the tasks no script covers, before `what` needs them."""
        missing = [t.task_id for t in tasks if not cls.covers(t)]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise ValueError(f"{what} needs a scripted expert, and none exists for {len(missing)} of the "
                             f"{len(tasks)} tasks: {shown}. Experts cover the arena and the MiniWoB++ tasks in "
                             "MiniWoBExpert.TASKS; turn the option off or choose covered tasks.")

    async def act(self, task: Task, intent: str, observation: Observation, history: list[Any], seed: int = 0) -> str:
        if task.suite == "arena":
            return await self.arena.act(task, intent, observation, history)
        return await self.miniwob.act(task, intent, observation, history)
