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
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

DELTA = 1e-3
PARAMS = ("E", "A", "B", "alpha", "beta")
DERIVED = ("a", "b", "G")
N_FIT = len(PARAMS)  # parameters fitted: the fewest points a fit accepts
MIN_DISTINCT = 3  # distinct N (and D) that identify E + A / N^alpha (B / D^beta): 3 unknowns, one level each
# Hoffmann et al. 2022, appendix D.2: the grid of initialisations (a = log A, b = log B, e = log E)
GRID = {
    "a": np.arange(0.0, 30.0, 5.0),
    "b": np.arange(0.0, 30.0, 5.0),
    "e": np.arange(-1.0, 1.5, 0.5),
    "alpha": np.arange(0.0, 2.5, 0.5),
    "beta": np.arange(0.0, 2.5, 0.5),
}
_LBFGSB = {"maxiter": 5000, "maxfun": 20000, "ftol": 1e-13, "gtol": 1e-10}
# a fit is converged when L-BFGS-B ended without hitting a limit and the gradient of the mean objective (the
# summed Huber loss / delta over the summed weights) is at most this at the end point: converged fits of
# Chinchilla's 240 points and of 16-point synthetic sets reach <= 1e-6, runs stopped at maxiter=30 >= 6e-4
GRAD_TOL = 1e-4


class ScalingError(ValueError):
    """Bad input to the fit (a missing column, a non-positive value, too few points); the CLI exits with 2."""


def _checked(func: str, positive: dict, numbers: dict) -> list[np.ndarray]:
    """The values of `positive` (each must be > 0 and finite) and `numbers` (each must not be NaN) as float arrays,
    in that order. Raises ScalingError naming func, the argument and its first bad entry."""
    out = []
    for name, values in (*positive.items(), *numbers.items()):
        try:
            arr = np.asarray(values, dtype=float)
        except (TypeError, ValueError) as e:
            raise ScalingError(f"{func}: {name} must be numbers ({e})") from None
        if arr.size == 0:
            raise ScalingError(f"{func}: {name} is empty")
        bad = ~(np.isfinite(arr) & (arr > 0)) if name in positive else np.isnan(arr)
        if bad.any():
            i = np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape) if arr.ndim else ()
            where = f"{name}[{', '.join(map(str, i))}]" if arr.ndim else name
            need = "positive and finite" if name in positive else "a number (not NaN)"
            raise ScalingError(f"{func}: {where} = {float(arr[i])!r}; it must be {need}")
        out.append(arr)
    return out


def scaling_law(N, D, E, A, B, alpha, beta):
    """L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, eq. 2); broadcasts over all arguments.
    Raises ScalingError for N or D not positive and finite, or a NaN parameter (naming it)."""
    N, D, E, A, B, alpha, beta = _checked(
        "scaling_law", {"N": N, "D": D}, {"E": E, "A": A, "B": B, "alpha": alpha, "beta": beta}
    )
    return E + A / np.power(N, alpha) + B / np.power(D, beta)


def compute_optimal(C, E, A, B, alpha, beta):
    """The compute-optimal allocation and loss frontier for compute C = 6 N D FLOPs (broadcasts).

    Hoffmann et al. 2022, appendix D.2: minimising L(N, D) subject to 6 N D = C gives
    N_opt = G (C/6)^a, D_opt = (C/6)^b / G, G = (alpha A / (beta B))^(1/(alpha+beta)), a = beta / (alpha+beta),
    b = alpha / (alpha+beta), and the frontier L*(C) = L(N_opt, D_opt). Needs alpha > 0 and beta > 0 (otherwise there
    is no interior optimum): entries without are NaN. Returns (N_opt, D_opt, L_star) as float arrays.
    Raises ScalingError for C not positive and finite, A or B not positive (inf, an overflowing resample's, is
    allowed), or a NaN E, alpha or beta, naming the argument and entry.
    """
    C, E, alpha, beta = _checked("compute_optimal", {"C": C}, {"E": E, "alpha": alpha, "beta": beta})
    A, B = _checked("compute_optimal", {}, {"A": A, "B": B})
    for name, arr in (("A", A), ("B", B)):
        if (arr <= 0).any():
            raise ScalingError(f"compute_optimal: {name} = {float(arr[arr <= 0].flat[0])!r}; it must be positive")
    ok = (alpha > 0) & (beta > 0)
    al, be = np.where(ok, alpha, 1.0), np.where(ok, beta, 1.0)
    log_g = (np.log(al * A) - np.log(be * B)) / (al + be)
    log_k = np.log(C / 6.0)
    log_n = log_g + be / (al + be) * log_k
    log_d = log_k - log_n
    loss = E + A * np.exp(-al * log_n) + B * np.exp(-be * log_d)
    nan = np.where(ok, 1.0, np.nan)
    return np.exp(log_n) * nan, np.exp(log_d) * nan, loss * nan


