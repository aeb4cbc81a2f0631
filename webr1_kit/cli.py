"""The `webr1` command.

    webr1 tasks list --suite miniwob --json
    webr1 tasks list --suite arena --split test --json
    webr1 eval --suite miniwob --tasks click-button,enter-text --policy expert --episodes 16 --concurrency 8 --json
    webr1 eval --suite arena --split test --policy expert --json
    webr1 eval --suite webarena-lite --split test --policy PATH     # your own WebArena sites
    webr1 webarena check
    webr1 sites serve
    webr1 experts record --split train --out demos.jsonl
    webr1 demo
    webr1 doctor

Every subcommand has --help. Heavy modules are imported inside the handlers so
`webr1 --help` stays instant.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from . import distributed


def _tasks_list(args: argparse.Namespace) -> int:
    # Listing needs no sites: WebArena tasks whose sites are not configured keep their placeholders.
    tasks = _select_tasks(args, sites_required=False)
    if args.json:
        if args.suite == "miniwob":
            print(json.dumps([t.task_id.split("/", 1)[1] for t in tasks]))
        else:
            print(json.dumps([t.to_dict() for t in tasks], indent=1))
    else:
        for t in tasks:
            print(t.task_id + (f"  {t.intent[:80]}" if t.intent else ""))
        print(f"{len(tasks)} tasks", file=sys.stderr)
    return 0


POLICIES = ("expert", "random", "embedded")
"""Built-in policy names; any other --policy value is a model (Hugging Face id or local path)."""


def _default_split(suite: str) -> str | None:
    return "train" if suite == "arena" else None


def _make_policy(name: str, seed: int, args: argparse.Namespace | None = None) -> Any:
    """A scripted policy by name, or a language model ("embedded", a Hub id or a path)."""
    if name == "scripted":
        raise ValueError('--policy scripted is called "expert" now (the scripted experts of MiniWoB++ and the arena)')
    if name == "expert":
        from .experts import Expert

        return Expert()
    if name == "random":
        from .baselines import RandomPolicy

        return RandomPolicy(seed)
    from .config import PromptConfig, SamplingConfig
    from .policy import load_policy

    adapter = getattr(args, "adapter", None)
    sampling = SamplingConfig(temperature=getattr(args, "temperature", 0.0) or 0.0,
                              max_new_tokens=getattr(args, "max_new_tokens", 256) or 256)
    prompt = PromptConfig(think=not getattr(args, "no_think", False))
    print(f"loading model {name}" + (f" with adapter {adapter}" if adapter else ""), file=sys.stderr)
    return load_policy(name, lora=None, adapter=adapter, prompt=prompt, sampling=sampling, seed=seed)


def _select_tasks(args: argparse.Namespace, sites_required: bool = True) -> list:
    """The tasks named by --suite, --split, --tasks and --limit (a sample seeded by --seed)."""
    from .tasks import select_tasks

    wanted = [n.strip() for n in args.tasks.split(",") if n.strip()] if args.tasks else None
    kwargs = ({**_webarena_sources(args), "sites_required": sites_required} if args.suite in WEBARENA_SUITES
              else {})
    if getattr(args, "subset", None) is not None:
        if args.suite != "webarena-verified":
            raise ValueError(f"--subset is WebArena-Verified's (--suite webarena-verified --subset hard), not {args.suite}'s")
        kwargs["subset"] = args.subset
    return select_tasks(args.suite, split=args.split or _default_split(args.suite), names=wanted, limit=args.limit,
                        seed=getattr(args, "seed", 0), **kwargs)


def _task_options(suite: str, suites: str = "miniwob, arena, webarena, webarena-lite, webarena-verified (your own "
                  "WebArena sites), or a .json/.jsonl task file") -> argparse.ArgumentParser:
    """--suite, --split, --tasks and --limit: how every command picks its tasks (one parent
    parser, read by `_select_tasks`, which calls `tasks.select_tasks`)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--suite", default=suite, help=f"{suites} (default {suite})")
    p.add_argument("--split", default=None,
                   help="arena split: train (default), test or all; webarena-lite: test (default), train or all")
    p.add_argument("--tasks", default=None, help="comma-separated task names/ids, or arena template ids "
                   "(default: all of the suite/split)")
    p.add_argument("--limit", type=int, default=None, help="a sample of N of the selected tasks, seeded by --seed")
    p.add_argument("--subset", default=None, help="webarena-verified: a subset of its tasks, e.g. hard (258)")
    return p


WEBARENA_SUITES = ("webarena", "webarena-lite", "webarena-verified")


def _webarena_sources(args: argparse.Namespace) -> dict[str, Any]:
    """Where the WebArena config, task file and Lite split come from (None: environment/config file)."""
    return {"config_path": getattr(args, "webarena_config", None), "tasks_file": getattr(args, "tasks_file", None),
            "split_file": getattr(args, "split_file", None)}


