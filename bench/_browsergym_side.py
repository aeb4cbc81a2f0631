"""BrowserGym side of `bench/bench_env.py`. Runs in bench/.venv-browsergym, never in the kit's venv.

BrowserGym (browsergym-miniwob 0.14.3) pins playwright==1.44 and uses the *sync*
Playwright API, so it gets a virtualenv of its own and this script is started as a
subprocess by bench_env.py. It does not import webr1_kit.

It runs `--episodes` episodes of MiniWoB++ click-button with a scripted policy
(click the button whose accessible name is the one in the goal, through BrowserGym's
own action space: `click("<bid>")`), in `--concurrency` worker processes, each with its
own BrowserGym environment (sync Playwright objects cannot be shared between threads,
so parallelism means processes). Every worker first plays `--warmup` untimed episodes;
the clock starts when all workers are warm (a barrier) and stops when the last timed
episode has been reported. It prints one JSON object on stdout; logs go to stderr.

Browser launch. BrowserGym launches Chromium itself, twice per `reset()`: one browser
for the task page (`BrowserEnv.reset`) and one for its chat window (`Chat.__init__`).
The task browser takes an executable through the supported `pw_chromium_kwargs`
option, but `args` cannot go through it (BrowserGym passes its own `args=`, so a second
one is a TypeError), and the chat browser takes no options at all. So this script
wraps Playwright's `BrowserType.launch` (sync API) in this process only: it fills in
`executable_path` where none was given and appends the same launch flags the kit uses.
Playwright itself adds --no-sandbox (its `chromiumSandbox` option is off by default),
which root needs. Nothing else in BrowserGym is changed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import random
import re
import shutil
import sys
import time
import traceback
from typing import Any

from _cputime import become_subreaper, others_share, system_busy_seconds, tree_cpu_seconds  # bench/ is sys.path[0] when this file runs as a script

GOAL = re.compile(r'^Click on the "(.*)" button\.$')


def patch_launch(executable: str, extra_args: list[str]) -> None:
    """Make every Chromium launch in this process use `executable` and `extra_args`."""
    from playwright.sync_api._generated import BrowserType

    original = BrowserType.launch
    if getattr(original, "_bench_patched", False):
        return

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("executable_path"):
            kwargs["executable_path"] = executable
        kwargs["args"] = list(kwargs.get("args") or []) + [a for a in extra_args if a not in (kwargs.get("args") or [])]
        return original(self, *args, **kwargs)

    launch._bench_patched = True  # type: ignore[attr-defined]
    BrowserType.launch = launch  # type: ignore[method-assign]


def make_env(config: str, executable: str) -> Any:
    import gymnasium as gym
    import browsergym.miniwob  # noqa: F401  (registers browsergym/miniwob.*)

    kwargs: dict[str, Any] = {"pw_chromium_kwargs": {"executable_path": executable}}
    if config == "nodelay":
        # Constructor options, documented as debugging/testing knobs: no 100 ms Playwright
        # slow_mo (the MiniWoB task's default) and no 0.5 s sleep before each observation.
        kwargs.update(slow_mo=0, pre_observation_delay=0.0)
    elif config != "default":
        raise ValueError(f"unknown config {config!r}")
    return gym.make("browsergym/miniwob.click-button", **kwargs)


def policy(obs: dict[str, Any]) -> str:
    """Scripted click-button policy on BrowserGym's observation: the AXTree's button with the goal's name."""
    m = GOAL.match(obs["goal"].strip())
    if not m:
        return 'send_msg_to_user("unsupported task")'
    label = m.group(1)
    for node in obs["axtree_object"]["nodes"]:
        if node.get("role", {}).get("value") == "button" and node.get("name", {}).get("value", "").strip() == label:
            if node.get("browsergym_id"):
                return f'click("{node["browsergym_id"]}")'
    return "scroll(0, 200)"  # like the kit's expert: the button is not visible, scroll


def obs_sizes(obs: dict[str, Any]) -> dict[str, Any]:
    """What one default BrowserGym observation holds, in sizes."""
    shot = obs.get("screenshot")
    return {
        "keys": sorted(obs.keys()),
        "screenshot_shape": list(shot.shape) if shot is not None else None,
        "dom_snapshot_json_chars": len(json.dumps(obs.get("dom_object"))),
        "axtree_json_chars": len(json.dumps(obs.get("axtree_object"))),
        "axtree_nodes": len(obs.get("axtree_object", {}).get("nodes", [])),
        "extra_element_properties": len(obs.get("extra_element_properties") or {}),
    }


def episode(env: Any, seed: int, max_turns: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"seed": seed, "reward": 0.0, "status": "truncated", "turns": 0, "errors": []}
    try:
        obs, _ = env.reset(seed=seed)
        rec["reset_s"] = time.perf_counter() - t0
        rec["obs"] = obs_sizes(obs)
        for _ in range(max_turns):
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            rec["turns"] += 1
            if obs.get("last_action_error"):
                rec["errors"].append(obs["last_action_error"][:200])
            if terminated or truncated:
                rec["reward"], rec["status"] = float(reward), "done"
                break
    except Exception as exc:  # infrastructure failure: counted apart, never as reward 0
        rec["status"], rec["infra_error"] = "infra_failure", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    rec["seconds"] = time.perf_counter() - t0
    return rec


