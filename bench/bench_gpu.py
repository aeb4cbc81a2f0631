"""GPU memory and speed of M-GRPO updates with LoRA and QLoRA, and of bf16 generation.

    python bench/bench_gpu.py [--models qwen2.5-3b,llama3.1-8b] [--lengths 4096,8192] [--out DIR]

For each model, adapter kind (LoRA in bf16, QLoRA in 4-bit NF4) and trajectory length,
one training step of the kit's own loss code (training.token_logprobs + grpo.grpo_loss,
gradient checkpointing on, the last 1024 tokens trained) is timed and its peak memory
read from torch.cuda.max_memory_allocated. Generation is timed in bf16: transformers'
`generate` at batch 8, and the kit's own batching generator (the path rollouts take) at
batch 8 and 32 after 1024-token prompts.

No weights are needed: the models are random-initialised from the real architectures'
configs (written out below), because memory and speed do not depend on weight values.
QLoRA needs the weights on disk to quantise them at load time, so the random model is
saved once to --scratch first. Needs a CUDA GPU; it has not been run on one yet, so
BENCHMARKS.md has no figures from it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

CONFIGS = {
    # Qwen/Qwen2.5-3B-Instruct config.json (architecture fields)
    "qwen2.5-3b": dict(model_type="qwen2", vocab_size=151936, hidden_size=2048, intermediate_size=11008,
                       num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=2,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True),
    # meta-llama/Llama-3.1-8B-Instruct config.json (architecture fields)
    "llama3.1-8b": dict(model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                        max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                        tie_word_embeddings=False),
}


def build(name: str, scratch: Path) -> Path:
    """Save a random-initialised bf16 model of the architecture (once) and return its path."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = scratch / name
    if (path / "config.json").is_file():
        return path
    cfg = dict(CONFIGS[name])
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(path)
    del model
    torch.cuda.empty_cache()
    return path


def train_step(path: Path, quant: str, length: int, trained: int = 1024) -> dict:
    import torch

    from webr1_kit.config import GRPOConfig, LoRA, PolicyConfig
    from webr1_kit.grpo import grpo_loss
    from webr1_kit.models import attach_lora, load_model  # noqa: F401  (load_model needs a tokenizer)
    from webr1_kit.training import token_logprobs
    from webr1_kit.trajectory import Packed
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    kwargs = {"dtype": torch.bfloat16, "device_map": {"": "cuda"}}
    if quant == "qlora":
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                           bnb_4bit_use_double_quant=True,
                                                           bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = attach_lora(model, LoRA(r=16, alpha=32), quantized=quant == "qlora", checkpointing=True)
    model.eval()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    seq = Packed()
    vocab = model.config.vocab_size
    seq.add(torch.randint(0, vocab, (length - trained,)).tolist(), trained=False)
    seq.add(torch.randint(0, vocab, (trained,)).tolist(), trained=True, logprobs=[-1.0] * trained, turn=0)
    cfg = GRPOConfig()
    times = []
    for _ in range(3):  # the first step warms up kernels
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logp, _ = token_logprobs(model, [seq])
        n = len(logp)
        loss, _ = grpo_loss(logp, logp.detach() - 0.01, None, torch.ones(n, device="cuda"),
                            torch.full((n,), 1 / n, device="cuda"), cfg)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() / 2**30
    del model, opt
    torch.cuda.empty_cache()
    step_s = min(times[1:])
    return {"peak_gib": round(peak, 2), "step_s": round(step_s, 3), "tokens_per_s": round(length / step_s, 1)}


def generation(path: Path, batch: int = 8, prompt: int = 512, new: int = 128) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map={"": "cuda"})
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device="cuda")
    model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=True)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    del model
    torch.cuda.empty_cache()
    return {"batch": batch, "prompt_tokens": prompt, "new_tokens": new, "new_tokens_per_s": round(batch * new / dt, 1)}


def kit_generation(path: Path, tokenizer: str, batch: int = 8, prompt: int = 1024, new: int = 128) -> dict:
    """New tokens per second of the kit's own batching generator (`generation.Generator`, the
    path rollouts take), sampling `batch` rows of `new` tokens after `prompt`-token prompts.

    The random models come without a tokenizer; the embedded model's (`tokenizer`) decodes
    for the stop check and the prompts draw ids inside its vocabulary. A row that samples the
    end token stops early, so the rate counts the tokens actually produced."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from webr1_kit.config import SamplingConfig
    from webr1_kit.generation import Generator

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map={"": device})
    tok = AutoTokenizer.from_pretrained(tokenizer)
    gen = Generator(model, tok, SamplingConfig(temperature=1.0, max_new_tokens=new, max_batch=batch,
                                               batch_token_budget=batch * (prompt + new)), stop=())
    rng = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, len(tok), (prompt,), generator=rng).tolist() for _ in range(batch)]
    gen.generate_batch(prompts, list(range(batch)))  # warm-up
    gen.stats.update(new_tokens=0, seconds=0.0)
    gen.generate_batch(prompts, list(range(batch, 2 * batch)))
    made, seconds = gen.stats["new_tokens"], gen.stats["seconds"]
    del model, gen
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"batch": batch, "prompt_tokens": prompt, "new_tokens": made, "new_tokens_per_s": round(made / seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="qwen2.5-3b,llama3.1-8b")
    ap.add_argument("--lengths", default="4096,8192")
    ap.add_argument("--scratch", default="/tmp/webr1_bench_models", help="where the random models are saved")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--tokenizer", default=None,
                    help="a tokenizer folder for the kit's generator (default: the embedded model's)")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs a CUDA GPU")
    if args.tokenizer is None:
        from webr1_kit.models import embedded_path

        args.tokenizer = str(embedded_path())
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
               "rows": []}
    import peft
    import transformers

    results.update(transformers=transformers.__version__, peft=peft.__version__)

    def save() -> None:  # after every model, so a run stopped at its time limit keeps what it measured
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "bench_gpu.json").write_text(json.dumps(results, indent=1))

    for name in args.models.split(","):
        path = build(name, Path(args.scratch))
        for quant in ("lora", "qlora"):
            for length in map(int, args.lengths.split(",")):
                try:
                    row = train_step(path, quant, length)
                except Exception as exc:  # out of memory, missing bitsandbytes: record, go on
                    row = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                results["rows"].append({"model": name, "adapter": quant, "tokens": length, **row})
                print(results["rows"][-1], flush=True)
                save()
        try:
            results.setdefault("generation", {})[name] = generation(path)
        except Exception as exc:  # record, go on
            results.setdefault("generation", {})[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        print(name, results["generation"][name], flush=True)
        for batch in (8, 32):
            try:
                row = kit_generation(path, args.tokenizer, batch=batch)
            except Exception as exc:  # record, go on
                row = {"batch": batch, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            results.setdefault("kit_generation", {}).setdefault(name, []).append(row)
            print(name, "kit generator", row, flush=True)
        save()


if __name__ == "__main__":
    main()
