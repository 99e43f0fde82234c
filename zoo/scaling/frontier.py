"""Compute frontiers and compute multipliers.

The law's frontier in measured compute uses each family's FLOPs per token: C = 6 r N D, with r the family's mean
C / (6 N D) over its points (zoo.scaling.points.flops_ratio). Beside it, the compute frontier L*(C) = E + A C^-gamma
is fitted to each family's lower envelope of (C, loss) (Kaplan et al. 2020; Tay et al. 2022). The compute
multiplier k(C) = C' / C: the compute C' a family needs to reach the reference's loss at C."""

import math

import numpy as np
from scipy.optimize import least_squares

from zoo.scaling import points as _points
from zoo.scaling.bootstrap import resample_weights
from zoo.scaling.law import PARAMS, compute_optimal


def frontier(C, params, r: float = 1.0) -> np.ndarray:
    """L*(C) of a law: compute_optimal's loss at 6 N D = C / r (C measured FLOPs, r the family's flops_ratio);
    params: (E, A, B, alpha, beta), each a scalar or a column of resamples."""
    return compute_optimal(np.asarray(C, dtype=float) / r, *params)[2]


def matching_compute(loss, params, lo: float, hi: float, r: float = 1.0) -> np.ndarray:
    """The compute C at which the law `params` (of a family with flops_ratio r) reaches `loss` on its frontier
    (bisection in log C between lo and hi FLOPs; inf where the law never gets that low: loss <= E, or beyond hi)."""
    loss = np.asarray(loss, dtype=float)
    a, b = np.full(loss.shape, np.log(lo)), np.full(loss.shape, np.log(hi))
    for _ in range(80):
        mid = (a + b) / 2
        above = frontier(np.exp(mid), params, r) > loss  # still worse than the target: needs more compute
        a, b = np.where(above, mid, a), np.where(above, b, mid)
    C = np.exp((a + b) / 2)
    return np.where(frontier(np.exp(b), params, r) <= loss * (1 + 1e-9), C, np.inf)


def interval(ks: np.ndarray):
    """The 95% percentile interval of resampled multipliers; inf (a law that never reaches the loss) ranks above
    every number, and a percentile that falls among the infs is inf."""
    ks = np.where(np.isfinite(ks), ks, np.inf)
    with np.errstate(invalid="ignore"):  # interpolating between two infs
        lo, hi = np.percentile(ks, [2.5, 97.5])
    return tuple(float(v) if not np.isnan(v) else math.inf for v in (lo, hi))


def multiplier(fit, ref, C: float, r: float = 1.0, r_ref: float = 1.0) -> dict:
    """k(C) = C' / C, C' the compute at which `fit`'s frontier reaches `ref`'s loss at C (the compute multiplier of
    Kaplan et al. 2020's architecture comparisons); r, r_ref: the families' flops_ratio; with the percentile
    interval over paired bootstrap resamples. {"value": k, "ci": (lo, hi) or None}; inf when the law never
    reaches that loss."""
    point = lambda f: tuple(f.values[k] for k in PARAMS)  # noqa: E731
    k = float(matching_compute(frontier(C, point(ref), r_ref), point(fit), C * 1e-9, C * 1e9, r)) / C
    n = min(len(fit.samples), len(ref.samples))
    if not n:
        return {"value": k, "ci": None}
    cols = lambda f: tuple(f.samples[:n, i] for i in range(5))  # noqa: E731
    with np.errstate(all="ignore"):
        ks = matching_compute(frontier(C, cols(ref), r_ref), cols(fit), C * 1e-9, C * 1e9, r) / C
    return {"value": k, "ci": interval(ks)}


def envelope(points: list[dict], key: str = "C") -> list[dict]:
    """The lower envelope of (C, loss): the points with a lower loss than every point of smaller C (C from key)."""
    out, best = [], math.inf
    for p in sorted(points, key=lambda p: (p[key], p["loss"])):
        if p["loss"] < best:
            out.append(p)
            best = p["loss"]
    return out


def fit_envelope(C: np.ndarray, L: np.ndarray) -> np.ndarray | None:
    """(E, A, gamma) of L = E + A C^-gamma by least squares in log L (scipy), E in [0, min L), from a small grid of
    starts; None with fewer than 4 points or no fit."""
    if len(C) < 4:
        return None
    x = np.log(C / np.exp(np.mean(np.log(C))))  # centred log C: A is the excess loss at the mean C
    log_loss = np.log(L)

    def resid(u):
        E, logA, g = u
        return np.log(E + np.exp(logA - g * x)) - log_loss

    def jac(u):  # d resid / d (E, log A, gamma), exact
        E, logA, g = u
        t = np.exp(logA - g * x)  # A C^-gamma
        return np.stack([np.ones_like(t), t, -x * t], axis=1) / (E + t)[:, None]

    best = None
    for frac in (0.0, 0.5, 0.9):
        for g in (0.05, 0.2, 0.5):
            E0 = frac * L.min()
            u0 = (E0, np.log(max(np.exp(np.mean(log_loss)) - E0, 1e-6)), g)
            try:
                r = least_squares(resid, u0, jac=jac, bounds=([0.0, -50.0, 1e-4], [L.min() * (1 - 1e-9), 50.0, 5.0]))
            except ValueError:
                continue
            if best is None or r.cost < best.cost:
                best = r
    if best is None:
        return None
    E, logA, g = best.x
    return np.array([E, np.exp(logA) * np.exp(np.mean(np.log(C))) ** g, g])


