"""Data-parallel training under a real `accelerate launch` (two CPU processes, gloo): the
same update as one process, one writer, and resumes across process counts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from webr1_kit import distributed

WORKER = Path(__file__).parent / "dp_worker.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args: list[str], processes: int, module: bool = False) -> subprocess.CompletedProcess:
    """`args` (a script and its arguments, or with module=True a module's) run by plain Python
    when processes == 1, else under `accelerate launch` with that many CPU processes."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(k, None)
    head = [sys.executable] + (["-m"] if module else [])
    if processes > 1:
        head = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                "--main_process_port", str(_free_port())] + (["-m"] if module else [])
    done = subprocess.run(head + args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def lora(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_one_process_is_the_default_and_needs_no_process_group(monkeypatch):
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    assert (distributed.size(), distributed.rank(), distributed.is_main()) == (1, 0, True)
    assert distributed.share(list("abc")) == [0, 1, 2]
    assert distributed.gather({0: "a", 1: "b"}, 2) == ["a", "b"]
    assert distributed.sum_values([1.5, 2.0], [3.0]) == ([1.5, 2.0], [3.0])
    distributed.barrier()  # a no-op, not a hang
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "1")
    assert distributed.share(list(range(10))) == [1, 5, 9] and not distributed.is_main()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        distributed.size()


def rl_config(tmp: Path) -> dict:
    """`webr1 rl` on a tiny random model: one M-GRPO step of three MiniWoB++ tasks, groups of two."""
    from test_training import save_tiny_model
    from transformers import AutoTokenizer

    from webr1_kit.models import embedded_path

    tokenizer = AutoTokenizer.from_pretrained(embedded_path())
    return {
        "policy": {"model": str(save_tiny_model(tokenizer, tmp / "tiny")), "lora": {"r": 4, "alpha": 8}},
        "prompt": {"max_prompt_tokens": 2048},
        "sampling": {"max_new_tokens": 8, "temperature": 0.7},
        # the random model fails: expert members give the update something to train on
        "grpo": {"steps": 1, "tasks_per_step": 3, "group_size": 2, "max_turns": 1, "eval_every": 0, "concurrency": 4,
                 "expert_if_unsolved": True},
        "tasks": {"suite": "miniwob", "names": ["click-button", "focus-text", "click-link"]},
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The training jobs of the tests below, in two launches: one process, then two (a launch
    starts the interpreters, imports torch, transformers and peft, and sets up the process
    group: paid once for all jobs). An M-GRPO update on each ("one", "two"); BC for two steps
    on one process ("straight"); BC for one step on one process, resumed for the second on
    two ("mixed"); `webr1 rl` on two processes ("rl-two", its output in rl-two.out)."""
    out = tmp_path_factory.mktemp("dp")
    (out / "rl.json").write_text(json.dumps(rl_config(out)))
    launch([str(WORKER), "grpo", str(out / "one"), "+", "sft", str(out / "straight"), "2",
            "+", "sft", str(out / "mixed"), "1"], 1)
    done = launch([str(WORKER), "grpo", str(out / "two"), "+", "sft", str(out / "mixed"), "2",
                   "+", "cli", "rl", "--config", str(out / "rl.json"), "--quiet", "--out", str(out / "rl-two")], 2)
    (out / "rl-two.out").write_text(done.stdout)
    return out


@pytest.mark.slow
def test_an_m_grpo_update_on_two_processes_equals_the_one_process_update(trained):
    tmp_path = trained
    one, two, other = (lora(tmp_path / p) for p in ("one/rank-0.pt", "two/rank-0.pt", "two/rank-1.pt"))
    start = lora(tmp_path / "one" / "start.pt")
    assert max_diff(one, start) > 1e-3  # the update moved the adapter ...
    assert max_diff(one, two) < 1e-5  # ... the same way on two processes (float summation order aside)
    assert max_diff(two, other) == 0.0  # and both processes hold the same adapter
    s1, s2 = (json.loads((tmp_path / p / "stats.json").read_text()) for p in ("one", "two"))
    assert s1["tokens_trained"] == s2["tokens_trained"] > 0
    for k in ("loss", "kl", "entropy", "clip_frac", "ratio", "grad_norm", "old_logp_gap_mean", "old_logp_gap_max"):
        assert s2[k] == pytest.approx(s1[k], rel=1e-5, abs=1e-7), k


@pytest.mark.slow
def test_behaviour_cloning_resumed_on_two_processes_continues_the_one_process_run(trained):
    tmp_path = trained  # two steps on one process ("straight"); one on one process, the second on two ("mixed")
    straight, mixed = lora(tmp_path / "straight" / "rank-0.pt"), lora(tmp_path / "mixed" / "rank-0.pt")
    assert max_diff(straight, mixed) < 1e-5
    assert max_diff(mixed, lora(tmp_path / "mixed" / "rank-1.pt")) == 0.0
    rows = [json.loads(x) for x in (tmp_path / "mixed" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]  # one writer: each step logged once
    ref = [json.loads(x) for x in (tmp_path / "straight" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[1]["loss"] == pytest.approx(ref[1]["loss"], rel=1e-5)


@pytest.mark.slow
def test_webr1_rl_under_accelerate_plays_each_episode_once_and_writes_once(trained):
    from webr1_kit.cli import main

    tmp_path = trained
    rl = ["rl", "--config", str(tmp_path / "rl.json"), "--quiet"]
    # The one-process reference and the resume run in this process (`webr1 rl` is the same
    # command either way); the two-process run was launched with the others (`trained`).
    assert main(rl + ["--out", str(tmp_path / "rl-one")]) == 0
    assert (tmp_path / "rl-two.out").read_text().count('"out"') == 1  # one process prints the result

    def episodes(run: str) -> list[tuple]:
        lines = (tmp_path / run / "trajectories" / "step-1.jsonl").read_text().splitlines()
        return sorted((t["task_id"], t["seed"], t["meta"]["sample_seed"], bool(t["meta"].get("expert")))
                      for t in map(json.loads, lines))

    # The same jobs as one process, each played once, expert members included.
    assert episodes("rl-two") == episodes("rl-one") and len(episodes("rl-two")) == 6
    row, = (json.loads(x) for x in (tmp_path / "rl-two" / "metrics.jsonl").read_text().splitlines())
    assert row["step"] == 1 and row["expert_members"] == 3 and row["tokens_trained"] > 0
    assert (tmp_path / "rl-two" / "checkpoints" / "step-1" / "state.json").is_file()
    assert (tmp_path / "rl-two" / "adapter" / "adapter_model.safetensors").is_file()
    # A run started on two processes resumes on one.
    config = json.loads((tmp_path / "rl.json").read_text())
    config["grpo"]["steps"] = 2
    (tmp_path / "rl-2.json").write_text(json.dumps(config))
    assert main(["rl", "--config", str(tmp_path / "rl-2.json"), "--quiet", "--out", str(tmp_path / "rl-two"),
                 "--resume"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "rl-two" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
