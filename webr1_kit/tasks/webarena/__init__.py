"""Real WebArena and WebArena-Lite, on the user's own WebArena Docker sites.

    from webr1_kit.tasks import webarena
    cfg = webarena.load_config("webarena.yaml")        # or SHOPPING=... REDDIT=... in the environment
    test = webarena.tasks("webarena-lite", split="test", config=cfg)
    result = await wk.run_episodes(policy, test, concurrency=4)
    webarena.paper_table(result.trajectories)          # Reddit / GitLab / CMS / Map / OSS / Avg

The kit does not ship WebArena's sites; the user points it at them (config.py says how).
The task files are WebArena's and WebArena-Lite's released ones, read from the packages that
publish them (`webr1 install-webarena`) unless the user names others. Modules:

    config.py     site URLs, task files, accounts, judge: from a file and the environment
    released.py   the released task files in their PyPI packages; provenance (version, SHA-256)
    taskfiles.py  WebArena's task files and Lite's split -> Task records, placeholders filled in
    auth.py       auto-login as data, saved storage state reused in every browser context
    judge.py      fuzzy_match through an OpenAI-compatible chat endpoint (urllib)
    helpers.py    the `func:` helpers program_html checks call
    sitecheck.py  reachability, login and changed-since-reset checks (`webr1 webarena check`)
    suite.py      the Suite hooks, and results laid out like the paper's table
"""

from __future__ import annotations

from typing import Iterable

from ..task import Task
from .config import (
    ACCOUNTS,
    PLACEHOLDERS,
    SITES,
    JudgeConfig,
    WebArenaConfig,
    WebArenaConfigError,
    active_config,
    configure,
    load_config,
)
from .suite import PAPER_COLUMNS, WebArenaSuite, format_paper_table, paper_table

SUITE_NAMES = ("webarena", "webarena-lite", "webarena-verified")


def tasks(suite: str = "webarena-lite", split: str | None = None, names: Iterable[str] | None = None,
          config: WebArenaConfig | None = None, config_path: str | None = None, tasks_file: str | None = None,
          split_file: str | None = None, sites_required: bool = True, subset: str | None = None) -> list[Task]:
    """The tasks of "webarena" (all 812, no split), "webarena-lite" (split "test", the
    default, "train" or "all") or "webarena-verified" (all 812, or a `subset` such as
    "hard": 258), with the configured site URLs filled in.

    config: a loaded configuration; otherwise it is read from `config_path`, the
    environment and `tasks_file` / `split_file`; a file none of these names is the released
    one, from its installed package (`released.py`). The configuration becomes the active
    one, so the episodes of these tasks run against the same sites. Raises
    WebArenaConfigError naming whatever is missing. sites_required=False reads the tasks
    without site URLs (placeholders kept: listable, not playable).
    """
    from .taskfiles import load

    if suite not in SUITE_NAMES:
        raise ValueError(f"unknown WebArena suite {suite!r}; use one of {', '.join(SUITE_NAMES)}")
    if subset is not None and suite != "webarena-verified":
        raise ValueError(f"subset is WebArena-Verified's (e.g. subset='hard'); {suite} has none")
    if suite == "webarena-verified":
        from .verified import load as load_verified

        if split not in (None, "all"):
            raise WebArenaConfigError(f"WebArena-Verified has no {split!r} split; its subsets: --subset hard")
        config = config or load_config(config_path)  # its task file: tasks_file, else the released one
        selected = load_verified(config, subset=subset, names=names, tasks_file=tasks_file,
                                 sites_required=sites_required)
        configure(config)
        return selected
    if config is None:
        config = load_config(config_path, tasks=tasks_file, split_file=split_file)
    selected = load(config, lite=suite == "webarena-lite", split=split, names=names, sites_required=sites_required)
    configure(config)
    return selected


__all__ = [
    "ACCOUNTS", "PAPER_COLUMNS", "PLACEHOLDERS", "SITES", "SUITE_NAMES", "JudgeConfig", "WebArenaConfig",
    "WebArenaConfigError", "WebArenaSuite", "active_config", "configure", "format_paper_table", "load_config",
    "paper_table", "tasks",
]
