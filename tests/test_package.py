"""Package-level promises: light import, configs that name bad keys, the script helper, the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from webr1_kit.aio import run
from webr1_kit.cli import main
from webr1_kit.config import ConfigError, EnvConfig, field_docs, from_dict


def test_import_is_light():
    code = (
        "import sys, webr1_kit as wk; wk.EnvConfig; wk.load_tasks; wk.parse_action; wk.BrowserEnv; "
        "print(json.dumps([m for m in ('torch', 'playwright', 'transformers') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_every_module_imports_alone_in_a_fresh_interpreter_and_changes_nothing_global():
    """No import circle can bite whichever module a user imports first (a circle breaks only
    the import that enters it from one side, so each module is imported first, alone), and
    importing is free of side effects: the malloc policy and the bitsandbytes log level are set by
    `policy.load_model`, when a model is loaded, not by importing a module."""
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    import webr1_kit

    root = Path(webr1_kit.__file__).parent
    modules = sorted(".".join(("webr1_kit", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
                     for p in root.rglob("*.py"))
    check = ("import importlib, logging, sys; importlib.import_module(sys.argv[1]); "
             "assert logging.getLogger('bitsandbytes.backends.cpu.ops').level == logging.NOTSET, 'log level set'")

    def run(module):
        r = subprocess.run([sys.executable, "-c", check, module], capture_output=True, text=True)
        return module, r.returncode, r.stderr.strip().splitlines()[-1:] if r.returncode else []

    with ThreadPoolExecutor(4) as pool:
        failed = [r for r in pool.map(run, modules) if r[1]]
    assert len(modules) > 70 and {"webr1_kit.errors", "webr1_kit.browser", "webr1_kit.tasks.arena_templates"} <= set(modules)
    assert failed == []


def test_public_names_resolve():
    import webr1_kit as wk

    for name in wk.__all__:
        assert getattr(wk, name) is not None
    with pytest.raises(AttributeError):
        wk.no_such_thing  # noqa: B018
    assert len(wk.__all__) <= 30  # the names a notebook needs; the rest stay in their modules
    from webr1_kit.trajectory import read_jsonl

    assert wk.trajectory.read_jsonl is read_jsonl  # modules are reachable as attributes too


def test_config_from_dict_names_the_bad_key_and_allowed_values():
    assert from_dict(EnvConfig, {"observation": "axtree", "max_obs_chars": 100}) == EnvConfig(
        observation="axtree", max_obs_chars=100
    )
    with pytest.raises(ConfigError, match=r"unknown key 'max_obs_char'.*max_obs_chars"):
        from_dict(EnvConfig, {"max_obs_char": 100})
    with pytest.raises(ConfigError, match=r"env\.observation: 'pixels' is not allowed.*'html', 'axtree'"):
        from_dict(EnvConfig, {"observation": "pixels"}, where="env")
    with pytest.raises(ConfigError, match=r"headless: expected true or false"):
        from_dict(EnvConfig, {"headless": "yes"})
    with pytest.raises(ConfigError, match=r"max_obs_chars: expected an integer"):
        from_dict(EnvConfig, {"max_obs_chars": True})
    with pytest.raises(ConfigError, match=r"expected int, got '8000'"):
        from_dict(EnvConfig, {"max_obs_chars": "8000"})


def test_every_config_field_is_documented():
    docs = field_docs(EnvConfig)
    assert set(docs) == set(EnvConfig.__dataclass_fields__)
    assert all(len(d) > 10 for d in docs.values())


def test_run_works_with_and_without_a_running_loop():
    async def answer():
        await asyncio.sleep(0)
        return 42

    assert run(answer()) == 42
    # Inside a running loop (a notebook calling a synchronous helper). nest-asyncio patches
    # asyncio globally, so this runs in its own interpreter.
    code = (
        "import asyncio\nfrom webr1_kit.aio import run\n"
        "async def answer():\n    await asyncio.sleep(0)\n    return 42\n"
        "async def cell():\n    return run(answer())\n"
        "print(asyncio.run(cell()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "42"


def test_cli_lists_miniwob_tasks(capsys):
    assert main(["tasks", "list", "--suite", "miniwob", "--json"]) == 0
    names = json.loads(capsys.readouterr().out)
    assert "click-button" in names and len(names) >= 100
    # The same task options as eval and experts record (one parent parser, one selector).
    assert main(["tasks", "list", "--suite", "miniwob", "--tasks", "focus-text,click-button", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == ["focus-text", "click-button"]
    assert main(["tasks", "list", "--suite", "miniwob", "--limit", "3", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3


def test_cli_experts_record_writes_demonstrations_of_any_suite_with_experts(capsys, tmp_path):
    out = tmp_path / "demos.jsonl"
    assert main(["experts", "record", "--suite", "miniwob", "--tasks", "click-button,enter-text", "--out", str(out),
                 "--quiet"]) == 0
    demos = [json.loads(x) for x in out.read_text().splitlines()]
    assert [d["task_id"] for d in demos] == ["miniwob/click-button", "miniwob/enter-text"]
    assert all(d["reward"] == 1.0 and d["turns"][0]["response"].startswith("<think>") for d in demos)
    assert main(["experts", "record", "--suite", "webarena", "--out", str(out), "--quiet"]) == 2
    assert "arena and MiniWoB++ only" in capsys.readouterr().err


def test_cli_eval_prints_the_metrics(capsys, tmp_path):
    rc = main(["eval", "--suite", "miniwob", "--tasks", "click-button,focus-text", "--policy", "expert",
               "--episodes", "2", "--concurrency", "2", "--json", "--quiet", "--out", str(tmp_path / "run")])
    assert rc == 0
    m = json.loads(capsys.readouterr().out)
    for key in ("success_rate", "episodes", "invalid_action_rate", "mean_turns", "infra_failures"):
        assert key in m
    assert m["episodes"] == 4 and m["success_rate"] == 1.0
    assert {p.name for p in (tmp_path / "run").iterdir()} == {"trajectories.jsonl", "metrics.json", "config.json"}
    rc = main(["eval", "--suite", "miniwob", "--tasks", "click-button", "--policy", "expert", "--episodes", "2",
               "--samples-per-page", "3", "--json", "--quiet", "--out", str(tmp_path / "sampled")])
    m = json.loads(capsys.readouterr().out)
    assert rc == 0 and m["episodes"] == 6 and m["samples_per_page"] == 3
    seeds = [json.loads(x)["seed"] for x in (tmp_path / "sampled" / "trajectories.jsonl").read_text().splitlines()]
    first = [json.loads(x)["seed"] for x in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()][:2]
    assert seeds == [first[0]] * 3 + [first[1]] * 3  # the pages of the plain run, three plays each
    assert main(["eval", "--tasks", "click-button", "--samples-per-page", "0", "--quiet"]) == 2
    assert "--samples-per-page must be 1 or more" in capsys.readouterr().err
    assert main(["eval", "--tasks", "click-button", "--policy", "scripted", "--quiet"]) == 2
    assert 'called "expert" now' in capsys.readouterr().err  # one name for the scripted experts


def test_cli_bad_input_names_the_problem(capsys, tmp_path):
    assert main(["eval", "--tasks", "click-buton", "--quiet"]) == 2
    assert "click-buton" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("env:\n  observaton: html\n")
    assert main(["eval", "--tasks", "click-button", "--config", str(bad), "--quiet"]) == 2
    assert "unknown key 'observaton'" in capsys.readouterr().err
    # A path that does not exist fails before any Hub lookup (no network retries in tests).
    assert main(["eval", "--policy", "./no-such-model", "--tasks", "click-button", "--quiet"]) == 2
    assert "model path ./no-such-model does not exist" in capsys.readouterr().err
    assert main(["eval", "--policy", str(tmp_path), "--tasks", "click-button", "--quiet"]) == 2
    assert "is not a model directory" in capsys.readouterr().err


def test_cli_help_for_every_subcommand():
    for cmd in (["--help"], ["eval", "--help"], ["tasks", "list", "--help"], ["demo", "--help"],
                ["doctor", "--help"], ["install-browser", "--help"]):
        out = subprocess.run([sys.executable, "-m", "webr1_kit.cli", *cmd], capture_output=True, text=True)
        assert out.returncode == 0 and "usage: webr1" in out.stdout


def test_every_entry_point_starts_from_the_same_rollout_defaults():
    """Each rollout knob has one default, in config.RolloutConfig: the library functions,
    `webr1 eval`, the pipeline's config and M-GRPO's config all start from it."""
    import inspect

    from webr1_kit.cli import build_parser
    from webr1_kit.config import GRPOConfig, RolloutConfig
    from webr1_kit.pipeline import PipelineConfig
    from webr1_kit.rollout import rollout, run_episode, run_episodes

    d = RolloutConfig()
    for fn in (run_episode, run_episodes, rollout):
        params = inspect.signature(fn).parameters
        for knob in ("max_turns", "max_invalid", "concurrency", "retries"):
            if knob in params:
                assert params[knob].default == getattr(d, knob), (fn.__name__, knob)
    args = build_parser().parse_args(["eval", "--suite", "miniwob"])
    assert (args.max_turns, args.max_invalid or None, args.concurrency) == (d.max_turns, d.max_invalid, d.concurrency)
    assert PipelineConfig().rollout == d
    g = GRPOConfig()
    assert (g.max_turns, g.concurrency) == (d.max_turns, d.concurrency)
    assert g.max_invalid == 1  # M-GRPO's own choice: one invalid turn costs the episode (see its docstring)
