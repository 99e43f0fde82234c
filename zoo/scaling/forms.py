"""The law's form as a choice to test: Chinchilla's against two published alternatives, by the long reach (a fit on
the sizes of N <= N_max / 4 predicting the largest size's points).

- chinchilla: L = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022; zoo.scaling.fit).
- data-constrained: the same law in the effective data D' of Muennighoff et al. 2023 (eq. 5, with N' = N):
  U_D the unique tokens (the training split), R_D = D / U_D - 1 the repetitions,
  D' = U_D + U_D R*_D (1 - exp(-R_D / R*_D)), R*_D fitted (profiled: the Chinchilla fit at each R*_D, the lowest
  objective), or Muennighoff's 15.4 when no fitted point reads its data more than once (R*_D then moves nothing
  the fit sees).
- kaplan: L = [(N_c / N)^(alpha_N / alpha_D) + D_c / D]^alpha_D (Kaplan et al. 2020, eq. 1.5), fitted with the
  same Huber loss on log L.

zoo keeps the form, Chinchilla or data-constrained, whose worst long-reach error over the families is smaller
(Chinchilla on a tie within 0.1 points, the fewer parameters); Kaplan's is reported beside them, not kept: it has no
irreducible loss E, which zoo's allocation and frontiers assume."""

import itertools
import math

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from zoo.scaling.checks import LONG_REACH_SIZES
from zoo.scaling.fit import fit_scaling_law
from zoo.scaling.huber import LBFGSB, huber_sum
from zoo.scaling.law import with_log_floor

MUENNIGHOFF_R_STAR_D = 15.4  # Muennighoff et al. 2023, sec. 4 (their fit: R*_D = 15.4, R*_N = 5.3)
SHAKESPEARE_PLAYS_TRAIN_TOKENS = 4_470_805  # data=shakespeare_plays' training split, characters (tests check it)
FORMS = ("chinchilla", "data-constrained", "kaplan")
TIE = 0.001  # long-reach errors closer than this keep Chinchilla's form


def effective_tokens(D, U, r_star: float) -> np.ndarray:
    """D' = U_D + U_D R*_D (1 - exp(-R_D / R*_D)), U_D = min(D, U), R_D = D / U_D - 1 (Muennighoff et al. 2023,
    eq. 5): D itself up to one epoch of the U unique tokens, each repetition worth less after."""
    D, U = np.asarray(D, dtype=float), np.asarray(U, dtype=float)
    unique = np.minimum(D, U)
    return unique + unique * r_star * (1.0 - np.exp(-(D / unique - 1.0) / r_star))


def fit_data_constrained(N, D, L, U) -> dict:
    """The Chinchilla law in D' (effective_tokens): {"fit": its ScalingFit on D', "r_star", "fitted": whether
    R*_D was fitted (some point reads its data more than once) or is Muennighoff's}. R*_D: profiled over
    10^-1 .. 10^2.5 (a grid of 15 in log, then a bounded refinement around the best)."""
    N, D, L, U = (np.asarray(v, dtype=float) for v in (N, D, L, U))
    if not np.any(D > U):
        r_star = MUENNIGHOFF_R_STAR_D
        return {"fit": _fit(N, effective_tokens(D, U, r_star), L), "r_star": r_star, "fitted": False}
    objective = lambda log_r: _fit(N, effective_tokens(D, U, math.exp(log_r)), L).objective  # noqa: E731
    grid = np.linspace(math.log(0.1), math.log(10**2.5), 15)
    best = int(np.argmin([objective(g) for g in grid]))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    log_r = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 0.02}).x
    r_star = math.exp(float(log_r))
    return {"fit": _fit(N, effective_tokens(D, U, r_star), L), "r_star": r_star, "fitted": True}


def _fit(N, D, L):
    return fit_scaling_law(N, D, L, bootstrap=0, n_starts=5)


def kaplan_law(N, D, params) -> np.ndarray:
    """L = [(N_c / N)^(alpha_N / alpha_D) + D_c / D]^alpha_D; params (log N_c, log D_c, alpha_N, alpha_D)."""
    log_nc, log_dc, a_n, a_d = params
    N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
    return np.exp(a_d * np.logaddexp(a_n / a_d * (log_nc - np.log(N)), log_dc - np.log(D)))


