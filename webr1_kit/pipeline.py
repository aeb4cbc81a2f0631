"""The main job: the whole WebAgent-R1 recipe in one call.

    expert demonstrations -> behaviour cloning (BC) -> M-GRPO -> held-out evaluation -> report

`run_pipeline(scale)` runs every stage into one run directory and writes report.html.
Each stage records its output there and a rerun skips finished stages (BC and M-GRPO
also resume mid-stage from their checkpoints), so an interrupted job continues where it
stopped. `webr1 demo` is the command-line front end.

Scales (`SCALES`):
- "smoke": a tiny random model and a few short episodes. It exercises every stage in a
  couple of minutes and learns nothing; it is how the tests and notebooks check the
  mechanics.
- "cpu": the embedded SmolLM2-135M-Instruct on five MiniWoB++ tasks (`MINIWOB_TASKS`),
  sized to finish in under 40 minutes on a 2-core CPU; MiniWoB++ pages fit in a few
  hundred tokens. The arena's pages make ~1.5k-token prompts: `bench/configs/arena-cpu.json` runs the recipe
  there at a reduced size (32 training tasks, 30 held-out ones) in about 80 minutes, and
  the 135M model learns the action format but solves no task (docs/experiments/arena-recipe.md).
- "gpu": Qwen2.5-3B-Instruct with LoRA on the arena (train split for demonstrations and
  RL, the held-out test split for evaluation). It needs the model in the Hugging Face
  cache or a local path (`{"policy": {"model": ...}}`), and a CUDA GPU.

Departure from the paper: the paper evaluates once, after training, on WebArena-Lite;
the report here evaluates the base model, the BC model and the RL model on the same
held-out episodes so that each stage's effect can be read off one table.
"""

from __future__ import annotations

import inspect
import json
import sys
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import distributed
from .config import (ConfigError, EnvConfig, GRPOConfig, LoRA, PolicyConfig, PromptConfig, RolloutConfig, SamplingConfig,
                     SFTConfig, TaskSelection, from_dict, to_dict)
from .tasks.miniwob import MINIWOB_TRAIN_TASKS

MINIWOB_TASKS = ("use-spinner", "focus-text-2", "click-button", "click-link", "click-tab-2-easy")
"""The cpu preset's five tasks (and `webr1 rl`'s default): MiniWoB++ training tasks on
which the behaviour-cloned 135M model succeeds sometimes but not always when sampled, so
that M-GRPO's groups get unequal rewards to learn from within the demo's few steps. A task
BC always or never solves gives every group equal rewards and no gradient. They are the
training tasks on which the learning benchmark (24 tasks, docs/experiments/learning-benchmark.md) saw M-GRPO gain;
that benchmark, not the demo, is the measure of the recipe."""

_FLAT_FORMAT_TASKS = MINIWOB_TRAIN_TASKS[:5]
"""The tasks a run saved in the flat config format trained on when it named none."""


