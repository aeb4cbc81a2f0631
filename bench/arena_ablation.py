"""The recipe variants for sparse rewards, side by side on the bundled arena: plain M-GRPO,
each variant alone and their combination, all continuing one BC adapter and all judged greedy
on the same held-out test-split tasks, so every arm's comparison with BC is paired.

    python bench/arena_ablation.py [--root runs/arena-ablation] [--arms plain,expert-members]
                                   [--record bench/results/arena-ablation] [--table]

First BC, the start of every arm: `webr1 demo --config bench/configs/arena-ablation/base.json
--out ROOT/bc --until eval-bc` (demonstrations, BC, BC's held-out evaluation). Each arm is the
same config with its `grpo` switches (written to ROOT/configs/ARM.json; `plain` has none), run
as `webr1 demo --bc-from ROOT/bc --skip eval-bc --until eval-rl`: it takes the demonstrations
and the BC adapter, and runs only M-GRPO and the RL policy's evaluation (BC's is recorded).
Arms run one after another, each in its own process; one that stopped resumes (every step is
a checkpoint).

An arm takes one to two hours on a 2-core CPU (6 steps) and about 40 minutes more for its
held-out evaluation (not run for an arm that ended with BC's adapter byte for byte, whose
episodes are BC's: see `unchanged`), so the table is filled over several runs, not
necessarily on one machine: BC's evaluation and each finished arm are recorded in the
--record folder (figures, the held-out episodes' outcomes, the config, the SHA-256 of the BC
adapter), and what is recorded there is not run again. A later run on a fresh machine trains
BC again (`--until sft`) and refuses to go on if the adapter's SHA-256 differs from the
recorded one, since its arms would not be paired with the recorded ones. BC from one config
gives the same adapter in every process (the seeds fix the demonstrations, what the agent
reads of them and LoRA dropout's masks: two processes gave byte-identical adapters), so the
check guards against a change of kit or config, not against chance.

After the arms (or alone, with --table) it prints the Markdown table of the recorded arms that
docs/experiments/arena-recipe-variants.md quotes: per arm, held-out success with its 95% interval, the paired comparison
with BC on the same tasks (newly solved, newly failed, exact McNemar p), the share of M-GRPO's
groups with a learning signal (any non-zero advantage, after expert members and step rewards),
the policy's own success during training (its unaided episodes: no expert member, hint or
prefix), what the guidance used (with the guided episodes whose task verdict passed), and the
wall time of M-GRPO (rollouts and updates, summed over steps, so resumes add up). Held-out
success is all-or-nothing over an episode; where no arm solves any, the table's step accuracy
says whether training moved single decisions: each policy, greedy, at the same 60 states of
the scripted expert's own held-out episodes (drawn once from ROOT/heldout-expert.jsonl, the
evaluation's pages), scored against the expert's action there (`sft.step_accuracy`), paired
with BC state by state. It is measured when an arm (or BC) is recorded, or added to a record
that lacks it while its adapter is still in ROOT (about 8 minutes for each policy). For the
arms that ask the expert at every turn (step rewards, departure credit), a second table
gives, per template, how often the scripted expert could name its action from the state the
policy reached.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

BASE = Path(__file__).parent / "configs" / "arena-ablation" / "base.json"
RECORD = Path(__file__).parent / "results" / "arena-ablation"

ARMS: dict[str, dict] = {
    # arm -> its grpo switches (README's settings table says what each does)
    "plain": {},
    "expert-members": {"expert_if_unsolved": True},
    "hints": {"hint_rate": 0.5},
    "prefix": {"prefix_max": 3, "credit_from_departure": True},
    "step-rewards": {"step_reward_coef": 0.5},
    "curriculum": {"task_sampling": "informative", "task_floor": 0.1},
    # the best combination the single arms point to: step rewards (a signal in most groups,
    # the format kept), expert prefixes counted from the goal (prefixes from the start made the
    # policy's turns more often valid, but left it 2 or more of the expert's steps from the
    # goal in every episode, so none succeeded), credit from the first departure, and
    # curriculum (which has something to weigh once prefix starts succeed). Left out: expert
    # members (the policy's format eroded under the negative advantages of its failures) and
    # hints (hinted turns were less often valid).
    "combined": {"prefix_max": 3, "prefix_from": "goal", "credit_from_departure": True, "step_reward_coef": 0.5,
                 "task_sampling": "informative", "task_floor": 0.1},
}
"""The arms, in the order they run by default."""

STEP_STATES = 60
"""Held-out expert states every policy is asked at for the step accuracy (`sft.step_accuracy`)."""


def arm_config(name: str, base: dict) -> dict:
    """`base` with the arm's switches merged into its grpo section."""
    if name not in ARMS:
        raise SystemExit(f"unknown arm {name!r}; the arms are {', '.join(ARMS)}")
    return {**base, "grpo": {**base.get("grpo", {}), **ARMS[name]}}


