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
- null_table: the report's table, per family and statistic, with a count of the P values below 0.05 (multiplicity).

ZOO_SCALING_NULL_REPS sets the replicates of the report's table (default 100; 0 leaves the table out)."""

import math
import os

import numpy as np

from zoo.scaling.checks import holdout, leave_one_size_out, long_reach
from zoo.scaling.gates import HOLDOUT, LOSO, REACH, REACH_BIAS, REACH_ERROR
from zoo.scaling.law import ScalingError
from zoo.scaling.points import budget_keys, cell_means, fit_points

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
    """{(size, seed): {budget key: loss / its cell's mean - 1}}: each run's relative deviation at each of its
    budgets (keys: zoo.scaling.points.budget_keys)."""
    means = {(c["N"], c["key"]): c["mean"] for c in cell_means(points)}
    runs: dict = {}
    for p, k in zip(points, budget_keys(points)):
        runs.setdefault((p["size"], p["seed"]), {})[k] = p["loss"] / means[p["N"], k] - 1
    return runs


def check_calibrated(points: list[dict]) -> None:
    """ScalingError unless every size has 2 or more runs (one run has no deviation to draw: its size would add no
    noise, and the ranges would be too narrow)."""
    runs: dict = {}
    for p in points:
        runs.setdefault(p["size"], set()).add(p["seed"])
    single = [str(size) for size, seeds in runs.items() if len(seeds) < 2]
    if single:
        raise ScalingError(f"one run at {', '.join(single)}: no seed deviations to draw there")


def simulate(points: list[dict], law, deviations: dict, rng: np.random.Generator) -> list[dict]:
    """A copy of `points` with each loss the law's prediction at (N, D) times (1 + a deviation): every run (size,
    seed) takes the whole deviation vector of one run of its size that has each of its budgets, drawn with
    replacement; each cell's deviations times sqrt(n / (n - 1)) for its n runs (a deviation from a mean of n has
    (n - 1) / n of a run's variance: the rescaled residual bootstrap of Davison and Hinkley 1997, sec. 6.2.3).
    Raises ScalingError where no run of a size has every budget of a run it replaces."""
    keys = budget_keys(points)
    n_of = {(c["N"], c["key"]): c["n"] for c in cell_means(points)}
    budgets: dict = {}
    for p, k in zip(points, keys):
        budgets.setdefault((p["size"], p["seed"]), set()).add(k)
    by_size: dict = {}
    for (size, _), dev in deviations.items():
        by_size.setdefault(size, []).append(dev)
    pick = {}
    for (size, seed), own in budgets.items():
        donors = [dev for dev in by_size.get(size, []) if own <= set(dev)]
        if not donors:
            raise ScalingError(f"no run of size {size} has every budget of seed {seed}'s: runs differ in budgets")
        pick[size, seed] = donors[rng.integers(0, len(donors))]
    pred = law.predict(np.array([p["N"] for p in points]), np.array([p["D"] for p in points]))
    out = []
    for p, k, y in zip(points, keys, pred):
        n = n_of[p["N"], k]
        scale = math.sqrt(n / (n - 1)) if n > 1 else 1.0
        out.append({**p, "loss": float(y) * (1 + scale * pick[p["size"], p["seed"]][k])})
    return out


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


def gate_null(
    points: list[dict], law, reps: int = NULL_REPS, seed: int = NULL_SEED, checks=None, statistics=None
) -> dict | None:
    """The gate statistics of `reps` replicates of simulate: {"reps", "stats": {key: {"observed", "range": (2.5%,
    97.5%) of the replicates, "p": the share at least as far off}}} for each key of STATISTICS the design gives;
    observed from `checks` (zoo.scaling.gates.family_checks) where the caller has them. law: anything with
    predict(N, D). statistics: a function of a set of points giving gate_statistics' dict under another law form
    (e.g. experiments/bench_scripts/scaling_form.py's), used for the observed points and every replicate; default
    gate_statistics (Chinchilla's law). None where the design gives none of them or reps < 1. Raises ScalingError
    where it cannot be calibrated (check_calibrated, simulate)."""
    stat = statistics or gate_statistics
    observed = statistics(points) if statistics else gate_statistics(points, checks)
    observed = {k: v for k, v in observed.items() if v is not None}
    if not observed or reps < 1:
        return None
    check_calibrated(points)
    rng, deviations = np.random.default_rng(seed), seed_deviations(points)
    rows = [stat(simulate(points, law, deviations, rng)) for _ in range(reps)]
    stats = {}
    for key, _, signed, _ in STATISTICS:
        if key not in observed:
            continue
        v, o = np.array([r[key] for r in rows], dtype=float), observed[key]
        p = np.mean(np.abs(v) >= abs(o)) if signed else np.mean(v >= o)
        ends = np.percentile(v, [2.5, 97.5], method="inverted_cdf")  # replicates' values: a failed refit is inf
        stats[key] = {"observed": o, "range": (float(ends[0]), float(ends[1])), "p": float(p)}
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
    checks, rows, why = checks or {}, {}, {}
    for arch, fit in fits.items() if reps else ():
        try:
            rows[arch] = gate_null(by_arch[arch], fit, reps, checks=checks.get(arch))
        except ScalingError as e:
            why[arch] = str(e)
    rows = {arch: r for arch, r in rows.items() if r is not None}
    if not rows and not why:
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
            p = _p(st["p"], reps)
            lines.append(f"| {arch} | {what} | {fmt(st['observed'])} | {fmt(low)} – {fmt(high)} | {p} | {bound} |")
    lines += [f"| {arch} | not calibrated: {reason} | | | | |" for arch, reason in why.items()]
    return lines + (["", multiplicity(rows)] if rows else [])


def multiplicity(rows: dict) -> str:
    """How many statistics the table judged, and how many fall below 0.05 where a law that holds everywhere gives
    about 1 in 20 by chance: each P is its statistic's own, not a family-wise test."""
    ps = [st["p"] for r in rows.values() for st in r["stats"].values()]
    low, none = sum(p < 0.05 for p in ps), sum(p == 0 for p in ps)
    return (
        f"Multiplicity: {len(ps)} statistics judged over {len(rows)} families; {low} have P < 0.05 ({none} beyond "
        f"every replicate), where laws that all hold would give about {0.05 * len(ps):.1f} by chance. Each P is its "
        "own statistic's, not a family-wise test."
    )


def _p(p: float, reps: int) -> str:
    """A tail share of `reps` replicates; none of them as far off reads "< 1 / reps"."""
    return f"< {1 / reps:.2g}" if p == 0 else f"{p:.2f}"


def _share(signed: bool):
    return (lambda x: f"{x:+.2%}") if signed else (lambda x: f"{x:.2%}")


def _loso(x: float) -> str:
    return f"{x:.3f}"
