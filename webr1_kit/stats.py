"""Statistics of evaluations: success rates with intervals, breakdowns, paired comparisons.

Everything here is plain Python on trajectories (or on counts), so a notebook can
recompute any figure of a report from the episode files alone.

- `wilson_interval`: the 95% interval of one success rate. Wilson's, not the normal
  approximation, because held-out rates are often near 0 or 1 and n is small.
- `summarize`: an evaluation's metrics, with rates per site, template and task.
- `compare_paired`: did a training stage change success on the *same* episodes? The
  exact McNemar test and Newcombe's interval for the paired difference: pairing is what
  lets 300 episodes resolve a change of a few points, which two overlapping Wilson
  intervals cannot.
"""

from __future__ import annotations

import math
from typing import Any, Callable


def _wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """95% Wilson score interval of a success rate, rounded to 4 places (None without episodes)."""
    if n == 0:
        return None
    lo, hi = _wilson(successes, n, z)
    return (round(lo, 4), round(hi, 4))


def site_key(sites: list[str] | tuple[str, ...]) -> str:
    """The per-site bucket of a task: its site, or "multi" for multi-site tasks (as WebArena-Lite reports)."""
    return sites[0] if len(sites) == 1 else ("multi" if sites else "unknown")


def breakdown(trajectories: list[Any], name: str, key: Callable[[Any], str]) -> dict[str, dict[str, Any]]:
    """Success rate per group (`per_<name>`), with episode counts (`per_<name>_n`) and 95% Wilson
    intervals (`per_<name>_ci95`): a held-out split has a few episodes per site or template, and
    the interval says how little a rate from six episodes tells."""
    groups: dict[str, list[float]] = {}
    for t in trajectories:
        groups.setdefault(key(t), []).append(t.reward)
    groups = dict(sorted(groups.items()))
    return {f"per_{name}": {k: sum(v) / len(v) for k, v in groups.items()},
            f"per_{name}_n": {k: len(v) for k, v in groups.items()},
            f"per_{name}_ci95": {k: wilson_interval(sum(v), len(v)) for k, v in groups.items()}}


def summarize(trajectories: list[Any], seconds: float) -> dict[str, Any]:
    """Success rate (with a 95% interval) over evaluated episodes; infrastructure
    failures are counted apart."""
    ok = [t for t in trajectories if t.status != "infra_failure"]
    steps = sum(len(t.turns) for t in ok)
    wins = sum(t.reward for t in ok)
    return {
        "success_rate": wins / len(ok) if ok else None,
        "success_ci95": wilson_interval(wins, len(ok)),
        "episodes": len(trajectories),
        "evaluated": len(ok),
        "infra_failures": len(trajectories) - len(ok),
        "invalid_action_rate": sum(t.invalid_actions for t in ok) / steps if steps else 0.0,
        "mean_turns": steps / len(ok) if ok else 0.0,
        "truncated": sum(1 for t in ok if t.status == "truncated"),
        **breakdown(ok, "site", lambda t: site_key(t.meta.get("sites", []))),
        **breakdown(ok, "template", lambda t: str(t.meta.get("template"))),
        "per_task": breakdown(ok, "task", lambda t: t.task_id)["per_task"],
        "seconds": round(seconds, 2),
        "episodes_per_s": round(len(trajectories) / seconds, 3) if seconds > 0 else None,
    }


def sign_test(x: int, y: int) -> float:
    """Exact two-sided binomial test of x successes in x + y trials at p = 1/2 (the exact
    McNemar test, with x and y the discordant pairs)."""
    n = x + y
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(x, y) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_difference_interval(both: int, gained: int, lost: int, neither: int,
                               z: float = 1.96) -> tuple[float, float] | None:
    """95% interval of after − before success on paired binary outcomes (Newcombe 1998,
    method 10: Wilson intervals of both rates, combined with the pairs' correlation, whose
    estimate is shrunk by n/2 when positive, as Newcombe recommends).

    both: pairs solved before and after; gained: failed before, solved after; lost:
    solved before, failed after; neither: failed both times. None without pairs."""
    n = both + gained + lost + neither
    if n == 0:
        return None
    before, after = (both + lost) / n, (both + gained) / n
    l1, u1 = _wilson(both + gained, n, z)
    l2, u2 = _wilson(both + lost, n, z)
    marginals = (both + lost) * (gained + neither) * (both + gained) * (lost + neither)
    concordance = both * neither - gained * lost
    if concordance > 0:  # Newcombe's correction: without it, small samples under-cover (0.90 at n = 60)
        concordance = max(concordance - n / 2, 0.0)
    phi = concordance / math.sqrt(marginals) if marginals else 0.0
    d = after - before
    lower = math.sqrt(max(0.0, (after - l1) ** 2 - 2 * phi * (after - l1) * (u2 - before) + (u2 - before) ** 2))
    upper = math.sqrt(max(0.0, (u1 - after) ** 2 - 2 * phi * (u1 - after) * (before - l2) + (before - l2) ** 2))
    return (round(max(-1.0, d - lower), 4), round(min(1.0, d + upper), 4))


def compare_paired(before: Any, after: Any) -> dict[str, Any]:
    """Did a training stage change success on the *same* held-out episodes?

    before, after: two evaluations of the same episodes (anything `report.results_table`
    takes: a run directory, an episodes file, an EvalResult, a list of trajectories).
    Episodes are paired by (task_id, seed); pairs where either side had an infrastructure
    failure are left out. Returns the number of pairs, successes before and after, the
    episodes `gained` (failed before, succeeded after) and `lost`, the difference in
    success rate with its 95% interval (`difference_ci95`, Newcombe's), and the exact
    two-sided McNemar p-value (a sign test on the gained/lost pairs).

    Pairing is why this is sharper than comparing two Wilson intervals: episodes both
    policies solve, or both fail, say nothing about the difference. With binary rewards and
    40 episodes, two intervals overlap unless the rates differ by about 0.3; a paired test
    can detect less when the changes go mostly one way.
    """
    from .viz.sources import load

    def keyed(source: Any) -> dict[tuple[str, int, int], Any]:
        out: dict[tuple[str, int, int], Any] = {}
        seen: dict[tuple[str, int], int] = {}
        for t in load(source).trajectories:
            k = (t.task_id, int(t.seed))
            seen[k] = seen.get(k, 0) + 1  # repeats of one episode pair up in order
            out[(*k, seen[k])] = t
        return out

    a, b = keyed(before), keyed(after)
    common = [k for k in a if k in b and a[k].status != "infra_failure" and b[k].status != "infra_failure"]
    both = sum(1 for k in common if a[k].success and b[k].success)
    gained = sum(1 for k in common if not a[k].success and b[k].success)
    lost = sum(1 for k in common if a[k].success and not b[k].success)
    n = len(common)
    return {"pairs": n, "unpaired": len(a) + len(b) - 2 * len(set(a) & set(b)),
            "before": both + lost, "after": both + gained,
            "gained": gained, "lost": lost, "difference": (gained - lost) / n if n else None,
            "difference_ci95": paired_difference_interval(both, gained, lost, n - both - gained - lost),
            "p_value": sign_test(gained, lost)}
