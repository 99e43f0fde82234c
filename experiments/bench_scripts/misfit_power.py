"""scaling_misfit.py's two records of one design (`common`) and each gate's power against another record's misfit
(`power`)."""

import math
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from misfit_core import cell_data, fit, nested_fits, nested_models, wls  # noqa: E402
from scipy.stats import chi2 as chi2_dist  # noqa: E402

from zoo.scaling.checks import lack_of_fit, pooled_sd  # noqa: E402
from zoo.scaling.law import ScalingError  # noqa: E402
from zoo.scaling.null import gate_statistics, seed_deviations, simulate  # noqa: E402
from zoo.scaling.points import budget_keys, by_family, cell_means, read_points_csv  # noqa: E402

# ---------------------------------------------------------------- common


def law_wls(points: list[dict], sd: dict):
    """The law's (M0's) weighted least-squares fit to the cell means, each size's relative sd from `sd` ({N: sd}):
    (the cells, M0's prediction of its parameters, the fit, its number of parameters)."""
    c = cell_data(points, sd)
    _, pred, n_params, starts = nested_models(c, fit(points).values)[0]
    return c, pred, wls(pred, c, starts(None)), n_params


def common_chi2(points: list[dict], sd: dict) -> tuple[float, float]:
    """The law's (M0's) least chi^2 on the cell means with each size's relative sd from `sd` ({N: sd}) / sqrt(n),
    and the cell means' rms relative residual at that fit."""
    c, pred, best, _ = law_wls(points, sd)
    res = (c["mean"] - pred(best.x)) / pred(best.x)
    return float(2 * best.cost), float(np.sqrt(np.mean(res**2)))


def shared_runs(one: list[dict], two: list[dict]) -> tuple[list[dict], list[dict]]:
    """Each record's points of the runs (size, seed) both records have."""
    both = {(p["size"], p["seed"]) for p in one} & {(p["size"], p["seed"]) for p in two}
    return tuple([p for p in pts if (p["size"], p["seed"]) in both] for pts in (one, two))


def cmd_common(args) -> None:
    """Two records of one design compared on one standard error: per family in both, each size's pooled seed sd
    in each, then the law's chi^2 and rms residual with the sd of both pooled (weighted by their degrees of freedom),
    so that a noisier record's smaller chi^2 is not its noise alone."""
    other = by_family(read_points_csv(args.other))
    runs = "every run of each" if args.every_run else "the runs both have"
    print(f"== {args.points} against {args.other}: one standard error for both, on {runs}")
    for arch in [a for a in args.families if a in other]:
        one, two = (
            (args.families[arch], other[arch]) if args.every_run else shared_runs(args.families[arch], other[arch])
        )
        a, b = pooled_sd(one), pooled_sd(two)
        if set(a) != set(b):
            print(f"  {arch}: the records' sizes differ (N {sorted(set(a) ^ set(b))}): not one design; left out")
            continue
        if single := sorted(N for N in a if a[N][1] + b[N][1] == 0):
            print(f"  {arch}: no seed spread at N {single} (one run a cell in both: --every-run?); left out")
            continue
        common = {N: math.sqrt((a[N][1] * a[N][0] ** 2 + b[N][1] * b[N][0] ** 2) / (a[N][1] + b[N][1])) for N in a}
        (c1, r1), (c2, r2) = (common_chi2(pts, common) for pts in (one, two))
        sds = [" ".join(f"{100 * d[N][0]:.2f}" for N in sorted(common)) for d in (a, b)]
        print(f"  {arch}: seed sd % by size [{sds[0]}] against [{sds[1]}]")
        print(f"  {arch}: chi2 {c1:.1f} against {c2:.1f}; cell means' rms residual {r1:.2%} against {r2:.2%}")


# ---------------------------------------------------------------- power


def misfit_pattern(points: list[dict], model: str = "M2") -> dict:
    """{(size, budget key): a cell's relative misfit from the family's law}: "raw", its mean's residual from the law
    (fit_points), that record's seed noise included; "M2" or "M3" (decompose's models), the nested model's fitted
    departure from the law's weighted fit to the cell means (M0), a misfit without the record's noise."""
    if model == "raw":
        law = fit(points)
        return {(c["size"], c["key"]): c["mean"] / float(law.predict(c["N"], c["D"])) - 1 for c in cell_means(points)}
    c, fits = nested_fits(points)
    models = {name.split()[0]: (pred, fits[name][0].x) for name, pred, _, _ in nested_models(c, fit(points).values)}
    (p0, u0), (pk, uk) = models["M0"], models[model]
    keys = [k["key"] for k in cell_means(points) if k["n"] > 1]
    return {(s, k): float(d) for s, k, d in zip(c["size"], keys, pk(uk) / p0(u0) - 1)}


