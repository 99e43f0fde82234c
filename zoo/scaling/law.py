"""The law L(N, D) = E + A / N^alpha + B / D^beta, its closed forms and the points it can be fitted from."""

from __future__ import annotations

import numpy as np

PARAMS = ("E", "A", "B", "alpha", "beta")
DERIVED = ("a", "b", "G")
N_FIT = len(PARAMS)  # parameters fitted: the fewest points a fit accepts
MIN_DISTINCT = 3  # distinct N (and D) that identify E + A / N^alpha (B / D^beta): 3 unknowns, one level each


class ScalingError(ValueError):
    """Bad input to the fit (a missing column, a non-positive value, too few points); the CLI exits with 2."""


def with_log_floor(u, floor: bool) -> tuple:
    """A fitter's log-space parameters (log E, log A, log B, alpha, beta) from its free ones `u`: `u` itself with a
    floor; (-inf, *u) without one (E = 0, a form without an irreducible loss such as Kaplan et al. 2020's)."""
    return tuple(u) if floor else (-np.inf, *u)


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


def allocation_g(E, A, B, alpha, beta):
    """G = (alpha A / (beta B))^(1 / (alpha + beta)) (Hoffmann et al. 2022, appendix D.2)."""
    return np.exp((np.log(alpha * A) - np.log(beta * B)) / (alpha + beta))


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