def allocation_exponents(alpha, beta):
    """(a, b) of N_opt ∝ C^a, D_opt ∝ C^b: a = beta / (alpha+beta), b = alpha / (alpha+beta) (Hoffmann, D.2).
    Raises ScalingError unless alpha and beta are positive and finite (no compute-optimal allocation otherwise)."""
    alpha, beta = _checked("allocation_exponents", {"alpha": alpha, "beta": beta}, {})
    return beta / (alpha + beta), alpha / (alpha + beta)


def check_points(N, D, L, drop_highest: int = 0, labels=None) -> np.ndarray:
    """Validate the points and return the indices fitted (all but the `drop_highest` highest losses), sorted.

    N, D, L: 1-d sequences of equal length (parameters, tokens, loss). labels[i] names point i in errors (default
    "point i"; one per point). Raises ScalingError for a non-finite or non-positive value (naming the point), a
    negative drop_highest, fewer than 5 points (the parameters fitted) left after dropping, one value of N or of
    D among them, or labels of another length. Ties among the highest losses drop the earlier row first.
    """
    arrays = {}
    for name, values in (("N (parameters)", N), ("D (tokens)", D), ("loss", L)):
        arr = np.asarray(values, dtype=float)
        if arr.ndim != 1:
            raise ScalingError(f"{name} must be a 1-d sequence, got shape {arr.shape}")
        arrays[name] = arr
    lengths = {len(a) for a in arrays.values()}
    if len(lengths) != 1:
        raise ScalingError(f"N, D and loss must have the same length, got {[len(a) for a in arrays.values()]}")
    if labels is not None and len(labels) != len(arrays["loss"]):
        raise ScalingError(f"labels must name each point: {len(arrays['loss'])} points, {len(labels)} labels")
    label = (lambda i: labels[i]) if labels is not None else (lambda i: f"point {i}")
    for name, arr in arrays.items():
        bad = np.flatnonzero(~np.isfinite(arr) | (arr <= 0))
        if len(bad):
            i = int(bad[0])
            raise ScalingError(
                f"{label(i)}: {name} = {float(arr[i])!r}; the law needs positive, finite N, D and loss "
                f"({len(bad)} such point(s)); fix or remove the row"
            )
    if int(drop_highest) != drop_highest or drop_highest < 0:
        raise ScalingError(f"--drop-highest (drop_highest) must be a non-negative integer, got {drop_highest!r}")
    n = len(arrays["loss"])
    left = n - int(drop_highest)
    if left < N_FIT:
        raise ScalingError(
            f"{max(left, 0)} point(s) left to fit ({n} given, {int(drop_highest)} highest dropped) but the law "
            f"has {N_FIT} parameters (E, A, B, alpha, beta): give at least {N_FIT} points after dropping "
            "(lower --drop-highest)"
        )
    kept = np.sort(np.argsort(-arrays["loss"], kind="stable")[int(drop_highest) :])
    for name in ("N (parameters)", "D (tokens)"):
        if len(np.unique(arrays[name][kept])) < 2:
            raise ScalingError(
                f"every point fitted has the same {name} ({float(arrays[name][kept[0]]):.6g}): the law's "
                f"{'A / N^alpha' if name.startswith('N') else 'B / D^beta'} term cannot be told from E; give runs "
                "of at least two sizes and two token counts"
            )
    return kept


def underdetermined(N, D) -> str | None:
    """One line on why the law cannot be fitted from points of these N and D, or None. With k < MIN_DISTINCT
    distinct values of N the points fix only k values of E + A / N^alpha, whose 3 unknowns then trade off without
    bound (a bootstrap interval of A can reach 1e130); likewise D with E + B / D^beta."""
    for name, values, term, what in (("N", N, "E + A / N^alpha", "size"), ("D", D, "E + B / D^beta", "token count")):
        k = len(np.unique(np.asarray(values, dtype=float)))
        if k < MIN_DISTINCT:
            return (
                f"only {k} distinct {name} among the points: the law's 5 parameters need at least {MIN_DISTINCT} "
                f"distinct N and {MIN_DISTINCT} distinct D ({k} {name} fix {k} values of {term}, whose 3 unknowns "
                f"then trade off without bound), so the fit cannot be trusted; add runs of another {what}"
            )
    return None