def webr1() -> list[str]:
    """The `webr1` command of the interpreter running this script."""
    return [sys.executable, "-m", "webr1_kit.cli"]


def bc_sha256(root: Path) -> str:
    """The SHA-256 of the BC adapter's weights: what every arm continues."""
    return hashlib.sha256((root / "bc" / "sft" / "adapter" / "adapter_model.safetensors").read_bytes()).hexdigest()


def read_record(record: Path, name: str) -> dict | None:
    f = record / f"{name}.json"
    return json.loads(f.read_text()) if f.is_file() else None


def demo(root: Path, name: str, config: dict, quiet: bool, *extra: str) -> None:
    """`webr1 demo` on `config` into ROOT/NAME, appending its output to ROOT/NAME.log."""
    cfg = root / "configs" / f"{name}.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps(config, indent=1))
    cmd = [*webr1(), "demo", "--config", str(cfg), "--out", str(root / name), *(["--quiet"] if quiet else []), *extra]
    print(f"{name}: webr1 {' '.join(cmd[3:])}", file=sys.stderr)
    with open(root / f"{name}.log", "a") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc:
        raise SystemExit(f"{name} stopped with exit status {rc}; see {root / f'{name}.log'} (rerun to resume)")


def ensure_bc(root: Path, base: dict, record: Path, quiet: bool) -> None:
    """The BC adapter every arm continues, in ROOT/bc: trained here if need be (and evaluated,
    until BC's evaluation is recorded), and refused unless it is the adapter the recorded arms
    continued."""
    bc = read_record(record, "bc")
    until = "sft" if bc else "eval-bc"
    if not (root / "bc" / "stages" / f"{until}.json").is_file():
        demo(root, "bc", base, quiet, "--until", until)
    if bc is None:
        write_bc_record(root, record)
    elif bc["bc_adapter_sha256"] != bc_sha256(root):
        raise SystemExit(f"the BC adapter in {root / 'bc'} (SHA-256 {bc_sha256(root)[:16]}...) is not the one the "
                         f"arms recorded in {record} continued ({bc['bc_adapter_sha256'][:16]}...), so new arms would "
                         f"not be paired with them; to start the ablation over, move {record} aside")


def run_arm(root: Path, name: str, base: dict, record: Path, quiet: bool) -> None:
    if (rec := read_record(record, name)) is not None:
        if rec["config"] != arm_config(name, base):
            raise SystemExit(f"{name} is recorded in {record} with another config than {BASE.name} gives it now; "
                             f"move {record / (name + '.json')} aside to run it again")
        print(f"{name}: recorded already ({record / (name + '.json')})", file=sys.stderr)
    else:
        if not (root / name / "stages" / "eval-rl.json").is_file():
            ensure_bc(root, base, record, quiet)
            for until in ("rl", "eval-rl"):  # a finished stage is not run again
                if until == "eval-rl" and unchanged(root, name):
                    break  # BC's weights: its greedy evaluation would replay BC's episodes
                demo(root, name, arm_config(name, base), quiet, "--until", until, "--bc-from", str(root / "bc"),
                     "--skip", "eval-bc")  # BC's evaluation is recorded: an arm need not run it again
        write_record(root, name, base, record)
    for policy in ("bc", name):
        add_step_accuracy(root, policy, record)


def unchanged(root: Path, name: str) -> bool:
    """Whether the arm ended with BC's adapter byte for byte (M-GRPO trained no token). Its
    held-out evaluation and step accuracy would then be BC's, episode for episode and state
    for state (greedy decoding, the same tasks, seeds and lockstep batches: the plain arm's
    evaluation, run in full, matched BC's episode for episode), so they are taken from BC's
    record instead of being run again (about 48 minutes on 2 cores)."""
    f = adapter_of(root, name) / "adapter_model.safetensors"
    return f.is_file() and hashlib.sha256(f.read_bytes()).hexdigest() == bc_sha256(root)


def adapter_of(root: Path, name: str) -> Path:
    """Where BC ("bc") or an arm keeps the adapter it ended with."""
    return root / "bc" / "sft" / "adapter" if name == "bc" else root / name / "rl" / "adapter"


