"""The gates against a true law: what their statistics would be if the family's law held exactly.

The long-reach gate (zoo.scaling.gates.reach_gate) asks for every point of the largest size within REACH_ERROR and
a mean signed error within +-REACH_BIAS, the hold-out gate for its points within HOLDOUT, and leave one size out
for exponents that move by at most LOSO. Those bounds are fixed numbers, not tests at a known level: how far a fit
on the small sizes misses a law that holds, or how far an exponent moves without one size, depends on the design
(sizes, budgets, seeds) and the seed noise. The null simulation calibrates them: each replicate is the study's
design with the losses of the family's own fitted law, every run given the deviations of one measured run of its
size from that run's cell means (a whole vector, drawn with replacement, so the correlation of a run's budgets is
kept; rescaled to a run's variance, simulate); the three checks are then refitted. Each observed statistic's
tail probability says whether it is larger than noise alone gives (a parametric bootstrap, Efron and Tibshirani
1993, ch. 6).

- seed_deviations: each run's relative deviations from its cell means;
- simulate: one replicate;
- gate_statistics: the statistics of STATISTICS on a set of points;
- gate_null: the replicates' 95% ranges and the observed statistics' tail probabilities;
- null_table: the report's table, per family and statistic.

ZOO_SCALING_NULL_REPS sets the replicates of the report's table (default 100; 0 leaves the table out)."""

import math
import os

import numpy as np

from zoo.scaling.checks import holdout, leave_one_size_out, long_reach
from zoo.scaling.gates import HOLDOUT, LOSO, REACH, REACH_BIAS, REACH_ERROR
from zoo.scaling.points import cell_means, fit_points

NULL_REPS = 100  # replicates of the report's table (ZOO_SCALING_NULL_REPS overrides)
NULL_SEED = 0  # numpy generator seed: the table is the same on every run
# (key, what it is, signed, the gate's fixed bound): the statistics a replicate is judged on. A signed statistic's
# tail is |value| >= |observed|; the others' value >= observed
STATISTICS = (
    ("reach_worst", "long reach: largest error", False, f"{REACH_ERROR:.0%}"),
    ("reach_mean", "long reach: mean signed error", True, f"±{REACH_BIAS:.0%}"),
    ("holdout_worst", "hold-out: largest error", False, f"{HOLDOUT:.0%}"),
    ("holdout_mean", "hold-out: mean signed error", True, "none"),
    ("loso_worst", "leave one size out: largest move of α or β", False, f"{LOSO:.2f}"),
)


def seed_deviations(points: list[dict]) -> dict:
    """{(size, seed): {D: loss / its cell's mean - 1}}: each run's relative deviation at each of its budgets."""
    means = {(c["N"], c["D"]): c["mean"] for c in cell_means(points)}
    runs: dict = {}
    for p in points:
        runs.setdefault((p["size"], p["seed"]), {})[p["D"]] = p["loss"] / means[p["N"], p["D"]] - 1
    return runs


def simulate(points: list[dict], law, deviations: dict, rng: np.random.Generator) -> list[dict]:
    """A copy of `points` with each loss the law's prediction at (N, D) times (1 + a deviation): every run (size,
    seed) takes the whole deviation vector of one run of its size, drawn with replacement, times sqrt(n / (n - 1))
    for the n runs of its size (a deviation from a mean of n has (n - 1) / n of a run's variance; the rescaled
    residual bootstrap of Davison and Hinkley 1997, sec. 6.2.3). Raises KeyError where a drawn run lacks a budget of
    the run it replaces (sizes whose runs differ in budgets)."""
    by_size: dict = {}
    for (size, _), dev in deviations.items():
        by_size.setdefault(size, []).append(dev)
    pick = {}
    for size, devs in by_size.items():
        seeds = sorted({p["seed"] for p in points if p["size"] == size})
        scale = math.sqrt(len(devs) / (len(devs) - 1)) if len(devs) > 1 else 1.0
        drawn = rng.integers(0, len(devs), len(seeds))
        pick.update({(size, s): {d: scale * e for d, e in devs[k].items()} for s, k in zip(seeds, drawn)})
    pred = law.predict(np.array([p["N"] for p in points]), np.array([p["D"] for p in points]))
    return [{**p, "loss": float(y) * (1 + pick[p["size"], p["seed"]][p["D"]])} for p, y in zip(points, pred)]


