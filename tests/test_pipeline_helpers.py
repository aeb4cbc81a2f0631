"""The small helpers the notebooks use: results tables, a pipeline's tasks and evaluations,
evaluating on other tasks, and the token view of what behaviour cloning trains on."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

import webr1_kit as wk
from webr1_kit.config import PromptConfig
from webr1_kit.observation import Observation
from webr1_kit.pipeline import Pipeline, run_tasks, scale_config
from webr1_kit.report import results_table, token_stats
from webr1_kit.stats import compare_paired
from webr1_kit.trajectory import Trajectory, Turn, write_jsonl


def model_traj(reward: float, prompts: list[int], completion: int = 3, task: str = "t") -> Trajectory:
    turns = [Turn(observation={}, response="r", prompt_ids=[1] * n, completion_ids=[2] * completion,
                  logprobs=[-1.0] * completion) for n in prompts]
    return Trajectory(task, "i", 0, turns=turns, reward=reward, status="done", meta={"sites": ["shop"]})


def test_results_table_rows_and_token_growth():
    a = [model_traj(1.0, [100, 110]), model_traj(0.0, [100, 120, 140])]
    b = [Trajectory("t", "i", 0, turns=[Turn(observation={}, response="x")], reward=1.0, status="done"),
         Trajectory("t", "i", 1, status="infra_failure")]
    table = results_table({"model": a, "<expert>": b})
    model, expert = table.rows
    assert model["success_rate"] == 0.5 and model["evaluated"] == 2 and model["mean_turns"] == 2.5
    assert model["prompt_tokens_by_turn"] == [100, 115, 140] and model["response_tokens"] == 3
    assert model["prompt_tokens"] == pytest.approx((100 + 110 + 100 + 120 + 140) / 5)
    assert expert["success_rate"] == 1.0 and expert["infra_failures"] == 1 and expert["prompt_tokens"] is None
    text = repr(table)
    assert "100 → 115 → 140" in text and "50%" in text and "<expert>" in text
    html = table._repr_html_()
    assert "&lt;expert&gt;" in html and "<expert>" not in html  # labels are escaped
    assert token_stats([]) == {"prompt_tokens": None, "response_tokens": None, "prompt_tokens_by_turn": []}


def test_results_table_reads_files(tmp_path):
    write_jsonl(tmp_path / "rl.jsonl", [model_traj(1.0, [50])])
    (row,) = results_table({"rl": tmp_path / "rl.jsonl"}).rows
    assert row["success_rate"] == 1.0 and row["per_site"] == {"shop": 1.0}


def test_compare_paired_counts_changes_on_the_same_episodes(tmp_path):
    def ev(outcomes, status=None):
        return [Trajectory(f"task{i % 5}", "i", i // 5, reward=float(r),
                           status=(status or {}).get(i, "done")) for i, r in enumerate(outcomes)]

    before = ev([0] * 12 + [1] * 8)
    after = ev([1] * 11 + [0] + [1] * 7 + [0], status={19: "infra_failure"})  # the last pair is not evaluated
    write_jsonl(tmp_path / "after.jsonl", after)
    c = compare_paired(before, tmp_path / "after.jsonl")  # any source results_table takes
    assert c["pairs"] == 19 and c["unpaired"] == 0
    assert (c["before"], c["after"], c["gained"], c["lost"]) == (7, 18, 11, 0)
    assert c["difference"] == pytest.approx(11 / 19)
    assert c["p_value"] == pytest.approx(2 / 2 ** 11)  # 11 gained, 0 lost: sign test
    lo, hi = c["difference_ci95"]
    assert 0.25 < lo < 11 / 19 < hi < 0.8  # clear of 0, as p = 0.001 says
    assert compare_paired(before, before)["p_value"] == 1.0 and compare_paired(before, before)["gained"] == 0
    # 6 gained against 4 lost is no evidence of a change
    mixed = ev([1] * 6 + [0] * 4 + [0] * 10)
    base = ev([0] * 6 + [1] * 4 + [0] * 10)
    assert compare_paired(base, mixed)["p_value"] == pytest.approx(0.754, abs=1e-3)
    # episodes evaluated on one side only are counted, not paired
    assert compare_paired(before[:10], before)["unpaired"] == 10
    assert wk.compare_paired is compare_paired


def test_pipeline_tasks_and_finished_evaluations(tmp_path):
    p = Pipeline(scale_config("smoke"), tmp_path / "run", progress=False)
    assert [t.task_id for t in p.tasks("train")] == [t.task_id for t in p.tasks("eval")]
    assert len(p.tasks()) == len(scale_config("smoke").tasks.names)
    assert p.tasks("heldout") == []  # the preset names none
    with pytest.raises(ValueError, match="train.*eval.*heldout"):
        p.tasks("test")
    assert p.evaluations() == {}
    for name in ("base", "bc"):
        write_jsonl(p.out / "eval" / f"{name}.jsonl", [model_traj(0.0, [10])])
        p.mark(f"eval-{name}", {"metrics": {}})
    write_jsonl(p.out / "eval" / "half-written.jsonl", [model_traj(0.0, [10])])  # no stage record: not finished
    assert p.evaluations() == {"base": p.out / "eval" / "base.jsonl", "bc": p.out / "eval" / "bc.jsonl"}


def test_show_tokens_shows_what_behaviour_cloning_trains_on():
    from transformers import AutoTokenizer

    from webr1_kit.models import embedded_path
    from webr1_kit.sft import examples

    tok = AutoTokenizer.from_pretrained(embedded_path())
    obs = Observation(url="http://shop/1", title="t", content='<button id="4" data-text="Buy">').to_dict()
    response = '<think>Click buy.</think><answer>do(action="Click", element="4")</answer>'
    demo = Trajectory("t1", "Buy it", 0, turns=[Turn(observation=obs, response=response)], reward=1.0, status="done")
    seqs = examples(SimpleNamespace(tokenizer=tok, prompt=PromptConfig()), [demo])
    with pytest.raises(ValueError, match="no token record"):
        wk.show_tokens(demo, tok)  # a scripted demonstration has no token ids of its own
    body = wk.show_tokens(seqs, tok).body
    trained = [int(i) for i in re.findall(r"data-i='(\d+)' data-m='1'", body)]
    assert trained == [i for i, m in enumerate(seqs[0].loss_mask) if m]
    assert tok.decode([seqs[0].input_ids[i] for i in trained]).startswith(response)
    assert "1 training sequence(s)" in body and "logp" not in body and "advantage" not in body


@pytest.mark.slow
async def test_pipeline_evaluates_on_other_tasks(tmp_path):
    p = Pipeline(scale_config("smoke", {"rollout": {"max_turns": 1}}), tmp_path / "run", progress=False, log=lambda _: None)
    other = wk.load_tasks("miniwob", names=["click-link"])
    r = await p.evaluate("transfer", None, tasks=other, episodes=1)
    assert r["metrics"]["episodes"] == 1 and list(r["metrics"]["per_task"]) == [other[0].task_id]
    again = await p.evaluate("transfer", None, tasks=wk.load_tasks("miniwob", names=["click-button"]))
    assert again == p.done("eval-transfer") and list(again["metrics"]["per_task"]) == [other[0].task_id]  # as recorded
    assert list(p.evaluations()) == ["transfer"]
    (traj,) = [json.loads(x) for x in p.evaluations()["transfer"].read_text().splitlines()]
    assert traj["task_id"] == other[0].task_id and len(traj["turns"]) == 1
    # `play` is the evaluation without the record: the same pages and responses, nothing written
    res = await p.play(None, tasks=other, episodes=1)
    (played,) = res.trajectories
    assert (played.task_id, played.seed, [t.response for t in played.turns]) == \
        (traj["task_id"], traj["seed"], [t["response"] for t in traj["turns"]])
    assert list(p.evaluations()) == ["transfer"]


def test_every_shipped_config_and_preset_reads_through_the_one_schema():
    """`webr1 demo`, `webr1 sft`, `webr1 rl` and the pipeline read one schema
    (`pipeline.load_config`): every preset, and every config file BENCHMARKS.md and docs/experiments/ cite, loads
    through it (an unknown or retyped key would raise ConfigError). `webr1 rl` configs
    (bench/configs/rl/) load on the class defaults, as that command reads them."""
    from pathlib import Path

    from webr1_kit.cli import _load_run_config
    from webr1_kit.pipeline import SCALES, load_config

    for name, preset in SCALES.items():
        assert scale_config(name) == preset == load_config({}, preset)
    configs = Path(__file__).parent.parent / "bench" / "configs"
    rl_files = sorted(configs.glob("rl/*.json"))
    assert rl_files
    for f in rl_files:
        overrides = json.loads(f.read_text())
        cfg = _load_run_config(str(f))
        assert cfg == load_config(overrides) and cfg.init_adapter == overrides.get("init_adapter")
        assert cfg.grpo.steps == overrides["grpo"]["steps"] and run_tasks(cfg, "train")
    files = sorted([*configs.glob("*.json"), *configs.glob("learn/*.json")])
    assert files
    for f in files:
        overrides = json.loads(f.read_text())
        cfg = scale_config("cpu", overrides)
        expected = overrides["tasks"]["suite"] if "tasks" in overrides else "miniwob"
        assert cfg.tasks.suite == expected
        assert run_tasks(cfg, "train") and run_tasks(cfg, "eval")  # every section selects tasks
        assert cfg.grpo.steps == overrides.get("grpo", {}).get("steps", cfg.grpo.steps)


def arena_ablation():
    """bench/arena_ablation.py as a module."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "bench" / "arena_ablation.py"
    spec = importlib.util.spec_from_file_location("arena_ablation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_arena_ablations_arms_differ_from_plain_only_in_their_grpo_switches(tmp_path):
    """bench/arena_ablation.py continues one BC adapter in every arm (`webr1 demo --bc-from`),
    which only a config that differs in grpo alone may do; each arm turns on what it names."""
    from webr1_kit.pipeline import _as_saved

    ablation = arena_ablation()
    base = json.loads(ablation.BASE.read_text())
    plain = _as_saved(scale_config("cpu", ablation.arm_config("plain", base)))
    assert plain["tasks"]["suite"] == plain["eval_tasks"]["suite"] == "arena"
    for name, switches in ablation.ARMS.items():
        cfg = scale_config("cpu", ablation.arm_config(name, base))
        saved = _as_saved(cfg)
        assert {k: v for k, v in saved.items() if k != "grpo"} == {k: v for k, v in plain.items() if k != "grpo"}
        changed = {k for k, v in saved["grpo"].items() if v != plain["grpo"][k]}
        assert changed == set(switches), name
    with pytest.raises(SystemExit, match="unknown arm 'bogus'"):
        ablation.main(["--arms", "plain,bogus", "--root", str(tmp_path)])
    assert not any(tmp_path.iterdir())  # refused before anything ran


def test_the_arena_ablation_tabulates_recorded_arms_paired_with_bc_and_keeps_them_paired(tmp_path):
    """Arms recorded by earlier runs (another machine, another day) join the table, paired
    with BC episode by episode; a run whose BC adapter is not the recorded one, or an arm
    recorded under another config, is refused rather than mixed in."""
    import hashlib

    ablation = arena_ablation()
    base = json.loads(ablation.BASE.read_text())
    record, root = tmp_path / "record", tmp_path / "root"
    record.mkdir()
    adapter = root / "bc" / "sft" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_model.safetensors").write_bytes(b"the BC weights")
    (root / "bc" / "stages").mkdir()
    (root / "bc" / "stages" / "sft.json").write_text("{}")
    sha = hashlib.sha256(b"the BC weights").hexdigest()

    def episodes(successes):
        return [{"task_id": f"arena/t/{i}", "seed": 0, "status": "done", "reward": float(s), "turns": 3,
                 "invalid_actions": 0} for i, s in enumerate(successes)]

    bc = [0] * 10
    arm = [1] * 7 + [0] * 3  # 7 newly solved, none newly failed: p = 2 * 0.5**7
    def states(scores):  # step accuracy at four held-out expert states
        return {"states": 4, "exact": sum(x == 1.0 for x in scores) / 4,
                "outcomes": [[f"arena/t/{i}", 0, 1, x] for i, x in enumerate(scores)]}

    (record / "bc.json").write_text(json.dumps({"bc_adapter_sha256": sha, "success": 0.0, "episodes": 10,
                                                "ci95": [0.0, 0.28], "invalid_action_rate": 0.5,
                                                "outcomes": episodes(bc), "step_accuracy": states([0, 0.5, 0, 1])}))
    row = {"success": 0.7, "solved": 7, "episodes": 10, "ci95": [0.4, 0.89], "invalid_action_rate": 0.1,
           "signal_share": 0.25, "own_success": 0.05, "expert_members": 12, "hinted_episodes": 0,
           "hinted_successes": 0, "prefix_turns": 30, "prefix_successes": 4, "tokens_trained": 900,
           "rl_minutes": 61.0, "steps": 16,
           "config": ablation.arm_config("expert-members", base), "bc_adapter_sha256": sha,
           "coverage": None, "outcomes": episodes(arm), "step_accuracy": states([1, 1, 1, 0.5])}
    (record / "expert-members.json").write_text(json.dumps(row))
    lines, _ = ablation.table(record, ["plain", "expert-members"])
    assert "| plain | not run |" in lines[3]
    assert lines[4].startswith("| expert-members | **0.700** (7/10) |") and "| 7 / 0, p = 0.0156 |" in lines[4]
    assert "| 25% of 4 |" in lines[2]  # BC's step accuracy, then the arm's, paired state by state with BC's
    assert "| 75% of 4 (3 / 1, p = 0.625) |" in lines[4]
    assert "| 12 / 0 / 30 (4 passed) |" in lines[4]  # guided successes show beside what guided them
    ablation.run_arm(root, "expert-members", base, record, quiet=True)  # recorded: nothing runs
    ablation.ensure_bc(root, base, record, quiet=True)  # the same adapter: goes on
    (adapter / "adapter_model.safetensors").write_bytes(b"other BC weights")
    with pytest.raises(SystemExit, match="not the one the arms recorded"):
        ablation.ensure_bc(root, base, record, quiet=True)
    (record / "expert-members.json").write_text(json.dumps({**row, "config": ablation.arm_config("hints", base)}))
    with pytest.raises(SystemExit, match="recorded in .* with another config"):
        ablation.run_arm(root, "expert-members", base, record, quiet=True)


def test_an_arm_that_kept_bcs_adapter_is_recorded_with_bcs_evaluation(tmp_path):
    """An arm whose M-GRPO trained no token ends with BC's adapter byte for byte; the driver
    records BC's held-out episodes and step accuracy for it instead of evaluating again, and
    says so in the table. Any other adapter is not taken for BC's."""
    import hashlib

    ablation = arena_ablation()
    base = json.loads(ablation.BASE.read_text())
    record, root = tmp_path / "record", tmp_path / "root"
    for adapter in (root / "bc" / "sft" / "adapter", root / "curriculum" / "rl" / "adapter"):
        adapter.mkdir(parents=True)
        (adapter / "adapter_model.safetensors").write_bytes(b"the BC weights")
    steps = [{"phase": "train", "equal_reward_frac": 1.0, "first_draw_success": 0.0, "first_draw_episodes": 16,
              "tokens_trained": 0, "rollout_s": 300.0, "update_s": 0.0}] * 2
    (root / "curriculum" / "rl" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    bc_outcomes = [{"task_id": f"arena/t/{i}", "seed": 0, "status": "truncated", "reward": 0.0, "turns": 8,
                    "invalid_actions": 3} for i in range(5)]
    accuracy = {"states": 2, "exact": 0.5, "outcomes": [["arena/t/0", 0, 1, 1.0], ["arena/t/1", 0, 2, 0.0]]}
    record.mkdir()
    (record / "bc.json").write_text(json.dumps({
        "bc_adapter_sha256": hashlib.sha256(b"the BC weights").hexdigest(), "success": 0.0, "episodes": 5,
        "ci95": [0.0, 0.43], "invalid_action_rate": 0.4, "infra_failures": 0, "outcomes": bc_outcomes,
        "step_accuracy": accuracy}))
    assert ablation.unchanged(root, "curriculum")
    ablation.write_record(root, "curriculum", base, record)
    rec = json.loads((record / "curriculum.json").read_text())
    assert rec["evaluated_as"] == "bc" and rec["outcomes"] == bc_outcomes and rec["step_accuracy"] == accuracy
    assert (rec["solved"], rec["episodes"], rec["steps"], rec["tokens_trained"], rec["rl_minutes"]) == (0, 5, 2, 0, 10.0)
    assert rec["signal_share"] == 0.0 and rec["config"] == ablation.arm_config("curriculum", base)
    lines, _ = ablation.table(record, ["curriculum"])
    assert "| 0 / 0, p = 1 (BC's weights: BC's episodes) |" in lines[3]
    assert "| 50% of 2 (0 / 0, p = 1) |" in lines[3]
    (root / "curriculum" / "rl" / "adapter" / "adapter_model.safetensors").write_bytes(b"trained weights")
    assert not ablation.unchanged(root, "curriculum")