def heldout_demos(root: Path) -> list:
    """The scripted expert's successful episodes on the held-out pages (the evaluation's tasks,
    page seeds and turn limit), played once into ROOT/heldout-expert.jsonl."""
    from webr1_kit.experts import Expert
    from webr1_kit.pipeline import EVAL_SEED_OFFSET, run_tasks, saved_config
    from webr1_kit.rollout import run_episodes
    from webr1_kit.trajectory import read_jsonl, write_jsonl

    f = root / "heldout-expert.jsonl"
    if not f.is_file():
        cfg = saved_config(root / "bc")
        res = asyncio.run(run_episodes(Expert(), run_tasks(cfg, "eval"), episodes=cfg.eval_episodes,
                                       concurrency=cfg.rollout.concurrency, max_turns=cfg.rollout.max_turns,
                                       seed=cfg.seed + EVAL_SEED_OFFSET, config=cfg.env))
        write_jsonl(f.with_suffix(".partial"), [t for t in res.trajectories if t.success])
        f.with_suffix(".partial").replace(f)
    return list(read_jsonl(f))


def add_step_accuracy(root: Path, name: str, record: Path) -> None:
    """Measure the step accuracy of BC or an arm and add it to its record, unless the record
    has it already or the adapter is not in ROOT (a record from another machine)."""
    from webr1_kit.pipeline import Pipeline, saved_config
    from webr1_kit.sft import step_accuracy

    rec = read_record(record, name)
    if rec is None or "step_accuracy" in rec or not adapter_of(root, name).is_dir():
        return
    if name != "bc" and bc_sha256(root) != rec["bc_adapter_sha256"]:
        return  # another BC's arm: its adapter is not the recorded one's
    cfg = saved_config(root / "bc")
    demos = heldout_demos(root)
    print(f"{name}: step accuracy at {STEP_STATES} held-out expert states", file=sys.stderr)
    policy = Pipeline(cfg, root / "bc", progress=False).policy(adapter_of(root, name))
    t0 = time.perf_counter()
    acc = asyncio.run(step_accuracy(policy, demos, strict=cfg.env.action_format == "strict", n_states=STEP_STATES,
                                    seed=cfg.seed))
    rec["step_accuracy"] = {**acc, "demos": len(demos), "seconds": round(time.perf_counter() - t0, 1)}
    (record / f"{name}.json").write_text(json.dumps(rec, indent=1) + "\n")


def outcomes(path: Path) -> list[dict]:
    """Per held-out episode what the paired comparison needs, and a little more."""
    from webr1_kit.trajectory import read_jsonl

    return [{"task_id": t.task_id, "seed": t.seed, "status": t.status, "reward": t.reward,
             "turns": len(t.turns), "invalid_actions": t.invalid_actions} for t in read_jsonl(path)]


def evaluation(run: Path, policy: str) -> dict:
    """A run's held-out evaluation of its "bc" or "rl" policy: the figures and the episodes."""
    m = json.loads((run / "stages" / f"eval-{policy}.json").read_text())["metrics"]
    return {"success": m["success_rate"], "solved": round(m["success_rate"] * m["evaluated"]),
            "episodes": m["evaluated"], "ci95": m["success_ci95"], "invalid_action_rate": m["invalid_action_rate"],
            "infra_failures": m["infra_failures"], "outcomes": outcomes(run / "eval" / f"{policy}.jsonl")}


def write_bc_record(root: Path, record: Path) -> None:
    """BC's training and held-out evaluation into RECORD/bc.json."""
    record.mkdir(parents=True, exist_ok=True)
    (record / "bc.json").write_text(json.dumps({
        "bc_adapter_sha256": bc_sha256(root), "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
        "sft": json.loads((root / "bc" / "stages" / "sft.json").read_text()),
        **evaluation(root / "bc", "bc")}, indent=1) + "\n")
    print(f"bc: recorded in {record / 'bc.json'}", file=sys.stderr)


