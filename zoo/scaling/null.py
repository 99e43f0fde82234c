"""The long reach against a true law: what its statistics would be if the family's law held exactly.

The long-reach gate (zoo.scaling.gates.reach_gate) asks for every point of the largest size within REACH_ERROR and
a mean signed error within +-REACH_BIAS. Those bounds are fixed numbers, not a test at a known level: how far a fit
on the small sizes misses a law that holds depends on the design (sizes, budgets, seeds) and the seed noise. The
null simulation calibrates them: each replicate is the study's design with the losses of the family's own fitted
law, every run given the deviations of one measured run of its size from that run's cell means (a whole vector,
drawn with replacement, so the correlation of a run's budgets is kept); the long reach is then refitted. The
observed statistic's tail probability says whether the miss is larger than noise alone gives (a parametric
bootstrap, Efron and Tibshirani 1993, ch. 6).

- seed_deviations: each run's relative deviations from its cell means;
- simulate: one replicate;
- reach_null: the replicates' 95% ranges and the observed statistics' tail probabilities;
- null_table: the report's table, per family.

ZOO_SCALING_NULL_REPS sets the replicates of the report's table (default 100; 0 leaves the table out)."""

import os

import numpy as np

from zoo.scaling.checks import long_reach
from zoo.scaling.gates import REACH, REACH_BIAS, REACH_ERROR
from zoo.scaling.points import cell_means

NULL_REPS = 100  # replicates of the report's table (ZOO_SCALING_NULL_REPS overrides)
NULL_SEED = 0  # numpy generator seed: the table is the same on every run


def seed_deviations(points: list[dict]) -> dict:
    """{(size, seed): {D: loss / its cell's mean - 1}}: each run's relative deviation at each of its budgets."""
    means = {(c["N"], c["D"]): c["mean"] for c in cell_means(points)}
    runs: dict = {}
    for p in points:
        runs.setdefault((p["size"], p["seed"]), {})[p["D"]] = p["loss"] / means[p["N"], p["D"]] - 1
    return runs


def simulate(points: list[dict], law, deviations: dict, rng: np.random.Generator) -> list[dict]:
    """A copy of `points` with each loss the law's prediction at (N, D) times (1 + a deviation): every run (size,
    seed) takes the whole deviation vector of one run of its size, drawn with replacement. Raises KeyError where a
    drawn run lacks a budget of the run it replaces (sizes whose runs differ in budgets)."""
    by_size: dict = {}
    for (size, _), dev in deviations.items():
        by_size.setdefault(size, []).append(dev)
    pick = {}
    for size, devs in by_size.items():
        seeds = sorted({p["seed"] for p in points if p["size"] == size})
        pick.update({(size, s): devs[k] for s, k in zip(seeds, rng.integers(0, len(devs), len(seeds)))})
    pred = law.predict(np.array([p["N"] for p in points]), np.array([p["D"] for p in points]))
    return [{**p, "loss": float(y) * (1 + pick[p["size"], p["seed"]][p["D"]])} for p, y in zip(points, pred)]


def reach_null(points: list[dict], law, reps: int = NULL_REPS, seed: int = NULL_SEED, observed=None) -> dict | None:
    """The long reach of `reps` replicates of simulate: {"reps", "worst": (2.5%, 97.5%) of the largest error,
    "mean": (2.5%, 97.5%) of the mean signed error, "p_worst": P(worst >= observed), "p_mean": P(|mean| >=
    |observed|), "observed": long_reach(points), or `observed` where the caller has it}; None where the design has
    no long reach or reps < 1."""
    if observed is None:
        observed = long_reach(points, REACH)
    if observed is None or reps < 1:
        return None
    rng, deviations = np.random.default_rng(seed), seed_deviations(points)
    rows = [long_reach(simulate(points, law, deviations, rng), REACH) for _ in range(reps)]
    worst, mean = np.array([r["worst"] for r in rows]), np.array([r["mean"] for r in rows])
    return {
        "reps": reps,
        "worst": tuple(np.percentile(worst, [2.5, 97.5])),
        "mean": tuple(np.percentile(mean, [2.5, 97.5])),
        "p_worst": float(np.mean(worst >= observed["worst"])),
        "p_mean": float(np.mean(np.abs(mean) >= abs(observed["mean"]))),
        "observed": observed,
    }


def null_reps() -> int:
    """The report's replicates: ZOO_SCALING_NULL_REPS (a whole number >= 0) or NULL_REPS. Raises ValueError."""
    text = os.environ.get("ZOO_SCALING_NULL_REPS", str(NULL_REPS))
    if not text.isdigit():
        raise ValueError(f"ZOO_SCALING_NULL_REPS={text!r}: give a whole number of replicates (0 leaves the table out)")
    return int(text)


def null_table(by_arch: dict, fits: dict, reps: int | None = None, checks: dict | None = None) -> list[str]:
    """Markdown lines: per family the observed long reach, a true law's 95% ranges and the tail probabilities.
    checks: {arch: zoo.scaling.gates.family_checks}, whose "reach" is then not refitted."""
    reps = null_reps() if reps is None else reps
    reach = {arch: (checks or {}).get(arch, {}).get("reach") for arch in fits}
    rows = {a: reach_null(by_arch[a], fit, reps, observed=reach[a]) for a, fit in fits.items()} if reps else {}
    rows = {arch: r for arch, r in rows.items() if r is not None}
    if not rows:
        return []
    lines = [
        f"The long reach against a true law (zoo.scaling.null; {reps} replicates of each family's design with the "
        "losses of its own fitted law and the deviations of its measured runs): the range a law that holds gives "
        f"95% of the time, beside the gate's fixed bounds ({REACH_ERROR:.0%}; mean within ±{REACH_BIAS:.0%}). "
        "P: the share of replicates at least as far off as the study.",
        "",
        "| arch | largest error | a true law's 95% range | P | mean signed | a true law's 95% range | P |",
        "|---|---|---|---|---|---|---|",
    ]
    for arch, r in rows.items():
        o = r["observed"]
        lines.append(
            f"| {arch} | {o['worst']:.2%} | {r['worst'][0]:.2%} – {r['worst'][1]:.2%} | {r['p_worst']:.2f} | "
            f"{o['mean']:+.2%} | {r['mean'][0]:+.2%} – {r['mean'][1]:+.2%} | {r['p_mean']:.2f} |"
        )
    return lines
