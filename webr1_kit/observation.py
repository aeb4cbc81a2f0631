"""What the agent sees: the page as simplified HTML (or accessibility-tree text) with numbered elements.

The paper's observation is simplified HTML of the viewport in which interactive
elements carry numeric ids, e.g. `<button id="6" type="submit" data-text="Sign in">`.
`observe()` produces that text, plus the URL, title, open tabs, an optional
screenshot with the box of every numbered element (for replays), and a structured
list of those elements (for scripted experts).

Departure from the paper: ids are written into the DOM (`data-webr1-id`) and kept
for the life of the document, instead of being positions in a list, so an id in an
observation still names the same element when the answering action runs.
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from .config import EnvConfig

ID_ATTR = "data-webr1-id"


_SHOWN: dict[str, str] = {}
"""The origins of the kit's own servers in this process -> the origin the agent reads."""


def show_origin_as(origin: str, shown: str) -> None:
    """Write URLs under `origin` (scheme://host:port of a server the kit started) as
    `shown` in every observation.

    The bundled sites listen on free ports, which differ in every process. With the port
    in the observation's URL, and so in every prompt and in the history of every later
    one, the tokens a policy reads, BC's adapter and every sampled episode would depend
    on which ports happened to be free; with a fixed name they depend on the seeds only.
    The browser still goes to the real address; only `Observation.url` (what the agent,
    the experts and the replays read) carries the name. Evaluators read the live page."""
    _SHOWN[origin.rstrip("/")] = shown.rstrip("/")


def shown_url(url: str) -> str:
    """`url` as the agent reads it: a registered origin replaced by its name
    (`show_origin_as`); any other URL as it is."""
    for origin, shown in _SHOWN.items():
        if url == origin or url.startswith((origin + "/", origin + "?", origin + "#")):
            return shown + url[len(origin):]
    return url


@functools.lru_cache(maxsize=None)
def _observe_js() -> str:
    return resources.files("webr1_kit").joinpath("js/observe.js").read_text(encoding="utf-8")


@dataclass
class Element:
    """One numbered, interactive element of an observation."""

    id: int
    tag: str
    role: str
    name: str
    """Accessible name: label, aria-label, alt or visible text."""
    type: str = ""
    value: str | None = None
    checked: bool | None = None
    disabled: bool = False
    focused: bool = False
    box: tuple[int, int, int, int] = (0, 0, 0, 0)
    """x, y, width, height in viewport CSS pixels."""
    options: list[str] | None = None


@dataclass
class Observation:
    """One observation of the browser. `text` is what goes into the prompt."""

    url: str
    title: str
    content: str
    """The page as simplified HTML or accessibility-tree text (already truncated)."""
    tabs: list[str] = field(default_factory=list)
    """Titles of the open tabs, in order."""
    active_tab: int = 0
    error: str | None = None
    """What went wrong with the previous action, in words for the agent."""
    truncated: bool = False
    elements: list[Element] = field(default_factory=list)
    screenshot: bytes | None = None
    """PNG of the viewport, when EnvConfig.screenshot is on."""
    notes: list[str] = field(default_factory=list)
    """Other events since the last action (dialogs, new tabs)."""

    @property
    def text(self) -> str:
        """The observation as the agent reads it: location, events, then the page."""
        head = [f"URL: {self.url}", f"Title: {self.title}"]
        if len(self.tabs) > 1:
            listed = ", ".join(
                f"[{i}] {t}{' (current)' if i == self.active_tab else ''}" for i, t in enumerate(self.tabs)
            )
            head.append(f"Tabs: {listed}")
        for note in self.notes:
            head.append(f"Note: {note}")
        if self.error:
            head.append(f"Error: {self.error}")
        return "\n".join(head) + "\n" + self.content

    def element(self, id: int) -> Element | None:
        return next((e for e in self.elements if e.id == id), None)

    def find(self, role: str | None = None, name: str | None = None, tag: str | None = None) -> list[Element]:
        """Elements matching all given criteria (`name` matches exactly, after trimming)."""
        out = []
        for e in self.elements:
            if role is not None and e.role != role:
                continue
            if tag is not None and e.tag != tag:
                continue
            if name is not None and e.name.strip() != name.strip():
                continue
            out.append(e)
        return out

    def to_dict(self, screenshot: bool = True) -> dict[str, Any]:
        d = {
            "url": self.url,
            "title": self.title,
            "content": self.content,
            "tabs": self.tabs,
            "active_tab": self.active_tab,
            "error": self.error,
            "truncated": self.truncated,
            "notes": self.notes,
            "elements": [{**e.__dict__, "box": list(e.box)} for e in self.elements],
        }
        if screenshot and self.screenshot is not None:
            d["screenshot_png_b64"] = base64.b64encode(self.screenshot).decode()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Observation":
        shot = d.get("screenshot_png_b64")
        return cls(
            url=d["url"],
            title=d.get("title", ""),
            content=d.get("content", ""),
            tabs=list(d.get("tabs", [])),
            active_tab=d.get("active_tab", 0),
            error=d.get("error"),
            truncated=d.get("truncated", False),
            notes=list(d.get("notes", [])),
            elements=[Element(**{**e, "box": tuple(e.get("box", (0, 0, 0, 0)))}) for e in d.get("elements", [])],
            screenshot=base64.b64decode(shot) if shot else None,
        )


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut `text` to `max_chars` at a line boundary and say so at the end."""
    if len(text) <= max_chars:
        return text, False
    cut = text.rfind("\n", 0, max_chars)
    cut = cut if cut > max_chars // 2 else max_chars
    shown = text[:cut]
    return shown + f"\n[observation truncated: {cut} of {len(text)} characters shown]", True


async def snapshot(page: Any, cfg: EnvConfig, exclude: str | None = None) -> dict[str, Any]:
    """Run the observation walker in `page`; numbers elements and returns text + elements."""
    return await page.evaluate(
        _observe_js(),
        {"viewportOnly": cfg.viewport_only, "format": cfg.observation, "exclude": exclude},
    )


async def observe(
    page: Any,
    cfg: EnvConfig,
    tabs: list[str] | None = None,
    active_tab: int = 0,
    error: str | None = None,
    notes: list[str] | None = None,
    exclude: str | None = None,
) -> Observation:
    """Build the Observation of `page` (a Playwright async Page)."""
    snap = await snapshot(page, cfg, exclude)
    content, truncated = truncate(snap["text"], cfg.max_obs_chars)
    scroll = snap["scroll"]
    if cfg.viewport_only and scroll["y"] + scroll["viewport"] < scroll["height"] - 4:
        content += "\n[more of the page is below: scroll down to see it]"
    if cfg.viewport_only and scroll["y"] > 4:
        content = "[more of the page is above: scroll up to see it]\n" + content
    elements = [
        Element(**{k: v for k, v in e.items() if k != "box"}, box=tuple(e["box"]))
        for e in snap["elements"]
    ]
    shot = await page.screenshot(type="png") if cfg.screenshot else None
    return Observation(
        url=shown_url(page.url),
        title=await page.title(),
        content=content,
        tabs=tabs if tabs is not None else [await page.title()],
        active_tab=active_tab,
        error=error,
        truncated=truncated,
        elements=elements,
        screenshot=shot,
        notes=list(notes or []),
    )
