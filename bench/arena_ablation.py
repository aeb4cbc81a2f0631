"""The recipe variants for sparse rewards, side by side on the bundled arena: plain M-GRPO,
each variant alone and their combination, all continuing one BC adapter and all judged greedy
on the same held-out test-split tasks, so every arm's comparison with BC is paired.

    python bench/arena_ablation.py [--root runs/arena-ablation] [--arms plain,expert-members]
                                   [--table] [--json bench/results/arena_ablation.json]

The first arm, `plain`, is the whole recipe, `webr1 demo --config
bench/configs/arena-ablation/base.json --out ROOT/plain`: demonstrations, BC, the base and BC
evaluations, plain M-GRPO and its evaluation. Every other arm is the same config with its
`grpo` switches (written to ROOT/configs/ARM.json), run as `webr1 demo --bc-from ROOT/plain`:
it takes plain's demonstrations, BC adapter and evaluations, and runs only M-GRPO and the RL
evaluation. An arm that finished is left as it is; one that stopped resumes (every step is a
checkpoint). Arms run one after another, each in its own process.

--table (or after the arms have run) prints the Markdown table BENCHMARKS.md quotes: per arm,
held-out success with its 95% interval, the paired comparison with BC on the same tasks
(newly solved, newly failed, exact McNemar p), the share of M-GRPO's groups with a learning
signal (any non-zero advantage, after expert members and step rewards), the policy's own
success during training (its episodes before any expert took a place), what the guidance
used, and the wall time of M-GRPO (rollouts and updates, summed over steps, so resumes add up).
For the arms that ask the expert at every turn (step rewards, departure credit), a second table
gives, per template, how often the scripted expert could name its action from the state the
policy reached.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

BASE = Path(__file__).parent / "configs" / "arena-ablation" / "base.json"

ARMS: dict[str, dict] = {
    # arm -> its grpo switches (README's settings table says what each does)
    "plain": {},
    "expert-members": {"expert_if_unsolved": True},
    "hints": {"hint_rate": 0.5},
    "prefix": {"prefix_max": 3, "credit_from_departure": True},
    "step-rewards": {"step_reward_coef": 0.5},
    "curriculum": {"task_sampling": "informative", "task_floor": 0.1},
    "combined": {"expert_if_unsolved": True, "hint_rate": 0.5, "prefix_max": 3, "credit_from_departure": True,
                 "step_reward_coef": 0.5, "task_sampling": "informative", "task_floor": 0.1},
}
"""The order the arms run in by default: plain first (its BC stages are everyone's)."""


def arm_config(name: str, base: dict) -> dict:
    """`base` with the arm's switches merged into its grpo section."""
    if name not in ARMS:
        raise SystemExit(f"unknown arm {name!r}; the arms are {', '.join(ARMS)}")
    return {**base, "grpo": {**base.get("grpo", {}), **ARMS[name]}}


def webr1() -> list[str]:
    """The `webr1` command of the interpreter running this script."""
    return [sys.executable, "-m", "webr1_kit.cli"]


def run_arm(root: Path, name: str, base: dict, quiet: bool) -> None:
    out = root / name
    if (out / "stages" / "eval-rl.json").is_file():
        print(f"{name}: finished already ({out})", file=sys.stderr)
        return
    cfg = root / "configs" / f"{name}.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps(arm_config(name, base), indent=1))
    cmd = [*webr1(), "demo", "--config", str(cfg), "--out", str(out), *(["--quiet"] if quiet else [])]
    if name != "plain":
        if not (root / "plain" / "stages" / "sft.json").is_file():
            raise SystemExit(f"{name} continues plain's BC adapter: run the plain arm first (--arms plain)")
        cmd += ["--bc-from", str(root / "plain")]
    print(f"{name}: webr1 {' '.join(cmd[3:])}", file=sys.stderr)
    with open(root / f"{name}.log", "a") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc:
        raise SystemExit(f"{name} stopped with exit status {rc}; see {root / f'{name}.log'} (rerun to resume)")


def arm_row(root: Path, name: str) -> dict | None:
    """One arm's figures, or None when it has not been evaluated."""
    from webr1_kit.stats import compare_paired

    out = root / name
    stage = out / "stages" / "eval-rl.json"
    if not stage.is_file():
        return None
    m = json.loads(stage.read_text())["metrics"]
    steps = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    steps = [r for r in steps if r.get("phase") == "train"]
    signal = [1 - r["equal_reward_frac"] for r in steps if r.get("equal_reward_frac") is not None]
    own = [(r["first_draw_success"] or 0.0, r["first_draw_episodes"] or 0) for r in steps]
    paired = compare_paired(root / "plain" / "eval" / "bc.jsonl", out / "eval" / "rl.jsonl")
    return {
        "arm": name, "switches": ARMS.get(name, {}),
        "success": m["success_rate"], "solved": round(m["success_rate"] * m["evaluated"]), "episodes": m["evaluated"],
        "ci95": m["success_ci95"], "invalid_action_rate": m["invalid_action_rate"],
        "infra_failures": m["infra_failures"], "vs_bc": paired, "steps": len(steps),
        "signal_share": sum(signal) / len(signal) if signal else None,
        "own_success": sum(s * n for s, n in own) / max(1, sum(n for _, n in own)),
        "expert_members": sum(r.get("expert_members", 0) for r in steps),
        "expert_skipped": sum(r.get("expert_skipped", 0) for r in steps),
        "hinted_episodes": sum(r.get("hinted_episodes", 0) for r in steps),
        "prefix_turns": sum(r.get("prefix_turns", 0) for r in steps),
        "tokens_trained": sum(r.get("tokens_trained", 0) for r in steps),
        "rl_minutes": sum(r.get("rollout_s", 0) + r.get("update_s", 0) for r in steps) / 60,
    }


def bc_row(root: Path) -> dict | None:
    stage = root / "plain" / "stages" / "eval-bc.json"
    if not stage.is_file():
        return None
    m = json.loads(stage.read_text())["metrics"]
    return {"success": m["success_rate"], "solved": round(m["success_rate"] * m["evaluated"]),
            "episodes": m["evaluated"], "ci95": m["success_ci95"], "invalid_action_rate": m["invalid_action_rate"]}


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


def table(root: Path, names: list[str]) -> tuple[list[str], dict]:
    rows = {n: arm_row(root, n) for n in names}
    bc = bc_row(root)
    lines = ["| arm | held-out success | 95% CI (Wilson) | vs BC: solved / failed anew, p | invalid actions "
             "| groups with signal | own training success | expert members / hinted episodes / prefix turns "
             "| tokens trained | M-GRPO wall time |", "|---" * 10 + "|"]
    if bc:
        lo, hi = bc["ci95"]
        lines.append(f"| BC (the start of every arm) | **{bc['success']:.3f}** ({bc['solved']}/{bc['episodes']}) "
                     f"| {lo:.3f} – {hi:.3f} | – | {100 * bc['invalid_action_rate']:.0f}% | – | – | – | – | – |")
    for n in names:
        r = rows[n]
        if r is None:
            lines.append(f"| {n} | not run | | | | | | | | |")
            continue
        lo, hi = r["ci95"]
        c = r["vs_bc"]
        sig = "–" if r["signal_share"] is None else f"{100 * r['signal_share']:.0f}%"
        lines.append(f"| {n} | **{r['success']:.3f}** ({r['solved']}/{r['episodes']}) | {lo:.3f} – {hi:.3f} "
                     f"| {c['gained']} / {c['lost']}, p = {c['p_value']:.3g} | {100 * r['invalid_action_rate']:.0f}% "
                     f"| {sig} | {r['own_success']:.3f} | {r['expert_members']} / {r['hinted_episodes']} / "
                     f"{r['prefix_turns']} | {r['tokens_trained']} | {r['rl_minutes']:.1f} min ({r['steps']} steps) |")
    covered = {n: c for n in names if rows[n] is not None and (c := coverage(root, n))}
    for n, c in covered.items():
        answered, asked = sum(a for a, _ in c.values()), sum(b for _, b in c.values())
        lines += ["", f"**{n}: the expert's answers at the states the policy reached** ({answered} of {asked} turns, "
                      f"{100 * answered / max(1, asked):.0f}%)", "", "| template | answered | turns |", "|---|---|---|"]
        lines += [f"| {t} | {a} | {b} |" for t, (a, b) in sorted(c.items())]
    return lines, {"bc": bc, "arms": rows, "coverage": covered}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="runs/arena-ablation", help="one run directory per arm under it")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, in order (default: {','.join(ARMS)})")
    ap.add_argument("--base", default=str(BASE), help="the config every arm shares (default: %(default)s)")
    ap.add_argument("--table", action="store_true", help="only print the table of the arms that have finished")
    ap.add_argument("--json", help="also write the table's figures to this file")
    ap.add_argument("--quiet", action="store_true", help="no progress bars in the arms' logs")
    args = ap.parse_args(argv)
    root, names = Path(args.root), [a.strip() for a in args.arms.split(",") if a.strip()]
    base = json.loads(Path(args.base).read_text())
    for n in names:
        arm_config(n, base)  # refuses an unknown arm before anything runs
    if not args.table:
        root.mkdir(parents=True, exist_ok=True)
        for n in names:
            run_arm(root, n, base, args.quiet)
    lines, figures = table(root, names)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