class _Problem:
    """The summed Huber objective of one data set in centred coordinates u = (a', b', e, alpha, beta)."""

    def __init__(self, N, D, L, delta: float = DELTA):
        x, y = np.log(N), np.log(D)
        self.x_mean, self.y_mean = float(x.mean()), float(y.mean())
        self.xc, self.yc = x - self.x_mean, y - self.y_mean
        self.log_loss = np.log(L)
        self.delta = delta

    def to_u(self, theta):
        """(a, b, e, alpha, beta) -> centred u; works on (..., 5) arrays."""
        theta = np.array(theta, dtype=float)
        theta[..., 0] -= theta[..., 3] * self.x_mean
        theta[..., 1] -= theta[..., 4] * self.y_mean
        return theta

    def to_theta(self, u):
        u = np.array(u, dtype=float)
        u[..., 0] += u[..., 3] * self.x_mean
        u[..., 1] += u[..., 4] * self.y_mean
        return u

    def value_and_grad(self, u, w):
        """Objective sum_i w_i huber(r_i) / delta, r = LSE(...) - log L, and its exact gradient in u."""
        a, b, e, alpha, beta = u
        t1 = a - alpha * self.xc
        t2 = b - beta * self.yc
        m = np.maximum(np.maximum(t1, t2), e)
        e1, e2, e3 = np.exp(t1 - m), np.exp(t2 - m), np.exp(e - m)
        s = e1 + e2 + e3
        r = m + np.log(s) - self.log_loss
        c = np.clip(r / self.delta, -1.0, 1.0)  # huber'(r) / delta
        f = w @ (c * r - 0.5 * self.delta * c * c)  # huber(r) / delta in both regimes
        g = w * c / s
        g1, g2 = g * e1, g * e2
        return f, np.array([g1.sum(), g2.sum(), g @ e3, -(g1 @ self.xc), -(g2 @ self.yc)])

    def values(self, us, w):
        """Objective at each row of us (k, 5), vectorised (ranks the grid)."""
        a, b, e, alpha, beta = (us[:, k : k + 1] for k in range(5))
        t = np.stack([a - alpha * self.xc, b - beta * self.yc, np.broadcast_to(e, (len(us), len(self.xc)))])
        r = np.logaddexp.reduce(t, axis=0) - self.log_loss
        c = np.clip(r / self.delta, -1.0, 1.0)
        return ((c * r - 0.5 * self.delta * c * c) * w).sum(axis=1)  # no BLAS call: no idle threads spinning

    def minimize(self, u0, w):
        """L-BFGS-B from u0; returns (u, objective, moved, why): moved False when it stopped where it started;
        why None for a converged end point, else why it is not one (convergence)."""
        res = minimize(self.value_and_grad, u0, args=(w,), jac=True, method="L-BFGS-B", options=_LBFGSB)
        return res.x, float(res.fun), bool(np.any(res.x != u0)), self.convergence(res, w)

    def convergence(self, res, w) -> str | None:
        """None when scipy's L-BFGS-B result `res` (weights w) is a converged fit, else why not.

        Converged: the optimiser did not stop at an iteration or evaluation limit (status 1), the objective is
        finite, and the largest |gradient| of the mean objective at res.x is at most GRAD_TOL. A success flag alone
        is not enough (the relative-reduction test also fires on a flat stretch), nor needed: status 2 (the line
        search found no lower point) at a zero gradient is a minimum at float precision.
        """
        f, g = self.value_and_grad(res.x, w)
        grad = float(np.max(np.abs(g))) / float(np.sum(w))
        if res.status == 1 or not np.isfinite(f) or not grad <= GRAD_TOL:
            message = res.message.decode() if isinstance(res.message, bytes) else str(res.message)
            return f"L-BFGS-B: {message.strip() or 'stopped'} after {res.nit} iterations, |gradient| {grad:.2g}"
        return None