def write_record(root: Path, name: str, base: dict, record: Path) -> None:
    """ROOT/ARM's figures, episodes and config into RECORD/ARM.json."""
    record.mkdir(parents=True, exist_ok=True)
    if unchanged(root, name) and not (root / name / "stages" / "eval-rl.json").is_file():
        bc = read_record(record, "bc")
        held_out = {k: bc[k] for k in ("success", "episodes", "ci95", "invalid_action_rate", "infra_failures",
                                       "outcomes", "step_accuracy") if k in bc}
        held_out |= {"solved": round(bc["success"] * bc["episodes"]), "evaluated_as": "bc"}
    else:
        held_out = evaluation(root / name, "rl")
    row = {"arm": name, "switches": ARMS.get(name, {}), **held_out, **training(root, name),
           "config": arm_config(name, base), "bc_adapter_sha256": bc_sha256(root),
           "recorded": time.strftime("%Y-%m-%d", time.gmtime()), "coverage": coverage(root, name)}
    (record / f"{name}.json").write_text(json.dumps(row, indent=1) + "\n")
    print(f"{name}: recorded in {record / (name + '.json')}", file=sys.stderr)


def training(root: Path, name: str) -> dict:
    """An arm's M-GRPO figures from its run directory."""
    out = root / name
    steps = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    steps = [r for r in steps if r.get("phase") == "train"]
    signal = [1 - r["equal_reward_frac"] for r in steps if r.get("equal_reward_frac") is not None]
    own = [(r["first_draw_success"] or 0.0, r["first_draw_episodes"] or 0) for r in steps]
    return {
        "steps": len(steps),
        "signal_share": sum(signal) / len(signal) if signal else None,
        "own_success": sum(s * n for s, n in own) / max(1, sum(n for _, n in own)),
        "expert_members": sum(r.get("expert_members", 0) for r in steps),
        "expert_skipped": sum(r.get("expert_skipped", 0) for r in steps),
        "hinted_episodes": sum(r.get("hinted_episodes", 0) for r in steps),
        "hinted_successes": sum(r.get("hinted_successes", 0) for r in steps),
        "hint_followed": [r.get("hint_followed") for r in steps if "hint_followed" in r],
        "prefix_turns": sum(r.get("prefix_turns", 0) for r in steps),
        "prefix_successes": sum(r.get("prefix_successes", 0) for r in steps),
        "tokens_trained": sum(r.get("tokens_trained", 0) for r in steps),
        "rl_minutes": sum(r.get("rollout_s", 0) + r.get("update_s", 0) for r in steps) / 60,
    }


def paired(before: list[dict], after: list[dict]) -> dict:
    """Recorded outcomes ({"task_id", "seed", "reward", "status"} each) compared one by one
    (`compare_paired`): an arm's held-out episodes against BC's, or its step-accuracy states."""
    from webr1_kit.stats import compare_paired
    from webr1_kit.trajectory import Trajectory

    def episodes(outcomes: list[dict]) -> list:
        return [Trajectory(task_id=o["task_id"], intent="", seed=o["seed"], reward=o["reward"], status=o["status"])
                for o in outcomes]

    return compare_paired(episodes(before), episodes(after))


def steps(rec: dict, bc: dict | None) -> str:
    """The table's step accuracy cell: exact matches of the expert's action at the held-out
    states, and against BC (when given) the states newly right and newly wrong, exact McNemar p."""
    acc = rec.get("step_accuracy")
    if acc is None:
        return "not measured"
    cell = f"{100 * acc['exact']:.0f}% of {acc['states']}"
    if bc is None or bc.get("step_accuracy") is None:
        return cell

    def states(a: dict) -> list[dict]:  # a state is "right" when its step score is 1
        return [{"task_id": f"{task}#{turn}", "seed": seed, "reward": float(score == 1.0), "status": "done"}
                for task, seed, turn, score in a["outcomes"]]

    c = paired(states(bc["step_accuracy"]), states(acc))
    return f"{cell} ({c['gained']} / {c['lost']}, p = {c['p_value']:.3g})"


def coverage(root: Path, name: str) -> dict[str, list[int]] | None:
    """Per template, [turns where the expert named its action, turns the policy played], over
    the arm's training episodes, for an arm that asks the expert at every turn the policy plays
    (step rewards, departure credit): how often the scripted expert could answer from the
    state the policy actually reached. None for other arms."""
    from webr1_kit.guidance import is_expert
    from webr1_kit.trajectory import read_jsonl

    switches = ARMS.get(name, {})
    if not (switches.get("step_reward_coef") or switches.get("credit_from_departure")):
        return None
    counts: dict[str, list[int]] = {}
    for f in sorted((root / name / "rl" / "trajectories").glob("step-*.jsonl")):
        for t in read_jsonl(f):
            if is_expert(t):
                continue
            c = counts.setdefault(t.meta.get("template", t.task_id), [0, 0])
            for turn in t.turns:
                if turn.trained:
                    c[0] += turn.expert is not None
                    c[1] += 1
    return counts


