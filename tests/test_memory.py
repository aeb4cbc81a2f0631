"""The memory plan (`webr1 plan`): its arithmetic on known shapes and run configs. Its
predictions against measured peaks are `bench/bench_memory.py`'s (not yet within 25%)."""

from __future__ import annotations

import json

import pytest

from webr1_kit.memory import ARCHITECTURES, CARDS, NF4_BYTES_PER_WEIGHT, card_memory, model_config, plan, shape
from webr1_kit.pipeline import scale_config

GiB = 1024**3


def test_parameter_counts_of_the_known_architectures_match_their_published_sizes():
    # Qwen2.5-3B: 3.09B parameters (tied head); Llama-3.1-8B: 8.03B; Qwen2.5-7B: 7.62B
    for name, billions in (("qwen2.5-3b", 3.09), ("llama-3.1-8b", 8.03), ("qwen2.5-7b", 7.62)):
        m = shape(model_config(name), name)
        assert m.params / 1e9 == pytest.approx(billions, rel=0.01), name


def test_the_plan_adds_up_and_4_bits_shrink_the_linear_weights():
    cfg = scale_config("gpu")
    full = plan(cfg, device="cuda")
    m = shape(model_config(cfg.policy.model))
    assert full.parts["weights"] == m.params * 2  # bfloat16
    q = plan(scale_config("gpu", {"policy": {"quantization": "4bit"}}), device="cuda")
    assert q.parts["weights"] == int(m.linear_params * NF4_BYTES_PER_WEIGHT + m.other_params * 2)
    assert q.peak < full.peak
    ckpt = plan(scale_config("gpu", {"policy": {"gradient_checkpointing": True}}), device="cuda")
    assert ckpt.parts["update activations"] < full.parts["update activations"] / 10
    small = plan(scale_config("gpu", {"grpo": {"micro_batch_tokens": 1024}, "sft": {"micro_batch_tokens": 1024}}),
                 device="cuda")
    assert small.parts["update activations"] == full.parts["update activations"] // 4
    for phase, total in full.phases.items():
        assert total >= full.parts["weights"] + full.parts["CUDA context"], phase


def test_advice_names_the_settings_that_would_make_it_fit():
    p = plan(scale_config("gpu"), device="cuda")
    assert p.fits(80) and p.advice(80) == []
    if not p.fits(16):
        advice = " ".join(p.advice(16))
        assert "4bit" in advice and "micro_batch_tokens" in advice
    assert card_memory("t4") == {"T4": CARDS["T4"]} and card_memory("24GB") == {"24 GB": 24.0}
    assert set(card_memory("all")) == set(CARDS)
    with pytest.raises(ValueError, match="a card"):
        card_memory("lots")


def test_webr1_plan_prints_a_plan_for_a_known_architecture_without_weights(capsys):
    from webr1_kit.cli import main

    assert main(["plan", "--model", "llama-3.1-8b", "--gpu", "T4", "--gpu", "H100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["cards"]) == {"T4", "H100"} and not out["cards"]["T4"]["fits"]
    assert out["parts_bytes"]["weights"] == pytest.approx(8.03e9 * 2, rel=0.01)  # 8B parameters in bfloat16
    assert "llama-3.1-8b" in ARCHITECTURES
