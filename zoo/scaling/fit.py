"""Fit the Chinchilla scaling law L(N, D) = E + A / N^alpha + B / D^beta, with bootstrap intervals.

N: parameters, D: training tokens, L: final loss (any data, not only zoo's runs). Only numpy and scipy.

Method (Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models", section 3.3 and appendix D.2;
as reproduced by Besiroglu et al. 2024, "Chinchilla Scaling: A replication attempt", arXiv 2404.10102):

- the law in log-sum-exp form, log L_hat = LSE(a - alpha log N, b - beta log D, e), A = e^a, B = e^b, E = e^e;
- the objective: the Huber loss (delta = 1e-3) of log L_hat - log L, summed over the points;
- minimised with L-BFGS-B (scipy) and the closed-form gradient, from Hoffmann's grid of starting points
  (alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1}, a, b in {0, 5, ..., 25}): the objective is evaluated at
  all 4,500 grid points and L-BFGS-B runs from the `n_starts` best of them; the lowest end point is the fit;
- intervals: the percentile bootstrap over whole points (each resample draws n points with replacement, Epoch's
  scheme), or over whole groups (a run's points are correlated), optionally within strata (a designed factor
  such as the model size is held fixed and only the seeds are resampled: the stratified bootstrap of Davison &
  Hinkley 1997, section 3.2, with Rao & Wu 1988's rescaling for strata of few groups); each resample refitted
  from the full-data fit and the best grid starts.

The optimiser works in centred coordinates (a - alpha mean(log N), b - beta mean(log D), e, alpha, beta), a change
of variables that leaves the minimum unchanged and conditions the problem; the objective is divided by delta.

The law and its closed forms: zoo.scaling.law; the objective, its grid and L-BFGS-B: zoo.scaling.huber; the
bootstrap: zoo.scaling.bootstrap. Here: the fit's steps (fit_scaling_law) and its result (ScalingFit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from zoo.scaling.bootstrap import bootstrap_intervals, percentiles, resample_units
from zoo.scaling.huber import DELTA, HuberProblem, best_start, ranked_starts
from zoo.scaling.law import (
    DERIVED,
    N_FIT,
    PARAMS,
    ScalingError,
    allocation_exponents,
    allocation_g,
    check_points,
    compute_optimal,
    scaling_law,
    underdetermined,
)


@dataclass
class ScalingFit:
    """A fitted law. values: E, A, B, alpha, beta and the derived a, b, G (compute_optimal; NaN unless alpha > 0
    and beta > 0); ci: their percentile
    intervals at `level` (None without bootstrap, or for a, b, G when some resample had alpha <= 0 or beta <= 0);
    samples: (k, 5) converged fits of the resamples (k <= n_bootstrap), columns PARAMS; kept: indices of the input
    points fitted; objective: the summed Huber loss (log-loss units) at the fit.
    converged: False when the full-data fit did not converge (HuberProblem.convergence): values are then where the
    optimiser stopped, not a fit, ci is all None and notes say why; n_unconverged: resamples whose fit did not
    converge, left out of samples and the intervals (notes say how many)."""

    values: dict[str, float]
    ci: dict[str, tuple[float, float] | None]
    samples: np.ndarray
    n_points: int
    kept: np.ndarray
    objective: float
    n_bootstrap: int
    seed: int | None
    level: float = 0.95
    notes: list[str] = field(default_factory=list)
    converged: bool = True
    n_unconverged: int = 0

    def predict(self, N, D):
        """The fitted L(N, D)."""
        return scaling_law(N, D, *(self.values[k] for k in PARAMS))

    def allocation(self, C) -> dict[str, dict]:
        """N_opt, D_opt and the frontier L*(C) at each compute C (FLOPs, C = 6 N D), with intervals from the
        resamples: {"C": [...], "N_opt": {"value": [...], "ci": [[lo, hi], ...] or None}, "D_opt": ..., "loss": ...}.
        """
        C = np.atleast_1d(np.asarray(C, dtype=float))
        if np.any(~np.isfinite(C) | (C <= 0)):
            raise ScalingError(f"compute C must be positive and finite, got {C.tolist()}")
        point = compute_optimal(C, *(self.values[k] for k in PARAMS))
        out = {"C": C.tolist()}
        draws = None
        if len(self.samples):
            s = self.samples
            draws = compute_optimal(C[None, :], *(s[:, k : k + 1] for k in range(5)))
        for name, value, k in zip(("N_opt", "D_opt", "loss"), point, range(3)):
            ci = None
            if draws is not None and np.all(np.isfinite(draws[k])):
                lo, hi = percentiles(draws[k], self.level)
                ci = [[float(a), float(b)] for a, b in zip(lo, hi)]
            out[name] = {"value": [_num(v) for v in value], "ci": ci}
        return out

    def to_dict(self, compute=None) -> dict:
        """The JSON form: {"E": {"value": v, "ci": [lo, hi]}, ..., "a": ..., "b": ..., "G": ..., "n_points": n, ...}
        plus the frontier at `compute` (a list of C) when given."""
        out = {k: {"value": _num(self.values[k]), "ci": _pair(self.ci[k])} for k in (*PARAMS, *DERIVED)}
        out.update(
            n_points=self.n_points,
            n_bootstrap=self.n_bootstrap,
            seed=self.seed,
            level=self.level,
            delta=DELTA,
            objective=self.objective,
            converged=self.converged,
            n_unconverged=self.n_unconverged,
            notes=list(self.notes),
        )
        if compute is not None:
            out["frontier"] = self.allocation(compute)
        return out


def _num(v) -> float | None:
    return float(v) if np.isfinite(v) else None


def _pair(ci) -> list[float] | None:
    return None if ci is None else [float(ci[0]), float(ci[1])]


def fit_scaling_law(
    N,
    D,
    L,
    *,
    drop_highest: int = 0,
    bootstrap: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
    n_starts: int | None = 20,
    bootstrap_starts: int = 1,
    labels=None,
    groups=None,
    strata=None,
) -> ScalingFit:
    """Fit L(N, D) = E + A / N^alpha + B / D^beta to points (N parameters, D tokens, L loss; 1-d, equal length).

    drop_highest: drop that many highest-loss points first (Besiroglu et al. drop 5 of Chinchilla's 245).
    bootstrap: resamples for the intervals (0: none); seed fixes them (the fit is deterministic given it).
    n_starts: L-BFGS-B runs from that many best points of Hoffmann's grid (None: all 4,500).
    bootstrap_starts: each resample's fit starts from the full-data fit and that many best grid points.
    labels[i] names point i in errors. groups[i]: the group of point i (e.g. its run, whose evaluations are
    correlated); given, a resample draws whole groups with replacement instead of points. strata[i]: the stratum
    of point i (e.g. its model size, a designed factor); given, a resample draws groups (or points) within each
    stratum, rescaled so that few per stratum do not narrow the intervals (resample_weights, rescaled: Rao & Wu
    1988), and a stratum of one group is in every resample (a note says its interval contribution is nil).
    Raises ScalingError on bad input (check_points; a bootstrap, level, n_starts, bootstrap_starts or seed out of
    range; groups or strata of another length; a group in two strata; strata that each hold one group) before any
    fitting, and RuntimeError when a resample's optimiser never left its starting points (the intervals would
    collapse). Returns a ScalingFit; its values and ci hold E, A, B, alpha, beta, a, b and G; its first note says
    so when the points have fewer than 3 distinct N or D (underdetermined: the fit cannot be trusted). Check its
    `converged`: an optimiser that stopped early (an iteration limit, a flat stretch) on the full data gives
    converged False and no bootstrap; resamples that stopped early are left out of the intervals and counted in
    n_unconverged. In-process callers: start Python with OPENBLAS_NUM_THREADS=1 (scipy >= 1.15's L-BFGS-B is
    10-30x slower with OpenBLAS threads, scipy issue #22438); python -m zoo.scaling does.
    """
    kept = check_points(N, D, L, drop_highest, labels)
    _check_options(bootstrap, level, n_starts, bootstrap_starts, seed)
    members, units, lone = resample_units(groups, strata, len(L), kept, bootstrap)
    N, D, L = (np.asarray(v, dtype=float)[kept] for v in (N, D, L))
    problem = HuberProblem(N, D, L)
    ranked = ranked_starts(problem)
    fit, u_hat = _full_fit(problem, ranked, n_starts, kept, bootstrap, seed, level)
    if not fit.converged:  # not a fit: no intervals around it
        return fit
    fit.samples, fit.ci, notes, fit.n_unconverged = bootstrap_intervals(
        problem, u_hat, ranked[: int(bootstrap_starts)], bootstrap, seed, level, members, units, lone
    )
    fit.notes = [why for why in (underdetermined(N, D),) if why is not None] + notes  # underdetermined: first
    return fit


def _check_options(bootstrap, level, n_starts, bootstrap_starts, seed) -> None:
    """ScalingError for a bootstrap, level, n_starts, bootstrap_starts or seed out of range (fit_scaling_law)."""
    if int(bootstrap) != bootstrap or bootstrap < 0:
        raise ScalingError(f"bootstrap must be a non-negative integer, got {bootstrap!r}")
    if not 0.0 < level < 1.0:
        raise ScalingError(f"level must be in (0, 1), got {level!r}")
    for name, value, least in (("n_starts", n_starts, 1), ("bootstrap_starts", bootstrap_starts, 0), ("seed", seed, 0)):
        if value is None and name != "bootstrap_starts":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            none = " or None" if name != "bootstrap_starts" else ""
            raise ScalingError(f"{name} must be an integer >= {least}{none}, got {value!r}")


def _full_fit(problem: HuberProblem, ranked, n_starts, kept, bootstrap, seed, level) -> tuple[ScalingFit, np.ndarray]:
    """(the fit to all points from the n_starts best of the `ranked` grid (None: all), its end point u): intervals
    and samples empty; converged False (a note says why; no bootstrap follows) when L-BFGS-B did not converge."""
    n = len(problem.log_loss)
    starts = ranked if n_starts is None else ranked[: int(n_starts)]
    u_hat, f_hat, _, why = best_start(problem, starts, np.ones(n))
    fit = ScalingFit(
        values=_values(problem.to_theta(u_hat)),
        ci=dict.fromkeys((*PARAMS, *DERIVED)),
        samples=np.empty((0, N_FIT)),
        n_points=n,
        kept=kept,
        objective=f_hat * DELTA,
        n_bootstrap=int(bootstrap),
        seed=seed,
        level=level,
    )
    if why is not None:
        fit.notes, fit.converged = [f"the fit did not converge ({why}): not a fit; no bootstrap"], False
    return fit, u_hat


def _values(theta) -> dict[str, float]:
    """E, A, B, alpha, beta of the end point theta = (a, b, e, alpha, beta) and a, b, G (NaN unless alpha, beta > 0)."""
    a, b, e, alpha, beta = (float(v) for v in theta)
    with np.errstate(over="ignore"):
        values = {"E": float(np.exp(e)), "A": float(np.exp(a)), "B": float(np.exp(b)), "alpha": alpha, "beta": beta}
    values.update(a=math.nan, b=math.nan, G=math.nan)  # no compute-optimal allocation unless alpha, beta > 0
    if alpha > 0 and beta > 0:
        exp_a, exp_b = allocation_exponents(alpha, beta)
        values.update(a=float(exp_a), b=float(exp_b), G=float(allocation_g(*(values[k] for k in PARAMS))))
    return values
