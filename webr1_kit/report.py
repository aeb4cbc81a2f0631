"""The main job's report: one self-contained HTML page from a pipeline run directory.

It holds the held-out success table for the base, BC and RL policies (with 95% Wilson
intervals), success per task, the BC and M-GRPO training curves, and replays of one
successful and one failed held-out episode. Images are embedded, so the file can be
mailed or opened anywhere. Stages that have not run yet are listed as missing.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from .stats import compare_paired

STAGES = (("base", "Base model (no training)"), ("bc", "After BC warm-up"), ("rl", "After BC + M-GRPO"))
EVALUATIONS = (("", "Held-out success: unseen pages of the training tasks, greedy"),
               ("-heldout-tasks", "Held-out tasks (never trained on), greedy"),
               ("-sampled", "Unseen pages of the training tasks, sampled at the training temperature"))
"""(suffix of the evaluation's name, heading): the evaluations a pipeline may hold per stage
(`Pipeline.evaluate_stage`)."""


def _stage(out: Path, name: str) -> dict[str, Any] | None:
    p = out / "stages" / f"{name}.json"
    return json.loads(p.read_text()) if p.is_file() else None


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def success_table(out: Path, kind: str = "") -> list[dict[str, Any]]:
    """One row per evaluated stage: success, its interval, episodes, turns, invalid rate, infra
    failures. `kind`: which evaluation (a suffix of EVALUATIONS; "" is the main one)."""
    rows = []
    for key, label in STAGES:
        st = _stage(out, f"eval-{key}{kind}")
        if st is None:
            continue
        m = st["metrics"]
        rows.append({"stage": key, "label": label, "success_rate": m["success_rate"], "ci95": m["success_ci95"],
                     "episodes": m["evaluated"], "mean_turns": m["mean_turns"],
                     "invalid_action_rate": m["invalid_action_rate"], "infra_failures": m["infra_failures"],
                     "per_task": m.get("per_task", {})})
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    from .viz.page import esc

    head = ("<tr><th>policy</th><th>success</th><th>95% CI</th><th>episodes</th><th>mean turns</th>"
            "<th>invalid actions</th><th>infra failures</th></tr>")
    body = "".join(
        f"<tr><td>{esc(r['label'])}</td><td><b>{_pct(r['success_rate'])}</b></td>"
        f"<td>{_pct(r['ci95'][0])} – {_pct(r['ci95'][1])}</td><td>{r['episodes']}</td>"
        f"<td>{r['mean_turns']:.1f}</td><td>{_pct(r['invalid_action_rate'])}</td><td>{r['infra_failures']}</td></tr>"
        for r in rows)
    return f"<table class='w1-report'>{head}{body}</table>"


def _per_task(rows: list[dict[str, Any]]) -> str:
    from .viz.page import esc

    tasks = sorted({t for r in rows for t in r["per_task"]})
    if not tasks:
        return ""
    head = "<tr><th>task</th>" + "".join(f"<th>{esc(r['stage'])}</th>" for r in rows) + "</tr>"

    def cell(r: dict[str, Any], t: str) -> str:
        v = r["per_task"].get(t)
        return f"<td>{_pct(v)}</td>"

    body = "".join(f"<tr><td>{esc(t)}</td>" + "".join(cell(r, t) for r in rows) + "</tr>" for t in tasks)
    return f"<h3>Success per task</h3><table class='w1-report'>{head}{body}</table>"


def _curves(out: Path) -> tuple[str, list[str]]:
    from .viz.plots import figure_png, plot_run

    parts, missing = [], []
    for sub, title in (("sft", "Behaviour cloning"), ("rl", "M-GRPO")):
        metrics = out / sub / "metrics.jsonl"
        if not metrics.is_file():
            missing.append(f"no {sub}/metrics.jsonl: the {title} stage has not run")
            continue
        try:
            fig = plot_run(out / sub, title=title)
        except Exception as exc:  # a report with one plot missing beats no report
            missing.append(f"{title} curves could not be drawn: {exc}")
            continue
        import matplotlib.pyplot as plt

        png = base64.b64encode(figure_png(fig)).decode()
        plt.close(fig)
        parts.append(f"<h3>{title}</h3><img alt='{title} curves' src='data:image/png;base64,{png}' style='max-width:100%'>")
    return "".join(parts), missing


def _replays(out: Path) -> tuple[str, list[str]]:
    """A successful and a failed held-out episode, from the latest evaluated stage."""
    from .trajectory import read_jsonl
    from .viz import show

    for key in ("rl", "bc", "base"):
        path = out / "eval" / f"{key}.jsonl"
        if not path.is_file():
            continue
        trajs = [t for t in read_jsonl(path) if t.status != "infra_failure"]
        picks = [(label, next((t for t in trajs if bool(t.success) == ok), None))
                 for label, ok in (("a success", True), ("a failure", False))]
        parts, missing = [], []
        for label, t in picks:
            if t is None:
                missing.append(f"no {label} among the {key} evaluation episodes")
                continue
            view = show(t, base=path.parent, title=f"{key}: {label}")
            parts.append(f"<h3>{key} policy, {label}: {t.task_id}</h3>{view._repr_html_()}")
        return "".join(parts), missing
    return "", ["no evaluation episodes to replay yet"]


def token_stats(trajectories: list[Any]) -> dict[str, Any]:
    """Mean prompt and response tokens per turn, and the mean prompt length at each turn
    index (how the context grows), from a model policy's recorded token ids. Turns without
    token records (a scripted policy's) are left out; all None when there are none."""
    turns = [(j, t) for traj in trajectories for j, t in enumerate(traj.turns) if t.prompt_ids is not None]
    if not turns:
        return {"prompt_tokens": None, "response_tokens": None, "prompt_tokens_by_turn": []}
    by_turn: dict[int, list[int]] = {}
    for j, t in turns:
        by_turn.setdefault(j, []).append(len(t.prompt_ids))
    return {"prompt_tokens": sum(len(t.prompt_ids) for _, t in turns) / len(turns),
            "response_tokens": sum(len(t.completion_ids or []) for _, t in turns) / len(turns),
            "prompt_tokens_by_turn": [sum(v) / len(v) for _, v in sorted(by_turn.items())]}


class Table:
    """Rows of results that show as an HTML table in a notebook and as text elsewhere."""

    COLUMNS = (("label", "policy"), ("success_rate", "success"), ("ci95", "95% CI"), ("evaluated", "episodes"),
               ("mean_turns", "turns"), ("invalid_action_rate", "invalid actions"), ("infra_failures", "infra"),
               ("prompt_tokens_by_turn", "prompt tokens at turn 1, 2, ..."),
               ("response_tokens", "response tokens/turn"))

    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = rows

    @staticmethod
    def cell(key: str, value: Any) -> str:
        if value is None or value == []:
            return "–"
        if key in ("success_rate", "invalid_action_rate"):
            return _pct(value)
        if key == "ci95":
            return f"{_pct(value[0])} – {_pct(value[1])}"
        if key == "prompt_tokens_by_turn":
            return " → ".join(f"{v:.0f}" for v in value[:6]) + (" …" if len(value) > 6 else "")
        if isinstance(value, float):
            return f"{value:.1f}"
        return str(value)

    def _repr_html_(self) -> str:
        from .viz.page import esc

        head = "".join(f"<th>{esc(title)}</th>" for _, title in self.COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{esc(self.cell(k, r.get(k)))}</td>" for k, _ in self.COLUMNS) + "</tr>"
                       for r in self.rows)
        return (f"<table class='w1-results' style='border-collapse:collapse'><tr>{head}</tr>{body}</table>"
                "<style>table.w1-results td,table.w1-results th{border:1px solid #ccc;padding:2px 8px;"
                "text-align:left}</style>")

    def __repr__(self) -> str:
        cells = [[title for _, title in self.COLUMNS]] + [[self.cell(k, r.get(k)) for k, _ in self.COLUMNS]
                                                          for r in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.COLUMNS))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def results_table(results: Any) -> Table:
    """Evaluations side by side, one row each: success with its 95% Wilson interval,
    episodes, mean turns, invalid-action rate, infrastructure failures, the prompt length
    at each turn (context compression keeps it flat) and the response tokens per turn.

    results: {label: episodes}, where episodes is anything `wk.show` reads (an EvalResult,
    a list of trajectories, a trajectory JSONL file, a GRPORun); `Pipeline.evaluations()`
    gives a run's evaluation files. The returned Table's `rows` hold the numbers.
    """
    from .stats import summarize
    from .viz.sources import load

    rows = []
    for label, source in dict(results).items():
        trajs = load(source).trajectories
        m = summarize(trajs, 0.0)
        keep = ("success_rate", "evaluated", "mean_turns", "invalid_action_rate", "infra_failures", "per_site",
                "per_template", "per_task")
        rows.append({"label": str(label), **{k: m[k] for k in keep}, "ci95": m["success_ci95"],
                     **token_stats([t for t in trajs if t.status != "infra_failure"])})
    return Table(rows)


def _changes(out: Path, kind: str = "") -> str:
    """One line per training stage: the paired change on the same held-out episodes."""
    from .viz.page import esc

    lines = []
    for (k1, l1), (k2, l2) in zip(STAGES, STAGES[1:]):
        k1, k2 = k1 + kind, k2 + kind
        p1, p2 = out / "eval" / f"{k1}.jsonl", out / "eval" / f"{k2}.jsonl"
        if not (_stage(out, f"eval-{k1}") and _stage(out, f"eval-{k2}") and p1.is_file() and p2.is_file()):
            continue
        c = compare_paired(p1, p2)
        if not c["pairs"]:
            continue
        ci = c["difference_ci95"]
        lines.append(f"<li>{esc(k1)} &rarr; {esc(k2)}: on the same {c['pairs']} episodes, {c['gained']} newly "
                     f"solved and {c['lost']} newly failed (success {c['before']} &rarr; {c['after']}); "
                     f"difference {c['difference']:+.3f} (95% CI {ci[0]:+.3f} to {ci[1]:+.3f}), "
                     f"exact McNemar p = {c['p_value']:.3g}</li>")
    if not lines:
        return ""
    caveat = (" Several samples of one page are not independent, so for sampled evaluations this p is only "
              "indicative." if kind == "-sampled" else "")
    return ("<h3>What each stage changed</h3><p>Paired on the same held-out episodes (task and page seed); "
            "p is the chance of a split at least this uneven between newly solved and newly failed episodes "
            f"if the stage made no difference.{caveat}</p><ul>{''.join(lines)}</ul>")


def _run_config(out: Path) -> dict[str, Any]:
    """Scale, model, suite and seed of the run in `out`, read as a resumed run reads its
    config (older layouts included); "?" for what cannot be read."""
    from .config import ConfigError
    from .pipeline import saved_config

    try:
        cfg = saved_config(out)
    except (ValueError, ConfigError):
        return dict.fromkeys(("scale", "model", "suite", "seed"), "?")
    return {"scale": cfg.scale, "model": cfg.policy.model, "suite": cfg.tasks.suite, "seed": cfg.seed}


def write_report(out: str | Path, path: str | Path | None = None) -> Path:
    """Write <out>/report.html (or `path`) from the pipeline run in `out`; returns its path."""
    from .viz.page import esc

    out = Path(out)
    cfg = _run_config(out)
    rows = success_table(out)
    more = "".join(f"<h2>{esc(heading)}</h2>" + _table(extra) + _changes(out, kind) + _per_task(extra)
                   for kind, heading in EVALUATIONS[1:] if (extra := success_table(out, kind)))
    curves, missing_curves = _curves(out)
    replays, missing_replays = _replays(out)
    missing = [f"{label}: not evaluated yet" for key, label in STAGES if not any(r["stage"] == key for r in rows)]
    missing += missing_curves + missing_replays
    timing = []
    done = sorted((out / "stages").glob("*.json"), key=lambda p: p.stat().st_mtime) if (out / "stages").is_dir() else []
    for name in (p.stem for p in done):
        st = _stage(out, name)
        if st is not None:
            secs = st.get("seconds", st.get("metrics", {}).get("seconds"))
            if secs is not None:
                timing.append(f"<li>{esc(name)}: {float(secs) / 60:.1f} min</li>")
    demos = _stage(out, "demos") or {}
    intro = (f"<p>Scale <b>{esc(cfg['scale'])}</b>, model <b>{esc(cfg['model'])}</b>, "
             f"suite <b>{esc(cfg['suite'])}</b>, seed {esc(cfg['seed'])}. "
             f"Expert demonstrations: {demos.get('successful', '–')} successful of {demos.get('episodes', '–')}. "
             "Held-out episodes are greedy (temperature 0) on page seeds never used for demonstrations or RL.</p>")
    notes = "".join(f"<li>{esc(m)}</li>" for m in missing)
    body = (
        "<h1>webr1_kit: WebAgent-R1 recipe report</h1>" + intro
        + f"<h2>{esc(EVALUATIONS[0][1])}</h2>" + (_table(rows) if rows else "<p>No stage evaluated yet.</p>")
        + _changes(out)
        + _per_task(rows)
        + more
        + "<h2>Training curves</h2>" + (curves or "<p>No training has run yet.</p>")
        + "<h2>Replays</h2>" + (replays or "<p>No episodes to replay.</p>")
        + (f"<h2>Time per stage</h2><ul>{''.join(timing)}</ul>" if timing else "")
        + (f"<h2>Missing</h2><ul>{notes}</ul>" if notes else "")
    )
    style = ("table.w1-report{border-collapse:collapse;margin:8px 0}table.w1-report td,table.w1-report th"
             "{border:1px solid #ccc;padding:4px 10px;text-align:left}body{font-family:sans-serif;max-width:1200px}")
    from .viz.page import CSS

    target = Path(path) if path is not None else out / "report.html"
    target.write_text(f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>webr1 report</title>"
                      f"<style>{CSS}\n{style}</style></head><body>{body}</body></html>\n", encoding="utf-8")
    return target
