"""The budget-rate diagnosis: how much of a family's misfit the one-rate-per-size design carries.

experiment=scaling tunes each family's peak rate per size at the size's tuning budget D_tune (its middle budget,
zoo.scaling.sizes.middle_budget; zoo.scaling.tune) and runs every budget of the size at that one rate. Where the
best rate drifts with the budget, the budgets away from D_tune run off their best rate and their losses rise by
about c d^2 %, d = log2(D / D_tune) the doublings from the tuning budget (D in tokens):

- budget_rate: the cell residuals against the law (zoo.scaling.residuals, in %) regressed by weighted least squares
  (weights 1 / se^2, se the cell's relative standard error in %) on a per-size intercept, a per-size slope in d and
  one common term c d^2; c in % per doubling^2, its se widened by the Birge ratio where chi2/dof > 1;
- corrected: the points with c d^2 removed, loss / (1 + c d^2 / 100);
- corrected_checks: the gate statistics (zoo.scaling.gates.family_checks) of the law refitted to them;
- budget_rate_table: per family c and the gate statistics before -> after.

A diagnosis of the design, not a corrected law: the law quoted stays the fit to the measured points. c does not
depend on where d is counted from (a shift of d per size is absorbed by the size's intercept and slope); the
correction does."""

import math

import numpy as np

from zoo.scaling.gates import family_checks, holdout_gate, lack_gate, loso_gate, reach_gate
from zoo.scaling.law import ScalingError
from zoo.scaling.points import budget_keys, cell_means, fit_points
from zoo.scaling.residuals import cell_residuals
from zoo.scaling.sizes import middle_budget

MIN_BUDGETS = 3  # cells (of 2 or more seeds) a size needs in the regression: intercept + slope fit 2 exactly


def tuning_budgets(points: list[dict]) -> dict[float, float]:
    """{N: D_tune} of each size (keyed by N): the tokens of the budget its rate was tuned at, zoo's middle_budget
    of the distinct tokens its points hold (the lower middle of an even count: 4 budgets -> the 2nd)."""
    tokens = {}
    for p in points:
        tokens.setdefault(p["N"], set()).add(float(p["tokens"]))
    return {n: middle_budget({"budgets": sorted(t)}, ()) for n, t in tokens.items()}


def doublings(points: list[dict]) -> list[float]:
    """d = log2(tokens / D_tune) of each point (tuning_budgets): its budget's doublings from its size's tuning
    budget (0 at D_tune, -1 at half of it)."""
    tune = tuning_budgets(points)
    return [math.log2(p["tokens"] / tune[p["N"]]) for p in points]


def _cells(fit, points: list[dict]) -> list[tuple]:
    """(N, d, residual %, se %) of each cell of 2 or more seeds with unequal losses, N then D order."""
    d_of = {(p["N"], k): d for p, k, d in zip(points, budget_keys(points), doublings(points))}
    out = []
    for r, c in zip(cell_residuals(fit, points), cell_means(points)):
        if c["n"] > 1 and c["se"] > 0:
            out.append((r["N"], d_of[(r["N"], r["key"])], 100 * r["resid"], 100 * c["se"] / c["mean"]))
    return out


def budget_rate(fit, points: list[dict]) -> dict | None:
    """The common curvature c of one family's cell residuals in d (module docstring): the weighted least squares of
    y = 100 (mean - L_hat) / L_hat on [per-size 1, per-size d, d^2], weights 1 / (100 se / mean)^2, `fit` the
    family's law (anything with predict(N, D)). A size with fewer than MIN_BUDGETS such cells is left out (its
    intercept and slope would fit it exactly; its points are still corrected). Returns {"c", "se" (% per
    doubling^2; se x max(1, sqrt(chi2/dof))), "slopes": {size: (slope, se)} (% per doubling), "chi2_dof" (left
    about the regression), "dof", "cells", "left_out": [sizes]}; None with dof < 1 (too few cells)."""
    cells = _cells(fit, points)
    count = {}
    for n, *_ in cells:
        count[n] = count.get(n, 0) + 1
    kept = sorted(n for n, k in count.items() if k >= MIN_BUDGETS)
    label = {p["N"]: p.get("size") or f"N{p['N']:.0f}" for p in points}
    rows = [c for c in cells if c[0] in kept]
    S = len(kept)
    dof = len(rows) - (2 * S + 1)
    if S == 0 or dof < 1:
        return None
    X = np.zeros((len(rows), 2 * S + 1))
    for i, (n, d, _, _) in enumerate(rows):
        j = kept.index(n)
        X[i, j], X[i, S + j], X[i, -1] = 1.0, d, d * d
    y, w = np.array([r[2] for r in rows]), np.array([r[3] for r in rows]) ** -2.0
    Xw, yw = X * np.sqrt(w)[:, None], y * np.sqrt(w)
    b = np.linalg.lstsq(Xw, yw, rcond=None)[0]
    chi2_dof = float(np.sum((yw - Xw @ b) ** 2)) / dof
    se = np.sqrt(np.diag(np.linalg.inv(Xw.T @ Xw))) * max(1.0, math.sqrt(chi2_dof))
    return {
        "c": float(b[-1]),
        "se": float(se[-1]),
        "slopes": {label[n]: (float(b[S + j]), float(se[S + j])) for j, n in enumerate(kept)},
        "chi2_dof": chi2_dof,
        "dof": dof,
        "cells": len(rows),
        "left_out": sorted({label[p["N"]] for p in points if p["N"] not in kept}, key=str),
    }


