"""The LLM policy: a language model that acts through the paper's prompt.

    policy = load_policy("embedded")                                  # SmolLM2-135M-Instruct, no download
    policy = load_policy("Qwen/Qwen2.5-3B-Instruct", quantization="4bit", lora=LoRA(r=16))
    policy = load_policy(PolicyConfig(...))                            # a run config's policy section

Getting the model (weights, dtype, device, quantization, the LoRA adapter) is `models.py`.
`LLMPolicy.act` builds the prompt (prompt.py), asks the shared batching generator for a
response, and returns a `Response` with the prompt ids, the sampled ids and their
log-probabilities: what training later scores, token for token.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

from .config import LoRA, PolicyConfig, PromptConfig, SamplingConfig, from_dict
from .models import PolicyLoadError, load_model
from .seeds import derive_seed

REFERENCE_ADAPTER = "reference"
"""Name of the frozen second adapter that `LLMPolicy.freeze_reference` makes (the KL reference)."""


@dataclass
class Response:
    """What a model policy answered, with the exact tokens involved."""

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    finish: str = "stop"
    prompt_truncated: bool = False
    trained: bool = True
    """False for a response the policy is to read as context, not learn (an expert's prefix turn)."""
    expert: dict[str, Any] | None = None
    """The scripted expert's action at the same state, where a guided recipe asked (`Turn.expert`)."""


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
        self.adapter_on = True
        """False while `adapter_off` runs (a generator on a server asks)."""
        if self.config.vllm_urls:
            from .vllm_generation import VLLMGenerator

            self.generator: Any = VLLMGenerator(self.config.vllm_urls, tokenizer, self.sampling, policy=self,
                                                adapter_dir=self.config.vllm_adapter_dir)
        else:
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
        out = await self.sample(prompt.ids, task, history, seed)
        return Response(out.text, prompt.ids, out.ids, out.logprobs, out.finish, prompt.truncated)

    async def sample(self, ids: list[int], task: Any, history: list, seed: int = 0) -> Any:
        """The generator's answer to the prompt `ids` at this turn's seed, which the policy's
        seed, the episode's seed, the task and the turn number fix, so a replayed episode
        samples the same. `act` answers through it, and so does a hinted turn
        (`guidance.GuidedPolicy`), which shows the policy a prompt `act` would not build."""
        return await self.generator.generate(ids, seed=derive_seed(self.seed, seed, task.task_id, len(history)))

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
        self.adapter_on = False
        try:
            with self.model.disable_adapter():
                yield self.model
        finally:
            self.adapter_on = True


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
    model_obj, tokenizer = load_model(cfg, seed)
    return LLMPolicy(model_obj, tokenizer, cfg, prompt, sampling, seed)
