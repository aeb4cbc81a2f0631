"""Episode replays: `show()` for one or more trajectories, `show_group()` for the G
episodes of one task side by side with their GRPO advantages.

Each step shows the page as the agent saw it (the screenshot, with the element the
action targets outlined from the observation's element boxes), then the thought, the
action, any error and the URL; a step without a screenshot shows the observation
text instead and says so. A last frame shows the page at the end and the
evaluator's verdict. Whatever could not be read (corrupt JSONL lines, missing
screenshot files) is listed at the top rather than failing the replay.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any, Sequence

from ..trajectory import Trajectory, TrajectoryGroup, Turn
from . import sources
from .page import HTML, esc, new_id, stepper, stepper_script


def show(source: Any, select: Sequence[int | str] | None = None, limit: int | None = None,
         title: str | None = None, base: str | Path | None = None) -> HTML:
    """Replay trajectories inline (the returned view renders as a cell's last expression;
    `.save("replay.html")` writes a standalone page).

    source: a Trajectory, a list of them, a TrajectoryGroup, an EvalResult, a GRPORun, or
        a path: a trajectory JSONL file or a run directory (its latest rollout step).
    select: positions (0-based) and/or task ids to show, in that order; limit: at most N.
    base: folder for relative screenshot files (default: the JSONL's folder).
    """
    loaded = sources.load(source)
    trajs = sources.select(loaded.trajectories, select, limit)
    if not trajs:
        raise ValueError("nothing to show: no trajectories selected")
    where = Path(base) if base is not None else loaded.base
    parts, notes = _read_notes(loaded), list(loaded.notes)
    for t in trajs:
        html, missing = render(t, base=where)
        parts.append(html)
        notes += [f"{t.task_id}: {m}" for m in missing]
    name = title or (trajs[0].task_id if len(trajs) == 1 else f"{len(trajs)} trajectories")
    return HTML("\n".join(parts), title=f"webr1 replay: {name}", notes=notes)


def trained_reward(t: Any) -> float:
    """The reward M-GRPO learned from (recorded in meta["rl_reward"]), else the verdict's."""
    return float(t.meta.get("rl_reward", t.reward))


def show_group(group: Any, title: str | None = None, base: str | Path | None = None) -> HTML:
    """The G trajectories of one task side by side, each with its reward and GRPO advantage.

    group: a TrajectoryGroup, or anything `show` takes (a list of trajectories, a run
    directory, ...), which is regrouped by task id and page seed, one row per group.
    Advantages come from `grpo.group_advantages` over the group's valid members' rewards
    as training saw them (`meta["rl_reward"]`, which M-GRPO records; the verdict's reward
    otherwise); infrastructure failures get none (training drops them).
    """
    from ..grpo import group_advantages

    if isinstance(group, TrajectoryGroup):
        loaded, groups = sources.Loaded(list(group.trajectories)), [group]
    else:
        loaded = sources.load(group)
        groups = sources.groups_of(loaded.trajectories)
    if not groups:
        raise ValueError("nothing to show: no trajectories")
    where = Path(base) if base is not None else loaded.base
    parts, notes = _read_notes(loaded), list(loaded.notes)
    for g in groups:
        valid = g.valid
        adv = dict(zip(map(id, valid), group_advantages([trained_reward(t) for t in valid])))
        rewards = ", ".join(f"{trained_reward(t):g}" for t in valid) or "none"
        flat = bool(valid) and all(a == 0 for a in adv.values())
        n, lost = len(g.trajectories), len(g.trajectories) - len(valid)
        head = (f"<h3>group: {esc(g.task_id)}</h3><div class='wr1-meta'>{n} episode{'' if n == 1 else 's'}; "
                f"rewards [{esc(rewards)}]"
                + (f"; {lost} infrastructure failure(s), left out of the update" if lost else "") + "</div>")
        if flat:
            head += ("<div class='wr1-meta'><span class='wr1-badge wr1-warn'>equal rewards</span>every advantage "
                     "is 0: this group is left out of the update</div>")
        cols = []
        for t in g.trajectories:
            html, missing = render(t, base=where, advantage=adv.get(id(t)), compact=True)
            cols.append(html)
            notes += [f"{t.task_id}: {m}" for m in missing]
        parts.append(f"<div class='wr1'>{head}<div class='wr1-group'>{''.join(cols)}</div></div>")
    name = title or (groups[0].task_id if len(groups) == 1 else f"{len(groups)} groups")
    return HTML("\n".join(parts), title=f"webr1 group: {name}", notes=notes)


# ---------------------------------------------------------------- one trajectory


def render(traj: Trajectory, base: Path | None = None, advantage: float | None = None,
           compact: bool = False) -> tuple[str, list[str]]:
    """One trajectory's widget, and the list of things missing from its record."""
    wid = new_id("replay")
    frames, missing = [], []
    for j, turn in enumerate(traj.turns):
        content, why = _step(turn, j, base)
        frames.append((f"step {j + 1}", content))
        if why:
            missing.append((j + 1, why))
    frames.append(("end", _end(traj, base, missing)))
    notes = _missing_notes(missing)
    head = _header(traj, advantage)
    box = _notes_box("Missing from this record", notes) if notes else ""
    tag = "wr1 wr1-compact" if compact else "wr1"
    body = (f'<div class="{tag}" id="{wid}" tabindex="0" data-steps="{len(traj.turns)}">{head}{box}'
            f"{stepper(frames)}</div>{stepper_script(wid)}")
    return body, notes


def _header(t: Trajectory, advantage: float | None) -> str:
    ok = t.success
    badges = []
    if t.status == "infra_failure":
        badges.append("<span class='wr1-badge wr1-warn'>infrastructure failure</span>")
    else:
        badges.append(f"<span class='wr1-badge {'wr1-ok' if ok else 'wr1-bad'}'>"
                      f"{'success' if ok else 'failure'} &middot; reward {t.reward:g}</span>")
    if t.meta.get("expert"):
        badges.append("<span class='wr1-badge wr1-info'>expert member</span>")
    if t.meta.get("hinted"):
        badges.append("<span class='wr1-badge wr1-info'>hinted</span>")
    if advantage is not None:
        badges.append(f"<span class='wr1-badge wr1-info'>advantage {advantage:+.3f}</span>")
    elif t.status == "infra_failure":
        badges.append("<span class='wr1-badge wr1-info'>no advantage</span>")
    meta = [f"{len(t.turns)} step{'' if len(t.turns) == 1 else 's'}", f"status {esc(t.status)}",
            f"ended by {esc(t.termination or '?')}", f"seed {t.seed}", f"{t.seconds:.1f} s"]
    if t.invalid_actions:
        meta.append(f"{t.invalid_actions} invalid action(s)")
    template = t.meta.get("template") if isinstance(t.meta, dict) else None
    if template:
        meta.append(f"template {esc(template)}")
    return (f"<h3>{esc(t.task_id)}</h3><div class='wr1-meta'>{''.join(badges)} {' &middot; '.join(meta)}</div>"
            f"<div class='wr1-meta'>intent: {esc(t.intent)}</div>")


def _step(turn: Turn, j: int, base: Path | None) -> tuple[str, str | None]:
    """One step's HTML, and why its screenshot is missing (None when it is there)."""
    obs = turn.observation if isinstance(turn.observation, dict) else {}
    png, why = sources.screenshot(obs, base)
    action = turn.action if isinstance(turn.action, dict) else None
    target = action.get("element") if action else None
    element = _element(obs, target)
    if png is not None:
        left = _image(png, element)
    else:
        left = (f"<div class='wr1-side'><span class='wr1-badge wr1-warn'>{esc(why)}</span>"
                f"<div class='wr1-label'>observation text</div><pre class='wr1-obs'>{esc(_obs_text(obs))}</pre></div>")
    thought, answer = _split(turn.response)
    side = [_field("page", obs.get("url", "")), _field("thought", thought or "(none)")]
    if not getattr(turn, "trained", True):
        side.insert(0, "<div class='wr1-meta'><span class='wr1-badge wr1-info'>expert prefix</span>played by the "
                       "scripted expert; the policy reads it, training does not</div>")
    if action:
        side.append(_field("action", action.get("text") or answer))
        if target is not None:
            side.append(f"<div class='wr1-meta'>target: {esc(_describe(element, target))}</div>")
    else:
        side.append(_field("action", "(no valid action) " + answer))
    expert = getattr(turn, "expert", None)
    if isinstance(expert, dict):  # a guided run asked the expert at this state
        side.append(_field("the expert would", expert.get("text") or expert.get("name", "")))
    if turn.error:
        side.append(_field(f"error ({turn.error_kind})" if turn.error_kind else "error", turn.error, "wr1-err"))
    side.append(_field("URL after the action", turn.url))
    timing = f"{turn.seconds:.2f} s (policy {turn.policy_seconds:.2f} s)"
    if turn.completion_ids is not None:
        timing += f" &middot; {len(turn.completion_ids)} response tokens" + (
            " (cut at max_new_tokens)" if turn.finish == "length" else "")
    side.append(f"<div class='wr1-meta'>{timing}</div>")
    side.append(f"<details><summary>full response</summary><pre>{esc(turn.response)}</pre></details>")
    if png is not None:
        side.append(f"<details><summary>observation text</summary><pre class='wr1-obs'>{esc(_obs_text(obs))}</pre>"
                    "</details>")
    return f"<div class='wr1-cols'>{left}<div class='wr1-side'>{''.join(side)}</div></div>", why


def _end(t: Trajectory, base: Path | None, missing: list[tuple[int, str]]) -> str:
    """The last frame: the page at the end (if recorded), the answer and the verdict."""
    rows = [f"<div class='wr1-label'>outcome</div><div>{'success' if t.success else 'no success'}; reward "
            f"{t.reward:g}; status {esc(t.status)}; ended by {esc(t.termination or '?')}</div>"]
    if t.answer is not None:
        rows.append(_field("answer", t.answer))
    if t.infra_error:
        rows.append(_field("infrastructure error", t.infra_error, "wr1-err"))
    rows.append(_verdict(t.verdict))
    left = ""
    if t.final_observation is not None:
        png, why = sources.screenshot(t.final_observation, base)
        if png is not None:
            left = _image(png, None)
        else:
            missing.append((0, why or ""))
            left = (f"<div class='wr1-side'><span class='wr1-badge wr1-warn'>final page: {esc(why)}</span>"
                    f"<pre class='wr1-obs'>{esc(_obs_text(t.final_observation))}</pre></div>")
        rows.insert(0, _field("final page", t.final_observation.get("url", "")))
    return f"<div class='wr1-cols'>{left}<div class='wr1-side'>{''.join(rows)}</div></div>"


def _verdict(v: Any) -> str:
    if not isinstance(v, dict):
        return "<div class='wr1-meta'>no evaluator verdict recorded</div>"
    checks = v.get("checks") or []
    rows = "".join(
        f"<tr><td>{'&#10003;' if c.get('passed') else '&#10007;'}</td><td>{esc(c.get('type', ''))}</td>"
        f"<td>{esc(c.get('reason', ''))}</td></tr>" for c in checks if isinstance(c, dict)
    )
    return (f"<div class='wr1-label'>evaluator verdict: reward {esc(v.get('reward'))}</div>"
            f"<table>{rows or '<tr><td>no checks recorded</td></tr>'}</table>")


# ---------------------------------------------------------------- pieces


def _image(png: bytes, element: dict[str, Any] | None) -> str:
    """The screenshot as a data: URI, with the target element's box outlined on top."""
    width, height = sources.png_size(png)
    outline = ""
    box = element.get("box") if element else None
    if box and len(box) == 4 and width and height and box[2] > 0 and box[3] > 0:
        x, y, w, h = (float(v) for v in box)
        pct = [100 * x / width, 100 * y / height, 100 * w / width, 100 * h / height]
        outline = (f"<div class='wr1-box' title='element {esc(element.get('id'))}' style='left:{pct[0]:.2f}%;"
                   f"top:{pct[1]:.2f}%;width:{pct[2]:.2f}%;height:{pct[3]:.2f}%'></div>")
    data = base64.b64encode(png).decode("ascii")  # re-encoded here: only base64 characters reach the page
    return f"<div class='wr1-shot'><img alt='screenshot' src='data:image/png;base64,{data}'>{outline}</div>"


def _element(obs: dict[str, Any], target: Any) -> dict[str, Any] | None:
    if target is None:
        return None
    for e in obs.get("elements") or []:
        if isinstance(e, dict) and str(e.get("id")) == str(target):
            return e
    return None


def _describe(element: dict[str, Any] | None, target: Any) -> str:
    if element is None:
        return f"element {target} (not in the observation's element list: no outline)"
    name = element.get("name") or element.get("value") or ""
    return f"element {target}: {element.get('role') or element.get('tag', '')} {name!r}".strip()


def _split(response: str) -> tuple[str, str]:
    """(thought, answer) of a `<think>…</think><answer>…</answer>` response; a response
    without tags is all answer."""
    text = response or ""
    m = re.search(r"<think>(.*?)(?:</think>|$)", text, re.S)
    thought = m.group(1).strip() if m else ""
    a = re.search(r"<answer>(.*?)(?:</answer>|$)", text, re.S)
    answer = a.group(1).strip() if a else re.sub(r"<think>.*?(?:</think>|$)", "", text, flags=re.S).strip()
    return thought, answer


def _obs_text(obs: dict[str, Any]) -> str:
    """The observation as the agent read it (Observation.text), or its raw content."""
    from ..observation import Observation

    try:
        return Observation.from_dict({k: v for k, v in obs.items() if k != "screenshot_png_b64"}).text
    except (KeyError, TypeError, ValueError, AttributeError):
        return str(obs.get("content", "")) or "(no observation recorded)"


def _field(label: str, value: Any, cls: str = "") -> str:
    return f"<div class='wr1-label'>{esc(label)}</div><pre class='{cls}'>{esc(value)}</pre>"


def _missing_notes(missing: list[tuple[int, str]]) -> list[str]:
    """"steps 1, 3: no screenshot recorded" lines, one per reason (step 0 is the final page)."""
    by_reason: dict[str, list[str]] = {}
    for step, why in missing:
        by_reason.setdefault(why, []).append("final page" if step == 0 else str(step))
    out = []
    for why, steps in by_reason.items():
        nums = [s for s in steps if s != "final page"]
        where = (f"step{'s' if len(nums) > 1 else ''} {', '.join(nums)}" if nums else "")
        if "final page" in steps:
            where = f"{where} and the final page" if where else "the final page"
        out.append(f"{where}: {why}")
    return out


def _read_notes(loaded: sources.Loaded) -> list[str]:
    """A box listing the lines that could not be read, if any."""
    if not loaded.notes:
        return []
    return [f"<div class='wr1'>{_notes_box(f'Skipped while reading {loaded.source}', loaded.notes)}</div>"]


def _notes_box(title: str, notes: list[str]) -> str:
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f"<div class='wr1-missing'><b>{esc(title)}</b><ul style='margin:2px 0'>{items}</ul></div>"