def guidance_cell(r: dict, used: str, passed: str) -> str:
    """How much of a guidance an arm used, and in how many of those episodes the task's
    verdict passed: the own-success column counts only unaided episodes, so an arm whose
    every episode began with an expert prefix would otherwise hide its successes. Unused
    guidance, and records made before the count was kept, show the use alone."""
    return f"{r[used]} ({r[passed]} passed)" if r[used] and passed in r else str(r[used])


def table(record: Path, names: list[str]) -> tuple[list[str], dict]:
    """The Markdown table of the recorded arms (and their figures), in `names`' order."""
    bc = read_record(record, "bc")
    rows = {n: read_record(record, n) for n in names}
    lines = ["| arm | held-out success | 95% CI (Wilson) | vs BC: solved / failed anew, p | invalid actions "
             "| step accuracy (vs BC: right / wrong anew, p) | groups with signal | own training success "
             "| expert members / hinted episodes / prefix turns (guided episodes whose verdict passed) "
             "| tokens trained | M-GRPO wall time |",
             "|---" * 11 + "|"]
    if bc:
        lo, hi = bc["ci95"]
        solved = round(bc["success"] * bc["episodes"])
        lines.append(f"| BC (the start of every arm) | **{bc['success']:.3f}** ({solved}/{bc['episodes']}) "
                     f"| {lo:.3f} – {hi:.3f} | – | {100 * bc['invalid_action_rate']:.0f}% | {steps(bc, None)} "
                     f"| – | – | – | – | – |")
    for n in names:
        r = rows[n]
        if r is None or bc is None:
            lines.append(f"| {n} | not run | | | | | | | | | |")
            continue
        if r["bc_adapter_sha256"] != bc["bc_adapter_sha256"]:
            raise SystemExit(f"{n} is recorded as continuing another BC adapter than {record / 'bc.json'}")
        lo, hi = r["ci95"]
        c = r["vs_bc"] = paired(bc["outcomes"], r["outcomes"])
        same = " (BC's weights: BC's episodes)" if r.get("evaluated_as") == "bc" else ""
        sig = "–" if r["signal_share"] is None else f"{100 * r['signal_share']:.0f}%"
        lines.append(f"| {n} | **{r['success']:.3f}** ({r['solved']}/{r['episodes']}) | {lo:.3f} – {hi:.3f} "
                     f"| {c['gained']} / {c['lost']}, p = {c['p_value']:.3g}{same} | {100 * r['invalid_action_rate']:.0f}% "
                     f"| {steps(r, bc)} | {sig} | {r['own_success']:.3f} | {r['expert_members']} / "
                     f"{guidance_cell(r, 'hinted_episodes', 'hinted_successes')} / "
                     f"{guidance_cell(r, 'prefix_turns', 'prefix_successes')} | {r['tokens_trained']} "
                     f"| {r['rl_minutes']:.1f} min ({r['steps']} steps) |")
    for n in names:
        if rows[n] is None or not (c := rows[n]["coverage"]):
            continue
        answered, asked = sum(a for a, _ in c.values()), sum(b for _, b in c.values())
        lines += ["", f"**{n}: the expert's answers at the states the policy reached** ({answered} of {asked} turns, "
                      f"{100 * answered / max(1, asked):.0f}%)", "", "| template | answered | turns |", "|---|---|---|"]
        lines += [f"| {t} | {a} | {b} |" for t, (a, b) in sorted(c.items())]
    return lines, {"bc": bc, "arms": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="runs/arena-ablation", help="one run directory per arm under it")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, in order (default: {','.join(ARMS)})")
    ap.add_argument("--base", default=str(BASE), help="the config every arm shares (default: %(default)s)")
    ap.add_argument("--record", default=str(RECORD),
                    help="where finished arms are recorded and the table is read from (default: %(default)s)")
    ap.add_argument("--table", action="store_true", help="only print the table of the recorded arms")
    ap.add_argument("--quiet", action="store_true", help="no progress bars in the arms' logs")
    args = ap.parse_args(argv)
    root, names = Path(args.root), [a.strip() for a in args.arms.split(",") if a.strip()]
    record = Path(args.record)
    base = json.loads(Path(args.base).read_text())
    for n in names:
        arm_config(n, base)  # refuses an unknown arm before anything runs
    if not args.table:
        root.mkdir(parents=True, exist_ok=True)
        for n in names:
            run_arm(root, n, base, record, args.quiet)
    lines, _ = table(record, names)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
