"""Will it fit? A memory plan for a run, from the model's config and the run config alone.

Nothing loads weights: the model is built on PyTorch's meta device (shapes, no storage), so
a 3B or 8B plan takes a second on a laptop. `plan(cfg)` estimates the peak memory of the
run's three phases on its device:

    weights     Σ linear layers' parameters at the weight dtype, or in 4 bits:
                NF4 is ½ byte a weight, its absmax one byte per block of 64 and, double
                quantised, 4 bytes per 256 blocks: 0.516 bytes a weight; every other
                parameter (embeddings, norms, an untied head) at the weight dtype.
                Float32 weights under the CPU's bfloat16 autocast add a bfloat16 copy of
                every weight a forward pass multiplies by (autocast's weight cache).
    adapter     P = Σ r·(in + out) over the adapted linear layers, float32: weights,
                gradients and Adam's two moments, 16 bytes a parameter; M-GRPO also
                keeps the frozen reference adapter, 4 more.
    BC step / M-GRPO update, per micro-batch of T tokens (`micro_batch_tokens`):
                activations  L · T · a · b   (a elements kept per token and layer; with
                             gradient checkpointing, L · T · h · b plus one layer's
                             T · a · b while it is recomputed)
                             a = 7h + 2·kv + 4·I  (h hidden, kv the key/value width, I the
                             MLP width: the norms' inputs and outputs, q k v and the
                             attention output, the MLP's gate, up, activation and product)
                head         the trained tokens' float32 logits, log-softmax and gradient,
                             12 bytes · V per trained token; trained tokens are taken as
                             `trained_share` of T (responses are a small part of a prompt
                             with its page: ¼ by default)
    rollout     weights + the generator's KV cache for a full batch,
                2 · L · kv · b · max_batch · (max_prompt_tokens + max_new_tokens),
                + one layer's prefill activations for `batch_token_budget` tokens.

b is the compute dtype's bytes (2 for bfloat16/float16, also under the CPU's autocast; 4
for float32). On CUDA a fixed 1 GiB is added for the CUDA context and allocator slack.

These are estimates, and the activation terms are not calibrated yet. On a CPU without native
bfloat16 (the kit then trains in float32), the tensors autograd saves in a training pass of the
embedded model came to 10.6k float32 elements per token and layer, as `a` counts; but
`bench/bench_memory.py` measured the pass's resident peak at 1.6 times the plan's (1,024 and
2,048 tokens: backward transients and allocator retention are not modelled) and 3.2 times with
gradient checkpointing (4,096 tokens). On GPUs they are predictions until measured.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from .cpu import native_bf16_cpu

GiB = 1024**3
CUDA_OVERHEAD = 1 * GiB
NF4_BYTES_PER_WEIGHT = 0.5 + 1 / 64 + 4 / (64 * 256)

CARDS: dict[str, float] = {
    "T4": 16, "L4": 24, "A10G": 24, "RTX4090": 24, "A100-40GB": 40, "A100-80GB": 80, "H100": 80, "H200": 141,
}
"""GPU memory in GB (10^9 bytes, as cards are sold) of common cards, for `--gpu`."""

ARCHITECTURES: dict[str, dict[str, Any]] = {
    # The architecture values of the public config.json files (no weights): enough to plan for
    # these models, or to build them with random weights, without a download.
    "qwen2.5-3b": dict(model_type="qwen2", vocab_size=151936, hidden_size=2048, intermediate_size=11008,
                       num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=2,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True, hidden_act="silu"),
    "qwen2.5-7b": dict(model_type="qwen2", vocab_size=152064, hidden_size=3584, intermediate_size=18944,
                       num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=False, hidden_act="silu"),
    "llama-3.1-8b": dict(model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                         max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=False, hidden_act="silu"),
}
ALIASES = {"Qwen/Qwen2.5-3B-Instruct": "qwen2.5-3b", "Qwen/Qwen2.5-7B-Instruct": "qwen2.5-7b",
           "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B-Instruct": "llama-3.1-8b"}


@dataclass
class Shape:
    """What the plan needs of a model: its linear layers and the other parameters' count."""

    name: str
    layers: int
    hidden: int
    kv_width: int
    intermediate: int
    vocab: int
    linear: list[tuple[str, int, int]] = field(default_factory=list)  # (name, in, out) in the decoder layers
    other_params: int = 0  # embeddings, norms, biases, an untied head

    @property
    def linear_params(self) -> int:
        return sum(i * o for _, i, o in self.linear)

    @property
    def params(self) -> int:
        return self.linear_params + self.other_params


