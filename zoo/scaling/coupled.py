"""The coupled law: Chinchilla's sum with a D amplitude that follows a power of N (experiments/RESULTS.md, "The
coupled law, stated before it was fitted"),

    L = E + A / N^alpha + B N^g / D^beta

g = 0 is Hoffmann et al. 2022's law; g > 0 makes a doubling of D gain more at larger N, the direction of Kaplan et
al. 2020's coupling of N and D, while the N term stays separate."""

import itertools

import numpy as np
from scipy.optimize import minimize

from zoo.scaling.huber import LBFGSB, huber_sum


def coupled_law(N, D, E, A, B, alpha, beta, g) -> np.ndarray:
    """L = E + A / N^alpha + B N^g / D^beta (nats a token). N, D: broadcast, positive."""
    N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
    return E + A * N**-alpha + B * N**g * D**-beta


def fit_coupled(N, D, L, weights=None, starts=(), n_grid: int = 10) -> np.ndarray:
    """(E, A, B, alpha, beta, g) minimising the weighted Huber loss (delta 1e-3, as zoo.scaling.huber) of
    log L_hat - log L. Centred coordinates u = (log E, log A - alpha mean(log N), log B + g mean(log N) - beta
    mean(log D), alpha, beta, g); L-BFGS-B (alpha, beta in [0.001, 5], g in [-2, 2]) from each of `starts`
    ((E, A, B, alpha, beta, g) tuples, e.g. a Chinchilla fit with g = 0) and the n_grid best of a grid of 2,048.
    weights: one per point (a bootstrap's; default 1)."""
    x, y = np.log(np.asarray(N, dtype=float)), np.log(np.asarray(D, dtype=float))
    mx, my, log_l = x.mean(), y.mean(), np.log(np.asarray(L, dtype=float))
    w = np.ones_like(log_l) if weights is None else np.asarray(weights, dtype=float)

    def loss(u):
        e, a, b, al, be, g = u
        terms = np.logaddexp(a - al * (x - mx), b + g * (x - mx) - be * (y - my))
        return huber_sum(np.logaddexp(e, terms) - log_l, w)

    def to_u(t):
        E, A, B, al, be, g = t
        with np.errstate(divide="ignore"):  # a start's E of 0 (collapsed): log 0, clipped to the bound below
            u = np.array([np.log(E), np.log(A) - al * mx, np.log(B) + g * mx - be * my, al, be, g])
        return np.maximum(u, -50.0)

    levels, exps = (-4.0, -2.0, 0.0, 1.0), (0.1, 0.3, 0.6, 1.0)
    grid = itertools.product((-1.0, -0.5, 0.0, 0.5), levels, levels, exps, exps, (0.0, 0.15))
    grid = sorted((np.array(u) for u in grid), key=loss)
    bounds = [(-50, 50), (-50, 50), (-50, 50), (1e-3, 5.0), (1e-3, 5.0), (-2.0, 2.0)]
    u0s = [to_u(t) for t in starts] + grid[:n_grid]
    best = min(
        (minimize(loss, u0, method="L-BFGS-B", bounds=bounds, options=LBFGSB) for u0 in u0s), key=lambda r: r.fun
    ).x
    e, a, b, al, be, g = best
    return np.array([np.exp(e), np.exp(a + al * mx), np.exp(b - g * mx + be * my), al, be, g])
