"""The main job end to end at smoke scale (tiny random model, real browser and pages)."""

from __future__ import annotations

import json

import pytest

from webr1_kit.aio import run
from webr1_kit.browser import Browser
from webr1_kit.config import ConfigError
from webr1_kit.pipeline import SCALES, Pipeline, run_pipeline, saved_config, scale_config
from webr1_kit.report import success_table, write_report


# The smoke preset plus every optional evaluation: a held-out task and sampled evaluations.
EXTRA = {"heldout_tasks": {"suite": "miniwob", "names": ["click-link"]}, "eval_samples": 2}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipeline") / "run"
    report = run(run_pipeline("smoke", out, progress=False, overrides=EXTRA))
    return out, report


def test_every_stage_runs_and_the_report_holds_them(smoke_run):
    out, report = smoke_run
    for name in ("demos", "eval-base", "sft", "eval-bc", "rl", "eval-rl", "eval-base-heldout-tasks",
                 "eval-bc-heldout-tasks", "eval-rl-heldout-tasks", "eval-bc-sampled", "eval-rl-sampled"):
        assert (out / "stages" / f"{name}.json").is_file(), name
    assert not (out / "stages" / "eval-base-sampled.json").exists()  # the untrained model is evaluated greedily only
    rows = success_table(out)
    assert [r["stage"] for r in rows] == ["base", "bc", "rl"]
    cfg = scale_config("smoke", EXTRA)
    for r in rows:
        assert r["episodes"] + r["infra_failures"] == len(cfg.tasks.names) * cfg.eval_episodes
        assert 0.0 <= r["ci95"][0] <= r["ci95"][1] <= 1.0
    heldout = success_table(out, "-heldout-tasks")
    assert [r["stage"] for r in heldout] == ["base", "bc", "rl"]
    assert all(set(r["per_task"]) == {"miniwob/click-link"} for r in heldout)
    sampled = success_table(out, "-sampled")
    assert [r["episodes"] + r["infra_failures"] for r in sampled] == [len(cfg.tasks.names) * cfg.eval_episodes * 2] * 2
    html = report.read_text()
    for text in ("Base model (no training)", "After BC warm-up", "After BC + M-GRPO", "Behaviour cloning", "M-GRPO",
                 "data:image/png;base64,", "What each stage changed", "base &rarr; bc: on the same",
                 "Held-out tasks (never trained on)", "base-heldout-tasks &rarr; bc-heldout-tasks", "sampled at the"):
        assert text in html, text
    assert "src='http" not in html and 'src="http' not in html and "<link" not in html  # self-contained
    # the demonstrations are real expert successes on the training pages
    demos = json.loads((out / "stages" / "demos.json").read_text())
    assert demos["successful"] == demos["episodes"] == len(cfg.tasks.names) * cfg.demos_per_task


def test_evaluation_pages_are_held_out_from_the_demonstrations(smoke_run):
    from webr1_kit.trajectory import read_jsonl

    out, _ = smoke_run
    demo_seeds = {(t.task_id, t.seed) for t in read_jsonl(out / "demos.jsonl")}
    eval_seeds = {(t.task_id, t.seed) for t in read_jsonl(out / "eval" / "rl.jsonl")}
    assert eval_seeds and not demo_seeds & eval_seeds
    sampled = [(t.task_id, t.seed) for t in read_jsonl(out / "eval" / "rl-sampled.jsonl")]
    assert set(sampled) == eval_seeds and len(sampled) == 2 * len(eval_seeds)  # the same pages, twice each


def test_heldout_tasks_must_not_be_training_tasks(tmp_path):
    cfg = scale_config("smoke", {"heldout_tasks": {"suite": "miniwob", "names": ["click-button"]}})
    with pytest.raises(ValueError, match="heldout_tasks are also training tasks: miniwob/click-button"):
        run(Pipeline(cfg, tmp_path / "bad", progress=False).run())


def test_a_rerun_skips_finished_stages(smoke_run):
    out, _ = smoke_run
    before = {p.name: p.stat().st_mtime_ns for p in (out / "stages").iterdir()}
    run(run_pipeline("smoke", out, progress=False, overrides=EXTRA))
    after = {p.name: p.stat().st_mtime_ns for p in (out / "stages").iterdir()}
    assert before == after


def test_a_changed_config_is_refused_rather_than_mixed(smoke_run):
    out, _ = smoke_run
    with pytest.raises(ValueError, match="different config.*grpo.steps"):
        Pipeline(scale_config("smoke", {**EXTRA, "grpo": {"steps": 3}}), out)


