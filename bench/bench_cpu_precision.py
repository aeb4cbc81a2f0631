"""CPU arithmetic benchmark: float32 against bfloat16 autocast, and glibc's mmap threshold.

    .venv/bin/python bench/bench_cpu_precision.py [--tokens 1500] [--repeats 3]

With the embedded model (SmolLM2-135M-Instruct, float32 weights, LoRA r=16 on every linear
layer, as the kit trains it), measures in one process, configuration after configuration:
- prefill: tokens/s of one forward pass over a `--tokens`-long prompt (last logits only);
- decode: tokens/s of 32 greedy steps at batch 4 through the kit's generator;
- training: tokens/s of `token_logprobs` + backward on two `--tokens`-long sequences;
for PolicyConfig.cpu_autocast "off" (float32) and "bfloat16", each at a fixed mmap threshold of
1 MiB (the kit's setting before this benchmark) and 32 MiB (its setting now). The threshold is
process-wide and applies to later allocations, so every configuration runs in the same process
with a warm-up pass first. Best of `--repeats`. Writes bench/results/bench_cpu_precision.json.
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import random
import resource
import time
from pathlib import Path


def _threshold(nbytes: int) -> None:
    ctypes.CDLL("libc.so.6").mallopt(-3, nbytes)  # M_MMAP_THRESHOLD


def _cpu_seconds() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def measure(policy, tokens: int, repeats: int) -> dict[str, float]:
    import torch

    from webr1_kit.cpu import compute_context
    from webr1_kit.training import token_logprobs
    from webr1_kit.trajectory import Packed

    rng = random.Random(0)
    prompt = [rng.randrange(100, 40000) for _ in range(tokens)]
    model = policy.model
    params = [p for p in model.parameters() if p.requires_grad]
    u0, s0 = _cpu_seconds()

    def prefill() -> None:
        with torch.inference_mode(), compute_context(model):
            model(input_ids=torch.tensor([prompt]), logits_to_keep=1)

    def decode() -> int:
        policy.generator.invalidate_cache()
        outs = policy.generator.generate_batch([prompt[:200 + 10 * i] for i in range(4)], [1, 2, 3, 4])
        return sum(len(o.ids) for o in outs)

    def train() -> None:
        seqs = [Packed(input_ids=prompt, loss_mask=[0] * (tokens // 2) + [1] * (tokens - tokens // 2))] * 2
        logp, _ = token_logprobs(model, seqs)
        (-logp.mean()).backward()
        for p in params:
            p.grad = None

    out = {}
    for name, fn, count in (("prefill", prefill, tokens), ("decode", decode, None), ("train", train, 2 * tokens)):
        fn()  # warm-up
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            n = fn()
            best = min(best, time.perf_counter() - t)
        out[f"{name}_tok_s"] = round((count if count is not None else n) / best, 1)
    u1, s1 = _cpu_seconds()
    out["system_cpu_share"] = round((s1 - s0) / max(1e-9, (u1 - u0) + (s1 - s0)), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=1500, help="prompt/sequence length (default 1500, an arena prompt)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per measurement, best kept (default 3)")
    args = ap.parse_args()

    from webr1_kit.config import LoRA, SamplingConfig
    from webr1_kit.cpu import native_bf16_cpu
    from webr1_kit.policy import load_policy

    sampling = SamplingConfig(temperature=0.0, max_new_tokens=32)
    rows = []
    for autocast in ("off", "bfloat16"):
        policy = load_policy("embedded", lora=LoRA(), cpu_autocast=autocast, sampling=sampling)
        policy.generator.end_ids, policy.generator.stop = set(), ()  # always decode all 32 tokens
        for threshold in (1 << 20, 32 << 20):
            _threshold(threshold)
            row = {"cpu_autocast": autocast, "mmap_threshold_mib": threshold >> 20,
                   **measure(policy, args.tokens, args.repeats)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        del policy
    _threshold(32 << 20)
    result = {"date": time.strftime("%Y-%m-%d"), "tokens": args.tokens, "native_bf16_cpu": native_bf16_cpu(),
              "model": "SmolLM2-135M-Instruct (embedded), float32 weights, LoRA r=16 all-linear", "rows": rows}
    out = Path(__file__).parent / "results" / "bench_cpu_precision.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
