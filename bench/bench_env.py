"""Environment throughput: the kit vs BrowserGym on MiniWoB++ click-button, side by side.

    .venv/bin/python bench/bench_env.py [--episodes N]        (or: make bench)

Both sides play MiniWoB++ click-button with a scripted policy that clicks the button
named in the instruction, through each side's own observation and action space, on
the same system Chromium, serially and at concurrency 8, in one run:

- the kit: `webr1_kit.rollout.run_episodes(MiniWoBExpert(), ...)`, async Playwright,
  one Chromium shared by `concurrency` environments (one browser context each);
- BrowserGym (browsergym-miniwob 0.14.3, sync Playwright 1.44): `concurrency` worker
  processes with one BrowserGym environment each (sync Playwright objects cannot be
  shared across threads). It lives in its own virtualenv, bench/.venv-browsergym,
  created here on first use (pip install browsergym-miniwob==0.14.3), because it pins
  playwright==1.44 and the kit needs a newer one; bench/_browsergym_side.py runs there.

Each configuration first plays untimed warm-up episodes (per worker), so browser
start-up is not in the timed figure (it is reported apart). Both sides get the same
MiniWoB++ pages from the same local HTTP server (the kit's), the same Chromium and the
same extra launch flags. Results: a table on stdout and bench/results/bench_env.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BG_VENV = HERE / ".venv-browsergym"
BG_REQUIREMENT = "browsergym-miniwob==0.14.3"
BG_SIDE = HERE / "_browsergym_side.py"
TASK = "click-button"

sys.path.insert(0, str(HERE))
from _cputime import become_subreaper, others_share, reap_orphans, system_busy_seconds, tree_cpu_seconds  # noqa: E402


# ---------------------------------------------------------------- BrowserGym venv


def bg_python() -> Path:
    return BG_VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_browsergym_venv(log: Any) -> Path:
    """Create bench/.venv-browsergym with BrowserGym in it, once (a marker file records what is installed)."""
    marker = BG_VENV / ".bench-installed"
    py = bg_python()
    if py.exists() and marker.exists() and marker.read_text().strip() == BG_REQUIREMENT:
        return py
    if not py.exists():
        log(f"creating {BG_VENV.relative_to(HERE.parent)} (BrowserGym pins playwright==1.44, so it gets its own venv)")
        subprocess.run([sys.executable, "-m", "venv", str(BG_VENV)], check=True)
    log(f"installing {BG_REQUIREMENT} into it")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", BG_REQUIREMENT], check=True)
    marker.write_text(BG_REQUIREMENT + "\n")
    return py


# ---------------------------------------------------------------- the kit's side


async def _kit_run(chromium: str, episodes: int, concurrency: int, warmup: int, seed: int) -> dict[str, Any]:
    from webr1_kit.browser import Browser
    from webr1_kit.config import EnvConfig
    from webr1_kit.experts import MiniWoBExpert
    from webr1_kit.rollout import run_episodes
    from webr1_kit.tasks import load_tasks

    cfg = EnvConfig(browser_path=chromium)  # defaults otherwise: html observation, no screenshot
    tasks = load_tasks("miniwob", names=[TASK])
    expert = MiniWoBExpert()
    t_start = time.perf_counter()
    browser = Browser(cfg)
    await browser.start()
    try:
        warm = await run_episodes(expert, tasks, episodes=warmup * concurrency, concurrency=concurrency,
                                  seed=seed + 1_000_003, config=cfg, browser=browser)
        startup_s = time.perf_counter() - t_start
        t0, cpu0, busy0 = time.perf_counter(), tree_cpu_seconds(), system_busy_seconds()
        result = await run_episodes(expert, tasks, episodes=episodes, concurrency=concurrency,
                                    seed=seed, config=cfg, browser=browser)
        seconds, cpu1, busy1 = time.perf_counter() - t0, tree_cpu_seconds(), system_busy_seconds()
        browser_version = browser.version
    finally:
        await browser.close()
    trajs = result.trajectories
    m = result.metrics
    first = trajs[0].turns[0].observation if trajs and trajs[0].turns else None
    return {
        "side": "kit",
        "config": "default",
        "concurrency": concurrency,
        "episodes": len(trajs),
        "evaluated": m["evaluated"],
        "infra_failures": m["infra_failures"],
        "success_rate": m["success_rate"],
        "seconds": seconds,
        "episodes_per_s": len(trajs) / seconds if seconds > 0 else None,
        "kit_metrics": m,
        "cpu_seconds": cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
        "cpu_s_per_episode": (cpu1 - cpu0) / len(trajs) if cpu0 is not None and cpu1 is not None and trajs else None,
        "others_cpu_share": others_share(seconds, None if cpu0 is None or cpu1 is None else cpu1 - cpu0, busy0, busy1),
        "mean_episode_s": sum(t.seconds for t in trajs) / len(trajs) if trajs else None,
        "mean_turns": m["mean_turns"],
        "startup_and_warmup_s": startup_s,
        "warmup_episodes": warmup * concurrency,
        "warmup_success": warm.metrics["success_rate"],
        "observation": None if first is None else {
            "keys": sorted(first.keys()),
            "screenshot": "screenshot_png_b64" in first,
            "content_chars": len(first["content"]),
            "numbered_elements": len(first["elements"]),
            "content": first["content"],
        },
        "browser_version": browser_version,
        "episode_records": [
            {"index": i, "seed": t.seed, "reward": t.reward, "status": t.status, "turns": len(t.turns),
             "seconds": t.seconds, **({"infra_error": t.infra_error} if t.infra_error else {})}
            for i, t in enumerate(trajs)
        ],
    }


def kit_run(chromium: str, episodes: int, concurrency: int, warmup: int, seed: int) -> dict[str, Any]:
    return asyncio.run(_kit_run(chromium, episodes, concurrency, warmup, seed))


# ---------------------------------------------------------------- BrowserGym's side


def browsergym_run(py: Path, chromium: str, miniwob_url: str, launch_args: list[str], episodes: int,
                   concurrency: int, warmup: int, seed: int, config: str, log: Any) -> dict[str, Any]:
    cmd = [str(py), str(BG_SIDE), "--episodes", str(episodes), "--concurrency", str(concurrency),
           "--warmup", str(warmup), "--seed", str(seed), "--config", config, "--miniwob-url", miniwob_url,
           "--chromium", chromium, "--launch-args", json.dumps(launch_args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or "").splitlines()[-15:])
        log(f"BrowserGym side failed (exit {proc.returncode}):\n{tail}")
        return {"side": "browsergym", "config": config, "concurrency": concurrency,
                "error": f"exit {proc.returncode}", "stderr_tail": tail, "stdout": proc.stdout[-2000:]}
    return json.loads(lines[-1])


# ---------------------------------------------------------------- reporting


def machine_info(chromium: str) -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        chromium_version = subprocess.run([chromium, "--version"], capture_output=True, text=True,
                                          timeout=30).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        chromium_version = f"unknown ({exc})"
    mem = ""
    try:
        kb = int(next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")).split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except Exception:  # noqa: BLE001
        pass
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory": mem, "platform": platform.platform(),
            "python": sys.version.split()[0], "chromium": chromium, "chromium_version": chromium_version}


def git_state() -> dict[str, Any]:
    """The commit the kit was measured at, and whether webr1_kit/ had uncommitted changes."""
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=HERE.parent, capture_output=True, text=True, timeout=30).stdout.strip()
        except Exception:  # noqa: BLE001 - not a git checkout
            return ""
    return {"commit": git("rev-parse", "HEAD") or None,
            "webr1_kit_uncommitted_changes": bool(git("status", "--porcelain", "--", "webr1_kit"))}


def fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


COLUMNS = ["side", "config", "conc", "episodes", "success", "infra fail", "turns/ep", "seconds", "episodes/s",
           "s/episode (each)", "CPU s/episode", "others' CPU % during"]


def cells(r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [r["side"], r["config"], str(r["concurrency"]), "-", "-", "-", "-", "-", f"ERROR {r['error']}", "-", "-", "-"]
    share = r.get("others_cpu_share")
    return [r["side"], r["config"], str(r["concurrency"]), str(r["episodes"]), fmt(r["success_rate"]),
            str(r["infra_failures"]), fmt(r.get("mean_turns")), fmt(r["seconds"], 1), fmt(r["episodes_per_s"], 3),
            fmt(r.get("mean_episode_s"), 2), fmt(r.get("cpu_s_per_episode"), 2),
            "-" if share is None else f"{100 * share:.0f}"]


def table(rows: list[dict[str, Any]]) -> str:
    body = [cells(r) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(COLUMNS)]
    line = lambda cs: "  ".join(c.ljust(w) for c, w in zip(cs, widths)).rstrip()  # noqa: E731
    return "\n".join([line(COLUMNS), line(["-" * w for w in widths])] + [line(b) for b in body])


def markdown(rows: list[dict[str, Any]]) -> str:
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(out)


def ratios(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """kit/BrowserGym episodes per second, and BrowserGym/kit CPU seconds per episode, per concurrency."""
    def get(side: str, config: str, c: int, key: str) -> float | None:
        for r in rows:
            if r["side"] == side and r["config"] == config and r["concurrency"] == c and "error" not in r:
                return r.get(key)
        return None

    out: dict[str, float | None] = {}
    for c in sorted({r["concurrency"] for r in rows}):
        for config in ("default", "nodelay"):
            k, b = get("kit", "default", c, "episodes_per_s"), get("browsergym", config, c, "episodes_per_s")
            if k and b:
                out[f"episodes/s, kit / browsergym-{config}, concurrency {c}"] = k / b
            k, b = get("kit", "default", c, "cpu_s_per_episode"), get("browsergym", config, c, "cpu_s_per_episode")
            if k and b:
                out[f"CPU s/episode, browsergym-{config} / kit, concurrency {c}"] = b / k
    return out


def cpu_busy(sample_s: float = 5.0) -> float | None:
    """Percent of all cores busy over `sample_s` seconds (from /proc/stat); None without /proc."""
    def read() -> tuple[int, int]:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
        return sum(v), idle
    try:
        t0, i0 = read()
        time.sleep(sample_s)
        t1, i1 = read()
    except OSError:
        return None
    return 100.0 * (1 - (i1 - i0) / (t1 - t0)) if t1 > t0 else 0.0


def wait_idle(limit_pct: float, log: Any, max_wait_s: float = 600) -> float | None:
    """Between configurations (when this benchmark runs nothing), wait until the other work on the
    machine uses less than `limit_pct` percent of the CPU, for at most `max_wait_s`. Returns the last sample."""
    t0 = time.perf_counter()
    busy = cpu_busy()
    while busy is not None and busy >= limit_pct and time.perf_counter() - t0 < max_wait_s:
        log(f"waiting for the machine to quieten: other processes use {busy:.0f}% of the CPU (limit {limit_pct:.0f}%)")
        busy = cpu_busy()
    return busy


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Takes a few minutes on 2 cores with the defaults (BrowserGym is the slow side).")
    p.add_argument("--episodes", type=int, default=32, help="timed episodes per configuration (default: 32)")
    p.add_argument("--concurrency", default="1,8",
                   help="comma-separated concurrency levels (default: 1,8). The kit: environments on one "
                        "Chromium; BrowserGym: worker processes, one env (and browsers) each")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed warm-up episodes per worker before each timed run (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the episode list (default: 0)")
    p.add_argument("--browsergym-configs", default="default,nodelay",
                   help="BrowserGym configurations to run: 'default' (its defaults) and/or 'nodelay' "
                        "(slow_mo=0, pre_observation_delay=0; same observation). Default: default,nodelay")
    p.add_argument("--skip-browsergym", action="store_true", help="measure the kit only (no BrowserGym venv needed)")
    p.add_argument("--chromium", default=None,
                   help="Chromium executable for both sides (default: $WEBR1_BROWSER or `chromium` on PATH)")
    p.add_argument("--wait-idle", type=float, default=None, metavar="PCT",
                   help="before each configuration, wait (up to 10 minutes) until other processes use less than "
                        "PCT percent of the CPU over 5 s, e.g. 25; useful on a shared machine (default: don't wait). "
                        "The CPU use measured just before each configuration is recorded either way")
    p.add_argument("--out", type=Path, default=HERE / "results" / "bench_env.json",
                   help="where to write the JSON results (default: bench/results/bench_env.json)")
    args = p.parse_args()

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    from webr1_kit.browser import LAUNCH_ARGS, find_browser
    from webr1_kit.tasks.miniwob import server

    chromium = args.chromium or os.environ.get("WEBR1_BROWSER") or shutil.which("chromium") or find_browser()
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    bg_configs = [] if args.skip_browsergym else [c.strip() for c in args.browsergym_configs.split(",") if c.strip()]
    py = ensure_browsergym_venv(log) if bg_configs else None
    become_subreaper()  # count the CPU time of browser helpers orphaned when a browser closes (see _cputime.py)
    miniwob_url = server().url + "/miniwob/"  # the kit's local server: both sides load the same pages from it
    machine = machine_info(chromium)
    git = git_state()
    log(f"{machine['cpus']} CPUs, {machine['chromium_version']}, {args.episodes} timed episodes per configuration")

    def measured(run: Any) -> dict[str, Any]:
        """Run one configuration, recording the machine's load around it (other work skews the figures)."""
        busy = wait_idle(args.wait_idle, log) if args.wait_idle is not None else cpu_busy()
        before = os.getloadavg()
        row = run()
        reap_orphans()
        row["other_cpu_busy_pct_before"] = None if busy is None else round(busy, 1)
        row["loadavg_before"], row["loadavg_after"] = [round(x, 2) for x in before], [round(x, 2) for x in os.getloadavg()]
        if "error" not in row:
            log(f"  {row['episodes_per_s']:.3f} episodes/s, success {row['success_rate']}, "
                f"CPU used by others just before: {row['other_cpu_busy_pct_before']}%")
        return row

    rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for c in levels:
        log(f"kit, concurrency {c}")
        rows.append(measured(lambda: kit_run(chromium, args.episodes, c, args.warmup, args.seed)))
        for config in bg_configs:
            log(f"BrowserGym ({config}), concurrency {c}")
            rows.append(measured(lambda: browsergym_run(py, chromium, miniwob_url, list(LAUNCH_ARGS), args.episodes,
                                                        c, args.warmup, args.seed, config, log)))
    total_s = time.perf_counter() - t_all

    bg_versions = next((r["versions"] for r in rows if r["side"] == "browsergym" and "versions" in r), None)
    result = {
        "benchmark": f"environment throughput, MiniWoB++ {TASK}, scripted policy",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "bench/bench_env.py", *sys.argv[1:]]),
        "machine": machine,
        "git": git,
        "versions": {
            "kit": {"webr1_kit": version("webr1_kit"), "playwright": version("playwright"),
                    "miniwob (pages)": version("miniwob")},
            "browsergym": bg_versions,
        },
        "launch_args_both_sides": list(LAUNCH_ARGS),
        "episodes_per_configuration": args.episodes,
        "warmup_per_worker": args.warmup,
        "total_seconds": total_s,
        "ratios": ratios(rows),
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    ratio_lines = "\n".join(f"- {k}: {v:.2f}x" for k, v in result["ratios"].items())
    args.out.with_suffix(".md").write_text(
        f"MiniWoB++ {TASK}, {args.episodes} timed episodes per row; {result['date']}; `{result['command']}`\n\n"
        f"{markdown(rows)}\n\n{ratio_lines}\n")

    print(f"\nMiniWoB++ {TASK}, {args.episodes} timed episodes per row, {machine['cpus']} CPUs, "
          f"{machine['chromium_version']}")
    print(table(rows))
    for k, v in result["ratios"].items():
        print(f"{k}: {v:.2f}x")
    print(f"(total {total_s:.0f} s; results in {args.out} and {args.out.with_suffix('.md')})")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
