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
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence, TypeVar

import pytest
import pytest_asyncio

# Under `pytest -n N` on N cores, each worker gets one math thread (torch reads
# OMP_NUM_THREADS when it loads; the processes a test starts inherit it). With torch's
# default of one thread per core, two workers put four spinning threads on two cores: a
# model-bound test beside another slowed down several-fold (past its timeout beside a vLLM
# server), and the suite spent more CPU time for the same work. Serial runs keep torch's default.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from webr1_kit.browser import Browser
from webr1_kit.tasks.miniwob import StaticServer

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent
VERIFY_RECORD = ROOT / "bench" / "results" / "verify.json"

T = TypeVar("T")
_SWEEP = pytest.StashKey["Sweep"]()  # this run's sample of the sweeps


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
    parser.addoption("--write-durations", action="store_true", default=False,
                     help="after a serial run (-p no:xdist), write each test's seconds (set-up, call and "
                          "tear-down) to tests/durations.json, which orders the tests under -n")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SWEEP] = _sweep(config)
    if (config.getoption("--verify") or config.getoption("--write-durations")) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Recorder(config), "webr1-recorder")
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        # the controller of `pytest -n`: where its workers write the groups they collect
        os.environ[GROUPS_ENV] = str(Path(tempfile.mkdtemp(prefix="webr1-test-groups-")) / "groups.json")


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


DURATIONS = Path(__file__).parent / "durations.json"  # seconds per test, for ordering only


# xdist's own `--dist loadgroup` cannot group under pytest 9 (it renames the test ids, which
# pytest 9 no longer allows), so the kit schedules groups itself: each worker writes the
# groups it collected to a file the controller named, and the controller's scheduler reads
# them. Tests with no group are scheduled one by one.
GROUPS_ENV = "WEBR1_TEST_GROUPS"


def _group(item: pytest.Item) -> str:
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else item.nodeid


def _on_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput") and bool(os.environ.get(GROUPS_ENV))


def pytest_itemcollected(item: pytest.Item) -> None:
    """On a worker, the tests of a module that share a module-scoped fixture (a smoke run, a
    vLLM server, recorded episodes) become one group, which one worker runs, building the
    fixture once; tests may also name a group (`pytest.mark.xdist_group`)."""
    if not _on_worker(item.config):
        return
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if item.get_closest_marker("xdist_group") is None and any(
            d.scope == "module" for fds in defs.values() for d in fds):
        item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker, groups are ordered longest first, so that no long test starts last while
    the other worker idles: tests/durations.json holds each test's seconds in a serial run
    (`pytest -p no:xdist --write-durations` rewrites it); a test it does not know counts 30 s
    if marked slow, else 1 s. Within a group the order stays. Then the groups go to the
    controller's scheduler (GROUPS_ENV)."""
    if not _on_worker(config):
        return
    known = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    cost: dict[str, float] = {}
    for item in items:
        guess = 30.0 if item.get_closest_marker("slow") else 1.0
        cost[_group(item)] = cost.get(_group(item), 0.0) + known.get(item.nodeid, guess)
    items.sort(key=lambda item: -cost[_group(item)])  # stable: the order within a group stays
    path = Path(os.environ[GROUPS_ENV])
    part = path.with_name(f"{path.name}.{config.workerinput['workerid']}")
    part.write_text(json.dumps({item.nodeid: _group(item) for item in items if _group(item) != item.nodeid}))
    os.replace(part, path)  # whole, whichever worker writes last (they collect the same tests)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under `--dist loadgroup`: whole groups to one worker each, in the workers' order."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once the workers have collected
                path = Path(os.environ[GROUPS_ENV])
                self.groups = json.loads(path.read_text()) if path.is_file() else {}
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False  # keep the longest-first order
    return GroupScheduling(config, log)


# ---------------------------------------------------------------- the verify record, test durations


class Recorder:
    """In the process that reports (serial pytest, or the controller under `-n`, which gets
    every worker's reports): under --verify, each sweep test's outcome, time and recorded
    figures (`record_property`), written to bench/results/verify.json with the command,
    date, commit and machine; under --write-durations, each test's seconds, written to
    tests/durations.json."""

    def __init__(self, config: pytest.Config) -> None:
        self.config, self.start = config, time.time()
        self.rows: list[dict] = []
        self.times: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.times[report.nodeid] = self.times.get(report.nodeid, 0.0) + report.duration
        if report.when == "call" or report.outcome != "passed":
            self.rows.append({"test": report.nodeid, "phase": report.when, "outcome": report.outcome,
                              "seconds": round(report.duration, 1), **dict(report.user_properties)})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.config.getoption("--write-durations"):
            times = {k: round(v, 1) for k, v in sorted(self.times.items()) if v >= 0.5}
            DURATIONS.write_text(json.dumps(times, indent=0) + "\n")
        if not self.config.getoption("--verify"):
            return
        record = {
            "command": "make verify  (" + " ".join(["pytest", *sys.argv[1:]]) + ")",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": self.config.stash[_SWEEP].commit,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "exit_status": int(exitstatus),
            "tests": sum(r["phase"] == "call" for r in self.rows),
            "failed": [r["test"] for r in self.rows if r["outcome"] == "failed"],
            "minutes": round((time.time() - self.start) / 60, 1),
            "results": self.rows,
        }
        VERIFY_RECORD.parent.mkdir(parents=True, exist_ok=True)
        VERIFY_RECORD.write_text(json.dumps(record, indent=1) + "\n")


# ---------------------------------------------------------------- browser and pages


@pytest.fixture(scope="session")
def fixture_server():
    """tests/fixtures/ served on 127.0.0.1 (free port)."""
    server = StaticServer(FIXTURES)
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="session")
async def chromium():
    """One Chromium for the whole session (per worker). Tests take it as `browser`; a
    module-scoped fixture takes it as is."""
    b = Browser()
    await b.start()
    yield b
    await b.close()


@pytest_asyncio.fixture
async def browser(chromium):
    """The session's Chromium; each environment gets its own context. The tabs that runs
    leave for later runs (`Browser.park`) are closed before and after each test, so that
    no test starts in another's tab or counts its contexts."""
    await chromium.close_idle()
    yield chromium
    await chromium.close_idle()