def _grid() -> np.ndarray:
    """Hoffmann's 4,500 starting points as (a, b, e, alpha, beta) rows."""
    return np.array(list(itertools.product(*(GRID[k] for k in ("a", "b", "e", "alpha", "beta")))))


def _best(problem: _Problem, starts: np.ndarray, w) -> tuple[np.ndarray, float, bool, str | None]:
    """The lowest end point of L-BFGS-B over `starts` (weights w): (u, objective, whether any start moved, why it
    is not converged or None)."""
    best_u, best_f, best_why, moved_any = None, math.inf, None, False
    for u0 in starts:
        u, f, moved, why = problem.minimize(u0, w)
        moved_any |= moved
        if np.isfinite(f) and f < best_f:
            best_u, best_f, best_why = u, f, why
    if best_u is None:
        raise ScalingError("no start of L-BFGS-B reached a finite objective; check the data for extreme values")
    return best_u, best_f, moved_any, best_why


@dataclass
class ScalingFit:
    """A fitted law. values: E, A, B, alpha, beta and the derived a, b, G (compute_optimal; NaN unless alpha > 0
    and beta > 0); ci: their percentile
    intervals at `level` (None without bootstrap, or for a, b, G when some resample had alpha <= 0 or beta <= 0);
    samples: (k, 5) converged fits of the resamples (k <= n_bootstrap), columns PARAMS; kept: indices of the input
    points fitted; objective: the summed Huber loss (log-loss units) at the fit.
    converged: False when the full-data fit did not converge (_Problem.convergence): values are then where the
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
                lo, hi = _percentiles(draws[k], self.level)
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


def _percentiles(x: np.ndarray, level: float):
    tail = 50.0 * (1.0 - level)
    return np.percentile(x, [tail, 100.0 - tail], axis=0)


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
    fitting, and RuntimeError when a resample's
    optimiser never left its starting points (the intervals would collapse).
    Returns a ScalingFit; its values and ci hold E, A, B, alpha, beta, a, b and G; its first note says so when
    the points have fewer than 3 distinct N or D (underdetermined: the fit cannot be trusted). Check its `converged`: an
    optimiser that stopped early (an iteration limit, a flat stretch) on the full data gives converged False and no
    bootstrap; resamples that stopped early are left out of the intervals and counted in n_unconverged.
    In-process callers: start Python with OPENBLAS_NUM_THREADS=1 (scipy >= 1.15's L-BFGS-B is 10-30x slower with
    OpenBLAS threads, scipy issue #22438); python -m zoo.scaling does.
    """
    kept = check_points(N, D, L, drop_highest, labels)
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
    members = None if groups is None else _members(groups, len(L), kept, bootstrap)
    units, lone = _strata(strata, len(L), kept, members, bootstrap)
    N, D, L = (np.asarray(v, dtype=float)[kept] for v in (N, D, L))
    n = len(L)
    problem = _Problem(N, D, L)
    ones = np.ones(n)

    grid_u = problem.to_u(_grid())
    ranked = grid_u[np.argsort(problem.values(grid_u, ones), kind="stable")]
    starts = ranked if n_starts is None else ranked[: int(n_starts)]
    u_hat, f_hat, _, why = _best(problem, starts, ones)
    values = _values(problem.to_theta(u_hat))
    if why is not None:  # not a fit: no intervals around it
        note = f"the fit did not converge ({why}): not a fit; no bootstrap"
        no_ci = dict.fromkeys((*PARAMS, *DERIVED))
        empty = np.empty((0, N_FIT))
        return ScalingFit(values, no_ci, empty, n, kept, f_hat * DELTA, int(bootstrap), seed, level, [note], False)

    boot_starts = np.vstack([u_hat[None, :], ranked[: int(bootstrap_starts)]])
    samples, reasons = _bootstrap_samples(problem, u_hat, boot_starts, bootstrap, seed, members, units)
    ci, notes = _intervals(samples, level)
    if lone and bootstrap:
        notes.append(
            f"{lone} of {len(units)} strata hold one {'group' if members is not None else 'point'}: it is in every "
            "resample, so the intervals leave out its noise (too narrow); give each stratum 2 or more"
        )
    if reasons:
        notes.insert(
            0,
            f"{len(reasons)} of {bootstrap} resamples did not converge (first: {reasons[0]}): the intervals use "
            f"the other {len(samples)}",
        )
    why_not = underdetermined(N, D)
    if why_not is not None:
        notes.insert(0, why_not)
    fit = ScalingFit(values, ci, samples, n, kept, f_hat * DELTA, int(bootstrap), seed, level, notes)
    fit.n_unconverged = len(reasons)
    return fit