def fit_kaplan(N, D, L) -> np.ndarray:
    """(log N_c, log D_c, alpha_N, alpha_D) minimising the summed Huber loss (delta 1e-3, as zoo.scaling.huber) of
    log L_hat - log L. The optimiser works in centred coordinates, log L = alpha_D LSE(a - r x, b - y) with
    x = log N - mean, y = log D - mean, r = alpha_N / alpha_D (a, b the terms' logs at the mean point): L-BFGS-B
    (r, alpha_D in [0.001, 5]) from the 10 best of a grid of 500 starts."""
    x, y = np.log(np.asarray(N, dtype=float)), np.log(np.asarray(D, dtype=float))
    mx, my, log_l = x.mean(), y.mean(), np.log(np.asarray(L, dtype=float))

    def loss(u):
        a, r, b, a_d = u
        return huber_sum(a_d * np.logaddexp(a - r * (x - mx), b - (y - my)) - log_l)

    terms, exps = np.linspace(-4.0, 4.0, 5), (0.1, 0.3, 0.6, 1.0, 2.0)
    grid = sorted((np.array(u) for u in itertools.product(terms, exps, terms, (0.05, 0.1, 0.3, 1.0))), key=loss)
    bounds = [(-50, 50), (1e-3, 5.0), (-50, 50), (1e-3, 5.0)]
    a, r, b, a_d = min(
        (minimize(loss, u0, method="L-BFGS-B", bounds=bounds) for u0 in grid[:10]), key=lambda e: e.fun
    ).x
    return np.array([(a + r * mx) / r, b + my, r * a_d, a_d])


def kaplan_e_law(N, D, E, A, B, alpha, beta) -> np.ndarray:
    """L = E + [(A / N^alpha)^(1/beta) + (B / D^beta)^(1/beta)]^beta: Kaplan et al. 2020's eq. 1.5 with
    N_c = A^(1/alpha), D_c = B^(1/beta), alpha_N = alpha, alpha_D = beta, and an irreducible loss E (Henighan et al.
    2020 add one to Kaplan's laws). Chinchilla's parameters and limits: E + A / N^alpha as D -> inf, E + B / D^beta
    as N -> inf; between them a doubling of D gains less where the N term dominates. N, D: broadcast, positive."""
    x, y = np.log(np.asarray(N, dtype=float)), np.log(np.asarray(D, dtype=float))
    inner = np.logaddexp((np.log(A) - alpha * x) / beta, np.log(B) / beta - y)
    return E + np.exp(beta * inner)


def fit_kaplan_e(N, D, L, weights=None, starts=(), n_grid: int = 10, floor: bool = True) -> np.ndarray:
    """(E, A, B, alpha, beta) of kaplan_e_law minimising the weighted Huber loss (delta 1e-3, as zoo.scaling.huber)
    of log L_hat - log L. Centred coordinates u = (log E, log A - alpha mean(log N), log B - beta mean(log D),
    alpha, beta); L-BFGS-B (alpha, beta in [0.001, 5]) from each of `starts` ((E, A, B, alpha, beta) tuples, e.g.
    the Chinchilla fit) and the n_grid best of a grid of 1,024. weights: one per point (a bootstrap's; default
    1). floor=False: E fixed at 0, Kaplan et al. 2020's eq. 1.5 itself (zoo.scaling.forms.kaplan_law's form), the
    other four fitted; a fit without `starts` also starts from fit_kaplan's (unweighted) fit: where the N term is
    small this grid's starts end in a local minimum with the N term switched off. A refit from `starts` (a
    resample's, a subset's: already a good point) does not pay for it again."""
    if not floor and not starts:
        log_nc, log_dc, a_n, a_d = fit_kaplan(N, D, L)  # N_c = A^(1/alpha), D_c = B^(1/beta)
        starts = (*starts, (0.0, math.exp(log_nc * a_n), math.exp(log_dc * a_d), a_n, a_d))
    x, y = np.log(np.asarray(N, dtype=float)), np.log(np.asarray(D, dtype=float))
    mx, my, log_l = x.mean(), y.mean(), np.log(np.asarray(L, dtype=float))
    w = np.ones_like(log_l) if weights is None else np.asarray(weights, dtype=float)

    first = 0 if floor else 1  # without a floor, u omits log E (e = -inf: logaddexp(e, t) = t)

    def loss(u):
        e, a, b, al, be = with_log_floor(u, floor)
        return huber_sum(np.logaddexp(e, be * np.logaddexp((a - al * (x - mx)) / be, b / be - (y - my))) - log_l, w)

    def to_u(t):
        with np.errstate(divide="ignore"):  # a start's E of 0 (a fit without a floor): log 0, dropped below
            return np.array([np.log(t[0]), np.log(t[1]) - t[3] * mx, np.log(t[2]) - t[4] * my, t[3], t[4]])[first:]

    levels, exps = (-4.0, -2.0, 0.0, 1.0), (0.1, 0.3, 0.6, 1.0)
    floors = (-1.0, -0.5, 0.0, 0.5) if floor else ((),)
    grid = sorted((np.hstack(u) for u in itertools.product(floors, levels, levels, exps, exps)), key=loss)
    bounds = [(-50, 50), (-50, 50), (-50, 50), (1e-3, 5.0), (1e-3, 5.0)][first:]
    u0s = [to_u(t) for t in starts] + grid[:n_grid]
    best = min(
        (minimize(loss, u0, method="L-BFGS-B", bounds=bounds, options=LBFGSB) for u0 in u0s), key=lambda r: r.fun
    ).x
    e, a, b, al, be = with_log_floor(best, floor)
    return np.array([np.exp(e), np.exp(a + al * mx), np.exp(b + be * my), al, be])