def gate_statistics(points: list[dict], checks: dict | None = None) -> dict:
    """{key of STATISTICS: its value, or None where the design has no such check} of `points`: read from `checks`
    (zoo.scaling.gates.family_checks: its "reach", "holdout" and "loso") where given, else refitted (fit_points)."""
    if checks is None:
        many = len({p["N"] for p in points}) >= 3
        checks = {
            "reach": long_reach(points, REACH),
            "holdout": holdout(points) if many else None,
            "loso": leave_one_size_out(fit_points(points, bootstrap=0), points) if many else None,
        }
    reach, hold, loso = checks.get("reach"), checks.get("holdout"), checks.get("loso")
    return {
        "reach_worst": reach["worst"] if reach else None,
        "reach_mean": reach["mean"] if reach else None,
        "holdout_worst": max(hold["errors"]) if hold else None,
        "holdout_mean": float(np.mean(hold["signed"])) if hold else None,
        "loso_worst": loso["worst"] if loso else None,
    }


def gate_null(points: list[dict], law, reps: int = NULL_REPS, seed: int = NULL_SEED, checks=None) -> dict | None:
    """The gate statistics of `reps` replicates of simulate: {"reps", "stats": {key: {"observed", "range": (2.5%,
    97.5%) of the replicates, "p": the share at least as far off}}} for each key of STATISTICS the design gives;
    observed from `checks` (zoo.scaling.gates.family_checks) where the caller has them. None where the design
    gives none of them or reps < 1."""
    observed = {k: v for k, v in gate_statistics(points, checks).items() if v is not None}
    if not observed or reps < 1:
        return None
    rng, deviations = np.random.default_rng(seed), seed_deviations(points)
    rows = [gate_statistics(simulate(points, law, deviations, rng)) for _ in range(reps)]
    stats = {}
    for key, _, signed, _ in STATISTICS:
        if key not in observed:
            continue
        v, o = np.array([r[key] for r in rows], dtype=float), observed[key]
        p = np.mean(np.abs(v) >= abs(o)) if signed else np.mean(v >= o)
        stats[key] = {"observed": o, "range": tuple(np.percentile(v, [2.5, 97.5])), "p": float(p)}
    return {"reps": reps, "stats": stats}


def null_reps() -> int:
    """The report's replicates: ZOO_SCALING_NULL_REPS (a whole number >= 0) or NULL_REPS. Raises ValueError."""
    text = os.environ.get("ZOO_SCALING_NULL_REPS", str(NULL_REPS))
    if not text.isdigit():
        raise ValueError(f"ZOO_SCALING_NULL_REPS={text!r}: give a whole number of replicates (0 leaves the table out)")
    return int(text)


def null_table(by_arch: dict, fits: dict, reps: int | None = None, checks: dict | None = None) -> list[str]:
    """Markdown lines: per family and statistic of STATISTICS, the observed value, a true law's 95% range, the tail
    probability and the gate's fixed bound. checks: {arch: zoo.scaling.gates.family_checks}, whose statistics are
    then not refitted."""
    reps = null_reps() if reps is None else reps
    rows = (
        {a: gate_null(by_arch[a], fit, reps, checks=(checks or {}).get(a)) for a, fit in fits.items()} if reps else {}
    )
    rows = {arch: r for arch, r in rows.items() if r is not None}
    if not rows:
        return []
    lines = [
        f"The gates against a true law (zoo.scaling.null; {reps} replicates of each family's design with the losses "
        "of its own fitted law and the deviations of its measured runs): the range a law that holds gives 95% of the "
        "time, beside each gate's fixed bound. P: the share of replicates at least as far off as the study (a mean "
        "signed error: at least as far from 0).",
        "",
        "| arch | statistic | observed | a true law's 95% range | P | the gate's bound |",
        "|---|---|---|---|---|---|",
    ]
    for arch, r in rows.items():
        for key, what, signed, bound in STATISTICS:
            if key not in r["stats"]:
                continue
            st, fmt = r["stats"][key], (_loso if key == "loso_worst" else _share(signed))
            low, high = st["range"]
            lines.append(
                f"| {arch} | {what} | {fmt(st['observed'])} | {fmt(low)} – {fmt(high)} | {st['p']:.2f} | {bound} |"
            )
    return lines


def _share(signed: bool):
    return (lambda x: f"{x:+.2%}") if signed else (lambda x: f"{x:.2%}")


def _loso(x: float) -> str:
    return f"{x:.3f}"
