"""The Huber objective of the law's fit in centred coordinates, Hoffmann's grid of starts and L-BFGS-B from them."""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.optimize import minimize

from zoo.scaling.law import ScalingError

DELTA = 1e-3
# Hoffmann et al. 2022, appendix D.2: the grid of initialisations (a = log A, b = log B, e = log E)
GRID = {
    "a": np.arange(0.0, 30.0, 5.0),
    "b": np.arange(0.0, 30.0, 5.0),
    "e": np.arange(-1.0, 1.5, 0.5),
    "alpha": np.arange(0.0, 2.5, 0.5),
    "beta": np.arange(0.0, 2.5, 0.5),
}
LBFGSB = {"maxiter": 5000, "maxfun": 20000, "ftol": 1e-13, "gtol": 1e-10}
# a fit is converged when L-BFGS-B ended without hitting a limit and the gradient of the mean objective (the
# summed Huber loss / delta over the summed weights) is at most this at the end point: converged fits of
# Chinchilla's 240 points and of 16-point synthetic sets reach <= 1e-6, runs stopped at maxiter=30 >= 6e-4
GRAD_TOL = 1e-4


def huber_sum(res, w=1.0) -> float:
    """The summed Huber loss of the residuals res (delta DELTA), each weighted by w, over delta: HuberProblem's
    objective for a law given by its residuals (zoo.scaling.forms' Kaplan fits)."""
    h = np.abs(res)
    return float(np.sum(w * np.where(h <= DELTA, 0.5 * res * res, DELTA * (h - 0.5 * DELTA))) / DELTA)


class HuberProblem:
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
        res = minimize(self.value_and_grad, u0, args=(w,), jac=True, method="L-BFGS-B", options=LBFGSB)
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


def grid_starts() -> np.ndarray:
    """Hoffmann's 4,500 starting points as (a, b, e, alpha, beta) rows."""
    return np.array(list(itertools.product(*(GRID[k] for k in ("a", "b", "e", "alpha", "beta")))))


def ranked_starts(problem: HuberProblem) -> np.ndarray:
    """Hoffmann's grid (grid_starts) in problem's centred coordinates, lowest objective (unit weights) first."""
    grid_u = problem.to_u(grid_starts())
    return grid_u[np.argsort(problem.values(grid_u, np.ones(len(problem.log_loss))), kind="stable")]


def best_start(problem: HuberProblem, starts: np.ndarray, w) -> tuple[np.ndarray, float, bool, str | None]:
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
