"""The HTML container every view returns, and the pieces the views share: escaping,
unique widget ids, the style sheet and the step controls.

Everything is self-contained (images are data: URIs, style and script are inline), so
a saved notebook or a saved .html file shows the view without a kernel or a network.
The controls are progressive: without JavaScript (an untrusted notebook, a static
viewer) every step is shown one below the other; the script hides all but one and
reveals the buttons and the slider.

Model output is data: every text that comes from a trajectory goes through `esc`, so
an action that says `<script>` is shown as those characters, never run.
"""

from __future__ import annotations

import html
import uuid
from pathlib import Path
from typing import Any


def esc(value: Any) -> str:
    """Text for HTML content or attribute values (None becomes empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def new_id(kind: str = "w") -> str:
    """A page-unique element id, so several views in one notebook or page do not clash."""
    return f"wr1-{kind}-{uuid.uuid4().hex[:12]}"


CSS = """
.wr1{font:13px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1f2328;border:1px solid #d0d7de;
 border-radius:6px;padding:8px 10px;margin:6px 0;background:#fff;max-width:1200px;box-sizing:border-box}
.wr1 *{box-sizing:border-box}
.wr1 [hidden]{display:none !important}
.wr1 h3{margin:0 0 4px;font-size:14px}
.wr1 .wr1-meta{color:#57606a;margin:2px 0}
.wr1 .wr1-badge{display:inline-block;border-radius:10px;padding:0 7px;margin-right:4px;font-weight:600;font-size:12px}
.wr1 .wr1-ok{background:#dafbe1;color:#116329}.wr1 .wr1-bad{background:#ffebe9;color:#a40e26}
.wr1 .wr1-warn{background:#fff8c5;color:#7d4e00}.wr1 .wr1-info{background:#ddf4ff;color:#0a3069}
.wr1 .wr1-missing{background:#fff8c5;border:1px solid #d4a72c;border-radius:4px;padding:4px 8px;margin:4px 0}
.wr1 .wr1-controls{display:flex;gap:8px;align-items:center;margin:6px 0}
.wr1 .wr1-controls input[type=range]{flex:1;min-width:80px}
.wr1 .wr1-controls button{padding:2px 10px;cursor:pointer}
.wr1 .wr1-frame{border-top:1px solid #eaeef2;padding-top:6px;margin-top:6px}
.wr1 .wr1-cols{display:flex;gap:10px;flex-wrap:wrap;align-items:flex-start}
.wr1 .wr1-shot{position:relative;flex:1 1 480px;max-width:760px;border:1px solid #d0d7de;line-height:0}
.wr1 .wr1-shot img{width:100%;height:auto;display:block}
.wr1 .wr1-box{position:absolute;border:3px solid #e5534b;border-radius:3px;box-shadow:0 0 0 2px rgba(255,255,255,.8)}
.wr1 .wr1-side{flex:1 1 280px;min-width:240px}
.wr1 .wr1-label{color:#57606a;font-size:11px;text-transform:uppercase;letter-spacing:.04em;margin-top:4px}
.wr1 pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;
 background:#f6f8fa;border-radius:4px;padding:4px 6px}
.wr1 pre.wr1-obs{max-height:360px;overflow:auto}
.wr1 .wr1-err{color:#a40e26}
.wr1 .wr1-group{display:flex;gap:8px;overflow-x:auto;align-items:flex-start}
.wr1 .wr1-group > .wr1{flex:0 0 460px;margin:0}
.wr1 .wr1-group .wr1-shot{flex-basis:100%}
.wr1 .wr1-tokens{white-space:pre-wrap;word-break:break-all;font:12px/1.6 ui-monospace,Menlo,Consolas,monospace;
 max-height:600px;overflow:auto;border:1px solid #eaeef2;padding:4px}
.wr1 .wr1-tokens span{border-radius:2px;box-shadow:inset -1px 0 0 rgba(255,255,255,.9)}
.wr1 .wr1-tokens .wr1-m0{color:#8c959f}
.wr1 .wr1-tokens .wr1-think{text-decoration:line-through dotted}
.wr1 table{border-collapse:collapse}.wr1 td,.wr1 th{padding:1px 8px 1px 0;text-align:left;vertical-align:top}
"""

# The step controls. Only the widget's own id (hex, made by new_id) is put into the script.
_STEPPER_JS = """(function(){
var root=document.getElementById("%s");
if(!root||root.getAttribute("data-ready"))return;root.setAttribute("data-ready","1");
var frames=root.querySelectorAll(":scope>.wr1-frames>.wr1-frame"),n=frames.length;if(!n)return;
var bar=root.querySelector(":scope>.wr1-controls"),slider=bar.querySelector("input"),
pos=bar.querySelector(".wr1-pos"),prev=bar.querySelector(".wr1-prev"),next=bar.querySelector(".wr1-next"),i=0;
function go(k){i=Math.max(0,Math.min(n-1,k));
for(var j=0;j<n;j++){frames[j].hidden=(j!==i);}
slider.value=String(i);pos.textContent=(i+1)+" / "+n+": "+frames[i].getAttribute("data-label");
prev.disabled=(i===0);next.disabled=(i===n-1);root.setAttribute("data-step",String(i));}
bar.hidden=false;slider.max=String(n-1);
prev.addEventListener("click",function(){go(i-1);});next.addEventListener("click",function(){go(i+1);});
slider.addEventListener("input",function(){go(parseInt(slider.value,10));});
root.addEventListener("keydown",function(e){if(e.key==="ArrowLeft")go(i-1);if(e.key==="ArrowRight")go(i+1);});
go(0);})();"""


def stepper(frames: list[tuple[str, str]]) -> str:
    """Controls plus frames; `frames` holds (label, html) pairs. Labels are escaped here."""
    body = "".join(
        f'<div class="wr1-frame" data-step="{k}" data-label="{esc(label)}">{content}</div>'
        for k, (label, content) in enumerate(frames)
    )
    controls = (
        '<div class="wr1-controls" hidden><button type="button" class="wr1-prev">&#9664; prev</button>'
        f'<input type="range" min="0" max="{max(0, len(frames) - 1)}" value="0" step="1" aria-label="step">'
        '<button type="button" class="wr1-next">next &#9654;</button><span class="wr1-pos"></span></div>'
    )
    return controls + f'<div class="wr1-frames">{body}</div>'


def stepper_script(widget_id: str) -> str:
    if not widget_id.replace("-", "").isalnum():  # ids come from new_id; never put other text into script
        raise ValueError(f"bad widget id {widget_id!r}")
    return f"<script>{_STEPPER_JS % widget_id}</script>"


class HTML:
    """A rendered view: shows itself when it is a notebook cell's last expression
    (`_repr_html_`), and `.save(path)` writes it as a standalone page.

    `notes` lists what was missing or skipped in the input (also shown in the view).
    """

    def __init__(self, body: str, title: str = "webr1", notes: list[str] | None = None):
        self.body = body
        self.title = title
        self.notes = list(notes or [])

    def _repr_html_(self) -> str:
        return f"<style>{CSS}</style>{self.body}"

    def page(self) -> str:
        """The standalone HTML document."""
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(self.title)}</title><style>{CSS}\nbody{{margin:12px;background:#f6f8fa}}</style></head>"
            f"<body>\n{self.body}\n</body></html>\n"
        )

    def save(self, path: str | Path) -> Path:
        """Write the standalone page to `path` (parent folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.page(), encoding="utf-8")
        return path

    def __str__(self) -> str:
        return self.body

    def __repr__(self) -> str:
        extra = f", {len(self.notes)} note(s)" if self.notes else ""
        return f"<webr1 view {self.title!r}: {len(self.body)} characters of HTML{extra}>"