def model_config(model: str) -> Any:
    """The transformers config of `model`: a known architecture (ARCHITECTURES, or a Hub id
    in ALIASES), "embedded"/"tiny", a local model folder, or a Hub id already in the cache."""
    from transformers import AutoConfig, CONFIG_MAPPING

    key = ALIASES.get(model, model).lower()
    if key in ARCHITECTURES:
        values = dict(ARCHITECTURES[key])
        return CONFIG_MAPPING[values.pop("model_type")](**values)
    from .models import resolve_model

    name = resolve_model(model)
    try:
        return AutoConfig.from_pretrained(name)
    except OSError as exc:
        known = ", ".join(ARCHITECTURES)
        raise ValueError(f"no config for {model!r} here ({str(exc).splitlines()[0]}); plan for a known "
                         f"architecture ({known}) or a local model folder") from None


def shape(config: Any, name: str = "") -> Shape:
    """Build the model on the meta device (no storage) and read its shapes."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    layers = model.get_decoder().layers if hasattr(model, "get_decoder") else model.model.layers
    linear_ids = set()
    linear: list[tuple[str, int, int]] = []
    for lname, module in layers.named_modules():
        if isinstance(module, torch.nn.Linear):
            linear.append((lname, module.in_features, module.out_features))
            linear_ids.add(id(module.weight))
    other = sum(p.numel() for p in model.parameters() if id(p) not in linear_ids)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv = getattr(config, "num_key_value_heads", heads) * head_dim
    return Shape(name=name or getattr(config, "_name_or_path", "") or config.model_type,
                 layers=config.num_hidden_layers, hidden=config.hidden_size, kv_width=kv,
                 intermediate=config.intermediate_size, vocab=config.vocab_size, linear=linear, other_params=other)


@dataclass
class Plan:
    """Peak memory estimates in bytes, per phase, and what they are made of."""

    model: str
    device: str
    weight_dtype: str
    quantization: str
    parts: dict[str, int]
    phases: dict[str, int]
    settings: dict[str, Any]

    @property
    def peak(self) -> int:
        return max(self.phases.values())

    def fits(self, gb: float) -> bool:
        """Whether every phase fits a card of `gb` GB (10^9 bytes)."""
        return self.peak <= gb * 1e9

    def advice(self, gb: float) -> list[str]:
        """Settings that would lower the largest phases, most effective first."""
        if self.fits(gb):
            return []
        s, out = self.settings, []
        if self.quantization != "4bit" and self.parts["weights"] > 0.3 * gb * 1e9:
            out.append('policy.quantization = "4bit" (QLoRA): the weights shrink to about a quarter of bfloat16')
        if not s["gradient_checkpointing"] and self.parts["update activations"] > 0.2 * gb * 1e9:
            out.append("policy.gradient_checkpointing = true: keeps one activation per layer instead of all")
        if self.parts["update activations"] + self.parts["update head"] > 0.2 * gb * 1e9:
            out.append(f"grpo.micro_batch_tokens and sft.micro_batch_tokens below {s['micro_batch_tokens']}: "
                       "activations scale with them (gradients accumulate, the update is the same)")
        if self.parts["KV cache"] > 0.2 * gb * 1e9:
            out.append(f"sampling.max_batch below {s['max_batch']} (or rollout concurrency): the KV cache "
                       "scales with it")
        return out or ["a card with more memory"]

    def table(self, cards: dict[str, float] | None = None) -> str:
        rows = [f"memory plan: {self.model} on {self.device}, {self.weight_dtype} weights"
                + (", 4-bit NF4 (QLoRA)" if self.quantization == "4bit" else ""),
                "  (experimental: the activation terms are not calibrated yet; read the peaks as a lower bound)"]
        for k, v in self.parts.items():
            rows.append(f"  {k:<22} {v / GiB:8.2f} GiB")
        for k, v in self.phases.items():
            rows.append(f"  peak of {k:<14} {v / GiB:8.2f} GiB")
        for card, gb in (cards or {}).items():
            verdict = "fits" if self.fits(gb) else "does NOT fit"
            rows.append(f"  {card} ({gb:g} GB): {verdict}")
            rows += [f"    try {a}" for a in self.advice(gb)]
        return "\n".join(rows)


def _bytes(dtype: str) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]


def plan(cfg: Any, device: str | None = None, trained_share: float = 0.25, model_shape: Shape | None = None) -> Plan:
    """The memory plan of run config `cfg` (a PipelineConfig) on `device` ("cuda" or "cpu";
    default: the config's, "auto" meaning cuda). `model_shape` skips building the model."""
    pol = cfg.policy
    device = device or ("cuda" if pol.device == "auto" else pol.device)
    cuda = device.startswith("cuda")
    weight_dtype = pol.dtype if pol.dtype != "auto" else ("bfloat16" if cuda else "float32")
    autocast = (not cuda and weight_dtype == "float32" and pol.quantization != "4bit"
                and (pol.cpu_autocast == "bfloat16" or (pol.cpu_autocast == "auto" and native_bf16_cpu())))
    b = 2 if autocast else _bytes(weight_dtype)
    m = model_shape or shape(model_config(pol.model), pol.model)
    wb = _bytes(weight_dtype)
    if pol.quantization == "4bit":
        weights = m.linear_params * NF4_BYTES_PER_WEIGHT + m.other_params * wb
    else:
        weights = m.params * wb
    cast_cache = m.linear_params * 2 if autocast else 0  # the output head stays float32 (cpu.float32_head)

    lora_params = 0
    if pol.lora is not None:
        targets = tuple(pol.lora.target_modules)
        for lname, i, o in m.linear:
            if targets == ("all-linear",) or any(re.search(rf"(^|\.){t}$", lname) for t in targets):
                lora_params += pol.lora.r * (i + o)
    adapter_train = lora_params * 16
    reference = lora_params * 4

    per_layer = 7 * m.hidden + 2 * m.kv_width + 4 * m.intermediate

    def activations(tokens: int) -> int:
        if pol.gradient_checkpointing:
            return m.layers * tokens * m.hidden * b + tokens * per_layer * b
        return m.layers * tokens * per_layer * b

    def head(tokens: int) -> int:
        return math.ceil(tokens * trained_share) * m.vocab * 12

    bc_tokens, rl_tokens = cfg.sft.micro_batch_tokens, cfg.grpo.micro_batch_tokens
    tokens = max(bc_tokens, rl_tokens)

    s = cfg.sampling
    context = cfg.prompt.max_prompt_tokens + s.max_new_tokens
    kv_cache = 2 * m.layers * m.kv_width * b * s.max_batch * context
    prefill = min(s.batch_token_budget, s.max_batch * cfg.prompt.max_prompt_tokens) * per_layer * b
    overhead = CUDA_OVERHEAD if cuda else 0

    parts = {"weights": int(weights), "autocast weight copies": int(cast_cache), "adapter + Adam": adapter_train,
             "reference adapter": reference, "update activations": activations(tokens), "update head": head(tokens),
             "KV cache": int(kv_cache), "prefill": int(prefill), "CUDA context": overhead}
    base = weights + cast_cache + overhead
    phases = {  # Adam's moments stay allocated between updates, so rollouts carry them too
        "BC step": int(base + adapter_train + activations(bc_tokens) + head(bc_tokens)),
        "M-GRPO update": int(base + adapter_train + reference + activations(rl_tokens) + head(rl_tokens)),
        "rollout batch": int(base + adapter_train + reference + kv_cache + prefill),
    }
    settings = {"micro_batch_tokens": tokens, "max_batch": s.max_batch,
                "gradient_checkpointing": pol.gradient_checkpointing, "trained_share": trained_share}
    return Plan(model=pol.model, device=device, weight_dtype=weight_dtype, quantization=pol.quantization,
                parts=parts, phases=phases, settings=settings)


def card_memory(spec: str) -> dict[str, float]:
    """`--gpu` values: a card name (CARDS, case-insensitive), a size like "16GB", or "all"."""
    if spec.lower() == "all":
        return dict(CARDS)
    for name, gb in CARDS.items():
        if name.lower() == spec.lower():
            return {name: gb}
    match = re.fullmatch(r"\s*([0-9.]+)\s*(GB|G|GiB)?\s*", spec, re.IGNORECASE)
    if match:
        gb = float(match.group(1)) * (GiB / 1e9 if (match.group(2) or "").lower() == "gib" else 1)
        return {f"{match.group(1)} {match.group(2) or 'GB'}": gb}
    raise ValueError(f"--gpu {spec!r}: give a card ({', '.join(CARDS)}), a size such as 24GB, or all")