def corrected(points: list[dict], c: float) -> list[dict]:
    """The points with the budget term removed: loss / (1 + c d^2 / 100), c in % per doubling^2, d of `doublings`;
    every other key kept. Raises ScalingError where 1 + c d^2 / 100 <= 0 (a c of the wrong unit)."""
    out = []
    for p, d in zip(points, doublings(points)):
        factor = 1.0 + c * d * d / 100.0
        if not factor > 0:
            raise ScalingError(f"c = {c:g} % per doubling^2 takes a loss to {factor:g} x at d = {d:g}: give c in %")
        out.append({**p, "loss": p["loss"] / factor})
    return out


def corrected_checks(points: list[dict], c: float) -> dict:
    """The gate statistics of the law refitted (fit_points, no bootstrap) to corrected(points, c):
    zoo.scaling.gates.family_checks's dict, with the refit under "fit"."""
    pts = corrected(points, c)
    refit = fit_points(pts, bootstrap=0)
    return {**family_checks(refit, pts), "fit": refit}


def _stats(c: dict) -> list[tuple[str, str]]:
    """(value, gate state) of lack of fit (judged chi2/dof), hold-out and long reach (largest error), leave one
    size out (largest move) of family_checks's dict."""
    n = len({r["N"] for r in (c["loso"] or {"rows": []})["rows"]})
    lack, ho, lr, lo = c["lack"], c["holdout"], c["reach"], c["loso"]
    bound = f", bound {lack['limit']:.3g}" if lack else ""
    return [
        ("–" if lack is None else f"{lack['ratio']:.3g}", lack_gate(c)[0] + bound),
        ("–" if ho is None else f"{max(ho['errors']):.2%}", holdout_gate(c, n)[0]),
        ("–" if lr is None else f"{lr['worst']:.2%} ({lr['mean']:+.2%})", reach_gate(c)[0]),
        ("–" if lo is None else f"{lo['worst']:.3f}", loso_gate(c, n)[0]),
    ]


def _row(arch: str, fit, points: list[dict], before: dict) -> str:
    est = budget_rate(fit, points)
    if est is None:
        return f"| {arch} | – (too few cells of 2 or more seeds at sizes of {MIN_BUDGETS} budgets) |" + " – |" * 5
    left = f" ({', '.join(est['left_out'])} left out)" if est["left_out"] else ""
    head = f"{est['c']:+.2f} ± {est['se']:.2f}{left}"
    try:
        after = _stats(corrected_checks(points, est["c"]))
    except ScalingError as e:
        return f"| {arch} | {head} | {est['chi2_dof']:.3g} | the refit failed: {e} |" + " – |" * 3
    cells = [f"{b} → {a} ({state})" for (b, _), (a, state) in zip(_stats(before), after)]
    return f"| {arch} | {head} | {est['chi2_dof']:.3g} | " + " | ".join(cells) + " |"


def budget_rate_table(by_arch: dict, fits: dict, checks: dict) -> list[str]:
    """Markdown lines: per family c ± se and the gate statistics of its law (`checks`: {arch: family_checks})
    before -> after c d^2 is removed from its points, with the after's gate state."""
    if not fits:
        return []
    return [
        "The one-rate-per-size design: a family's rate is tuned at each size's middle budget D_tune and every budget "
        "of the size runs it. c: the curvature common to every size of the cell residuals in d = log2(D / D_tune) "
        "(% per doubling²; weighted by 1/se², beside a per-size level and slope; ± 1 se, widened by the Birge ratio "
        "of what is left), then the gate statistics before → after the law is refitted to the points with c d² "
        "removed (loss / (1 + c d²/100); the after's verdict in parentheses). It measures how much of the misfit that "
        "curvature carries; it does not show the rate is its cause, nor give a law to quote: the law quoted stays "
        "the fit above.",
        "",
        "| arch | c (%/doubling²) | χ²/dof left | lack of fit | hold-out | long reach (mean) | leave one size out |",
        "|---|---|---|---|---|---|---|",
        *(_row(arch, fit, by_arch[arch], checks[arch]) for arch, fit in fits.items()),
    ]
