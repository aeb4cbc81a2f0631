"""QLoRA for real: the embedded SmolLM2-135M loaded in 4 bits by bitsandbytes (its CPU
backend: NF4 with double quantisation, the configuration a GPU run uses), trained through
the kit's own entry points.

What a 4-bit run must keep from a 16/32-bit one: every base weight stays frozen and only the
adapter learns; the log-probabilities the generator records (π_old) are the ones training
recomputes, so the ratio starts at 1; BC resumes from its checkpoint to the same next step;
and a saved adapter loaded onto a fresh 4-bit base gives the trained policy back.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from webr1_kit.config import GRPOConfig, LoRA, PolicyConfig, SamplingConfig, SFTConfig
from webr1_kit.grpo import build_batch, update
from webr1_kit.policy import load_policy
from webr1_kit.sft import train_sft
from webr1_kit.training import make_optimizer, token_logprobs
from webr1_kit.trajectory import Packed, TrajectoryGroup

from test_training import demo, perturb_lora_b, rl_traj, sample_and_pack

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # bitsandbytes' and peft's notes on CPU 4-bit

QLORA = PolicyConfig(model="embedded", quantization="4bit", lora=LoRA(r=4, alpha=8, dropout=0.0))
LOGP_ATOL = 1e-4
"""How far the generator's recorded log-probabilities may be from training's recomputation in
4 bits on the CPU: the bound the 16/32-bit tests use. Both run the same dequantise-then-multiply
kernels in float32, but generation reads its prompt from a KV cache and in batches, training in
one padded pass, so sums are taken in other orders (measured: 1.3e-5 at most)."""


@pytest.fixture(scope="module")
def qlora():
    return load_policy(QLORA, sampling=SamplingConfig(max_new_tokens=8))


def _linear4bit_layers(model):
    import bitsandbytes as bnb

    return [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]


def test_the_base_is_nf4_with_double_quantisation_and_only_the_adapter_trains(qlora):
    layers = _linear4bit_layers(qlora.model)
    assert len(layers) == 7 * qlora.model.config.num_hidden_layers  # q, k, v, o, gate, up, down in every block
    for layer in layers:
        state = layer.weight.quant_state
        assert layer.weight.dtype == torch.uint8 and state.quant_type == "nf4" and state.nested
        assert not layer.weight.requires_grad
    trainable = [n for n, p in qlora.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert all(p.dtype == torch.float32 for n, p in qlora.model.named_parameters() if p.requires_grad)
    full = load_policy(PolicyConfig(model="embedded", lora=None))
    assert qlora.model.get_memory_footprint() < 0.75 * full.model.get_memory_footprint()


def test_recorded_log_probs_are_the_ones_training_recomputes(qlora):
    perturb_lora_b(qlora.model, 0.02)
    _, outs, seqs = sample_and_pack(qlora, temperature=0.7)
    recorded = torch.tensor([lp for o in outs for lp in o.logprobs])
    with torch.no_grad():
        trained, _ = token_logprobs(qlora.model, seqs, temperature=0.7)
    gap = (trained - recorded).abs().max().item()
    assert gap < LOGP_ATOL, gap


def test_one_m_grpo_update_changes_every_lora_weight_and_no_base_weight(qlora):
    model = qlora.model
    perturb_lora_b(model)  # with B = 0 the gradient of A is exactly zero
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    quantised = {id(layer.weight): layer.weight.quant_state.absmax.clone() for layer in _linear4bit_layers(model)}
    groups = [TrajectoryGroup("a", [rl_traj([1, 2, 3], [4, 5, 6], 1.0), rl_traj([1, 2, 3], [7, 8], 0.0)])]
    batch = build_batch(groups, qlora.tokenizer, GRPOConfig())
    stats = update(qlora, batch, GRPOConfig(lr=1e-3), make_optimizer(model, 1e-3, (0.9, 0.99)))
    assert stats["grad_norm"] > 0 and stats["tokens_trained"] == 5
    for n, p in model.named_parameters():
        assert (not torch.equal(p, before[n])) == ("lora_" in n), n
    for layer in _linear4bit_layers(model):  # nor the quantisation constants
        assert torch.equal(layer.weight.quant_state.absmax, quantised[id(layer.weight)])


def test_bc_resumes_and_its_adapter_reloads_onto_a_fresh_4bit_base(tmp_path):
    # (a 4-bit step on the CPU dequantises every weight in each pass: about 6 s for one
    # 560-token example here, so the run is two steps of one example)
    demos = [demo(k) for k in range(2)]
    cfg = SFTConfig(epochs=1, batch_size=1, lr=5e-3, warmup_steps=0, max_steps=1)
    policy = load_policy(QLORA)
    first = train_sft(policy, demos, cfg, out=tmp_path / "bc", progress=False)
    assert first["step"] == 1
    # the same run, one more step, resumed from its checkpoint in a new policy
    resumed = load_policy(QLORA)
    row = train_sft(resumed, demos, replace(cfg, max_steps=2), out=tmp_path / "bc", progress=False)
    assert row["step"] == 2
    steps = [json.loads(x)["step"] for x in (tmp_path / "bc" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
    resumed.save_adapter(tmp_path / "adapter")
    reloaded = load_policy(QLORA, adapter=tmp_path / "adapter")
    assert len(_linear4bit_layers(reloaded.model)) == len(_linear4bit_layers(resumed.model))
    seq = Packed()
    ids = resumed.tokenizer.encode("Buy item 3")
    seq.add(ids[:2], trained=False)
    seq.add(ids[2:], trained=True, turn=0)
    with torch.no_grad():
        a, _ = token_logprobs(resumed.model, [seq])
        b, _ = token_logprobs(reloaded.model, [seq])
    assert torch.allclose(a, b, atol=1e-5)
    # and the reloaded adapter trains on: an M-GRPO update changes it
    perturb_lora_b(reloaded.model)
    before = {n: p.detach().clone() for n, p in reloaded.model.named_parameters() if "lora_" in n}
    groups = [TrajectoryGroup("a", [rl_traj([1, 2, 3], [4, 5, 6], 1.0), rl_traj([1, 2, 3], [7, 8], 0.0)])]
    update(reloaded, build_batch(groups, reloaded.tokenizer, GRPOConfig()), GRPOConfig(lr=1e-3),
           make_optimizer(reloaded.model, 1e-3, (0.9, 0.99)))
    assert all(not torch.equal(p, before[n]) for n, p in reloaded.model.named_parameters() if n in before)


@pytest.mark.slow
def test_webr1_rl_trains_a_4bit_policy_on_live_episodes_and_resumes(tmp_path, capsys):
    """The kit's own entry point, as a user runs QLoRA: `webr1 rl` with quantization "4bit"
    plays MiniWoB++ episodes with the 4-bit model, updates its adapter, checkpoints, and a
    second invocation with --resume goes on from the checkpoint to the next step."""
    from webr1_kit.cli import main

    config = {
        "policy": {"model": "embedded", "quantization": "4bit", "lora": {"r": 4, "alpha": 8}},
        "sampling": {"max_new_tokens": 12, "temperature": 1.0},
        "grpo": {"steps": 1, "tasks_per_step": 2, "group_size": 2, "max_turns": 1, "eval_every": 0,
                 "save_every": 1, "concurrency": 4, "dynamic_sampling": False},
        "tasks": {"suite": "miniwob", "names": ["click-button", "focus-text"]},
    }
    (tmp_path / "rl.json").write_text(json.dumps(config))
    out = tmp_path / "run"
    assert main(["rl", "--config", str(tmp_path / "rl.json"), "--out", str(out), "--quiet"]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["policy"]["quantization"] == "4bit"
    config["grpo"]["steps"] = 2
    (tmp_path / "rl.json").write_text(json.dumps(config))
    assert main(["rl", "--config", str(tmp_path / "rl.json"), "--out", str(out), "--resume", "--quiet"]) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["phase"] == "train"]
    assert [r["step"] for r in train] == [1, 2]
    assert all(r["episodes"] == 4 and r["infra_failures"] == 0 for r in train)
    assert all(r["old_logp_gap_max"] < LOGP_ATOL for r in train if r["tokens_trained"])
    assert (out / "adapter" / "adapter_config.json").is_file()
