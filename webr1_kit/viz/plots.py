"""Training dashboards with matplotlib: curves of one run, comparisons of runs, and
success per site and per template.

Curves are read from a run's metrics.jsonl (the rows `train_grpo` and `train_sft`
log) and plotted against step. Every panel is drawn from whichever keys the rows
have; panels with no data are skipped and named in a note under the figure. Every
function returns the matplotlib Figure (it shows itself in a notebook) and can save
a PNG.

matplotlib is imported only when a plot is drawn. Outside a notebook the figures
are drawn on the Agg canvas, so scripts and servers need no display.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

Rows = list[dict[str, Any]]

PANELS: list[tuple[str, list[tuple[str, str, str]]]] = [
    ("success rate", [("train", "first_draw_success", "first draw"), ("train", "success_rate", "trained groups"),
                      ("eval", "success_rate", "held-out")]),
    ("reward", [("train", "reward_mean", "mean reward"), ("train", "equal_reward_frac", "equal-reward groups")]),
    ("KL to the reference", [("train", "kl", "KL (k3)")]),
    ("entropy", [("train", "entropy", "entropy")]),
    ("response length", [("train", "response_tokens", "tokens per turn")]),
    ("turns per episode", [("train", "turns", "train"), ("eval", "turns", "held-out")]),
    ("invalid-action rate", [("train", "invalid_action_rate", "train"), ("eval", "invalid_action_rate", "held-out")]),
    ("loss", [("train", "loss", "M-GRPO"), ("sft", "loss", "SFT")]),
]
"""(panel title, [(phase, metrics key, line label)]): what `plot_run` draws. Rows
without a "phase" count as "train"."""


# ---------------------------------------------------------------- reading metrics


def read_metrics(source: Any) -> Rows:
    """Metrics rows from a run directory, a metrics.jsonl file, a GRPORun, or rows.
    A run whose file does not exist yet has no rows; a line cut off mid-write is skipped."""
    from ..grpo import GRPORun

    if isinstance(source, GRPORun):
        return list(source.metrics)
    if isinstance(source, (str, Path)):
        p = Path(source)
        if p.is_dir() or not p.suffix:
            p = p / "metrics.jsonl"
        if not p.is_file():
            if not p.parent.exists():
                raise FileNotFoundError(f"{p.parent} does not exist")
            return []
        rows = []
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows
    if isinstance(source, Sequence):
        return [dict(r) for r in source]
    raise TypeError(f"cannot read metrics from a {type(source).__name__}: pass a run directory, a metrics.jsonl "
                    "file, a GRPORun or a list of rows")


def series(rows: Rows, phase: str, key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of `key` in the rows of `phase`, skipping rows without a number there."""
    xs, ys = [], []
    for k, r in enumerate(rows):
        v = r.get(key)
        if r.get("phase", "train") != phase or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if isinstance(v, float) and math.isnan(v):
            continue
        xs.append(r.get("step", k))
        ys.append(float(v))
    return xs, ys


# ---------------------------------------------------------------- figures


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def new_figure(width: float, height: float) -> Any:
    """A Figure: from pyplot in a notebook (so it shows inline, closed so it shows once),
    else on the Agg canvas without touching the global backend."""
    if _in_notebook():
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(width, height))
        plt.close(fig)
        return fig
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _grid(fig: Any, n: int, cols: int = 3) -> list[Any]:
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    return [fig.add_subplot(rows, cols, k + 1) for k in range(n)]


def _note(fig: Any, text: str) -> None:
    fig.text(0.01, 0.005, text, fontsize=8, color="#57606a", ha="left", va="bottom", wrap=True)


def _finish(fig: Any, save: str | Path | None) -> Any:
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    if save is not None:
        Path(save).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(save, dpi=100)
    return fig