def _members(groups, n: int, kept: np.ndarray, bootstrap: int) -> np.ndarray:
    """Each kept point's group index 0 .. G-1 from `groups` (one label per input point). Raises ScalingError for
    another length, or (with bootstrap) fewer than 2 groups among the kept points: resamples would all be equal."""
    labels = np.asarray(groups, dtype=object)
    if labels.shape != (n,):
        raise ScalingError(f"groups must give one group per point: {n} points, got shape {labels.shape}")
    if any(g is None or (isinstance(g, float) and not math.isfinite(g)) for g in labels):
        raise ScalingError("groups holds a missing group (None or NaN): give every point its group (its run)")
    members = np.unique(np.asarray(groups)[kept], return_inverse=True)[1].ravel()
    if bootstrap and members.max() < 1:
        raise ScalingError(
            f"every point fitted is in one group ({labels[kept[0]]!r}): resampling whole groups needs at least 2 "
            "(--group names each point's run)"
        )
    return members


def _strata(strata, n: int, kept: np.ndarray, members, bootstrap: int) -> tuple[list[np.ndarray] | None, int]:
    """(units, lone): units[s] the indices of stratum s's units (the groups of `members`, else the kept points);
    None without strata (the plain bootstrap). lone: strata holding one unit. Raises ScalingError for strata of
    another length or with a missing value, a group whose points are in two strata, or (with bootstrap) strata
    that each hold one unit: every resample would equal the data."""
    if strata is None:
        return None, 0
    n_units = len(kept) if members is None else int(members.max()) + 1
    labels = np.asarray(strata, dtype=object)
    if labels.shape != (n,):
        raise ScalingError(f"strata must give one stratum per point: {n} points, got shape {labels.shape}")
    if any(s is None or (isinstance(s, float) and not math.isfinite(s)) for s in labels):
        raise ScalingError("strata holds a missing stratum (None or NaN): give every point its stratum (its size)")
    of_point = np.unique(labels[kept].astype(str), return_inverse=True)[1].ravel()
    unit = np.arange(len(kept)) if members is None else members
    of_unit = np.full(n_units, -1)
    for u, s in zip(unit, of_point):
        if of_unit[u] not in (-1, s):
            raise ScalingError(
                f"a group's points are in two strata (point {int(kept[np.flatnonzero(unit == u)[0]])}): strata must "
                "hold whole groups (a run is of one size)"
            )
        of_unit[u] = s
    units = [np.flatnonzero(of_unit == s) for s in range(int(of_point.max()) + 1)]
    lone = sum(len(u) == 1 for u in units)
    if bootstrap and lone == len(units):
        raise ScalingError(
            "every stratum holds one group (or point): each resample would equal the data; give 2 or more runs "
            "(seeds) per stratum, or no strata"
        )
    return units, lone


def resample_weights(rng: np.random.Generator, units: list[np.ndarray], n_units: int, rescaled: bool = False):
    """One stratified bootstrap draw of weights (n_units,): for each stratum's unit indices in `units`, its units
    drawn with replacement; each stratum's weights sum to its size n.

    rescaled False: n draws, weight = count (Davison & Hinkley 1997, section 3.2; one stratum of every unit: the
    plain bootstrap). A unit's weight then has variance (n - 1) / n, so for a linear statistic the resamples
    understate the between-unit variance by that factor: by half at 2 seeds a size.
    rescaled True: the rescaled bootstrap of Rao & Wu 1988 (JASA 83, 231-241) with n - 1 draws, weight =
    count x n / (n - 1): mean 1 and variance 1 at every n >= 2, the unbiased variance for a linear statistic.
    A stratum of one unit keeps weight 1 either way (it cannot vary)."""
    weights = np.zeros(n_units)
    for u in units:
        n = len(u)
        m = n - 1 if rescaled and n > 1 else n
        counts = np.bincount(u[rng.integers(0, n, size=m)], minlength=n_units)
        weights += counts * (n / m)
    return weights