@dataclass(frozen=True)
class PipelineConfig:
    """Everything the main job needs; `SCALES` holds the presets."""

    scale: str = "cpu"
    """Name of the preset this config came from (recorded in the report)."""

    policy: PolicyConfig = PolicyConfig()
    """The model and how it is loaded: the same section `webr1 sft` and `webr1 rl` read
    (model "embedded", "tiny" (random, for smoke runs), a Hugging Face id or a local path;
    LoRA, 4-bit QLoRA, dtype, device, CPU autocast). Its LoRA adapter is what BC and
    M-GRPO train, so `lora` may not be None here."""

    tasks: TaskSelection = TaskSelection(suite="miniwob", names=MINIWOB_TASKS)
    """The training tasks: demonstrations, BC and M-GRPO (`webr1 rl`'s `tasks` section)."""

    eval_tasks: TaskSelection | None = None
    """The tasks every policy is evaluated on. None: the training tasks themselves, on page
    seeds never used for training; only MiniWoB++ tasks have page seeds, so a run on another
    suite names its held-out tasks here, e.g. {"suite": "arena", "split": "test"}."""

    warmup: bool = True
    """Behaviour-clone the demonstrations before RL. False: RL from `init_adapter`, or from
    the base model (the paper's WebAgent-R1-Zero ablation)."""

    init_adapter: str | None = None
    """A LoRA adapter to start from (a directory `save_adapter` wrote, e.g. another run's
    sft/adapter): behaviour cloning continues it, or, with warmup false, M-GRPO starts from
    it; `webr1 sft` and `webr1 rl` start from it too. None: a fresh adapter, which leaves the
    base model as it is. A relative path is relative to where the command runs."""

    demos_per_task: int = 6
    """Expert episodes recorded per training task (only the successful ones are kept)."""

    eval_episodes: int = 8
    """Held-out episodes per evaluation task (MiniWoB++: fresh page seeds, never trained on)."""

    heldout_tasks: TaskSelection | None = None
    """Tasks never used for demonstrations or RL, e.g. {"suite": "miniwob", "names": [...]}.
    Every policy is also evaluated on them (evaluation "<stage>-heldout-tasks"), to see
    whether what it learned transfers. None: no such evaluation."""

    eval_samples: int = 0
    """Also evaluate the BC and RL policies sampled at the training temperature, this many
    samples per held-out page (evaluation "<stage>-sampled"; 0: greedy only). Greedy
    decoding shows the policy's most likely action only; RL changes the whole distribution."""

    rollout: RolloutConfig = RolloutConfig()
    """How the demonstrations and the evaluations are played: turn limit, invalid-action
    budget (an untrained model writes few valid actions; without a budget it would use
    every turn), episodes at once, retries. Demonstrations get at least 30 turns, so that
    the expert finishes. M-GRPO's training episodes follow `grpo`'s own limits."""

    seed: int = 0
    """Fixes the demonstrations, the evaluation episodes, the data order and the sampling."""

    env: EnvConfig = EnvConfig()
    """Browser and observation settings (e.g. observation="axtree" for the ablation)."""

    prompt: PromptConfig = PromptConfig()
    sampling: SamplingConfig = SamplingConfig()
    sft: SFTConfig = SFTConfig()
    grpo: GRPOConfig = GRPOConfig()


SCALES: dict[str, PipelineConfig] = {
    "smoke": PipelineConfig(
        scale="smoke", policy=PolicyConfig(model="tiny", lora=LoRA(r=4, alpha=8)),
        tasks=TaskSelection(suite="miniwob", names=("click-button", "focus-text")),
        demos_per_task=2, eval_episodes=2, rollout=RolloutConfig(max_turns=2, concurrency=4),
        sampling=SamplingConfig(max_new_tokens=16, max_batch=8),
        sft=SFTConfig(epochs=1, batch_size=4, warmup_steps=0),
        grpo=GRPOConfig(steps=1, tasks_per_step=2, group_size=2, max_turns=2, concurrency=4, eval_every=0,
                        dynamic_sampling=False),
    ),
    "cpu": PipelineConfig(
        scale="cpu", policy=PolicyConfig(model="embedded"), demos_per_task=6, eval_episodes=16,
        rollout=RolloutConfig(max_turns=6),
        sampling=SamplingConfig(temperature=0.7, max_new_tokens=64, max_batch=32),
        sft=SFTConfig(epochs=2, batch_size=8, lr=5e-4, warmup_steps=2),
        grpo=GRPOConfig(steps=12, tasks_per_step=5, group_size=4, max_turns=6, concurrency=20, eval_every=0,
                        lr=1e-4, warmup_steps=3, save_every=1),
    ),
    "gpu": PipelineConfig(
        scale="gpu", policy=PolicyConfig(model="Qwen/Qwen2.5-3B-Instruct", dtype="bfloat16"),
        tasks=TaskSelection(suite="arena", split="train"), eval_tasks=TaskSelection(suite="arena", split="test"),
        demos_per_task=1, eval_episodes=1, rollout=RolloutConfig(max_turns=15, concurrency=16),
        sampling=SamplingConfig(max_new_tokens=256, max_batch=32),
        sft=SFTConfig(epochs=2, batch_size=16),
        grpo=GRPOConfig(steps=100, tasks_per_step=16, group_size=4, max_turns=15, concurrency=32, eval_every=20),
    ),
}


