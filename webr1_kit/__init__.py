"""webr1_kit: train small open LLMs into web agents with end-to-end multi-turn RL (WebAgent-R1).

    import webr1_kit as wk
    tasks = wk.load_tasks("miniwob", names=["click-button"])
    result = await wk.run_episodes(wk.Expert(), tasks, episodes=16, concurrency=16)
    result.metrics["success_rate"]

Importing the package is light: torch and playwright load only when a name that
needs them is first used (attributes below are resolved lazily).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it: what a notebook or a short script needs, by task.
# Everything else is imported from its module (e.g. `from webr1_kit.trajectory import
# Trajectory`); docs/ARCHITECTURE.md maps the modules.
_EXPORTS = {
    # tasks and the browser environment
    "load_tasks": "tasks",
    "check_tasks": "conformance",
    "EnvConfig": "config",
    "Browser": "browser",
    "BrowserEnv": "browser",
    "InfraError": "errors",
    "parse_action": "actions",
    "action_docs": "actions",
    # playing episodes
    "run": "aio",
    "run_episodes": "rollout",
    "Expert": "experts",
    # models and training
    "load_policy": "policy",
    "SamplingConfig": "config",
    "SFTConfig": "config",
    "GRPOConfig": "config",
    "train_sft": "sft",
    "train_grpo": "grpo",
    # the whole recipe
    "Pipeline": "pipeline",
    "scale_config": "pipeline",
    # looking at results
    "show": "viz",
    "show_group": "viz",
    "show_tokens": "viz",
    "plot_run": "viz",
    "plot_runs": "viz",
    "plot_success": "viz",
    "LiveDashboard": "viz",
    "results_table": "report",
    "compare_paired": "stats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # A module of the package (`wk.viz.save_gif`, `wk.trajectory.read_jsonl`), imported on first use.
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'webr1_kit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