class Frontier:
    """The compute frontier of one family: (E, A, gamma) on its envelope of (p[key], loss) and `samples`, the
    refits of bootstrap resamples of whole runs, within each size when every size has 2 or more (each resample's
    own envelope; zoo.scaling.bootstrap.resample_weights). key: the points' compute (C, or another count: a FLOP
    convention's, the target tokens)."""

    def __init__(self, points: list[dict], bootstrap: int | None = None, seed: int = 0, key: str = "C"):
        bootstrap = _points.BOOTSTRAP if bootstrap is None else bootstrap
        env = envelope(points, key)
        self.n_points = len(env)
        self.values = fit_envelope(np.array([p[key] for p in env]), np.array([p["loss"] for p in env]))
        runs = sorted({p["run"] for p in points})
        stratified = not _points.single_seed_sizes(points, "N")  # as fit_points (no N: one stratum of every run)
        of_run = {p["run"]: p.get("N") for p in points}
        by_size = {}
        for i, r in enumerate(runs):
            by_size.setdefault(of_run[r], []).append(i)
        units = [np.array(v) for v in by_size.values()] if stratified else [np.arange(len(runs))]
        rng = np.random.default_rng(seed)
        samples = []
        for _ in range(bootstrap if self.values is not None else 0):
            drawn_runs = {runs[i] for i in np.flatnonzero(resample_weights(rng, units, len(runs), stratified))}
            e = envelope([p for p in points if p["run"] in drawn_runs], key)  # which runs, not how often
            u = fit_envelope(np.array([p[key] for p in e]), np.array([p["loss"] for p in e]))
            if u is not None:
                samples.append(u)
        self.samples = np.array(samples).reshape(-1, 3)

    def ci(self, i: int):
        return tuple(np.percentile(self.samples[:, i], [2.5, 97.5])) if len(self.samples) else None

    @staticmethod
    def loss(C, u) -> np.ndarray:
        return u[..., 0] + u[..., 1] * np.asarray(C, dtype=float) ** -u[..., 2]

    @staticmethod
    def compute(loss, u) -> np.ndarray:
        """The C at which the frontier u reaches `loss` (inf at or below its E)."""
        with np.errstate(all="ignore"):
            excess = np.asarray(loss, dtype=float) - u[..., 0]
            return np.where(excess > 0, (excess / u[..., 1]) ** (-1.0 / u[..., 2]), np.inf)

    def multiplier(self, ref: "Frontier", C: float) -> dict:
        """k(C) from the two frontiers, with the interval over their resamples (paired by index)."""
        k = float(self.compute(self.loss(C, ref.values), self.values)) / C
        n = min(len(self.samples), len(ref.samples))
        if not n:
            return {"value": k, "ci": None}
        ks = self.compute(self.loss(C, ref.samples[:n]), self.samples[:n]) / C
        return {"value": k, "ci": interval(ks)}


def fitted(*frontiers) -> bool:
    """Every one of the frontiers exists and was fitted (its envelope had 4 or more points)."""
    return all(fr is not None and fr.values is not None for fr in frontiers)


def measured_compute(fr: Frontier, ref: Frontier, cmax: float, cmax_ref: float) -> float:
    """The largest compute c of the reference at which k(c) is measured on both sides: c within the reference's
    largest measured C (cmax_ref), and the family's frontier reaching the reference's loss at c within its own
    largest measured C (cmax): c* = min(cmax_ref, C_ref(L_fam(cmax))), from the frontiers' point estimates."""
    return min(cmax_ref, float(Frontier.compute(Frontier.loss(cmax, fr.values), ref.values)))


def crossover(fr: Frontier, ref: Frontier, lo: float, hi: float) -> float | None:
    """The compute c in [lo, hi] (the reference's measured range) at which the two frontiers' k(c) = 1 (the
    families are equally efficient there), from their point estimates; the lowest such c on a grid of 400 in log c,
    refined by bisection. None when k - 1 keeps one sign over the range."""

    def log_k(c):
        with np.errstate(all="ignore"):
            return np.log(Frontier.compute(Frontier.loss(c, ref.values), fr.values) / c)

    cs = np.geomspace(lo, hi, 400)
    sign = np.sign(log_k(cs))
    flips = np.flatnonzero(sign[:-1] * sign[1:] < 0)
    if not len(flips):
        return None
    a, b = math.log(cs[flips[0]]), math.log(cs[flips[0] + 1])
    for _ in range(60):
        mid = (a + b) / 2
        a, b = (mid, b) if np.sign(log_k(math.exp(mid))) == sign[flips[0]] else (a, mid)
    return math.exp((a + b) / 2)