def scale_config(scale: str, overrides: dict[str, Any] | None = None) -> PipelineConfig:
    """A preset, with `overrides` (a mapping shaped like PipelineConfig) applied and checked
    (`load_config`)."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    return load_config(overrides, SCALES[scale])


def load_config(overrides: dict[str, Any] | None = None, base: PipelineConfig = PipelineConfig(),
                where: str = "pipeline") -> PipelineConfig:
    """The run config every entry point reads: `base` (the class defaults, or a preset) with
    `overrides` (a mapping shaped like PipelineConfig, e.g. a config file) applied and
    checked. Sections are merged into the base's key by key, except the task sections,
    which replace the base's whole: a suite's names mean nothing in another suite. Keys
    that have moved into a section, and the old flat task keys, are refused with the
    section to write instead; `where` names the source in every error."""
    base = to_dict(base)
    moved: dict[str, dict[str, Any]] = {}
    for key in sorted(set(overrides or {}) & set(_MOVED_KEYS)):
        moved.setdefault(_MOVED_KEYS[key], {})[key] = overrides[key]
    if moved:
        hint = " (M-GRPO's training episodes take grpo's own limits)" if "rollout" in moved else ""
        raise ConfigError(f"{where}: {', '.join(repr(k) for keys in moved.values() for k in keys)} moved into the "
                          f"{' and '.join(moved)} section{'s' * (len(moved) > 1)}: write {json.dumps(moved)}{hint}")
    if _flat_tasks(overrides or {}):
        raise ConfigError(f"{where}: tasks are chosen by sections now: "
                          f"{json.dumps(_task_sections(dict(overrides or {}), base['tasks']))} "
                          "(keys suite, split, names, limit; see TaskSelection)")
    for key, value in (overrides or {}).items():
        # A task section is one choice (a suite's names mean nothing in another suite), so it
        # is taken whole; the other sections are merged key by key into the preset's.
        if isinstance(value, dict) and isinstance(base.get(key), dict) and key not in _TASK_SECTIONS:
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    cfg = from_dict(PipelineConfig, base, where=where)
    if cfg.policy.lora is None:
        raise ConfigError(f"{where}.policy.lora: BC and M-GRPO train a LoRA adapter; it cannot be null")
    return cfg


# ---------------------------------------------------------------------- tasks


def run_tasks(cfg: PipelineConfig, which: str) -> list:
    """The "train" tasks (demonstrations and RL), the "eval" tasks (held-out evaluation) or
    the "heldout" tasks (never trained on; [] when the config names none), each selected by
    `tasks.select_tasks` from its section. Limits draw with the seeds "<seed>/train" and
    "<seed>/eval" (and "<seed>/heldout"), so training and evaluation samples are independent."""
    from .tasks import select_tasks

    if which not in ("train", "eval", "heldout"):
        raise ValueError(f"which must be 'train', 'eval' or 'heldout', got {which!r}")
    sel = {"train": cfg.tasks, "eval": cfg.eval_tasks, "heldout": cfg.heldout_tasks}[which]
    if which == "eval" and sel is None:
        if cfg.tasks.suite != "miniwob":
            raise ValueError(f"eval_tasks: {cfg.tasks.suite} tasks have no page seeds to hold out, so the "
                             "evaluation needs tasks of its own, e.g. {\"eval_tasks\": {\"suite\": \"arena\", "
                             "\"split\": \"test\"}}")
        sel = cfg.tasks  # the same tasks, on page seeds never trained on
    if sel is None:
        return []
    return select_tasks(sel, split="train" if which == "train" else "test", seed=f"{cfg.seed}/{which}")


def _check_tasks(cfg: PipelineConfig) -> None:
    """Select every task section now (a bad name fails before an hour of training), and
    refuse held-out tasks that are also training tasks."""
    train = {t.task_id for t in run_tasks(cfg, "train")}
    run_tasks(cfg, "eval")
    overlap = train & {t.task_id for t in run_tasks(cfg, "heldout")}
    if overlap:
        raise ValueError(f"heldout_tasks are also training tasks: {', '.join(sorted(overlap))}")


def _episodes(cfg: PipelineConfig, which: str) -> int:
    return cfg.demos_per_task if which == "train" else cfg.eval_episodes


# The evaluation episodes draw their page seeds from a different stream than the
# demonstrations and the RL rollouts, so MiniWoB++ evaluation pages are held out.
EVAL_SEED_OFFSET = 1_000_003


# ---------------------------------------------------------------------- stages

STAGES = ("demos", "sft", "eval-bc", "rl", "eval-rl", "eval-base")
"""The pipeline's stages in the order they run: expert demonstrations, BC training, BC's
held-out evaluation, M-GRPO, the RL policy's and then the base model's evaluations."""

SKIPPABLE = ("eval-bc", "eval-rl", "eval-base")
"""The stages `Pipeline.skip` may leave out: evaluations, which no later stage reads."""


@dataclass
class Pipeline:
    """One run directory and the stages that fill it."""

    cfg: PipelineConfig
    out: Path
    progress: bool = True
    log: Any = field(default=None)
    skip: tuple[str, ...] = ()
    """Evaluation stages not to run, e.g. ("eval-bc",) for an RL variant whose BC policy was
    evaluated in another run directory: the report then lacks their rows. Only evaluations
    can be skipped, since the other stages feed the ones after them."""
    browser: Any = None
    """A `Browser` every stage plays on, which the caller closes: a notebook that runs
    several pipelines starts one Chromium for all of them. None: `run` starts one for all
    its stages, and a stage method called on its own (`evaluate`, `reinforcement`) starts
    its own."""

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.skip = tuple(self.skip)
        if bad := [s for s in self.skip if s not in SKIPPABLE]:
            raise ValueError(f"skip: {', '.join(map(repr, bad))} cannot be skipped; only the evaluations can "
                             f"({', '.join(SKIPPABLE)})")
        self.out.mkdir(parents=True, exist_ok=True)
        saved = self.out / "pipeline.json"
        now = _as_saved(self.cfg)
        if saved.is_file():
            before = _saved_config(saved)
            if before != now:
                raise ValueError(f"{self.out} holds a run with a different config; choose another --out "
                                 f"(or delete it). First difference: {_first_difference(before, now)}")
        else:
            saved.write_text(json.dumps(now, indent=1))
        self._policy = None
        self._run_browser = None  # the browser `run` started for its stages

    def _browser(self) -> Any:
        """The browser the stages share (None: each starts its own)."""
        return self.browser if self.browser is not None else self._run_browser

    # -- bookkeeping

    def say(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        if self.log is not None:
            self.log(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def done(self, stage: str) -> dict[str, Any] | None:
        p = self.out / "stages" / f"{stage}.json"
        return json.loads(p.read_text()) if p.is_file() else None

    def mark(self, stage: str, result: dict[str, Any]) -> dict[str, Any]:
        p = self.out / "stages" / f"{stage}.json"
        p.parent.mkdir(exist_ok=True)
        tmp = p.with_suffix(".partial")
        tmp.write_text(json.dumps(result, indent=1, default=str))
        tmp.replace(p)
        return result

    def tasks(self, which: str = "train") -> list:
        """The tasks of this config: "train" (demonstrations and RL), "eval" (the held-out
        evaluation) or "heldout" (never trained on; [] when the config names none)."""
        return run_tasks(self.cfg, which)

    def evaluations(self) -> dict[str, Path]:
        """{name: episodes file} of every finished evaluation of this run, oldest first."""
        done = sorted((self.out / "stages").glob("eval-*.json"), key=lambda p: p.stat().st_mtime)
        files = {p.stem[len("eval-"):]: self.out / "eval" / f"{p.stem[len('eval-'):]}.jsonl" for p in done}
        return {name: f for name, f in files.items() if f.is_file()}

    def policy(self, adapter: Path | None = None) -> Any:
        """The policy, loaded once; `adapter` replaces its adapter weights."""
        from .policy import load_policy

        if self._policy is None:
            c = self.cfg
            self._policy = load_policy(c.policy, prompt=c.prompt, sampling=c.sampling, seed=c.seed)
        if adapter is not None:
            self._policy.load_adapter(adapter)
        return self._policy

    def reuse_bc(self, source: str | Path) -> list[str]:
        """Take the finished demonstrations, BC stage and BC and base-model evaluations of the
        run in `source`, whose config may differ from this one only in `grpo`. RL variants
        then start from the same BC adapter and are judged on the same held-out episodes (a
        paired comparison), without redoing the hour those stages take on a CPU. Stages this
        run has already finished are kept. Returns the stages taken."""
        import shutil

        source = Path(source)
        saved = source / "pipeline.json"
        if not saved.is_file():
            raise ValueError(f"{source} is not a pipeline run directory (no pipeline.json)")
        theirs = {k: v for k, v in _saved_config(saved).items() if k != "grpo"}
        ours = {k: v for k, v in _as_saved(self.cfg).items() if k != "grpo"}
        if theirs != ours:
            raise ValueError(f"{source} ran a different config outside grpo, so its BC stages are not this run's: "
                             f"{_first_difference(theirs, ours)}")
        stages = ["demos", "sft"] + sorted(p.stem for pattern in ("eval-bc*.json", "eval-base*.json")
                                            for p in (source / "stages").glob(pattern))
        for needed in ("demos", "sft"):
            if not (source / "stages" / f"{needed}.json").is_file():
                raise ValueError(f"{source} has not finished its {needed} stage; run it to the end of BC first")
        taken = []
        for stage in stages:
            if self.done(stage) is not None:
                continue
            files = ({"demos": ["demos.jsonl"], "sft": ["sft/adapter", "sft/config.json", "sft/metrics.jsonl"]}
                     .get(stage, [f"eval/{stage[len('eval-'):]}.jsonl"]))
            for rel in files:
                src, dst = source / rel, self.out / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                if src.is_dir():
                    shutil.copytree(src, dst, dirs_exist_ok=True)
                elif src.is_file():
                    shutil.copy2(src, dst)
            result = json.loads((source / "stages" / f"{stage}.json").read_text())
            if result.get("adapter"):  # the source's BC adapter (the only one these stages name): the copy's
                result["adapter"] = str(self.adapter("sft"))
            self.mark(stage, result)
            taken.append(stage)
        return taken

    def adapter(self, stage: str) -> Path:
        """Where the "sft" or "rl" stage keeps its adapter in this run directory. The stages
        read adapters from here, not from the paths their stage files name: those are
        relative to wherever the run was started (or name another run, for reused stages)."""
        return self.out / stage / "adapter"

    # -- stages

    async def demonstrations(self) -> dict[str, Any]:
        from .experts import Expert
        from .rollout import run_episodes
        from .trajectory import write_jsonl

        if (r := self.done("demos")) is not None:
            return r
        tasks = run_tasks(self.cfg, "train")
        self.say(f"expert demonstrations: {len(tasks)} tasks x {self.cfg.demos_per_task} episodes")
        r = self.cfg.rollout
        res = await run_episodes(Expert(), tasks, episodes=self.cfg.demos_per_task, concurrency=r.concurrency,
                                 max_turns=max(r.max_turns, 30), retries=r.retries, seed=self.cfg.seed,
                                 progress=self.progress, config=self.cfg.env, browser=self._browser())
        good = [t for t in res.trajectories if t.success]
        write_jsonl(self.out / "demos.jsonl", good)
        return self.mark("demos", {"episodes": len(res.trajectories), "successful": len(good),
                                   "turns": sum(len(t.turns) for t in good), "seconds": round(res.seconds, 1)})

    async def play(self, adapter: Path | None, *, tasks: list | None = None, episodes: int | None = None,
                   max_turns: int | None = None, samples_per_page: int = 0, screenshots: bool = False) -> Any:
        """One adapter's held-out episodes, played as every evaluation of this run plays them
        (turn limit, invalid-action budget, retries, page seeds, lockstep batching), and
        returned (`rollout.EvalResult`) without being recorded; `evaluate` records them.
        `adapter` None means the untrained base model; the other arguments are `evaluate`'s."""
        from .rollout import evaluate

        policy = self.policy()
        r = self.cfg.rollout
        kw = dict(episodes=episodes or self.cfg.eval_episodes, concurrency=r.concurrency,
                  max_turns=max_turns or r.max_turns, max_invalid=r.max_invalid, retries=r.retries,
                  seed=self.cfg.seed + EVAL_SEED_OFFSET, samples_per_page=max(1, samples_per_page),
                  progress=self.progress, config=replace(self.cfg.env, screenshot=screenshots), browser=self._browser())
        tasks = tasks if tasks is not None else run_tasks(self.cfg, "eval")
        temperature = policy.sampling.temperature if samples_per_page else 0.0
        if adapter is not None:
            policy.load_adapter(adapter)
        with _adapter_off(policy) if adapter is None else nullcontext():
            return await evaluate(policy, tasks, temperature, **kw)

    async def evaluate(self, name: str, adapter: Path | None, max_turns: int | None = None,
                       tasks: list | None = None, episodes: int | None = None,
                       samples_per_page: int = 0) -> dict[str, Any]:
        """Greedy episodes on the held-out instances, recorded under eval/<name>.jsonl and
        stages/eval-<name>.json. `adapter` None means the untrained base model; `max_turns`
        overrides the config's turn limit (the test-time scaling ablation); `tasks` and
        `episodes` replace the held-out tasks and the episodes per task (e.g. transfer to
        another suite); `samples_per_page` > 0 samples at the training temperature instead,
        that many times per held-out page. `name` identifies the evaluation: a finished one
        is returned as recorded."""
        from .trajectory import write_jsonl

        if (r := self.done(f"eval-{name}")) is not None:
            return r
        tasks = tasks if tasks is not None else run_tasks(self.cfg, "eval")
        episodes = episodes or self.cfg.eval_episodes
        how = (f"{samples_per_page} samples each at temperature {self.policy().sampling.temperature}"
               if samples_per_page else "greedy")
        self.say(f"evaluating {name}: {len(tasks)} tasks x {episodes} held-out episodes ({how})")
        # Screenshots (~30 ms a step) so that the report can replay episodes.
        res = await self.play(adapter, tasks=tasks, episodes=episodes, max_turns=max_turns,
                              samples_per_page=samples_per_page, screenshots=True)
        write_jsonl(self.out / "eval" / f"{name}.jsonl", res.trajectories)
        m = res.metrics
        self.say(f"{name}: success {m['success_rate']:.2f} (95% CI {m['success_ci95'][0]:.2f}-{m['success_ci95'][1]:.2f})"
                 f" over {m['evaluated']} episodes")
        return self.mark(f"eval-{name}", {"metrics": m, "adapter": str(adapter) if adapter else None})

    def behaviour_cloning(self) -> dict[str, Any]:
        from .sft import train_sft
        from .trajectory import read_jsonl

        if (r := self.done("sft")) is not None:
            return r
        demos = list(read_jsonl(self.out / "demos.jsonl"))
        if not demos:
            raise ValueError(f"{self.out / 'demos.jsonl'} holds no successful demonstrations")
        start = self.cfg.init_adapter
        self.say(f"behaviour cloning on {len(demos)} demonstrations ({sum(len(t.turns) for t in demos)} turns)"
                 + (f", continuing {start}" if start else ""))
        t0 = time.perf_counter()
        policy = self.policy(Path(start) if start else None)
        row = train_sft(policy, demos, self.cfg.sft, out=self.out / "sft", progress=self.progress)
        adapter = self.adapter("sft")
        self.policy().save_adapter(adapter)
        return self.mark("sft", {"adapter": str(adapter), "last": row, "seconds": round(time.perf_counter() - t0, 1)})

    async def reinforcement(self, init_adapter: Path | None) -> dict[str, Any]:
        """M-GRPO from `init_adapter` (the BC adapter, or the config's), or from the base
        model if None."""
        from .grpo import train_grpo

        if (r := self.done("rl")) is not None:
            return r
        if init_adapter is None:
            self._policy = None  # a fresh adapter: LoRA starts as the identity, i.e. the base model
        policy = self.policy(init_adapter)
        tasks = run_tasks(self.cfg, "train")
        g = self.cfg.grpo
        self.say(f"M-GRPO: {g.steps} steps x {g.tasks_per_step} tasks x group of {g.group_size}")
        t0 = time.perf_counter()
        demos = None
        if g.replay_coef:  # the behaviour-cloning term replays the demonstrations (recorded here if need be)
            from .trajectory import read_jsonl

            await self.demonstrations()
            demos = list(read_jsonl(self.out / "demos.jsonl"))
        held_out = run_tasks(self.cfg, "eval") if g.eval_every else None  # the periodic evaluation, as `webr1 rl`
        run = await train_grpo(policy, tasks, g, eval_tasks=held_out, out=self.out / "rl", env_config=self.cfg.env,
                               progress=self.progress, demos=demos, browser=self._browser())
        adapter = self.adapter("rl")
        policy.save_adapter(adapter)
        train = [m for m in run.metrics if m.get("phase") == "train"]
        return self.mark("rl", {"adapter": str(adapter), "steps": len(train),
                                "train_success": [m.get("success_rate") for m in train],
                                "seconds": round(time.perf_counter() - t0, 1)})

    async def evaluate_stage(self, stage: str, adapter: Path | None) -> None:
        """Every evaluation of one policy the config asks for: greedy on unseen pages of the
        training tasks, greedy on the held-out tasks, sampled on the unseen pages."""
        await self.evaluate(stage, adapter)
        heldout = run_tasks(self.cfg, "heldout")
        if heldout:
            await self.evaluate(f"{stage}-heldout-tasks", adapter, tasks=heldout)
        if self.cfg.eval_samples and adapter is not None:
            await self.evaluate(f"{stage}-sampled", adapter, samples_per_page=self.cfg.eval_samples)

    def stages(self) -> list[str]:
        """The stages `run` goes through, in order (the names of their files in stages/):
        `STAGES`, less the BC ones when warmup is off and those in `skip`."""
        return [s for s in STAGES if (self.cfg.warmup or s not in ("demos", "sft", "eval-bc")) and s not in self.skip]

    async def run(self, until: str | None = None) -> Path:
        """Every stage, skipping finished ones, then the report; returns its path. The
        untrained model is evaluated last: its row is context for the others, and it is the
        slowest to evaluate (its invalid answers use up every turn), so an interrupted run has
        the BC and RL results first.

        until: stop after this stage (one of `stages()`, e.g. "sft" to train BC only) and
        return the run directory; running again without it goes on from there."""
        if until is not None and until not in self.stages():
            raise ValueError(f"until: no stage {until!r} in this run; its stages are {', '.join(self.stages())}")
        if distributed.size() > 1:
            raise ValueError(f"webr1 demo runs on one process, not {distributed.size()}: launch `webr1 sft` and "
                             "`webr1 rl` under accelerate instead (README, Scaling out)")
        t0 = time.perf_counter()
        _check_tasks(self.cfg)
        init = Path(self.cfg.init_adapter) if self.cfg.init_adapter else None
        if init is not None and not (init / "adapter_model.safetensors").is_file():
            raise ValueError(f"init_adapter: {init} holds no adapter (no adapter_model.safetensors)")
        if self.cfg.warmup:
            init = self.adapter("sft")
        work: dict[str, Any] = {
            "demos": self.demonstrations, "sft": self.behaviour_cloning,
            "eval-bc": lambda: self.evaluate_stage("bc", init), "rl": lambda: self.reinforcement(init),
            "eval-rl": lambda: self.evaluate_stage("rl", self.adapter("rl")),
            "eval-base": lambda: self.evaluate_stage("base", None),
        }
        # One Chromium for every stage (started when a stage first needs it), unless the
        # caller gave one.
        own = None
        if self._browser() is None:
            from .browser import Browser

            own = self._run_browser = Browser(self.cfg.env)
        try:
            for stage in self.stages():
                if stage == "eval-rl":
                    self.say("held-out evaluation of the RL policy")
                result = work[stage]()
                if inspect.isawaitable(result):
                    await result
                if stage == until:
                    self.say(f"stopped after {stage} ({(time.perf_counter() - t0) / 60:.1f} min); "
                             "run again without stopping there to go on")
                    return self.out
        finally:
            if own is not None:
                self._run_browser = None
                await own.close()
        self.say("report")
        from .report import write_report

        path = write_report(self.out)
        self.say(f"done in {(time.perf_counter() - t0) / 60:.1f} min. Report: {path.resolve()}")
        return path