def plot_run(source: Any, panels: Sequence[str] | None = None, save: str | Path | None = None,
             title: str | None = None, live: bool = False, every: float = 10.0,
             timeout: float | None = None) -> Any:
    """Curves of one run against step: success (train and held-out, with the 95% interval
    when logged), reward and the share of equal-reward groups, KL, entropy, response
    length, turns per episode, invalid-action rate and loss; see PANELS.

    source: a run directory, its metrics.jsonl, a GRPORun, or a list of metrics rows.
    panels: titles of the panels to draw (default: all that have data).
    live: keep re-drawing every `every` seconds until interrupted (the notebook's stop
        button) or `timeout`; for a run in another process (`webr1 rl`). For a run in
        this notebook's own event loop, use `LiveDashboard(...).start()` instead.
    Returns the matplotlib Figure; `save` also writes it as a PNG.
    """
    if live:
        return LiveDashboard(source, every=every, save=save, panels=panels, title=title).run(timeout)
    rows = read_metrics(source)
    wanted = [p for p in PANELS if panels is None or p[0] in panels]
    if panels is not None:
        unknown = set(panels) - {p[0] for p in PANELS}
        if unknown:
            raise ValueError(f"unknown panel(s) {sorted(unknown)}; panels: {[p[0] for p in PANELS]}")
    drawn = [(name, lines) for name, lines in wanted if any(series(rows, ph, k)[0] for ph, k, _ in lines)]
    skipped = [name for name, _ in wanted if name not in {d[0] for d in drawn}]
    fig = new_figure(4.2 * min(3, max(1, len(drawn))), 3.0 * math.ceil(max(1, len(drawn)) / 3) + 0.5)
    if not drawn:
        fig.text(0.5, 0.5, "no metrics yet" if not rows else "none of the plotted metrics are in these rows",
                 ha="center", va="center")
    for ax, (name, lines) in zip(_grid(fig, len(drawn)), drawn):
        for phase, key, label in lines:
            xs, ys = series(rows, phase, key)
            if not xs:
                continue
            style = "--" if phase == "eval" else "-"
            ax.plot(xs, ys, style, marker="o" if len(xs) < 30 else None, markersize=3, label=label)
            if phase == "eval" and key == "success_rate":
                band = [(r.get("step", 0), r["success_ci95"]) for r in rows
                        if r.get("phase") == "eval" and isinstance(r.get("success_ci95"), (list, tuple))]
                if band:
                    ax.fill_between([b[0] for b in band], [b[1][0] for b in band], [b[1][1] for b in band],
                                    alpha=0.15, color=ax.lines[-1].get_color())
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if len(ax.lines) > 1:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    if skipped:
        _note(fig, f"not in the metrics, skipped: {', '.join(skipped)}")
    return _finish(fig, save)


def plot_runs(runs: Mapping[str, Any], panels: Sequence[str] | None = None, save: str | Path | None = None,
              title: str | None = None) -> Any:
    """Compare runs (ablations): one panel per metric, one colour per run (train solid,
    held-out dashed). runs: {name: run directory, metrics file, GRPORun or rows}."""
    data = {name: read_metrics(src) for name, src in runs.items()}
    wanted = [p for p in PANELS if panels is None or p[0] in panels]
    drawn = [(n, ls) for n, ls in wanted if any(series(r, ph, k)[0] for r in data.values() for ph, k, _ in ls)]
    skipped = [n for n, _ in wanted if n not in {d[0] for d in drawn}]
    fig = new_figure(4.2 * min(3, max(1, len(drawn))), 3.0 * math.ceil(max(1, len(drawn)) / 3) + 0.5)
    if not drawn:
        fig.text(0.5, 0.5, "no metrics in these runs", ha="center", va="center")
    colours = {name: f"C{k % 10}" for k, name in enumerate(data)}
    for ax, (panel, lines) in zip(_grid(fig, len(drawn)), drawn):
        for name, rows in data.items():
            for k, (phase, key, label) in enumerate(lines):
                xs, ys = series(rows, phase, key)
                if xs:
                    suffix = f" ({label})" if len(lines) > 1 else ""
                    style = "--" if phase == "eval" else ("-", ":", "-.")[k % 3]
                    ax.plot(xs, ys, style, color=colours[name], label=name + suffix,
                            marker="o" if len(xs) < 30 else None, markersize=3)  # a one-step run still shows
        ax.set_title(panel, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    empty = [name for name, rows in data.items() if not rows]
    note = []
    if skipped:
        note.append(f"not in any run's metrics, skipped: {', '.join(skipped)}")
    if empty:
        note.append(f"no metrics yet: {', '.join(empty)}")
    if note:
        _note(fig, "; ".join(note))
    return _finish(fig, save)


def _success_tables(source: Any) -> dict[str, Any]:
    """The metrics dict holding per_site / per_template, from whatever `plot_success` gets."""
    from ..rollout import EvalResult

    if isinstance(source, EvalResult):
        return source.metrics
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, (str, Path)) and Path(source).is_dir() and (Path(source) / "metrics.json").is_file():
        return json.loads((Path(source) / "metrics.json").read_text())  # a `webr1 eval --out` folder
    if isinstance(source, (str, Path)) and str(source).endswith(".json"):
        return json.loads(Path(source).read_text())
    rows = read_metrics(source)  # a training run: its latest row with per-site results (an evaluation)
    with_sites = [r for r in rows if r.get("per_site") or r.get("per_template")]
    return with_sites[-1] if with_sites else {}


