"""Seeing what the agent did and what the loss saw.

    wk.show(trajectory)              # inline episode replay; .save("replay.html")
    wk.show_group(group)             # the G episodes of a task, with rewards and advantages
    wk.show_tokens(traj, tokenizer)  # the packed training sequence, coloured by the loss mask
    wk.plot_run("runs/rl")           # curves from metrics.jsonl
    wk.plot_runs({"a": "runs/a", "b": "runs/b"})
    wk.plot_success(eval_result)     # success per site and per template

The views are self-contained HTML (they show in JupyterLab, Colab, a saved notebook
and a saved file without a kernel); the plots are matplotlib Figures, imported only
when drawn. `webr1 replay RUN_DIR --out replay.html` writes a replay from a terminal.
"""

from .gif import save_gif
from .page import HTML
from .plots import LiveDashboard, plot_run, plot_runs, plot_success, read_metrics
from .replay import show, show_group
from .sources import read_trajectories, trajectory_file
from .tokens import show_tokens

__all__ = ["HTML", "LiveDashboard", "plot_run", "plot_runs", "plot_success", "read_metrics", "read_trajectories",
           "save_gif", "show", "show_group", "show_tokens", "trajectory_file"]
