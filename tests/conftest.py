"""Shared fixtures: one real headless Chromium and one local HTTP server per test session
(per worker under `pytest -n`), and the sweeps' sample.

Async tests run on one session-wide event loop (see pyproject.toml), because
Playwright objects belong to the loop that created them.

Sweeps (tests marked `sweep`) check a property over many pages or seeds. `make test` runs a
sample of each, which rotates with the commit so that over successive commits every item is
run; `make verify` (`pytest -m sweep --verify`) runs them in full and records the result in
bench/results/verify.json.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence, TypeVar

import pytest
import pytest_asyncio

from webr1_kit.browser import Browser
from webr1_kit.tasks.miniwob import StaticServer

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent
VERIFY_RECORD = ROOT / "bench" / "results" / "verify.json"

T = TypeVar("T")
_SWEEP = pytest.StashKey["Sweep"]()  # this run's sample of the sweeps
_RECORD = pytest.StashKey[list]()  # under --verify: the sweep tests' outcomes
_START = pytest.StashKey[float]()  # when the session started
_CONFIG: list[pytest.Config] = []  # the running session's config, for the report hook


# ---------------------------------------------------------------- sweeps: a rotating sample, or all


def _commit() -> str:
    """The checkout's commit (empty outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


@dataclass(frozen=True)
class Sweep:
    """Which items of a sweep this run checks.

    full: every item (`--verify`). Otherwise `sample(items, every)` keeps one item in
    `every`, starting at `turn % every`; `turn` comes from the commit (or
    $WEBR1_SWEEP_TURN), so consecutive commits check other items and a failing sample is
    reproduced by setting the turn the run printed in its header."""

    full: bool
    turn: int
    commit: str

    def sample(self, items: Sequence[T], every: int) -> list[T]:
        items = list(items)
        return items if self.full else items[self.turn % every::every]


def _sweep(config: pytest.Config) -> Sweep:
    commit = _commit()
    turn = os.environ.get("WEBR1_SWEEP_TURN")
    if turn is not None and not turn.isdigit():
        raise pytest.UsageError(f"WEBR1_SWEEP_TURN must be a non-negative integer, got {turn!r}")
    return Sweep(full=bool(config.getoption("--verify")), commit=commit,
                 turn=int(turn) if turn is not None else int(commit[:8] or "0", 16))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--verify", action="store_true", default=False,
                     help="run the sweeps (tests marked sweep) over every item instead of the rotating sample "
                          "`make test` runs; `make verify` runs `-m sweep --verify` and records "
                          "bench/results/verify.json")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SWEEP] = _sweep(config)
    config.stash[_RECORD] = []
    _CONFIG.append(config)


def pytest_report_header(config: pytest.Config) -> str:
    s = config.stash[_SWEEP]
    if s.full:
        return "sweeps: in full (--verify)"
    return (f"sweeps: a sample, turn {s.turn} (commit {s.commit[:12] or 'unknown'}); "
            f"WEBR1_SWEEP_TURN={s.turn} repeats it, --verify runs every item")


@pytest.fixture(scope="session")
def sweep(pytestconfig: pytest.Config) -> Sweep:
    """The run's `Sweep`: the sample of a sweep's items to check, or all of them."""
    return pytestconfig.stash[_SWEEP]


# ---------------------------------------------------------------- two workers (`make test`: pytest -n 2)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `pytest -n` (xdist, --dist loadgroup): the tests of a module that share a
    module-scoped fixture (a smoke run, a vLLM server, recorded episodes) go to one worker,
    which builds it once; other tests go wherever a worker is free, the slow ones first, so
    that no long test starts last."""
    if not getattr(config.option, "numprocesses", None):
        return
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if item.get_closest_marker("xdist_group") is None and any(
                d.scope == "module" for fds in defs.values() for d in fds):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the order within stays


# ---------------------------------------------------------------- the verify record


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Under --verify, keep each sweep test's outcome, time and recorded figures
    (`record_property`); under `-n` this runs in the controller, with every worker's reports."""
    config = _CONFIG[-1] if _CONFIG else None
    if config is None or not config.getoption("--verify"):
        return
    if report.when == "call" or report.outcome != "passed":
        config.stash[_RECORD].append({"test": report.nodeid, "phase": report.when, "outcome": report.outcome,
                                      "seconds": round(report.duration, 1), **dict(report.user_properties)})


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under --verify (and not on an xdist worker), write bench/results/verify.json: the
    command, date, commit, machine and every sweep test's outcome, time and figures."""
    config = session.config
    if not config.getoption("--verify") or hasattr(config, "workerinput"):
        return
    rows = config.stash[_RECORD]
    failed = [r["test"] for r in rows if r["outcome"] == "failed"]
    record = {
        "command": "make verify  (" + " ".join(["pytest", *sys.argv[1:]]) + ")",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": config.stash[_SWEEP].commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "exit_status": int(exitstatus),
        "tests": len([r for r in rows if r["phase"] == "call"]),
        "failed": failed,
        "minutes": round((time.time() - config.stash[_START]) / 60, 1),
        "results": rows,
    }
    VERIFY_RECORD.parent.mkdir(parents=True, exist_ok=True)
    VERIFY_RECORD.write_text(json.dumps(record, indent=1) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_START] = time.time()


# ---------------------------------------------------------------- browser and pages


@pytest.fixture(scope="session")
def fixture_server():
    """tests/fixtures/ served on 127.0.0.1 (free port)."""
    server = StaticServer(FIXTURES)
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="session")
async def browser():
    """One Chromium for the whole session; each environment gets its own context."""
    b = Browser()
    await b.start()
    yield b
    await b.close()
