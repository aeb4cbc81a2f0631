"""CPU seconds used by a process tree (Linux /proc), shared by bench_env.py and _browsergym_side.py.

Wall-clock throughput on a shared 2-core machine moves with whatever else runs there;
the CPU time a side's own processes (Python, Playwright driver, Chromium) spend per
episode does much less. `tree_cpu_seconds(pid)` sums user+system time of `pid` and all
its live descendants, plus the time of descendants already reaped (the cutime/cstime
of their parents), so the difference between two readings covers browsers that were
started and closed in between. Returns None where /proc is unavailable.

Chromium's helper processes (renderers, zygotes) are often orphaned when a browser is
closed; they would be re-parented to init and their CPU time lost. `become_subreaper()`
makes the calling process adopt such orphans instead (prctl PR_SET_CHILD_SUBREAPER, no
privileges needed); an exited orphan stays a zombie, which keeps its CPU time in /proc,
until `reap_orphans()` collects it into this process's cutime/cstime.
"""

from __future__ import annotations

import ctypes
import os

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux); returns False where that is not possible."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(keep: set[int] = frozenset()) -> int:
    """Collect exited children of this process that are zombies (except pids in `keep`)."""
    me, reaped = os.getpid(), 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if not name.isdigit() or int(name) in keep:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) == me:
            try:
                os.waitpid(int(name), os.WNOHANG)
                reaped += 1
            except ChildProcessError:
                pass
    return reaped


def tree_cpu_seconds(root: int | None = None) -> float | None:
    root = os.getpid() if root is None else root
    try:
        tick = os.sysconf("SC_CLK_TCK")
        names = os.listdir("/proc")
    except (OSError, ValueError, AttributeError):
        return None
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        pid, ppid = int(name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        times[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    if root not in times:
        return None
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += times.get(pid, 0)
        stack.extend(children.get(pid, ()))
    return total / tick


def system_busy_seconds() -> float | None:
    """CPU seconds all cores of the machine have spent busy since boot (/proc/stat, idle and iowait excluded)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # user..steal, minus idle and iowait
    except (OSError, ValueError, IndexError):
        return None


def others_share(wall_s: float, own_cpu_s: float | None, busy0: float | None, busy1: float | None) -> float | None:
    """Fraction of the machine's CPU capacity used by processes outside the measured tree during a window."""
    if None in (own_cpu_s, busy0, busy1) or wall_s <= 0:
        return None
    return max(0.0, (busy1 - busy0 - own_cpu_s) / (wall_s * (os.cpu_count() or 1)))
