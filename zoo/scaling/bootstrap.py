"""The fit's bootstrap: groups and strata of the points, resample weights, the refits and percentile intervals."""

from __future__ import annotations

import math

import numpy as np

from zoo.scaling.huber import LBFGSB, HuberProblem, best_start
from zoo.scaling.law import DERIVED, N_FIT, PARAMS, ScalingError, allocation_exponents, allocation_g


def resample_units(groups, strata, n: int, kept: np.ndarray, bootstrap: int):
    """(members, units, lone): each kept point's group (group_members; None without groups) and the strata's units
    (strata_units). Raises ScalingError as they do."""
    members = None if groups is None else group_members(groups, n, kept, bootstrap)
    return (members, *strata_units(strata, n, kept, members, bootstrap))


def group_members(groups, n: int, kept: np.ndarray, bootstrap: int) -> np.ndarray:
    """Each kept point's group index 0 .. G-1 from `groups` (one label per input point). Raises ScalingError for
    another length, or (with bootstrap) fewer than 2 groups among the kept points: resamples would all be equal."""
    labels = _one_per_point(groups, n, "groups", "group", "its run")
    members = np.unique(np.asarray(groups)[kept], return_inverse=True)[1].ravel()
    if bootstrap and members.max() < 1:
        raise ScalingError(
            f"every point fitted is in one group ({labels[kept[0]]!r}): resampling whole groups needs at least 2 "
            "(--group names each point's run)"
        )
    return members


def strata_units(strata, n: int, kept: np.ndarray, members, bootstrap: int) -> tuple[list[np.ndarray] | None, int]:
    """(units, lone): units[s] the indices of stratum s's units (the groups of `members`, else the kept points);
    None without strata (the plain bootstrap). lone: strata holding one unit. Raises ScalingError for strata of
    another length or with a missing value, a group whose points are in two strata, or (with bootstrap) strata
    that each hold one unit: every resample would equal the data."""
    if strata is None:
        return None, 0
    n_units = len(kept) if members is None else int(members.max()) + 1
    labels = _one_per_point(strata, n, "strata", "stratum", "its size")
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


def _one_per_point(values, n: int, name: str, one: str, which: str) -> np.ndarray:
    """`values` (the argument `name`) as an object array of n labels, one `one` per point. Raises ScalingError for
    another shape or a missing label (None or NaN), asking for each point's (`which`)."""
    labels = np.asarray(values, dtype=object)
    if labels.shape != (n,):
        raise ScalingError(f"{name} must give one {one} per point: {n} points, got shape {labels.shape}")
    if any(v is None or (isinstance(v, float) and not math.isfinite(v)) for v in labels):
        raise ScalingError(f"{name} holds a missing {one} (None or NaN): give every point its {one} ({which})")
    return labels


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


def bootstrap_samples(problem: HuberProblem, u_hat, boot_starts, bootstrap, seed, members=None, units=None):
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
        u, _, moved, why = best_start(problem, boot_starts, w)
        if not moved and np.max(np.abs(problem.value_and_grad(u_hat, w)[1])) > LBFGSB["gtol"]:
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


def bootstrap_intervals(problem: HuberProblem, u_hat, starts, bootstrap, seed, level, members, units, lone):
    """The bootstrap of the full-data fit u_hat, each resample refitted from u_hat and `starts` (bootstrap_samples):
    (samples, ci, notes, n_unconverged); notes first on resamples that did not converge, last on `lone` strata of
    one unit (resample_units)."""
    boot_starts = np.vstack([u_hat[None, :], starts])
    samples, reasons = bootstrap_samples(problem, u_hat, boot_starts, bootstrap, seed, members, units)
    ci, notes = intervals(samples, level)
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
    return samples, ci, notes, len(reasons)


def intervals(samples: np.ndarray, level: float):
    """Percentile intervals at `level` of PARAMS and DERIVED from the (k, 5) samples.

    Returns (ci, notes): ci maps each name to (lo, hi) or None (no samples, or some resample non-finite, or
    alpha <= 0 or beta <= 0 for a, b, G); notes say why an interval is missing.
    """
    notes = []
    ci: dict[str, tuple[float, float] | None] = dict.fromkeys((*PARAMS, *DERIVED))
    bootstrap = len(samples)
    if not bootstrap:
        return ci, notes
    lo, hi = percentiles(samples, level)
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
        derived = np.column_stack([*allocation_exponents(alpha, beta), allocation_g(*samples.T)])
    for i, k in enumerate(DERIVED):
        if np.all(np.isfinite(derived[:, i])):
            ci[k] = tuple(float(v) for v in percentiles(derived[:, i], level))
        else:
            notes.append(f"some resamples give a non-finite {k}: no interval for {k}")
    return ci, notes


def percentiles(x: np.ndarray, level: float):
    """The (lower, upper) percentiles of x along axis 0 of the central interval at `level`."""
    tail = 50.0 * (1.0 - level)
    return np.percentile(x, [tail, 100.0 - tail], axis=0)