def test_an_rl_variant_reuses_a_finished_runs_bc_stages(smoke_run, tmp_path):
    from webr1_kit.cli import main

    out, _ = smoke_run
    variant = tmp_path / "variant"
    other = Pipeline(scale_config("smoke", {**EXTRA, "grpo": {"loss_norm": "paper"}}), variant, progress=False)
    taken = other.reuse_bc(out)
    assert taken == ["demos", "sft", "eval-base", "eval-base-heldout-tasks", "eval-bc", "eval-bc-heldout-tasks",
                     "eval-bc-sampled"]
    assert json.loads((variant / "stages" / "sft.json").read_text())["adapter"] == str(variant / "sft" / "adapter")
    assert (variant / "sft" / "adapter" / "adapter_model.safetensors").read_bytes() == \
        (out / "sft" / "adapter" / "adapter_model.safetensors").read_bytes()
    assert (variant / "eval" / "bc.jsonl").read_text() == (out / "eval" / "bc.jsonl").read_text()
    assert other.done("rl") is None and not (variant / "eval" / "rl.jsonl").exists()
    assert other.reuse_bc(out) == []  # taken once
    with pytest.raises(ValueError, match="different config outside grpo.*eval_samples"):
        Pipeline(scale_config("smoke", {**EXTRA, "eval_samples": 3}), tmp_path / "v2").reuse_bc(out)
    with pytest.raises(ValueError, match="not a pipeline run directory"):
        other.reuse_bc(tmp_path)
    assert main(["demo", "--scale", "smoke", "--out", str(tmp_path / "v3"), "--bc-from", str(tmp_path)]) == 2


def test_a_variant_runs_from_a_moved_bc_run_whose_stage_files_name_old_paths(smoke_run, tmp_path):
    """Stage files name adapters relative to where a run was started; a run directory that
    was moved (or started from another folder) still lends its BC stage, and the variant
    trains and evaluates from its own copy of the adapter."""
    import shutil

    out, _ = smoke_run
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    stage = moved / "stages" / "sft.json"
    stage.write_text(json.dumps({**json.loads(stage.read_text()), "adapter": "somewhere/else/sft/adapter"}))
    variant = tmp_path / "variant"

    async def on_a_browser_of_its_own():
        """The variant's stages on a browser the caller gave (as a notebook running several
        pipelines does): every context is opened on it, and it is left open."""
        browser = Browser()
        opened = []
        new_context = browser.new_context
        browser.new_context = lambda *a, **kw: (opened.append(1), new_context(*a, **kw))[1]
        try:
            other = Pipeline(scale_config("smoke", {**EXTRA, "grpo": {"loss_norm": "paper"}}), variant,
                             progress=False, browser=browser)
            assert "sft" in other.reuse_bc(moved)
            assert (json.loads((variant / "stages" / "sft.json").read_text())["adapter"]
                    == str(variant / "sft" / "adapter"))
            await other.run()
            return other, browser.connected, len(opened)
        finally:
            await browser.close()

    other, still_open, contexts = run(on_a_browser_of_its_own())
    assert other.done("rl") is not None and (variant / "eval" / "rl.jsonl").is_file()
    assert (variant / "rl" / "adapter" / "adapter_model.safetensors").is_file()
    assert still_open and contexts >= 4  # RL's group and every evaluation played on it


def test_until_stops_after_a_stage_and_the_next_run_goes_on_from_it_or_skips_an_evaluation(tmp_path, capsys):
    """`--until sft` stops after BC; a later run goes on from there, either to a later stage
    or (`--skip eval-bc`, an RL variant whose BC was evaluated elsewhere) through every other
    stage, writing the report without BC's row. Only evaluations can be skipped. The two
    continuations share one run to BC (copied), as they would share it in use."""
    import shutil

    from webr1_kit.cli import main

    out = tmp_path / "bc-only"
    assert main(["demo", "--scale", "smoke", "--quiet", "--out", str(out), "--until", "sft"]) == 0
    assert f"stopped after sft: {out.resolve()}" in capsys.readouterr().out
    done = sorted(p.stem for p in (out / "stages").glob("*.json"))
    assert done == ["demos", "sft"] and (out / "sft" / "adapter" / "adapter_model.safetensors").is_file()
    variant = tmp_path / "variant"
    shutil.copytree(out, variant)
    trained = (out / "stages" / "sft.json").stat().st_mtime_ns
    p = Pipeline(scale_config("smoke"), out, progress=False)
    assert run(p.run(until="eval-bc")) == out
    assert sorted(p.stem for p in (out / "stages").glob("*.json")) == ["demos", "eval-bc", "sft"]
    assert (out / "stages" / "sft.json").stat().st_mtime_ns == trained  # BC was not trained again
    assert not (out / "report.html").exists()
    with pytest.raises(ValueError, match="no stage 'sft' in this run; its stages are rl, eval-rl, eval-base"):
        run(Pipeline(scale_config("smoke", {"warmup": False}), tmp_path / "zero", progress=False).run(until="sft"))
    with pytest.raises(SystemExit):
        main(["demo", "--scale", "smoke", "--out", str(out), "--until", "bc"])  # not a stage: argparse names them

    assert main(["demo", "--scale", "smoke", "--quiet", "--out", str(variant), "--skip", "eval-bc"]) == 0
    assert sorted(p.stem for p in (variant / "stages").glob("*.json")) == ["demos", "eval-base", "eval-rl", "rl", "sft"]
    assert (variant / "report.html").is_file()
    assert [r["stage"] for r in success_table(variant)] == ["base", "rl"]
    with pytest.raises(ValueError, match="'rl' cannot be skipped; only the evaluations can"):
        Pipeline(scale_config("smoke"), variant, skip=("eval-bc", "rl"))
    with pytest.raises(SystemExit):
        main(["demo", "--scale", "smoke", "--out", str(variant), "--skip", "sft"])  # argparse names the choices


