"""The gpu preset's code, run on the CPU.

`webr1 demo --scale gpu` trains Qwen2.5-3B-Instruct in bfloat16 with LoRA on the arena. Here
the same pipeline runs with every setting of the preset kept but two: the model (a Qwen2 with
Qwen2.5-3B's architecture settings but 2 layers of width 64 and random weights, built from a
config, so nothing downloads) and the sizes (tasks, steps). bfloat16 weights, the arena
tasks, prompt and response lengths, group size, rollout concurrency, turn limits and the
periodic evaluation all take the branches they take on a GPU. What only a GPU can check (CUDA
kernels, memory, speed) is listed in the README.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from webr1_kit.aio import run
from webr1_kit.pipeline import SCALES, run_pipeline, scale_config
from webr1_kit.report import success_table

# Qwen2.5-3B-Instruct's architecture settings (its config.json), at a toy size
QWEN25_3B = dict(rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu",
                 attention_dropout=0.0, use_sliding_window=False)
SIZES = {
    "tasks": {"suite": "arena", "split": "train", "limit": 2},
    "eval_tasks": {"suite": "arena", "split": "test", "limit": 2},
    "grpo": {"steps": 2, "tasks_per_step": 2, "eval_every": 2},  # evaluations at steps 0 and 2
}


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory):
    """A local model folder: a 2-layer Qwen2 with random weights, in bfloat16, and the
    embedded model's tokenizer (its chat template included)."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from webr1_kit.models import embedded_path

    tok = AutoTokenizer.from_pretrained(embedded_path())
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
                      **QWEN25_3B)
    path = tmp_path_factory.mktemp("models") / "qwen2-tiny"
    Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_only_the_model_and_the_sizes_differ_from_the_preset(qwen2_dir):
    cfg = scale_config("gpu", {"policy": {"model": str(qwen2_dir)}, **SIZES})
    gpu = SCALES["gpu"]
    assert cfg.policy == replace(gpu.policy, model=str(qwen2_dir))
    assert (cfg.prompt, cfg.sampling, cfg.rollout, cfg.sft, cfg.env) == (gpu.prompt, gpu.sampling, gpu.rollout, gpu.sft,
                                                                          gpu.env)
    assert cfg.grpo == replace(gpu.grpo, steps=2, tasks_per_step=2, eval_every=2)
    assert (cfg.demos_per_task, cfg.eval_episodes) == (gpu.demos_per_task, gpu.eval_episodes)


def test_the_presets_policy_loads_in_bfloat16_with_no_cpu_float32_fallback(qwen2_dir):
    from webr1_kit.policy import load_policy

    cfg = scale_config("gpu", {"policy": {"model": str(qwen2_dir)}})
    policy = load_policy(cfg.policy)
    model = policy.model
    assert type(model.get_base_model()).__name__ == "Qwen2ForCausalLM"
    base = {n: p for n, p in model.named_parameters() if "lora_" not in n}
    assert base and all(p.dtype == torch.bfloat16 for p in base.values())
    # the adapter trains in float32 (peft keeps adapter weights in float32 over a bfloat16 base)
    assert all(p.dtype == torch.float32 for n, p in model.named_parameters() if "lora_" in n)
    # the CPU's float32 tuning (bfloat16 autocast over float32 weights) is for float32 weights only
    assert getattr(model.get_base_model(), "webr1_autocast", None) is None


@pytest.mark.slow
def test_the_gpu_presets_pipeline_runs_on_the_cpu(qwen2_dir, tmp_path):
    out = tmp_path / "run"
    cfg = scale_config("gpu", {"policy": {"model": str(qwen2_dir)}, **SIZES})
    report = run(run_pipeline(cfg, out, progress=False))
    for name in ("demos", "eval-base", "sft", "eval-bc", "rl", "eval-rl"):
        assert (out / "stages" / f"{name}.json").is_file(), name
    rows = success_table(out)
    assert [r["stage"] for r in rows] == ["base", "bc", "rl"]
    assert all(r["episodes"] + r["infra_failures"] == 2 * cfg.eval_episodes for r in rows)
    assert all(r["infra_failures"] == 0 for r in rows)
    assert all(t.startswith("arena/") for r in rows for t in r["per_task"])
    import json

    metrics = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in metrics if m["phase"] == "train"]
    assert [m["step"] for m in train] == [1, 2]
    assert all(m["episodes"] == 2 * cfg.grpo.group_size and m["infra_failures"] == 0 for m in train)
    assert any(m["phase"] == "eval" for m in metrics)  # the periodic held-out evaluation ran
    assert report.is_file() and "After BC + M-GRPO" in report.read_text()