def reach_by_form(points: list[dict], U: float, reach: float = 4.0) -> dict | None:
    """Each form's long reach on one family's points: {form: {"signed": (predicted - measured) / measured of the
    largest size's points, "worst", "mean", "note"}}; None with fewer than 3 sizes of N <= N_max / reach. U: the
    unique training tokens (a point's own train_tokens where it has one)."""
    top = max(p["N"] for p in points)
    train = [p for p in points if p["N"] <= top / reach]
    test = [p for p in points if p["N"] == top]
    if len(train) < 6 or len({p["N"] for p in train}) < LONG_REACH_SIZES:  # as zoo.scaling.checks.long_reach
        return None
    cols = lambda pts, k: np.array([p[k] for p in pts], dtype=float)  # noqa: E731
    units = lambda pts: np.array([p.get("train_tokens") or U for p in pts], dtype=float)  # noqa: E731
    Nt, Dt, Lt = (cols(train, k) for k in ("N", "tokens", "loss"))
    Nx, Dx, Lx = (cols(test, k) for k in ("N", "tokens", "loss"))
    dc = fit_data_constrained(Nt, Dt, Lt, units(train))
    preds = {
        "chinchilla": _fit(Nt, Dt, Lt).predict(Nx, Dx),
        "data-constrained": dc["fit"].predict(Nx, effective_tokens(Dx, units(test), dc["r_star"])),
        "kaplan": kaplan_law(Nx, Dx, fit_kaplan(Nt, Dt, Lt)),
    }
    how = "fitted" if dc["fitted"] else "Muennighoff's: no point fitted reads its data twice"
    notes = {"data-constrained": f"R*_D = {dc['r_star']:.3g} ({how})"}
    out = {}
    for form, pred in preds.items():
        signed = (pred - Lx) / Lx
        out[form] = {"signed": signed, "worst": float(np.max(np.abs(signed))), "mean": float(np.mean(signed))}
        out[form]["note"] = notes.get(form, "")
    return out


def compare_forms(by_arch: dict, U: float) -> dict:
    """{"families": {arch: reach_by_form(...)}, "kept": the form kept ("chinchilla" or "data-constrained"),
    "worst": {form: its largest long-reach error over the families}, "epochs": the most any point reads its
    training tokens}."""
    families = {arch: reach_by_form(pts, U) for arch, pts in by_arch.items()}
    judged = [r for r in families.values() if r is not None]
    worst = {f: max((r[f]["worst"] for r in judged), default=math.nan) for f in FORMS}
    kept = "chinchilla"
    if judged and worst["data-constrained"] < worst["chinchilla"] - TIE:
        kept = "data-constrained"
    epochs = max(p["tokens"] / (p.get("train_tokens") or U) for pts in by_arch.values() for p in pts)
    return {"families": families, "kept": kept, "worst": worst, "epochs": epochs}
