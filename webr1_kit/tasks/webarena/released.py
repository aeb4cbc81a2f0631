"""The released WebArena task files, found in the Python packages that ship them.

WebArena's and WebArena-Lite's task files are published on PyPI under Apache-2.0:

    libwebarena 0.0.4             webarena/test.raw.json                               812 tasks
                                  (byte-identical to WebArena's config_files/test.raw.json, and
                                  to 0.0.5's; 0.0.4 is the version browsergym-webarenalite names)
    browsergym-webarenalite 0.14.3  browsergym/webarenalite/test_webarena_lite.raw.json  165 tasks
                                  (byte-identical to VisualAgentBench's VAB-WebArena-Lite file)
    webarena-verified 1.2.3       webarena_verified/assets/dataset/webarena-verified.json  812 tasks
                                  (+ subsets/webarena-verified-hard.json: 258 of their ids)

When a user names no task file, the loader takes these. Only the files are read: the packages'
code is never imported (`importlib.metadata` finds a file from the installed distribution's
record), so they install without their dependencies (`webr1 install-webarena`, or
`pip install --no-deps`): browsergym-webarenalite's dependencies pin Playwright 1.44, which
would replace the kit's own, and webarena-verified's pin pydantic 2.12.0.

Each file found is described by a `TaskFile` (package, version, path, SHA-256), which the
loaded tasks carry in `meta["task_file"]`, so a run can record the denominator of its
success rate (`task_files`).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from .config import WebArenaConfig


@dataclass(frozen=True)
class Release:
    """Where a released task file lives in a PyPI package."""

    package: str
    """The distribution's name on PyPI."""
    file: str
    """The file's path inside the installed distribution."""
    tasks: int
    """How many tasks the released file holds."""
    pin: str
    """The version `webr1 install-webarena` installs."""


RELEASES: dict[str, Release] = {
    "webarena": Release("libwebarena", "webarena/test.raw.json", 812, "0.0.4"),
    "webarena-lite": Release("browsergym-webarenalite", "browsergym/webarenalite/test_webarena_lite.raw.json", 165,
                             "0.14.3"),
    "webarena-verified": Release("webarena-verified", "webarena_verified/assets/dataset/webarena-verified.json", 812,
                                 "1.2.3"),
}
"""The task file each suite reads when the user names none: "webarena" (WebArena's 812
tasks; also the source of WebArena-Lite's training split), "webarena-lite" (Lite's 165
test tasks, with their human-verified evaluators) and "webarena-verified" (ServiceNow's
revision of the 812, with deterministic evaluators; its subsets, e.g. the 258 "hard" tasks,
are id lists beside it: `subset_file`)."""


def subset_file(name: str) -> Path | None:
    """WebArena-Verified's subset `name` ("hard" or its full name "webarena-verified-hard"):
    the installed id-list file, or None."""
    found = find("webarena-verified")
    if found is None:
        return None
    folder = Path(found.path).parent / "subsets"
    for stem in (name, f"webarena-verified-{name}"):
        if (folder / f"{stem}.json").is_file():
            return folder / f"{stem}.json"
    return None


def subset_names() -> list[str]:
    found = find("webarena-verified")
    folder = Path(found.path).parent / "subsets" if found else None
    return sorted(p.stem.removeprefix("webarena-verified-") for p in folder.glob("*.json")) if folder else []


@dataclass(frozen=True)
class TaskFile:
    """One task file as a run used it: enough to name the denominator of a success rate."""

    path: str
    sha256: str
    package: str | None = None
    """The PyPI package it came from (None: a file the user named)."""
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def describe(self) -> str:
        source = f"{self.package} {self.version}" if self.package else "a file given explicitly"
        return f"{self.path} ({source}, sha256 {self.sha256[:12]})"


def install_command(python: str = "python", quiet: bool = False) -> list[str]:
    """The pip command that installs every released task file, without the packages' dependencies."""
    return [python, "-m", "pip", "install", *(["-q"] if quiet else []), "--no-deps",
            *(f"{r.package}=={r.pin}" for r in RELEASES.values())]


def install_hint() -> str:
    pins = " ".join(f"{r.package}=={r.pin}" for r in RELEASES.values())
    return f"`webr1 install-webarena` (pip install --no-deps {pins})"


def find(name: str) -> TaskFile | None:
    """The released file of "webarena" or "webarena-lite" in the installed packages, or None
    when its package is not installed (or is installed without the file)."""
    release = RELEASES[name]
    try:
        dist = metadata.distribution(release.package)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(release.file)))
    if not path.is_file():
        return None
    return TaskFile(path=str(path), sha256=sha256(path), package=release.package, version=dist.version)


def describe_file(path: str | Path) -> TaskFile:
    """A task file (or folder of N.json files) the user named: its path and SHA-256 (of the
    files' names and contents, in order, for a folder)."""
    p = Path(path).expanduser()
    for name, release in RELEASES.items():  # the released file, given by its path
        found = find(name)
        if found and p.is_file() and Path(found.path).resolve() == p.resolve():
            return found
    return TaskFile(path=str(p), sha256=sha256(p))


def sha256(path: Path) -> str:
    return _sha256(str(path), path.stat().st_mtime_ns if path.exists() else 0)


@lru_cache(maxsize=32)
def _sha256(path: str, _mtime: int) -> str:
    h = hashlib.sha256()
    p = Path(path)
    files = sorted(p.glob("*.json")) if p.is_dir() else [p]
    for f in files:
        if p.is_dir():
            h.update(f.name.encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def with_released(config: WebArenaConfig, lite: bool) -> WebArenaConfig:
    """`config` with the released files filled in where the user named none: WebArena's
    file as `tasks`, and for WebArena-Lite its test file as `split_file`."""
    from dataclasses import replace

    changes: dict[str, str] = {}
    if not config.tasks and (found := find("webarena")):
        changes["tasks"] = found.path
    if lite and not config.split_file and (found := find("webarena-lite")):
        changes["split_file"] = found.path
    return replace(config, **changes) if changes else config


def task_files(tasks: Iterable[Any]) -> list[dict[str, Any]]:
    """The task files a list of tasks came from (each once, in order of first use), as
    `TaskFile.to_dict()` records; [] for tasks that carry none (MiniWoB++, the arena)."""
    seen: dict[str, dict[str, Any]] = {}
    for t in tasks:
        for f in (getattr(t, "meta", None) or {}).get("task_files", ()):
            seen.setdefault(f["sha256"] + f["path"], f)
    return list(seen.values())