async def run_pipeline(scale: str | PipelineConfig = "cpu", out: str | Path = "runs/demo", progress: bool = True,
                       overrides: dict[str, Any] | None = None, until: str | None = None,
                       skip: Sequence[str] = ()) -> Path:
    """Run (or resume) the main job into `out`; returns the path of report.html (with
    `until`, the run directory: see `Pipeline.run`; `skip`: see `Pipeline.skip`)."""
    cfg = scale if isinstance(scale, PipelineConfig) else scale_config(scale, overrides)
    return await Pipeline(cfg, Path(out), progress, skip=skip).run(until)


class _adapter_off:
    """Run the model without its adapter: the untrained base, whatever the adapter holds."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self._ctx = None

    def __enter__(self) -> Any:
        self._ctx = self.policy.adapter_off()
        self._ctx.__enter__()
        self.policy.generator.invalidate_cache()
        return self.policy

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)
        self.policy.generator.invalidate_cache()


def _as_saved(cfg: PipelineConfig) -> dict[str, Any]:
    """The config as pipeline.json holds it (tuples read back as lists)."""
    return json.loads(json.dumps(to_dict(cfg)))


_MOVED_KEYS = {**dict.fromkeys(("model", "lora", "quantization", "dtype"), "policy"),
               **dict.fromkeys(("max_turns", "max_invalid", "concurrency"), "rollout")}
"""Settings that pipeline.json once held at its top level, and the section each is in now."""


def _saved_config(path: Path) -> dict[str, Any]:
    """A run's pipeline.json read through today's PipelineConfig, so that settings added to
    the kit since the run was written take their defaults (the run still resumes), while a
    saved value that differs from today's config still counts as a difference. Runs saved
    with settings at the top level that now have a section (`_MOVED_KEYS`: the model's,
    the rollout limits) have them moved into it."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); the run's config is unreadable, nothing was changed") from None
    for key, section in _MOVED_KEYS.items():
        if key in data:
            data[section] = {key: data.pop(key), **data.get(section, {})}
    if _flat_tasks(data):
        data = _task_sections(data, {"suite": "miniwob", "names": list(_FLAT_FORMAT_TASKS)})
    return _as_saved(from_dict(PipelineConfig, data, where=str(path)))


