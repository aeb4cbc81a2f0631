"""webr1_kit: train small open LLMs into web agents with end-to-end multi-turn RL (WebAgent-R1).

    import webr1_kit as wk
    tasks = wk.load_tasks("miniwob", names=["click-button"])
    result = await wk.run_episodes(wk.MiniWoBExpert(), tasks, episodes=16, concurrency=16)
    result.metrics["success_rate"]

Importing the package is light: torch and playwright load only when a name that
needs them is first used (attributes below are resolved lazily).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "EnvConfig": "config",
    "ConfigError": "config",
    "run": "aio",
    "Browser": "browser",
    "BrowserEnv": "browser",
    "InfraError": "errors",
    "Observation": "observation",
    "Action": "actions",
    "ActionError": "actions",
    "parse_action": "actions",
    "action_docs": "actions",
    "Task": "tasks",
    "Verdict": "tasks",
    "load_tasks": "tasks",
    "select_tasks": "tasks",
    "Turn": "trajectory",
    "Trajectory": "trajectory",
    "run_episode": "rollout",
    "run_episodes": "rollout",
    "MiniWoBExpert": "experts",
    "Expert": "experts",
    "RandomPolicy": "baselines",
    "LoRA": "config",
    "PolicyConfig": "config",
    "PromptConfig": "config",
    "SamplingConfig": "config",
    "SFTConfig": "config",
    "GRPOConfig": "config",
    "load_policy": "policy",
    "LLMPolicy": "policy",
    "TrajectoryGroup": "trajectory",
    "train_sft": "sft",
    "train_grpo": "grpo",
    "show": "viz",
    "show_group": "viz",
    "show_tokens": "viz",
    "plot_run": "viz",
    "plot_runs": "viz",
    "plot_success": "viz",
    "LiveDashboard": "viz",
    "Pipeline": "pipeline",
    "PipelineConfig": "pipeline",
    "scale_config": "pipeline",
    "run_pipeline": "pipeline",
    "write_report": "report",
    "results_table": "report",
    "compare_paired": "stats",
    "check_tasks": "conformance",
    "evaluate_policy": "grpo",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'webr1_kit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