def _webarena_options(parser: argparse.ArgumentParser) -> None:
    """--webarena-config, --tasks-file and --split-file (read by `_webarena_sources`)."""
    wag = parser.add_argument_group("WebArena (--suite webarena / webarena-lite; see the README section 'Real WebArena')")
    wag.add_argument("--webarena-config", metavar="FILE",
                     help="YAML/JSON with sites, tasks, split_file, judge, ... (default: $WEBR1_WEBARENA_CONFIG; "
                     "site URLs also from SHOPPING, SHOPPING_ADMIN, REDDIT, GITLAB, MAP, WIKIPEDIA, HOMEPAGE)")
    wag.add_argument("--tasks-file", metavar="PATH",
                     help="WebArena's config_files/test.raw.json or a folder of per-task N.json (default: "
                     "$WEBR1_WEBARENA_TASKS, tasks: in the config, else the released file from libwebarena)")
    wag.add_argument("--split-file", metavar="PATH",
                     help="WebArena-Lite's split: its test_webarena_lite.raw.json, or {\"train\": [ids], \"test\": [ids]} "
                     "(default: $WEBR1_WEBARENA_SPLIT, split_file: in the config, else the released file from "
                     "browsergym-webarenalite)")


def _env_config(args: argparse.Namespace) -> Any:
    from .config import EnvConfig, from_dict

    data: dict[str, Any] = {}
    if getattr(args, "config", None):
        data = _read_config(args.config).get("env", {})
    if getattr(args, "observation", None):
        data["observation"] = args.observation
    if getattr(args, "screenshots", False):
        data["screenshot"] = True
    return from_dict(EnvConfig, data, where="env")


def _read_config(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"webr1: cannot read config {path}: {exc.strerror}") from None
    try:
        if p.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:
        raise SystemExit(f"webr1: config {path} is not valid {p.suffix.lstrip('.').upper() or 'JSON'}: {exc}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"webr1: config {path} must hold a mapping of sections (e.g. env: ...)")
    return data


def _eval(args: argparse.Namespace) -> int:
    from .aio import run
    from .rollout import evaluate
    from .trajectory import write_jsonl

    if args.max_invalid < 0:
        raise ValueError(f"--max-invalid must be 0 (never) or more, got {args.max_invalid}")
    if args.samples_per_page < 1:
        raise ValueError(f"--samples-per-page must be 1 or more, got {args.samples_per_page}")
    tasks = _select_tasks(args)
    cfg = _env_config(args)
    left_out: list[dict[str, str]] = []
    if args.suite in WEBARENA_SUITES:
        from .tasks.webarena import active_config
        from .tasks.webarena.judge import scorable
        from .tasks.webarena.sitecheck import preflight

        # refuses tasks that cannot be scored, naming them, unless --leave-out-unscorable
        tasks, left_out = scorable(tasks, active_config(), leave_out=args.leave_out_unscorable)
        if left_out:
            print(f"webr1: leaving out {len(left_out)} task(s) that cannot be scored: "
                  f"{', '.join(t['task_id'] for t in left_out)} ({left_out[0]['reason']})", file=sys.stderr)
        for warning in preflight(tasks):  # raises InfraError when a site the tasks need is down
            print(f"webr1: warning: {warning}", file=sys.stderr)
    policy = _make_policy(args.policy, args.seed, args)
    result = run(evaluate(policy, tasks, temperature=args.temperature or 0.0, episodes=args.episodes,
                          concurrency=args.concurrency, max_turns=args.max_turns, seed=args.seed, config=cfg,
                          progress=not args.quiet, max_invalid=args.max_invalid or None,
                          samples_per_page=args.samples_per_page))
    metrics = {"suite": args.suite, "split": args.split or _default_split(args.suite), "policy": args.policy,
               "seed": args.seed, "temperature": args.temperature, "samples_per_page": args.samples_per_page,
               **result.metrics, **({"left_out": left_out} if left_out else {})}
    if args.suite in WEBARENA_SUITES:
        from .tasks.webarena import paper_table

        metrics["by_paper_site"] = paper_table(result.trajectories)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / "trajectories.jsonl", result.trajectories)
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
        from .config import to_dict

        run_cfg = {"env": to_dict(cfg), "args": {k: v for k, v in vars(args).items() if k != "func"}}
        (out / "config.json").write_text(json.dumps(run_cfg, indent=1))
    if args.json:
        print(json.dumps(metrics))
    else:
        _print_metrics(metrics)
    return 0


def _print_metrics(m: dict[str, Any]) -> None:
    rate = m["success_rate"]
    print(f"success rate  {rate:.3f}" if rate is not None else "success rate  n/a (no evaluated episodes)")
    print(f"episodes      {m['episodes']} ({m['infra_failures']} infrastructure failures)")
    print(f"mean turns    {m['mean_turns']:.2f}   invalid-action rate {m['invalid_action_rate']:.3f}")
    print(f"time          {m['seconds']:.1f} s   ({m['episodes_per_s']} episodes/s)")
    if m.get("by_paper_site"):
        from .tasks.webarena import format_paper_table

        print("per site, as in the paper's table (OSS: shopping, CMS: shopping admin; n/e: not evaluated)")
        print(format_paper_table(m["by_paper_site"]))
    for title, key in (("per site", "per_site"), ("per template", "per_template"), ("per task", "per_task")):
        rows = m.get(key, {})
        if 1 < len(rows) <= 60 or (key == "per_task" and len(rows) == 1):
            print(title)
            counts, cis = m.get(f"{key}_n", {}), m.get(f"{key}_ci95", {})
            for name, r in rows.items():
                extra = ""
                if name in counts and cis.get(name):
                    lo, hi = cis[name]
                    extra = f"  ({round(r * counts[name])}/{counts[name]}, 95% CI {lo:.2f}-{hi:.2f})"
                print(f"  {name:<40} {r:.3f}{extra}")


