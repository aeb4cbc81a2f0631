"""Export a replay as an animated GIF (needs Pillow): one frame per step, the acted-on
element outlined, the step's action written underneath, then the final page."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ..trajectory import Trajectory
from . import sources


def save_gif(trajectory: Trajectory, path: str | Path, seconds: float = 1.5, width: int = 800,
             base: str | Path | None = None) -> Path:
    """Write `trajectory` as a GIF to `path`; steps without a screenshot get a grey frame
    that says so. Raises ImportError without Pillow, ValueError when no step has one."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise ImportError("GIF export needs Pillow (pip install pillow)") from None
    where = Path(base) if base is not None else None
    shots = [(t.observation, t.action, f"step {j + 1}: " + _caption(t)) for j, t in enumerate(trajectory.turns)]
    if trajectory.final_observation is not None:
        shots.append((trajectory.final_observation, None, f"end: reward {trajectory.reward:g}, {trajectory.status}"))
    loaded = [(obs, action, text, *sources.screenshot(obs, where)) for obs, action, text in shots]
    if not any(png for *_, png, _ in loaded):
        raise ValueError(f"{trajectory.task_id}: no screenshot recorded (run with EnvConfig(screenshot=True))")
    font = ImageFont.load_default()
    band = 28
    frames = []
    for obs, action, text, png, why in loaded:
        if png is not None:
            img = Image.open(io.BytesIO(png)).convert("RGB")
            scale = width / img.width
            img = img.resize((width, max(1, round(img.height * scale))))
            box = _box(action, obs)
            if box is not None:
                x, y, w, h = (v * scale for v in box)
                ImageDraw.Draw(img).rectangle([x - 2, y - 2, x + w + 2, y + h + 2], outline=(229, 83, 75), width=3)
        else:
            img = Image.new("RGB", (width, width * 9 // 16), (230, 230, 230))
            ImageDraw.Draw(img).text((12, 12), why or "no screenshot", fill=(90, 90, 90), font=font)
        frame = Image.new("RGB", (img.width, img.height + band), (255, 255, 255))
        frame.paste(img, (0, 0))
        ImageDraw.Draw(frame).text((6, img.height + 8), text[:120], fill=(20, 20, 20), font=font)
        frames.append(frame)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    frames[0].save(out, save_all=True, append_images=frames[1:], duration=int(seconds * 1000), loop=0)
    return out


def _caption(turn: Any) -> str:
    if isinstance(turn.action, dict) and turn.action.get("text"):
        text = turn.action["text"]
    else:
        text = "(no valid action)"
    return text + (f"  [error: {turn.error}]" if turn.error else "")


def _box(action: Any, observation: dict[str, Any]) -> tuple[float, ...] | None:
    target = action.get("element") if isinstance(action, dict) else None
    if target is None:
        return None
    for e in observation.get("elements") or []:
        if isinstance(e, dict) and str(e.get("id")) == str(target):
            box = e.get("box") or ()
            return tuple(float(v) for v in box) if len(box) == 4 and box[2] > 0 and box[3] > 0 else None
    return None