def worker(wid: int, args: argparse.Namespace, jobs: Any, results: Any, barrier: Any) -> None:
    os.environ["MINIWOB_URL"] = args.miniwob_url
    patch_launch(args.chromium, args.launch_args)
    t0 = time.perf_counter()
    env = None
    try:
        env = make_env(args.config, args.chromium)
        warm = [episode(env, 1_000_000 + wid * 100 + i, args.max_turns) for i in range(args.warmup)]
        results.put(("warm", wid, time.perf_counter() - t0, warm))
        barrier.wait()
        while True:
            try:
                i, seed = jobs.get_nowait()
            except queue.Empty:
                break
            rec = episode(env, seed, args.max_turns)
            rec.update(index=i, worker=wid)
            results.put(("episode", wid, time.perf_counter(), rec))
        results.put(("finished", wid, time.perf_counter(), None))
    except BaseException as exc:  # noqa: BLE001 - report anything, the parent decides
        results.put(("crash", wid, time.perf_counter(), f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        try:
            barrier.abort()
        except Exception:
            pass
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                pass


def episode_seeds(episodes: int, seed: int) -> list[int]:
    """Same seed list as webr1_kit.rollout.episode_seeds for one task."""
    rng = random.Random(seed)
    return [rng.randrange(2**31) for _ in range(episodes)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=32, help="timed episodes (default 32)")
    p.add_argument("--concurrency", type=int, default=1, help="worker processes, one BrowserGym env each")
    p.add_argument("--warmup", type=int, default=1, help="untimed episodes per worker before the clock starts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-turns", type=int, default=15)
    p.add_argument("--config", choices=("default", "nodelay"), default="default")
    p.add_argument("--miniwob-url", default=os.environ.get("MINIWOB_URL"), help="folder URL of the MiniWoB++ task pages")
    p.add_argument("--chromium", default=shutil.which("chromium"), help="Chromium executable")
    p.add_argument("--launch-args", default="[]", type=json.loads, help="JSON list of extra Chromium flags")
    args = p.parse_args()
    if not args.miniwob_url or not args.chromium:
        p.error("--miniwob-url and --chromium are required (or MINIWOB_URL and a chromium on PATH)")
    if not args.miniwob_url.endswith("/"):
        args.miniwob_url += "/"

    become_subreaper()  # so that the CPU time of closed browsers' orphaned helpers is still counted
    ctx = mp.get_context("spawn")
    jobs, results = ctx.Queue(), ctx.Queue()
    for item in enumerate(episode_seeds(args.episodes, args.seed)):
        jobs.put(item)
    barrier = ctx.Barrier(args.concurrency + 1)
    t_spawn = time.perf_counter()
    procs = [ctx.Process(target=worker, args=(w, args, jobs, results, barrier)) for w in range(args.concurrency)]
    for proc in procs:
        proc.start()

    warm, crashes = [], []
    while len(warm) + len(crashes) < args.concurrency:
        kind, wid, t, payload = results.get(timeout=600)
        (warm if kind == "warm" else crashes).append((wid, t, payload))
    if crashes:
        for proc in procs:
            proc.kill()
        print(json.dumps({"error": "worker crashed during warm-up", "details": [c[2] for c in crashes]}))
        sys.exit(1)
    startup_s = time.perf_counter() - t_spawn
    barrier.wait()
    t0 = time.perf_counter()
    cpu0, busy0 = tree_cpu_seconds(), system_busy_seconds()
    cpu1 = busy1 = None
    episodes: list[dict[str, Any]] = []
    finished = 0
    t_last = t0
    while finished < args.concurrency:
        kind, wid, t, payload = results.get(timeout=600)
        if kind == "episode":
            episodes.append(payload)
            t_last = time.perf_counter()
            if len(episodes) == args.episodes:
                cpu1, busy1 = tree_cpu_seconds(), system_busy_seconds()
        elif kind == "finished":
            finished += 1
        elif kind == "crash":
            crashes.append(payload)
            finished += 1
    seconds = t_last - t0
    for proc in procs:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()

    from importlib.metadata import version

    episodes.sort(key=lambda r: r["index"])
    ok = [r for r in episodes if r["status"] != "infra_failure"]
    first_obs = next((r["obs"] for r in episodes if "obs" in r), None)
    for r in episodes:
        r.pop("obs", None)
    out = {
        "side": "browsergym",
        "config": args.config,
        "concurrency": args.concurrency,
        "episodes": len(episodes),
        "evaluated": len(ok),
        "infra_failures": len(episodes) - len(ok),
        "success_rate": sum(r["reward"] for r in ok) / len(ok) if ok else None,
        "seconds": seconds,
        "episodes_per_s": len(episodes) / seconds if seconds > 0 else None,
        "cpu_seconds": cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
        "cpu_s_per_episode": (cpu1 - cpu0) / len(episodes) if cpu0 is not None and cpu1 is not None and episodes else None,
        "others_cpu_share": others_share(seconds, None if cpu0 is None or cpu1 is None else cpu1 - cpu0, busy0, busy1),
        "mean_episode_s": sum(r["seconds"] for r in episodes) / len(episodes) if episodes else None,
        "mean_reset_s": (sum(r["reset_s"] for r in ok if "reset_s" in r) / len(ok)) if ok else None,
        "mean_turns": sum(r["turns"] for r in ok) / len(ok) if ok else None,
        "startup_and_warmup_s": startup_s,
        "warmup_episodes": args.warmup * args.concurrency,
        "warmup_success": [r["reward"] for _, _, recs in warm for r in recs],
        "worker_crashes": crashes,
        "observation": first_obs,
        "versions": {
            "playwright": version("playwright"),
            "browsergym-core": version("browsergym-core"),
            "browsergym-miniwob": version("browsergym-miniwob"),
            "python": sys.version.split()[0],
        },
        "launch": {"executable": args.chromium, "extra_args": args.launch_args},
        "episode_records": episodes,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
