"""The statistics the gates judge (zoo.scaling.gates), each on one family's points (zoo.scaling.points):

- residual_rms, seed_noise: the law's relative residuals on its points against the seeds' spread;
- lack_of_fit: chi^2 / dof of the cell means' relative residuals over their relative standard errors, and the
  Birge ratio sqrt(chi^2 / dof) that widens every interval when it exceeds 1 (Birge 1932, Phys. Rev. 40, 207;
  the scale factor of the Particle Data Group's averages, Review of Particle Physics, Introduction, sec. 5.2);
- holdout (the largest size predicted by a fit without it), long_reach (by a fit on the sizes of N <= N_max / 4),
  leave_one_size_out (alpha and beta refitted without each size);
- at_bound: fitted parameters at a bound of the search."""

import math

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import f as f_dist

from zoo.scaling.law import PARAMS, ScalingError, scaling_law, with_log_floor
from zoo.scaling.points import budget_keys, cell_means, fit_points

MAX_EVALS = 20000  # form_lack_of_fit's least-squares evaluations

LONG_REACH = 4.0  # the long reach fits the sizes of N <= N_max / LONG_REACH and predicts N_max
LONG_REACH_SIZES = 3  # the fewest sizes it fits: two leave E, A and alpha unidentified

LOG_SCALE = ("E", "A", "B", "G")  # positive scale parameters: widened in log space (never below 0)
FLOOR = 1e-12  # the least E, A or B the lack-of-fit refit starts from (a fit that collapsed to 0 has no log)


def residual_rms(fit, points: list[dict]) -> float:
    """The law's relative residual rms on the points: sqrt(mean(((L - L_hat) / L)^2))."""
    pred = fit.predict(np.array([p["N"] for p in points]), np.array([p["D"] for p in points]))
    resid = np.array([(p["loss"] - q) / p["loss"] for p, q in zip(points, pred)])
    return float(np.sqrt(np.mean(resid**2)))


def seed_noise(points: list[dict]) -> float | None:
    """The seed noise of a family: at every (size, budget) with runs of several seeds, the relative sd of their
    losses (ddof 1); the rms over those. A budget is a cell's (budget_keys): a translation study's seeds train
    target tokens a little apart at one budget. None without repeated seeds."""
    groups = {}
    for p, key in zip(points, budget_keys(points)):
        groups.setdefault((p["N"], key), {})[p["seed"]] = p["loss"]
    sds = [np.std(list(g.values()), ddof=1) / np.mean(list(g.values())) for g in groups.values() if len(g) > 1]
    return float(np.sqrt(np.mean(np.square(sds)))) if sds else None


def lack_of_fit(fit, points: list[dict], level: float = 0.95) -> dict | None:
    """chi^2 / dof of the cell means (a cell: a size and a budget) about the law, in relative terms: the sum of
    ((mean - L_hat) / L_hat / (se / mean))^2 over the cells of 2 or more seeds (and unequal losses), over
    dof = cells - 5 (the law's parameters). Two numbers:

    - "ratio_cell": at `fit` (the report's law) with each cell's own se (std over its seeds, ddof 1, / sqrt(n));
      with n seeds each term is a Student t^2 of n - 1 degrees of freedom, heavy-tailed (mean (n - 1) / (n - 3),
      infinite at 3 seeds), so a law that holds often gives several;
    - "ratio" (judged): the least chi^2 of the form (L(N, D) fitted to the cell means by weighted least squares,
      from `fit`), with se = the size's relative sd pooled over its cells (pooled_sd) / sqrt(n). It is F(dof,
      nu)-distributed for a law that holds (nu: the pooled degrees of freedom); the bound "limit" is the `level`
      quantile of F(dof, nu_min), nu_min the smallest size's (it errs on passing: of 30 studies of a known law
      with 3 and with 8 seeds a cell, 0 and 1 exceed it; "ratio_cell" exceeds chi^2_dof's quantile in 17 and 9).

    Returns {"ratio", "ratio_cell", "dof", "cells", "limit", "birge" (sqrt(ratio), at least 1: the factor that
    widens every interval), "p" (the chance of a larger ratio for a law that holds, F(dof, nu_min)), "params"}; None
    with dof < 1."""
    judged = form_lack_of_fit(scaling_law, [fit.values[k] for k in PARAMS], points, level)
    if judged is None:
        return None
    cells = [c for c in cell_means(points) if c["n"] > 1 and c["se"] > 0]
    mean = np.array([c["mean"] for c in cells])
    pred = fit.predict(np.array([c["N"] for c in cells]), np.array([c["D"] for c in cells]))
    rel_se = np.array([c["se"] / c["mean"] for c in cells])
    return judged | {"ratio_cell": float(np.sum(((mean - pred) / pred / rel_se) ** 2)) / judged["dof"]}