def plot_success(source: Any, save: str | Path | None = None, title: str | None = None) -> Any:
    """Success rate per site and per template, as bar charts.

    source: an EvalResult (run_episodes), its metrics dict, a `webr1 eval --out` folder or
    its metrics.json, or a training run (its latest evaluation row). Raises ValueError
    when none of these holds per-site or per-template results."""
    m = _success_tables(source)
    tables = [(name, m.get(key)) for name, key in (("per site", "per_site"), ("per template", "per_template"))]
    drawn = [(n, t) for n, t in tables if isinstance(t, Mapping) and t]
    if not drawn:
        raise ValueError("no per_site or per_template results to plot (rollout results or an evaluation row have them)")
    heights = [max(1.6, 0.28 * len(t) + 0.9) for _, t in drawn]
    fig = new_figure(7.0, sum(heights) + 0.5)
    grid = fig.add_gridspec(len(drawn), 1, height_ratios=heights)
    for k, (name, table) in enumerate(drawn):
        ax = fig.add_subplot(grid[k])
        names = list(table)[::-1]
        rates = [float(table[n] or 0.0) for n in names]
        bars = ax.barh(range(len(names)), rates, color="C0")
        ax.set_yticks(range(len(names)), [str(n) for n in names], fontsize=8)
        ax.set_xlim(0, 1.12)
        ax.set_title(f"success {name}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        for bar, r in zip(bars, rates):
            ax.text(bar.get_width() + 0.01, bar.get_y() + bar.get_height() / 2, f"{r:.2f}", va="center", fontsize=7)
    overall = m.get("success_rate")
    if title is None and isinstance(overall, (int, float)):
        where = f" ({m['phase']} at step {m['step']})" if "phase" in m and "step" in m else ""
        title = f"success rate {overall:.3f}{where}"
    if title:
        fig.suptitle(title, fontsize=11)
    missing = [n for n, t in tables if not (isinstance(t, Mapping) and t)]
    if missing:
        _note(fig, f"not in the results, skipped: {', '.join(missing)}")
    return _finish(fig, save)


# ---------------------------------------------------------------- live refresh


def figure_png(fig: Any, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


class LiveDashboard:
    """`plot_run` re-drawn every `every` seconds into one notebook output while a run trains.

        dash = wk.LiveDashboard("runs/rl", every=15)
        dash.start()                                        # a task on the notebook's event loop
        run = await wk.train_grpo(policy, tasks, cfg, out="runs/rl")
        dash.stop()                                         # one last refresh

    The output is updated in place through an IPython display handle (no ipywidgets), so
    it keeps refreshing while a later cell awaits the training. Outside a notebook each
    refresh only writes `save` (a PNG path), if given.
    """

    def __init__(self, source: Any, every: float = 10.0, save: str | Path | None = None, **plot_args: Any):
        self.source, self.every, self.save, self.plot_args = source, every, save, plot_args
        self.refreshes = 0
        self._handle: Any = None
        self._task: asyncio.Task | None = None

    def refresh(self) -> Any:
        """Re-read the metrics, re-draw, update the output; returns the Figure."""
        try:
            fig = plot_run(self.source, save=self.save, **self.plot_args)
        except FileNotFoundError:  # started before the run made its directory
            fig = plot_run([], save=self.save, **{**self.plot_args, "title": f"waiting for {self.source}"})
        if _in_notebook():
            from IPython.display import Image, display

            image = Image(figure_png(fig))
            if self._handle is None:
                self._handle = display(image, display_id=True)
            else:
                self._handle.update(image)
        self.refreshes += 1
        return fig

    def run(self, timeout: float | None = None) -> Any:
        """Refresh until interrupted or `timeout` seconds pass (blocks); returns the last Figure."""
        end = None if timeout is None else time.monotonic() + timeout
        fig = self.refresh()
        try:
            while end is None or time.monotonic() + self.every <= end:
                time.sleep(self.every)
                fig = self.refresh()
        except KeyboardInterrupt:
            pass
        return fig

    def start(self) -> None:
        """Draw now, then refresh in the background on the running event loop (a notebook
        cell has one). The first draw happens here, in the calling cell, so the output
        lives in that cell; later draws update it in place through its display id."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("LiveDashboard.start() needs a running event loop (a notebook cell, or inside a "
                               "coroutine); elsewhere call .run() or plot_run(..., live=True)") from None
        self.stop(final=False)
        self.refresh()

        async def loop_() -> None:
            while True:
                await asyncio.sleep(self.every)
                try:
                    self.refresh()
                except Exception as exc:  # a bad refresh must not end the dashboard silently
                    warnings.warn(f"LiveDashboard: refresh failed: {exc!r}", stacklevel=1)

        self._task = loop.create_task(loop_())

    def stop(self, final: bool = True) -> None:
        """Stop the background refresh; with `final`, draw once more."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if final:
            self.refresh()