def with_pattern(points: list[dict], pattern: dict) -> list[dict]:
    """The points, each loss times (1 + its cell's residual in `pattern`). Raises ScalingError for a cell of the
    points that the pattern lacks (records of another design)."""
    out = []
    for p, k in zip(points, budget_keys(points)):
        if (p["size"], k) not in pattern:
            raise ScalingError(f"the pattern's record has no cell at {p['size']}, D {k:,.0f}: another design")
        out.append({**p, "loss": p["loss"] * (1 + pattern[p["size"], k])})
    return out


def power_stats(points: list[dict], pooled: dict, limit: float) -> dict:
    """The null statistics (gate_statistics) and the lack of fit: chi^2/dof of the form's weighted fit to the cell
    means (M0 of decompose) with each size's relative sd from `pooled` (_pooled_sd of the measured record: a
    replicate's own would be too small where its runs drew the same deviations), "lof_limit" its bound: with the
    sd known the chi^2 quantile over dof, not the gate's F quantile (whose sd is estimated)."""
    c, _, best, n_params = law_wls(points, {N: sd for N, (sd, _) in pooled.items()})
    lof = float(2 * best.cost / (len(c["mean"]) - n_params))
    return {**gate_statistics(points), "lof": lof, "lof_limit": limit}


POWER_BOUNDS = (  # (key, label, fails): each gate's fixed bound (zoo.scaling.gates); lack of fit with a known sd
    ("lof", "lack of fit, known sd", lambda s: s["lof"] > s["lof_limit"]),
    ("reach_worst", "long reach: largest", lambda s: s["reach_worst"] > 0.03),
    ("reach_mean", "long reach: mean", lambda s: abs(s["reach_mean"]) > 0.01),
    ("holdout_worst", "hold-out: largest", lambda s: s["holdout_worst"] > 0.03),
    ("loso_worst", "leave one size out", lambda s: s["loso_worst"] > 0.10),
)


def power_rows(points: list[dict], pattern: dict, reps: int, seed: int) -> tuple[list, list]:
    """power_stats of `reps` replicates of the points' design from their own law and seed deviations
    (zoo.scaling.null.simulate), and of each replicate with `pattern` added (with_pattern: the same noise)."""
    law, devs, rng = fit(points), seed_deviations(points), np.random.default_rng(seed)
    dof = lack_of_fit(law, points)["dof"]
    pooled, limit = pooled_sd(points), float(chi2_dist.ppf(0.95, dof) / dof)  # the sd known: chi^2, not F
    null, shifted = [], []
    for _ in range(reps):
        base = simulate(points, law, devs, rng)
        null.append(power_stats(base, pooled, limit))
        shifted.append(power_stats(with_pattern(base, pattern), pooled, limit))
    return null, shifted


def power_table(null: list[dict], shifted: list[dict]) -> list[tuple]:
    """Per gate of POWER_BOUNDS: (label, the share of `null` failing its bound, the share of `shifted` failing it,
    the share of `shifted` beyond a true law's range: above the 95th percentile of `null`, or for the signed mean
    outside its 2.5-97.5% range)."""
    out = []
    for key, label, fails in POWER_BOUNDS:
        v0, v1 = (np.array([s[key] for s in rows], dtype=float) for rows in (null, shifted))
        lo, hi = np.percentile(v0, [2.5, 97.5])
        beyond = np.mean((v1 < lo) | (v1 > hi)) if key == "reach_mean" else np.mean(v1 > np.percentile(v0, 95))
        out.append((label, np.mean([fails(s) for s in null]), np.mean([fails(s) for s in shifted]), float(beyond)))
    return out


def cmd_power(args) -> None:
    """Each gate's power against a misfit: replicates of the record's design from its own law and seed deviations
    (zoo.scaling.null.simulate), each also with the pattern's misfit added (same noise); power_table printed."""
    pts = args.families[args.arch]
    source = by_family(read_points_csv(args.pattern))
    if args.arch not in source:
        raise SystemExit(f"--pattern {args.pattern} has no {args.arch}; it has {', '.join(source)}")
    pattern = misfit_pattern(source[args.arch], args.model)
    null, shifted = power_rows(pts, pattern, args.reps, args.seed)
    size = max(abs(v) for v in pattern.values())
    print(
        f"== {args.arch}: {args.points} with the {args.model} misfit of {args.pattern} (cells up to {size:.2%}), "
        f"B={args.reps}"
    )
    for label, fail0, fail1, beyond in power_table(null, shifted):
        print(
            f"  {label:<22} fails its bound: true law {fail0:.2f}, with the misfit {fail1:.2f}; beyond a true law's "
            f"range {beyond:.2f}"
        )