def _bootstrap_samples(problem: _Problem, u_hat, boot_starts, bootstrap, seed, members=None, units=None):
    """Refit `bootstrap` resamples of whole points (weights from np.random.default_rng(seed)) from boot_starts;
    with members (each point's group index 0 .. G-1), of whole groups; units: each stratum's units, drawn within
    it and rescaled (resample_weights; None: one stratum, the plain bootstrap).

    Returns (samples, reasons): samples (k, 5) the converged fits, columns PARAMS (E, A, B may overflow to inf);
    reasons: why each of the other bootstrap - k did not converge. Raises RuntimeError when L-BFGS-B stopped
    where it started on a resample whose gradient at u_hat is not zero (the intervals would collapse).
    """
    n = len(problem.log_loss)
    rng = np.random.default_rng(seed)
    samples = np.empty((int(bootstrap), N_FIT))
    ok = np.ones(int(bootstrap), dtype=bool)
    reasons = []
    stuck = 0
    n_units = n if members is None else int(members.max()) + 1
    stratified = units is not None
    units = [np.arange(n_units)] if units is None else units
    for k in range(int(bootstrap)):
        w = resample_weights(rng, units, n_units, rescaled=stratified)
        w = w if members is None else w[members]
        u, _, moved, why = _best(problem, boot_starts, w)
        if not moved and np.max(np.abs(problem.value_and_grad(u_hat, w)[1])) > _LBFGSB["gtol"]:
            stuck += 1
        if why is not None:
            ok[k] = False
            reasons.append(why)
        t = problem.to_theta(u)
        with np.errstate(over="ignore"):  # an overflowing A, B or E is reported in notes, not raised
            samples[k] = [np.exp(t[2]), np.exp(t[0]), np.exp(t[1]), t[3], t[4]]
    if stuck:
        raise RuntimeError(
            f"L-BFGS-B stopped where it started on {stuck} of {bootstrap} resamples: the intervals would be too narrow"
        )
    return samples[ok], reasons


def _intervals(samples: np.ndarray, level: float):
    """Percentile intervals at `level` of PARAMS and DERIVED from the (k, 5) samples.

    Returns (ci, notes): ci maps each name to (lo, hi) or None (no samples, or some resample non-finite, or
    alpha <= 0 or beta <= 0 for a, b, G); notes say why an interval is missing.
    """
    notes = []
    ci: dict[str, tuple[float, float] | None] = dict.fromkeys((*PARAMS, *DERIVED))
    bootstrap = len(samples)
    if not bootstrap:
        return ci, notes
    lo, hi = _percentiles(samples, level)
    for i, k in enumerate(PARAMS):
        bad = int(np.sum(~np.isfinite(samples[:, i])))
        if bad:
            notes.append(f"{bad} of {bootstrap} resamples fit a non-finite {k}: no interval for {k}")
        else:
            ci[k] = (float(lo[i]), float(hi[i]))
    alpha, beta = samples[:, 3], samples[:, 4]
    bad = int(np.sum(~((alpha > 0) & (beta > 0))))
    if bad:
        notes.append(f"{bad} of {bootstrap} resamples fit alpha <= 0 or beta <= 0: no interval for a, b, G")
        return ci, notes
    with np.errstate(over="ignore", invalid="ignore"):
        derived = np.column_stack([*allocation_exponents(alpha, beta), _g(*samples.T)])
    for i, k in enumerate(DERIVED):
        if np.all(np.isfinite(derived[:, i])):
            ci[k] = tuple(float(v) for v in _percentiles(derived[:, i], level))
        else:
            notes.append(f"some resamples give a non-finite {k}: no interval for {k}")
    return ci, notes


def _g(E, A, B, alpha, beta):
    """G = (alpha A / (beta B))^(1 / (alpha + beta)) (Hoffmann et al. 2022, appendix D.2)."""
    return np.exp((np.log(alpha * A) - np.log(beta * B)) / (alpha + beta))


def _values(theta) -> dict[str, float]:
    a, b, e, alpha, beta = (float(v) for v in theta)
    with np.errstate(over="ignore"):
        values = {"E": float(np.exp(e)), "A": float(np.exp(a)), "B": float(np.exp(b)), "alpha": alpha, "beta": beta}
    values.update(a=math.nan, b=math.nan, G=math.nan)  # no compute-optimal allocation unless alpha, beta > 0
    if alpha > 0 and beta > 0:
        exp_a, exp_b = allocation_exponents(alpha, beta)
        values.update(a=float(exp_a), b=float(exp_b), G=float(_g(*(values[k] for k in PARAMS))))
    return values