def form_lack_of_fit(law, params, points: list[dict], level: float = 0.95, floor: bool = True) -> dict | None:
    """lack_of_fit's judged chi^2 / dof for any form law(N, D, E, A, B, alpha, beta, *extra) (e.g.
    zoo.scaling.law.scaling_law, zoo.scaling.forms.kaplan_e_law, zoo.scaling.coupled.coupled_law with its g)
    fitted to the cell means by weighted least squares from `params` (E, A, B, alpha, beta, *extra; an E, A or B
    of 0, collapsed to its bound, starts just above it), se = the size's pooled relative sd (pooled_sd) / sqrt(n);
    dof = cells - len(params). floor=False: E held at 0 (a form without an irreducible loss, e.g. Kaplan et al.
    2020's), one parameter fewer fitted, dof one more.

    Returns {"ratio", "dof", "cells", "limit", "birge", "p", "params" (the fitted E, A, B, alpha, beta, *extra)};
    None with dof < 1. ScalingError when the refit stops at MAX_EVALS evaluations without converging (its chi^2
    would not be the least one)."""
    cells = [c for c in cell_means(points) if c["n"] > 1 and c["se"] > 0]
    first = 0 if floor else 1  # without a floor, u omits log E
    dof = len(cells) - len(params) + first
    if dof < 1:
        return None
    pooled = pooled_sd(points)
    N, D, mean = (np.array([c[k] for c in cells]) for k in ("N", "D", "mean"))
    se = np.array([pooled[c["N"]][0] / math.sqrt(c["n"]) for c in cells])

    def resid(v):  # an overflowing law gives a large residual, which the fit avoids
        u = with_log_floor(v, floor)
        with np.errstate(over="ignore", invalid="ignore"):
            pred = law(N, D, math.exp(u[0]), math.exp(u[1]), math.exp(u[2]), *u[3:])
        return np.nan_to_num((mean - pred) / pred / se, nan=1e6, posinf=1e6, neginf=-1e6)

    u0 = ([math.log(max(v, FLOOR)) for v in params[:3]] + list(params[3:]))[first:]
    best = least_squares(resid, u0, max_nfev=MAX_EVALS)
    if best.status == 0:  # scipy: the evaluation limit was reached
        raise ScalingError(
            f"the lack-of-fit refit of {len(cells)} cell means did not converge in {MAX_EVALS} evaluations, so its "
            "chi2/dof is not the least one; check the points (a size whose losses fall far off the others?)"
        )
    ratio, nu = float(np.sum(best.fun**2)) / dof, min(pooled[c["N"]][1] for c in cells)
    x = with_log_floor(best.x, floor)
    fitted = [math.exp(v) for v in x[:3]] + [float(v) for v in x[3:]]
    return {
        "ratio": ratio,
        "dof": dof,
        "cells": len(cells),
        "limit": float(f_dist.ppf(level, dof, nu)),
        "birge": max(1.0, math.sqrt(ratio)),
        "p": float(f_dist.sf(ratio, dof, nu)),
        "params": fitted,
    }


def pooled_sd(points: list[dict]) -> dict:
    """Each size's seed noise: {N: (the relative sd of the size's losses about their cell means, pooled over its
    cells, its degrees of freedom: the sum of n - 1)}."""
    sums, keys = {}, budget_keys(points)
    for c in cell_means(points):
        losses = [p["loss"] for p, k in zip(points, keys) if (p["N"], k) == (c["N"], c["key"])]
        sq, dof = sums.get(c["N"], (0.0, 0))
        sums[c["N"]] = (sq + sum(((x - c["mean"]) / c["mean"]) ** 2 for x in losses), dof + len(losses) - 1)
    return {n: (math.sqrt(sq / dof) if dof else math.nan, dof) for n, (sq, dof) in sums.items()}


def widen(value: float, ci, scale: float, log: bool = False):
    """The interval `ci` = (lo, hi) around `value` stretched by `scale` on each side: value - scale (value - lo),
    value + scale (hi - value); log: the same in log space (for positive quantities: value (lo / value)^scale).
    None for no interval."""
    if ci is None or scale == 1.0:
        return ci
    lo, hi = ci
    if log:
        if not math.isfinite(value):  # a multiplier that is never reached: inf whatever the interval
            return ci
        if not (value > 0 and lo > 0):
            return (0.0, math.inf) if scale > 1 else ci
        with np.errstate(over="ignore"):  # a wide interval times a large ratio: inf
            return tuple(float(value * np.exp(scale * np.log(x / value))) for x in (lo, hi))
    return (value - scale * (value - lo), value + scale * (hi - value))


