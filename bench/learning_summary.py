"""Summarise a learning-benchmark run (a `webr1 demo --config ...` run directory) as the
Markdown tables docs/experiments/learning-benchmark.md quotes: held-out success of each stage with its 95% interval,
the paired comparisons BC -> RL, the first-draw training success per step with its moving
average, the groups drawn per training task (and how many had unequal rewards), and the
wall time of each stage.

    python bench/learning_summary.py runs/<name> [--window 4]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from webr1_kit.report import EVALUATIONS, STAGES, success_table
from webr1_kit.stats import compare_paired


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def eval_tables(out: Path) -> list[str]:
    lines = []
    for kind, heading in EVALUATIONS:
        rows = success_table(out, kind)
        if not rows:
            continue
        lines += [f"**{heading}**", "", "| policy | success | 95% CI (Wilson) | episodes | invalid actions | mean turns |",
                  "|---|---|---|---|---|---|"]
        for r in rows:
            lo, hi = r["ci95"]
            wins = round(r["success_rate"] * r["episodes"])
            lines.append(f"| {r['label']} | **{pct(r['success_rate'])}** ({wins}/{r['episodes']}) | {lo:.3f} – {hi:.3f} "
                         f"| {r['episodes']} | {100 * r['invalid_action_rate']:.1f}% | {r['mean_turns']:.2f} |")
        lines.append("")
        for (a, _), (b, _) in zip(STAGES, STAGES[1:]):
            pa, pb = out / "eval" / f"{a}{kind}.jsonl", out / "eval" / f"{b}{kind}.jsonl"
            if pa.is_file() and pb.is_file():
                c = compare_paired(pa, pb)
                lo, hi = c["difference_ci95"] or (0.0, 0.0)
                lines.append(f"- {a} → {b}: {c['pairs']} pairs, {c['gained']} newly solved, {c['lost']} newly failed "
                             f"({c['before']} → {c['after']}), difference {c['difference']:+.3f} "
                             f"(95% CI {lo:+.3f} to {hi:+.3f}), exact McNemar p = {c['p_value']:.3g}")
        per_task = {r["stage"]: r["per_task"] for r in rows}
        if per_task:
            tasks = sorted({t for v in per_task.values() for t in v})
            lines += ["", "| task | " + " | ".join(per_task) + " |", "|---" * (len(per_task) + 1) + "|"]
            for t in tasks:
                lines.append(f"| {t.split('/')[-1]} | " + " | ".join(pct(per_task[s].get(t)) for s in per_task) + " |")
        lines.append("")
    return lines


def curve(out: Path, window: int) -> list[str]:
    rows = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in rows if r.get("phase") == "train"]
    if not train:
        return ["(no M-GRPO steps logged)"]
    lines = ["| step | first-draw success | moving average | trained groups' success | invalid actions | cut off "
             "| equal-reward groups | infra failures | tokens trained | KL | lr | rollout s | update s |",
             "|---" * 13 + "|"]
    firsts = []
    for r in train:
        first = r.get("first_draw_success", r.get("success_rate"))
        firsts.append((first or 0.0, r.get("first_draw_episodes") or r.get("episodes") or 1))
        recent = firsts[-window:]
        avg = sum(s * n for s, n in recent) / sum(n for _, n in recent)
        eq = r.get("equal_reward_frac")
        lines.append(f"| {r['step']} | {pct(first)} | {avg:.3f} | {pct(r.get('success_rate'))} "
                     f"| {100 * r.get('invalid_action_rate', 0):.0f}% | {r.get('truncated_responses', '–')} "
                     f"| {'–' if eq is None else f'{eq:.2f}'} | {r.get('infra_failures', 0)} | {r.get('tokens_trained', 0)} | {r.get('kl', 0):.4f} "
                     f"| {r.get('lr', 0):.1e} | {r.get('rollout_s', 0):.0f} | {r.get('update_s', 0):.0f} |")
    return lines


def task_groups(out: Path) -> list[str]:
    """Per training task: the groups M-GRPO drew for it and how many of them had unequal
    rewards (only those train), from rl/trajectories/step-N.jsonl."""
    drawn: dict[str, int] = {}
    mixed: dict[str, int] = {}
    for f in sorted((out / "rl" / "trajectories").glob("step-*.jsonl")):
        groups: dict[int, list[dict]] = {}
        for line in f.read_text().splitlines():
            if line.strip():
                t = json.loads(line)
                groups.setdefault(t["meta"].get("group", 0), []).append(t)
        for g in groups.values():
            valid = [t for t in g if t.get("status") != "infra_failure"]
            if not valid:
                continue
            task = valid[0]["task_id"].split("/")[-1]
            drawn[task] = drawn.get(task, 0) + 1
            mixed[task] = mixed.get(task, 0) + (len({t["meta"].get("rl_reward", t["reward"]) for t in valid}) > 1)
    if not drawn:
        return ["(no M-GRPO trajectories)"]
    lines = ["| task | groups drawn | groups with unequal rewards |", "|---|---|---|"]
    for task in sorted(drawn, key=lambda k: (-drawn[k], k)):
        lines.append(f"| {task} | {drawn[task]} | {mixed[task]} |")
    lines.append(f"| all | {sum(drawn.values())} | {sum(mixed.values())} |")
    return lines


def times(out: Path) -> list[str]:
    done = sorted((out / "stages").glob("*.json"), key=lambda p: p.stat().st_mtime)
    lines = ["| stage | minutes |", "|---|---|"]
    total = 0.0
    for p in done:
        st = json.loads(p.read_text())
        secs = st.get("seconds", st.get("metrics", {}).get("seconds"))
        if secs is not None:
            total += float(secs)
            lines.append(f"| {p.stem} | {float(secs) / 60:.1f} |")
    lines.append(f"| all | {total / 60:.1f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="the run directory of `webr1 demo --config ... --out RUN`")
    ap.add_argument("--window", type=int, default=4, help="steps in the first-draw moving average (default 4)")
    args = ap.parse_args(argv)
    out = Path(args.run)
    if not (out / "pipeline.json").is_file():
        print(f"{out} is not a pipeline run directory (no pipeline.json)", file=sys.stderr)
        return 2
    print("\n".join(eval_tables(out) + ["**M-GRPO steps**", ""] + curve(out, args.window)
                    + ["", "**Groups per training task**", ""] + task_groups(out)
                    + ["", "**Wall time per stage**", ""] + times(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