_FLAT_TASK_KEYS = ("suite", "train_limit", "eval_limit")
_TASK_SECTIONS = ("tasks", "eval_tasks", "heldout_tasks")


def _flat_tasks(data: dict[str, Any]) -> bool:
    """Whether `data` chooses tasks the way pipeline configs did before the task sections
    (suite, tasks and heldout_tasks as lists of MiniWoB++ names, train_limit, eval_limit)."""
    return bool(set(data) & set(_FLAT_TASK_KEYS)) or any(isinstance(data.get(k), (list, tuple))
                                                         for k in ("tasks", "heldout_tasks"))


def _task_sections(data: dict[str, Any], tasks: dict[str, Any]) -> dict[str, Any]:
    """`data` with the old flat task keys replaced by the sections that select the same
    tasks with the same seeds: MiniWoB++ names, or the arena's train split (train_limit)
    evaluated on its test split (eval_limit). `tasks`: the section when none is named."""
    data = dict(data)
    suite = data.pop("suite", tasks.get("suite", "miniwob"))
    names = data.pop("tasks", None)
    train_limit, eval_limit = data.pop("train_limit", None), data.pop("eval_limit", None)
    held = data.pop("heldout_tasks", None)
    if suite == "miniwob":
        data["tasks"] = {"suite": "miniwob", "names": list(names if isinstance(names, (list, tuple)) else tasks["names"])}
    else:
        data["tasks"] = {"suite": suite, "split": "train", "limit": train_limit}
        data["eval_tasks"] = {"suite": suite, "split": "test", "limit": eval_limit}
    if isinstance(held, dict) or held is None:
        data["heldout_tasks"] = held
    else:
        data["heldout_tasks"] = {"suite": "miniwob", "names": list(held)} if held else None
    return data


def saved_config(out: str | Path) -> PipelineConfig:
    """The config of the pipeline run in directory `out` (its pipeline.json, read through
    today's PipelineConfig as a resumed run reads it)."""
    path = Path(out) / "pipeline.json"
    if not path.is_file():
        raise ValueError(f"{out} is not a pipeline run directory (no pipeline.json)")
    return from_dict(PipelineConfig, _saved_config(path), where=str(path))


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{where}.{k}" if where else k)
    return f"{where}: {a!r} (saved) vs {b!r} (now)"