def test_rl_starts_from_the_init_adapter(smoke_run, tmp_path, monkeypatch):
    """Without the warm-up, M-GRPO starts from `init_adapter`: the frozen KL reference, saved
    when RL starts, holds exactly that adapter's weights. An adapter that is not there is
    named before anything runs. The run's stages share one Chromium."""
    from safetensors.torch import load_file

    out, _ = smoke_run
    start = out / "sft" / "adapter"
    cfg = scale_config("smoke", {"warmup": False, "init_adapter": str(start)})
    p = Pipeline(cfg, tmp_path / "from-bc", progress=False)
    launches = []
    launch = Browser._launch

    async def counted(self):
        launches.append(self)
        await launch(self)

    monkeypatch.setattr(Browser, "_launch", counted)
    run(p.run())
    assert len(launches) == 1  # one Chromium for RL and both evaluations
    reference = load_file(str(tmp_path / "from-bc" / "rl" / "reference" / "adapter_model.safetensors"))
    init = load_file(str(start / "adapter_model.safetensors"))
    assert reference.keys() == init.keys() and all((reference[k] == init[k]).all() for k in init)
    assert p.done("demos") is None and p.done("sft") is None
    missing = Pipeline(scale_config("smoke", {"init_adapter": str(tmp_path / "nowhere")}), tmp_path / "bad",
                       progress=False)
    with pytest.raises(ValueError, match="init_adapter: .*nowhere holds no adapter"):
        run(missing.run())
    assert missing.done("demos") is None


def test_a_run_written_before_a_setting_existed_still_resumes(tmp_path):
    out = tmp_path / "old"
    Pipeline(SCALES["smoke"], out)
    saved = json.loads((out / "pipeline.json").read_text())
    del saved["grpo"]["replay_coef"]  # as a kit without that setting wrote it
    (out / "pipeline.json").write_text(json.dumps(saved))
    Pipeline(SCALES["smoke"], out)  # the missing setting takes its default
    with pytest.raises(ValueError, match="grpo.replay_coef"):
        Pipeline(scale_config("smoke", {"grpo": {"replay_coef": 0.5}}), out)
    # Runs saved before the policy section held the model settings at the top level.
    policy = saved.pop("policy")
    saved.update(model=policy["model"], lora=policy["lora"], quantization="none", dtype="auto")
    (out / "pipeline.json").write_text(json.dumps(saved))
    Pipeline(SCALES["smoke"], out)
    assert saved_config(out).policy == SCALES["smoke"].policy
    with pytest.raises(ValueError, match="policy.model"):
        Pipeline(scale_config("smoke", {"policy": {"model": "embedded"}}), out)
    # ... and the rollout limits at the top level, before the rollout section.
    rollout = saved.pop("rollout")
    saved.update(max_turns=rollout["max_turns"], max_invalid=rollout["max_invalid"], concurrency=rollout["concurrency"])
    (out / "pipeline.json").write_text(json.dumps(saved))
    Pipeline(SCALES["smoke"], out)
    assert saved_config(out).rollout == SCALES["smoke"].rollout
    with pytest.raises(ValueError, match="rollout.max_turns"):
        Pipeline(scale_config("smoke", {"rollout": {"max_turns": 3}}), out)
    (out / "pipeline.json").write_text('{"scale": "smo')  # a file cut off mid-write
    with pytest.raises(ValueError, match="pipeline.json is not valid JSON"):
        saved_config(out)
    assert (out / "pipeline.json").read_text() == '{"scale": "smo'  # left as it was