def _demo(args: argparse.Namespace) -> int:
    """The main job: expert demonstrations, BC, M-GRPO, held-out evaluation, report."""
    from .aio import run
    from .pipeline import run_pipeline, scale_config

    overrides = _read_config(args.config) if args.config else {}
    if args.seed is not None:
        overrides["seed"] = args.seed
    cfg = scale_config(args.scale, overrides)
    out = Path(args.out or f"runs/demo-{args.scale}")
    print(f"webr1 demo: the WebAgent-R1 recipe at {args.scale} scale ({cfg.policy.model} on "
          f"{cfg.tasks.suite}) into {out}/ (rerun the same command to resume)", file=sys.stderr)
    if args.bc_from:
        from .pipeline import Pipeline

        taken = Pipeline(cfg, out, progress=not args.quiet).reuse_bc(args.bc_from)
        print(f"webr1 demo: took {', '.join(taken) or 'nothing (already here)'} from {args.bc_from}", file=sys.stderr)
    path = run(run_pipeline(cfg, out, progress=not args.quiet, until=args.until, skip=args.skip))
    print(f"stopped after {args.until}: {path.resolve()}" if args.until else f"report: {path.resolve()}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    """Peak memory of a run's phases from its config, before any weights load."""
    from .memory import card_memory, plan
    from .pipeline import scale_config

    overrides = _read_config(args.config) if args.config else {}
    if args.model:
        overrides.setdefault("policy", {})["model"] = args.model
    cfg = scale_config(args.scale, overrides)
    cards: dict[str, float] = {}
    for spec in args.gpu or ["all"]:
        cards.update(card_memory(spec))
    result = plan(cfg, device=args.device)
    if args.json:
        print(json.dumps({"model": result.model, "device": result.device, "weight_dtype": result.weight_dtype,
                          "quantization": result.quantization, "parts_bytes": result.parts,
                          "phases_bytes": result.phases, "settings": result.settings,
                          "cards": {c: {"gb": gb, "fits": result.fits(gb), "advice": result.advice(gb)}
                                    for c, gb in cards.items()}}, indent=1))
    else:
        print(result.table(cards if result.device.startswith("cuda") else None))
    return 0


def _sites_serve(args: argparse.Namespace) -> int:
    """Run the arena's sites until interrupted (for people and external tools)."""
    import threading

    from .config import SITES_HOST_VAR, sites_host
    from .sites import Arena, site_specs

    if args.host:
        os.environ[SITES_HOST_VAR] = args.host
    host = sites_host()  # checked (and warned about) before anything starts
    names = [spec.name for spec in site_specs()]
    ports = {name: args.port_base + 10 * i for i, name in enumerate(names)} if args.port_base else {}
    arena = Arena(args.world_seed, ports=ports).start()
    print(f"arena world {args.world_seed} built in {arena.build_seconds:.2f} s; serving on {host} "
          "(requests without an episode cookie share one state):")
    for spec in site_specs():
        print(f"  {spec.name:<6} {spec.placeholder:<20} {arena.urls[spec.name]}")
    print("Ctrl-C stops.", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        arena.stop()
    return 0


def _browser_server(args: argparse.Namespace) -> int:
    """Serve the kit's Chromium to other processes or machines until interrupted."""
    import threading

    from .browser_server import BrowserServer

    server = BrowserServer(host=args.host, port=args.port, browser_path=args.browser).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"browser server (Playwright {_playwright_version()}; clients need the same version):")
    print(f"  {server.endpoint}")
    print('use it with {"env": {"browser_endpoints": ["' + str(server.endpoint) + '"]}} in a run config. Ctrl-C stops.',
          flush=True)
    try:
        while not stop.wait(1.0) and server.running:
            pass
    except KeyboardInterrupt:
        pass
    finally:
        died = not server.running
        server.stop()
    if died:
        print("webr1 browser-server: the server stopped by itself", file=sys.stderr)
        return 1
    return 0


def _serve_model(args: argparse.Namespace) -> int:
    """Run a vLLM server for a model, with the options the kit's vLLM generation needs."""
    from .models import resolve_model
    from .vllm_generation import serve, server_command

    model = resolve_model(args.model)
    python = args.python or os.environ.get("WEBR1_VLLM_PYTHON") or "python"
    options = {"dtype": args.dtype, "max_lora_rank": args.max_lora_rank,
               "gpu_memory_utilization": args.gpu_memory_utilization}
    cmd, env = server_command(model, port=args.port, host=args.host, python=python, **options)
    print("webr1 serve-model: " + " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(cmd), file=sys.stderr)
    print(f'use it with {{"policy": {{"model": "{args.model}", "vllm_urls": ["http://{args.host}:{args.port}"]}}}} '
          "in a run config. Ctrl-C stops.", file=sys.stderr, flush=True)
    try:
        return serve(model, port=args.port, host=args.host, python=python, **options)
    except FileNotFoundError:
        print(f"webr1 serve-model: no Python at {python!r}; point --python (or WEBR1_VLLM_PYTHON) at the "
              "interpreter of a virtualenv with vLLM installed", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


def _playwright_version() -> str:
    from importlib.metadata import version

    return version("playwright")


def _load_run_config(path: str | None) -> Any:
    """The run config in `path` (JSON or YAML): the same schema as `webr1 demo`'s, on the
    class defaults rather than a preset (`pipeline.load_config`)."""
    from .pipeline import load_config

    return load_config(_read_config(path) if path else {}, where=path or "config")


def _policy_from(cfg: Any) -> Any:
    """The policy a run config describes (policy, prompt, sampling and init_adapter)."""
    from .policy import load_policy

    return load_policy(cfg.policy, adapter=cfg.init_adapter, prompt=cfg.prompt, sampling=cfg.sampling, seed=cfg.seed)


def _sft(args: argparse.Namespace) -> int:
    """Behaviour cloning on demonstrations (webr1 experts record writes them)."""
    from .sft import train_sft
    from .trajectory import read_jsonl

    cfg = _load_run_config(args.config)
    if not Path(args.demos).is_file():
        raise ValueError(f"demonstrations file {args.demos} does not exist (webr1 experts record --out FILE makes one)")
    demos = [t for t in read_jsonl(args.demos) if t.success]
    if not demos:
        raise ValueError(f"{args.demos} holds no successful trajectories to learn from")
    policy = _policy_from(cfg)
    print(f"behaviour cloning on {len(demos)} demonstrations ({sum(len(t.turns) for t in demos)} turns)",
          file=sys.stderr)
    row = train_sft(policy, demos, cfg.sft, out=args.out, progress=not args.quiet)
    if distributed.is_main():  # under accelerate launch, one process writes (`distributed`)
        policy.save_adapter(Path(args.out) / "adapter")
        print(json.dumps({"out": args.out, "adapter": str(Path(args.out) / "adapter"), **row}))
    return 0


def _rl(args: argparse.Namespace) -> int:
    """M-GRPO training from a run config."""
    from .aio import run
    from .grpo import train_grpo
    from .pipeline import run_tasks
    from .rundir import RunDir

    cfg = _load_run_config(args.config)
    out = Path(args.out)
    if not args.resume and out.exists() and RunDir(out).latest_checkpoint() is not None:
        raise ValueError(f"{out} already holds a run; pass --resume to continue it, or choose another --out")
    train = run_tasks(cfg, "train")
    held_out = run_tasks(cfg, "eval") if cfg.grpo.eval_every else []
    demos = None
    if args.demos:
        from .trajectory import read_jsonl

        if not Path(args.demos).is_file():
            raise ValueError(f"demonstrations file {args.demos} does not exist (webr1 experts record --out FILE makes one)")
        demos = list(read_jsonl(args.demos))
    policy = _policy_from(cfg)
    result = run(train_grpo(policy, train, cfg.grpo, eval_tasks=held_out, out=out, env_config=cfg.env,
                            resume=args.resume, progress=not args.quiet, demos=demos))
    if not distributed.is_main():  # under accelerate launch, one process writes (`distributed`)
        return 0
    policy.save_adapter(out / "adapter")
    last = [m for m in result.metrics if m.get("phase") == "train"][-1:] or [{}]
    evals = [m for m in result.metrics if m.get("phase") == "eval"]
    print(json.dumps({"out": str(out), "steps": last[0].get("step"), "train_success": last[0].get("success_rate"),
                      "eval_success": [(m["step"], m["success_rate"]) for m in evals]}))
    return 0


def _experts_record(args: argparse.Namespace) -> int:
    """Run the scripted expert on the selected tasks and write its successful episodes as BC data."""
    from .aio import run
    from .experts import Expert
    from .rollout import run_episodes
    from .trajectory import write_jsonl

    if args.suite not in ("arena", "miniwob"):
        raise ValueError(f"--suite {args.suite}: the scripted experts play the arena and MiniWoB++ only")
    tasks = _select_tasks(args)
    result = run(run_episodes(Expert(), tasks, episodes=1, concurrency=args.concurrency, max_turns=args.max_turns,
                              seed=args.seed, progress=not args.quiet))
    good = [t for t in result.trajectories if t.success]
    write_jsonl(args.out, good)
    failed = [t for t in result.trajectories if not t.success]
    print(f"wrote {len(good)} demonstrations ({sum(len(t.turns) for t in good)} steps) to {args.out}; "
          f"{len(failed)} episodes failed and were left out", file=sys.stderr)
    for t in failed[:20]:
        why = t.infra_error or (t.verdict or {}).get("checks")
        print(f"  {t.task_id}: {t.status}: {why}", file=sys.stderr)
    return 0 if good else 1


def _replay(args: argparse.Namespace) -> int:
    """Write a standalone HTML replay of trajectories from a run directory or a JSONL file."""
    from .viz import show, show_group
    from .viz.sources import read_trajectories, select

    try:
        loaded = read_trajectories(args.path)
    except OSError as exc:  # missing path, unreadable file: a usage error (exit 2)
        raise ValueError(f"cannot replay {args.path}: {exc.strerror or exc}") from None
    loaded.trajectories = select(loaded.trajectories, args.select, args.limit)
    view = show_group(loaded) if args.groups else show(loaded)
    out = view.save(args.out)
    steps = sum(len(t.turns) for t in loaded.trajectories)
    n = len(loaded.trajectories)
    print(f"wrote {out}: {n} trajector{'y' if n == 1 else 'ies'}, {steps} steps, from {loaded.source}",
          file=sys.stderr)
    for note in view.notes[:20]:
        print(f"  note: {note}", file=sys.stderr)
    return 0


def _webarena_check(args: argparse.Namespace) -> int:
    """Which WebArena sites are up, logged in, and unchanged since their last reset."""
    from dataclasses import asdict

    from .aio import run
    from .tasks.webarena import load_config
    from .tasks.webarena.sitecheck import check, format_table

    cfg = load_config(args.webarena_config)
    rows = run(check(cfg, login=not args.no_login, mark_reset=args.mark_reset, timeout_s=args.timeout))
    print(json.dumps([asdict(r) for r in rows]) if args.json else format_table(rows))
    bad = [r.site for r in rows if not r.ok]
    if bad:
        print(f"webr1: not ready: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


def _install_webarena(args: argparse.Namespace) -> int:
    import subprocess

    from .tasks.webarena.released import RELEASES, find, install_command

    cmd = install_command(sys.executable, quiet=args.quiet)
    if not args.quiet:
        print(" ".join(cmd), file=sys.stderr)
    if subprocess.run(cmd).returncode != 0:
        print("webr1: pip could not install the released task files (see above)", file=sys.stderr)
        return 1
    for name, release in RELEASES.items():
        found = find(name)
        if found is None:
            print(f"webr1: {release.package} installed, but {release.file} is not in it", file=sys.stderr)
            return 1
        if not args.quiet:
            print(f"{name}: {found.describe()}")
    return 0


def _install_browser(args: argparse.Namespace) -> int:
    from .install import install_browser

    install_browser(allow_apt=not args.no_apt)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    """Check the pieces the kit needs and say what is missing."""
    import importlib.util
    import platform

    ok = True
    print(f"python      {platform.python_version()}")
    for mod in ("playwright", "miniwob", "torch", "transformers", "peft", "bitsandbytes"):
        spec = importlib.util.find_spec(mod)
        print(f"{mod:<11} {'installed' if spec else 'MISSING'}")
        ok &= spec is not None or mod in ("bitsandbytes",)
    from .aio import run
    from .browser import Browser, BrowserNotFound

    async def probe() -> str:
        async with Browser() as b:
            return f"{b.executable} (version {b.version})"

    try:
        print(f"browser     {run(probe())}")
    except BrowserNotFound as exc:
        ok = False
        print(f"browser     MISSING: {exc}")
    from .tasks import miniwob

    print(f"miniwob     {len(miniwob.task_names())} task pages in {miniwob.html_dir()}")
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    from .config import ROLLOUT
    from .pipeline import SKIPPABLE, STAGES

    p = argparse.ArgumentParser(
        prog="webr1",
        description="webr1_kit: train small open LLMs into web agents with multi-turn RL (WebAgent-R1).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    tasks = sub.add_parser("tasks", help="list the tasks of a suite")
    tsub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION")
    tsub.required = True
    tl = tsub.add_parser("list", help="list tasks", description="List the tasks of a suite or task file.",
                         parents=[_task_options("miniwob")])
    tl.add_argument("--json", action="store_true", help="print JSON (task names for miniwob, records otherwise)")
    _webarena_options(tl)
    tl.set_defaults(func=_tasks_list)

    ev = sub.add_parser(
        "eval", help="run a policy on tasks and report success",
        description="Run episodes of a policy in a real headless Chromium and report success rate, "
        "invalid-action rate, turns and infrastructure failures.",
        parents=[_task_options("miniwob")],
    )
    ev.add_argument("--policy", default="expert",
                    help="expert: the scripted experts (MiniWoB++ and arena); random: random valid actions; "
                    "embedded: the bundled SmolLM2-135M-Instruct; or a model's Hugging Face id or local path")
    ev.add_argument("--adapter", help="a saved LoRA adapter directory to load on the model")
    ev.add_argument("--temperature", type=float, default=0.0, help="model sampling temperature (default 0: greedy)")
    ev.add_argument("--max-new-tokens", type=int, default=256, help="longest model response in tokens (default 256)")
    ev.add_argument("--no-think", action="store_true", help="ask the model for the answer only, without <think>")
    ev.add_argument("--episodes", type=int, default=1, help="episodes per task, each on its own page (default 1)")
    ev.add_argument("--samples-per-page", type=int, default=1, metavar="K",
                    help="play each page K times with different sampling seeds: with --temperature above 0, a "
                         "sampled policy's success on the same pages a greedy run plays (default 1)")
    ev.add_argument("--concurrency", type=int, default=ROLLOUT.concurrency,
                    help=f"episodes running at once on one browser (default {ROLLOUT.concurrency})")
    ev.add_argument("--max-turns", type=int, default=ROLLOUT.max_turns,
                    help=f"turn limit per episode (default {ROLLOUT.max_turns})")
    ev.add_argument("--max-invalid", type=int, default=ROLLOUT.max_invalid or 0,
                    help=f"end an episode after this many invalid actions (default {ROLLOUT.max_invalid}, as "
                    "WebArena's own harness stops after 3 parsing failures; 0: never)")
    ev.add_argument("--seed", type=int, default=0, help="fixes the episodes' seeds (default 0)")
    ev.add_argument("--observation", choices=["html", "axtree"], help="observation format (default html)")
    ev.add_argument("--screenshots", action="store_true", help="store a screenshot per step in the trajectories")
    ev.add_argument("--config", help="JSON/YAML file with an `env:` section (EnvConfig fields)")
    ev.add_argument("--out", help="directory for trajectories.jsonl, metrics.json and config.json")
    ev.add_argument("--json", action="store_true", help="print one JSON object with the metrics")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    _webarena_options(ev)
    ev.add_argument("--leave-out-unscorable", action="store_true",
                    help="WebArena: run without the tasks this configuration cannot score (fuzzy_match checks with no "
                    "LLM judge configured), listing them in metrics.json as left_out; without it such tasks stop "
                    "the run before it starts, named")
    ev.set_defaults(func=_eval)

    demo = sub.add_parser(
        "demo", help="the main job: demonstrations, BC, M-GRPO, evaluation, report",
        description="Run the whole recipe: record expert demonstrations, behaviour-clone them, train "
        "with M-GRPO, evaluate the base, BC and RL policies on held-out episodes and write an HTML "
        "report. Scales: cpu (the embedded SmolLM2-135M on five MiniWoB++ tasks, under 40 minutes "
        "on 2 cores), gpu (Qwen2.5-3B-Instruct with LoRA on the arena; needs the model locally and a "
        "CUDA GPU), smoke (a tiny random model: checks the mechanics in minutes, learns nothing). "
        "Rerunning with the same --out resumes.",
    )
    demo.add_argument("--scale", choices=["cpu", "gpu", "smoke"], default="cpu", help="preset (default cpu)")
    demo.add_argument("--config", help="YAML/JSON overriding preset fields, e.g. {grpo: {steps: 8}, policy: {model: PATH}}")
    demo.add_argument("--seed", type=int, default=None, help="seed (default: the preset's, 0)")
    demo.add_argument("--out", help="run directory (default runs/demo-<scale>)")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.add_argument("--bc-from", metavar="RUN", help="start from the finished demonstrations, BC adapter and BC/base "
                      "evaluations of the run in RUN (its config may differ only in grpo), so RL variants are "
                      "compared on the same BC policy and held-out episodes")
    demo.add_argument("--until", choices=STAGES,
                      help="stop after this stage (sft: BC training; eval-*: a policy's held-out evaluation); "
                      "the same command without --until goes on from there")
    demo.add_argument("--skip", action="append", default=[], choices=SKIPPABLE, metavar="EVAL",
                      help="an evaluation not to run (repeatable; one of %(choices)s), e.g. eval-bc for an RL "
                      "variant whose BC policy was evaluated in the --bc-from run; the report lacks its rows")
    demo.set_defaults(func=_demo)

    pl = sub.add_parser(
        "plan", help="will it fit? peak memory of a run's phases, before any weights load (experimental)",
        description="Estimate the peak memory of a run's BC step, M-GRPO update and rollout batch from the "
        "model's config (built on the meta device: no weights, no download for the known architectures "
        "qwen2.5-3b, qwen2.5-7b, llama-3.1-8b) and the run config (preset, then --config), and say whether "
        "it fits common GPUs and which settings to change if not. The formulas are in webr1_kit/memory.py. "
        "Experimental: the activation terms are not calibrated (on the CPU, measured peaks were 1.6-3.2 times "
        "the plan's), so read the figures as a lower bound.")
    pl.add_argument("--scale", choices=["cpu", "gpu", "smoke"], default="gpu", help="preset (default gpu)")
    pl.add_argument("--config", help="YAML/JSON overriding preset fields, as for webr1 demo")
    pl.add_argument("--model", help="plan for this model instead (a known architecture, a local folder or a "
                    "cached Hub id), e.g. llama-3.1-8b")
    pl.add_argument("--gpu", action="append", metavar="CARD", help="a card (T4, L4, A100-40GB, H100, ...), a size "
                    "such as 24GB, or all (default; repeatable)")
    pl.add_argument("--device", choices=["cuda", "cpu"], help="plan for this device (default: the config's; auto "
                    "means cuda)")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    pl.set_defaults(func=_plan)

    sites = sub.add_parser("sites", help="the arena's bundled websites")
    ssub = sites.add_subparsers(dest="sites_command", metavar="ACTION")
    ssub.required = True
    ss = ssub.add_parser("serve", help="serve the arena sites on 127.0.0.1 until Ctrl-C",
                         description="Build the arena world and serve its sites on 127.0.0.1 (or --host). Requests "
                         "without an episode cookie share one state (episodes run by the kit get their own copies).")
    ss.add_argument("--host", help="the address to listen on and name in the sites' URLs, one other machines reach "
                    "this one at (default: $WEBR1_SITES_HOST, else 127.0.0.1); the sites have no authentication, "
                    "so any other than loopback is warned about")
    ss.add_argument("--world-seed", type=int, default=0, help="seed of the generated site data (default 0)")
    ss.add_argument("--port-base", type=int, default=0,
                    help="first port; sites get PORT, PORT+10, ... (default: free ports)")
    ss.set_defaults(func=_sites_serve)

    bs = sub.add_parser("browser-server", help="serve this machine's Chromium to episodes run elsewhere",
                        description="Start Playwright's browser server with the kit's Chromium and print its "
                        "WebSocket endpoint; runs that list it in env.browser_endpoints open their episodes' "
                        "browsers here (clients need the same Playwright version). Runs until Ctrl-C.")
    bs.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only; "
                    "anyone who can reach another address can drive the browser)")
    bs.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    bs.add_argument("--browser", help="Chromium executable (default: as `webr1 doctor` finds it)")
    bs.set_defaults(func=_browser_server)

    sm = sub.add_parser("serve-model", help="run a vLLM server the kit can generate on",
                        description="Start vLLM's OpenAI-compatible server for a model with what the kit's vLLM "
                        "generation needs: token ids and the log-probabilities of the sampled distribution, "
                        "runtime LoRA loading (the trainer loads each new adapter), seeded sampling. vLLM lives "
                        "in its own virtualenv: --python names its interpreter. Use the server with "
                        "policy.vllm_urls in a run config.")
    sm.add_argument("--model", default="embedded", help="the policy's model: \"embedded\", a local path or a Hub id "
                    "(default embedded)")
    sm.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sm.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    sm.add_argument("--python", help="the Python of vLLM's virtualenv (default: $WEBR1_VLLM_PYTHON, else python)")
    sm.add_argument("--dtype", default="auto", help="vLLM's --dtype (default auto; float32 on a CPU keeps the "
                    "log-probabilities within 2e-5 of the trainer's)")
    sm.add_argument("--max-lora-rank", type=int, default=16, help="largest LoRA rank to load (default 16, the kit's)")
    sm.add_argument("--gpu-memory-utilization", type=float, metavar="F",
                    help="the share of the GPU's memory vLLM may take (vLLM's default 0.9); lower it, e.g. 0.4, when "
                    "the trainer shares the GPU")
    sm.set_defaults(func=_serve_model)

    ex = sub.add_parser("experts", help="scripted expert demonstrations (behaviour-cloning data)")
    xsub = ex.add_subparsers(dest="experts_command", metavar="ACTION")
    xsub.required = True
    xr = xsub.add_parser("record", help="record expert demonstrations (arena by default, or MiniWoB++)",
                         description="Run the scripted expert once on each selected task and write the "
                         "successful episodes (with a <think> rationale per step) as trajectory JSONL, the "
                         "demonstrations `webr1 sft` and `webr1 rl --demos` read.",
                         parents=[_task_options("arena", suites="arena or miniwob (the suites with experts)")])
    xr.add_argument("--out", required=True, help="output JSONL file")
    xr.add_argument("--concurrency", type=int, default=4, help="episodes at once (default 4)")
    xr.add_argument("--max-turns", type=int, default=30, help="turn limit per episode (default 30)")
    xr.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    xr.add_argument("--quiet", action="store_true", help="no progress bar")
    xr.set_defaults(func=_experts_record)

    sf = sub.add_parser("sft", help="behaviour cloning (the SFT warm-up) on demonstrations",
                        description="Train the policy's LoRA adapter on expert demonstrations (trajectory JSONL, e.g. "
                        "from `webr1 experts record`). The config is webr1 demo's schema on the class defaults; this "
                        "command reads its policy, prompt, sft, init_adapter and seed. Writes OUT/metrics.jsonl, "
                        "OUT/checkpoints/ (resumed automatically) and OUT/adapter. Runs data-parallel under `accelerate launch` "
                        "(README, Scaling out).")
    sf.add_argument("--demos", required=True, help="demonstrations, trajectory JSONL")
    sf.add_argument("--out", required=True, help="run directory")
    sf.add_argument("--config", help="JSON/YAML run config")
    sf.add_argument("--quiet", action="store_true", help="no progress bar")
    sf.set_defaults(func=_sft)

    rl = sub.add_parser("rl", help="M-GRPO reinforcement learning on live episodes",
                        description="Alternate grouped rollouts and M-GRPO updates. The config is webr1 demo's "
                        "schema on the class defaults; this command reads its policy, prompt, sampling, env, grpo, "
                        "tasks {suite, split, names, limit}, eval_tasks {...} (the periodic evaluation's tasks, every "
                        "grpo.eval_every steps; none: the training tasks on other page seeds, MiniWoB++ only), "
                        "init_adapter (e.g. the SFT run's OUT/adapter) and seed. Writes OUT/config.json, "
                        "metrics.jsonl, trajectories/, checkpoints/ and adapter/. Runs data-parallel under `accelerate launch` "
                        "(README, Scaling out): each process plays its share of every step's episodes.")
    rl.add_argument("--config", help="JSON/YAML run config (defaults: the embedded model on five MiniWoB++ tasks)")
    rl.add_argument("--out", required=True, help="run directory")
    rl.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    rl.add_argument("--demos", help="expert demonstrations (JSONL, as `webr1 experts record` writes) for the "
                    "behaviour-cloning term that grpo.replay_coef > 0 adds to every update")
    rl.add_argument("--quiet", action="store_true", help="no progress bar")
    rl.set_defaults(func=_rl)

    rp = sub.add_parser(
        "replay", help="write an HTML replay of recorded episodes",
        description="Write a standalone HTML page (screenshots embedded, no network needed) that replays "
        "episodes step by step: the screenshot with the acted-on element outlined, the thought, the action, "
        "errors, URLs, and the final reward and evaluator verdict. RUN_DIR_OR_JSONL is a trajectory JSONL file "
        "or a folder: a `webr1 eval --out` folder (its trajectories.jsonl) or a training run (its latest "
        "trajectories/step-N.jsonl; pass e.g. RUN/trajectories/eval-step-10.jsonl for another file). "
        "Unreadable lines and missing screenshots are reported, not fatal.",
    )
    rp.add_argument("path", metavar="RUN_DIR_OR_JSONL", help="a run directory or a trajectory JSONL file")
    rp.add_argument("--out", default="replay.html", help="the HTML file to write (default replay.html)")
    rp.add_argument("--select", nargs="+", metavar="N_OR_TASK_ID",
                    help="which trajectories: 0-based positions in the file and/or task ids (every episode of "
                    "that task), in the order given (default: all)")
    rp.add_argument("--limit", type=int, default=None, help="at most N trajectories (after --select)")
    rp.add_argument("--groups", action="store_true",
                    help="show GRPO groups side by side (episodes of one task and page seed), with advantages")
    rp.set_defaults(func=_replay)

    wa = sub.add_parser("webarena", help="your own WebArena sites: check them")
    wasub = wa.add_subparsers(dest="webarena_command", metavar="ACTION")
    wasub.required = True
    wc = wasub.add_parser(
        "check", help="are the WebArena sites up, logged in, and unchanged since their reset?",
        description="For every configured WebArena site: is it reachable, does the kit's saved login still work "
        "(logging in again when it does not), and has its state changed since `check --mark-reset` was run right "
        "after the sites were reset (a fingerprint of a few cheap reads; see tasks/webarena/sitecheck.py for what "
        "it can and cannot see). Exit status 1 when a configured site is down or cannot be logged in to.",
    )
    wc.add_argument("--webarena-config", metavar="FILE", help="YAML/JSON config (default: $WEBR1_WEBARENA_CONFIG "
                    "and the SHOPPING, SHOPPING_ADMIN, REDDIT, GITLAB, MAP, WIKIPEDIA, HOMEPAGE variables)")
    wc.add_argument("--no-login", action="store_true",
                    help="no browser and no new logins: reachability, and the state column from saved logins")
    wc.add_argument("--mark-reset", action="store_true",
                    help="record the sites' current state as the freshly reset one (run right after a reset)")
    wc.add_argument("--timeout", type=float, default=10.0, help="seconds per reachability request (default 10)")
    wc.add_argument("--json", action="store_true", help="print the rows as JSON")
    wc.set_defaults(func=_webarena_check)

    iw = sub.add_parser("install-webarena", help="install the released WebArena task files (three benchmarks)",
                        description="pip-install the PyPI packages that publish WebArena's 812 tasks (libwebarena), "
                        "WebArena-Lite's 165 (browsergym-webarenalite) and WebArena-Verified's 812 with its 258 hard "
                        "ones (webarena-verified), without their dependencies: the kit reads only the task files, "
                        "and their dependencies would replace the kit's Playwright and pydantic. Afterwards --suite "
                        "webarena, webarena-lite and webarena-verified need no --tasks-file or --split-file. The "
                        "sites themselves are WebArena's Docker images (README, 'Real WebArena').")
    iw.add_argument("--quiet", action="store_true", help="print nothing unless something fails")
    iw.set_defaults(func=_install_webarena)

    ib = sub.add_parser("install-browser", help="find or install a Chromium the kit can drive",
                        description="Use an existing browser if there is one; otherwise try Playwright's own "
                        "build, then the system package (apt-get install chromium, as root).")
    ib.add_argument("--no-apt", action="store_true", help="never call apt-get")
    ib.set_defaults(func=_install_browser)

    doc = sub.add_parser("doctor", help="check the browser, packages and task pages",
                         description="Check that the browser, packages and MiniWoB++ pages are available.")
    doc.set_defaults(func=_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .errors import BrowserNotFound, InfraError
    from .config import ConfigError
    from .models import PolicyLoadError
    from .tasks.task import TaskSchemaError

    try:
        return args.func(args)
    except (ConfigError, TaskSchemaError, BrowserNotFound, PolicyLoadError, ValueError) as exc:
        print(f"webr1: error: {exc}", file=sys.stderr)
        return 2
    except InfraError as exc:
        print(f"webr1: infrastructure failure: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