def widened_ci(fit, scale: float) -> dict:
    """The fit's intervals (ScalingFit.ci) widened by `scale` (the Birge ratio): E, A, B and G in log space, the
    exponents alpha, beta, a and b linearly."""
    return {k: widen(fit.values[k], ci, scale, k in LOG_SCALE) for k, ci in fit.ci.items()}


def holdout(points: list[dict]) -> dict | None:
    """Refit without the largest size and predict its points: {"N": that size, "errors": relative errors
    |predicted - measured| / measured, "signed": (predicted - measured) / measured, in C order}; None with fewer
    than 6 points, or one size, left to fit."""
    top = max(p["N"] for p in points)
    return _predict_top(points, [p for p in points if p["N"] < top])


def long_reach(points: list[dict], reach: float = LONG_REACH) -> dict | None:
    """The long reach: a fit on the sizes of N <= N_max / reach predicts every point of the largest size.
    {"N": N_max, "sizes": the sizes fitted, "errors", "signed" (as holdout), "worst": max |error|, "mean": the
    mean signed error}; None with fewer than 6 points or 3 sizes to fit (two sizes leave E, A and alpha
    unidentified: on a known law with 0.3% noise their fit missed the largest size by 2-11%)."""
    top = max(p["N"] for p in points)
    train = [p for p in points if p["N"] <= top / reach]
    out = _predict_top(points, train) if len({p["N"] for p in train}) >= LONG_REACH_SIZES else None
    if out is not None:
        out.update(worst=max(out["errors"]), mean=float(np.mean(out["signed"])))
    return out


def _predict_top(points: list[dict], train: list[dict]) -> dict | None:
    top = max(p["N"] for p in points)
    test = sorted((p for p in points if p["N"] == top), key=lambda p: p["C"])
    if len(train) < 6 or not test or len({p["N"] for p in train}) < 2:  # one size left: no law to refit
        return None
    fit = fit_points(train, bootstrap=0)
    pred = fit.predict(np.array([p["N"] for p in test]), np.array([p["D"] for p in test]))
    signed = [(float(q) - p["loss"]) / p["loss"] for q, p in zip(pred, test)]
    sizes = sorted({p.get("size") or f"N{p['N']:.0f}" for p in train}, key=str)
    return {"N": top, "sizes": sizes, "errors": [abs(e) for e in signed], "signed": signed}


def leave_one_size_out(fit, points: list[dict]) -> dict | None:
    """alpha and beta refitted without each size in turn (fit_points, no bootstrap) against the fit of all sizes:
    {"rows": [{"size", "N", "alpha", "beta", "d_alpha", "d_beta", "error"}] (error: why a refit failed, else
    None), "worst": the largest |d_alpha| or |d_beta| (inf when a refit failed)}; None with fewer than 3 sizes."""
    sizes = sorted({p["N"] for p in points})
    if len(sizes) < 3:
        return None
    rows = []
    for n in sizes:
        pts = [p for p in points if p["N"] != n]
        row = {"size": next(p.get("size") or f"N{n:.0f}" for p in points if p["N"] == n), "N": n}
        try:
            refit = fit_points(pts, bootstrap=0)
            error = None if refit.converged else "the refit did not converge"
        except ScalingError as e:
            refit, error = None, str(e)
        if refit is not None and error is None:
            a, b = refit.values["alpha"], refit.values["beta"]
            row.update(alpha=a, beta=b, d_alpha=a - fit.values["alpha"], d_beta=b - fit.values["beta"], error=None)
        else:
            row.update(alpha=math.nan, beta=math.nan, d_alpha=math.inf, d_beta=math.inf, error=error)
        rows.append(row)
    worst = max(max(abs(r["d_alpha"]), abs(r["d_beta"])) for r in rows)
    return {"rows": rows, "worst": worst}


def at_bound(fit, points: list[dict]) -> list[str]:
    """The fitted parameters at a bound of the law's search: E collapsed to 0 (below 0.1% of the lowest loss), an
    exponent at 0 (below 0.005) or running away (above 3, outside Hoffmann's start grid 0 .. 2 by half of it);
    and a fit whose optimiser did not converge (zoo.scaling.fit's ScalingFit.converged)."""
    out = []
    if fit.values["E"] < 1e-3 * min(p["loss"] for p in points):
        out.append(f"E = {fit.values['E']:.3g} (collapsed to 0)")
    for k in ("alpha", "beta"):
        if not 0.005 < fit.values[k] < 3.0:
            out.append(f"{k} = {fit.values[k]:.3g}")
    if not fit.converged:
        out.append("the optimiser did not converge (" + "; ".join(fit.notes) + ")")
    return out