def test_runs_saved_with_flat_task_keys_resume_with_the_same_tasks(tmp_path):
    """Before the task sections, pipeline configs chose tasks with suite, tasks (MiniWoB++
    names), heldout_tasks, train_limit and eval_limit. Such runs still resume, select the
    same tasks (the arena's samples with the same seeds), and new configs get an error that
    shows the sections to write instead."""
    cases = {
        "miniwob": ({"suite": "miniwob", "tasks": ["click-button", "focus-text"], "heldout_tasks": ["click-link"],
                     "train_limit": None, "eval_limit": None},
                    {"tasks": {"suite": "miniwob", "names": ["click-button", "focus-text"]},
                     "heldout_tasks": {"suite": "miniwob", "names": ["click-link"]}}),
        "arena": ({"suite": "arena", "tasks": ["click-button"], "heldout_tasks": [], "train_limit": 5, "eval_limit": 3},
                  {"tasks": {"suite": "arena", "split": "train", "limit": 5},
                   "eval_tasks": {"suite": "arena", "split": "test", "limit": 3}}),
    }
    for name, (flat, sections) in cases.items():
        out = tmp_path / name
        cfg = scale_config("smoke", sections)
        Pipeline(cfg, out)
        saved = json.loads((out / "pipeline.json").read_text())
        for key in ("tasks", "eval_tasks", "heldout_tasks"):
            saved.pop(key)
        (out / "pipeline.json").write_text(json.dumps({**saved, **flat}))  # as the older kit wrote it
        Pipeline(cfg, out)  # resumes: the same config
        old = saved_config(out)
        for which in ("train", "eval", "heldout"):
            assert [t.task_id for t in Pipeline(old, out).tasks(which)] == [t.task_id for t in Pipeline(cfg, out).tasks(which)]
        with pytest.raises(ValueError, match="tasks are chosen by sections now"):
            scale_config("smoke", flat)
    assert len(Pipeline(old, tmp_path / "arena").tasks("eval")) == 3


def test_flat_runs_that_named_no_tasks_resume_on_the_tasks_they_trained_on(tmp_path):
    """A flat-format run without a task list trained on the first five MiniWoB++ training
    tasks, the default then; it keeps them after the default tasks changed."""
    from webr1_kit.pipeline import MINIWOB_TASKS
    from webr1_kit.tasks.miniwob import MINIWOB_TRAIN_TASKS

    out = tmp_path / "old"
    Pipeline(scale_config("smoke"), out)
    saved = json.loads((out / "pipeline.json").read_text())
    for key in ("tasks", "eval_tasks", "heldout_tasks"):
        saved.pop(key)
    (out / "pipeline.json").write_text(json.dumps({**saved, "suite": "miniwob"}))
    names = saved_config(out).tasks.names
    assert tuple(names) == MINIWOB_TRAIN_TASKS[:5] and tuple(names) != tuple(MINIWOB_TASKS)


def test_the_policy_section_reaches_the_model(tmp_path):
    """The demo config takes the same policy section as `webr1 sft/rl`; a field set there
    (here CPU autocast, which the pipeline once had no way to set) is what the model gets."""
    for autocast, marked in (("off", False), ("bfloat16", True)):
        cfg = scale_config("smoke", {"policy": {"cpu_autocast": autocast, "device": "cpu"}})
        policy = Pipeline(cfg, tmp_path / autocast, progress=False).policy()
        assert policy.config.cpu_autocast == autocast and policy.config.lora.r == 4  # the preset's LoRA stays
        assert (getattr(policy.model.get_base_model(), "webr1_autocast", None) is not None) == marked


def test_bad_overrides_name_the_key():
    with pytest.raises(ConfigError, match="grpo: unknown key 'stepz'"):
        scale_config("smoke", {"grpo": {"stepz": 3}})
    with pytest.raises(ValueError, match="unknown scale 'huge'"):
        scale_config("huge")
    with pytest.raises(ConfigError, match="'model'.*policy section"):
        scale_config("smoke", {"model": "embedded"})
    with pytest.raises(ConfigError, match=r"'concurrency', 'max_turns' moved into the rollout section.*\{\"rollout\""):
        scale_config("smoke", {"max_turns": 3, "concurrency": 2})
    with pytest.raises(ConfigError, match="policy.lora.*cannot be null"):
        scale_config("smoke", {"policy": {"lora": None}})


def test_a_report_of_an_unfinished_run_says_what_is_missing(tmp_path):
    out = tmp_path / "empty"
    Pipeline(SCALES["smoke"], out)
    html = write_report(out).read_text()
    assert "Base model (no training): not evaluated yet" in html
    assert "the M-GRPO stage has not run" in html
