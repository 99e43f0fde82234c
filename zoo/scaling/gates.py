"""The gates that say whether a family's law can be trusted (docs/scaling-laws.md, "The gates"): each a verdict
("pass", "FAIL" or "cannot check": a design that cannot judge it) and why, from the statistics of
zoo.scaling.checks and the compute frontiers of zoo.scaling.frontier."""

import numpy as np

from zoo.scaling.checks import (
    at_bound,
    holdout,
    lack_of_fit,
    leave_one_size_out,
    long_reach,
    residual_rms,
    seed_noise,
    widen,
    widened_ci,
)
from zoo.scaling.frontier import fitted, measured_compute, multiplier
from zoo.scaling.points import REFERENCE, flops_ratio, single_seed_sizes

FIT_RMS = 0.015  # the law's relative residual rms on its own points, at most ...
FIT_NOISE = 2.0  # ... and at most this many times the seed noise
LACK_LEVEL = 0.95  # chi^2 / dof at most its 95% quantile for a law that holds (zoo.scaling.checks.lack_of_fit)
HOLDOUT = 0.03  # every point of the largest size predicted within this (aim 2%) by a fit without it
HOLDOUT_AIM = 0.02
REACH = 4.0  # the long reach: a fit on the sizes of N <= N_max / REACH predicts the largest size's points ...
REACH_ERROR = 0.03  # ... each within this ...
REACH_BIAS = 0.01  # ... with a mean signed error within +- this
LOSO = 0.10  # alpha and beta refitted without any one size move by at most this
EXPONENT_HALF_WIDTH = 0.15  # each exponent's 95% interval (widened by the Birge ratio) narrower than +- this
K_RATIO = 2.0  # k(C)'s 95% interval: upper bound at most this times the lower
GATES = {
    "fit": "fit",
    "lack": "lack of fit",
    "holdout": "hold-out",
    "reach": "long reach",
    "loso": "leave one size out",
    "params": "parameters",
    "k": "k(C)",
}


def family_checks(fit, points: list[dict]) -> dict:
    """The statistics of one family's law `fit` on its points: {"rms", "noise", "lack", "holdout", "reach",
    "loso", "bound", "birge"} (zoo.scaling.checks; each None where the design cannot give it)."""
    lack = lack_of_fit(fit, points, LACK_LEVEL)
    return {
        "rms": residual_rms(fit, points),
        "noise": seed_noise(points),
        "lack": lack,
        "birge": lack["birge"] if lack else 1.0,
        "holdout": holdout(points) if len({p["N"] for p in points}) >= 3 else None,
        "reach": long_reach(points, REACH),
        "loso": leave_one_size_out(fit, points),
        "bound": at_bound(fit, points),
    }


def fit_gate(c: dict) -> tuple[str, str]:
    rms, noise = c["rms"], c["noise"]
    if noise is None:
        return ("cannot check" if rms <= FIT_RMS else "FAIL", f"rms {rms:.2%}; no repeated seeds to compare with")
    ok = rms <= FIT_RMS and rms <= FIT_NOISE * noise
    return ("pass" if ok else "FAIL", f"rms {rms:.2%}, {rms / noise:.1f}x the seed noise {noise:.2%}")


def lack_gate(c: dict) -> tuple[str, str]:
    lack = c["lack"]
    if lack is None:
        return ("cannot check", "fewer than 6 cells of 2 or more seeds")
    why = (
        f"chi2/dof = {lack['ratio_cell']:.3g} (the law, each cell's se); {lack['ratio']:.3g} for the form (weighted "
        f"fit to the {lack['cells']} cell means, se pooled per size; bound {lack['limit']:.2f})"
    )
    return ("pass" if lack["ratio"] <= lack["limit"] else "FAIL", why)


def holdout_gate(c: dict, n_sizes: int) -> tuple[str, str]:
    h = c["holdout"]
    if h is None:
        return ("cannot check", f"{n_sizes} sizes: a fit without the largest needs 2 or more left")
    worst = max(h["errors"])
    return ("pass" if worst <= HOLDOUT else "FAIL", f"largest error {worst:.2%} at N = {h['N']:,.0f}")


def reach_gate(c: dict) -> tuple[str, str]:
    r = c["reach"]
    if r is None:
        return ("cannot check", f"fewer than 3 sizes of N <= N_max / {REACH:g} to fit")
    ok = r["worst"] <= REACH_ERROR and abs(r["mean"]) <= REACH_BIAS
    why = f"fit on {', '.join(r['sizes'])}: largest error {r['worst']:.2%}, mean signed {r['mean']:+.2%}"
    return ("pass" if ok else "FAIL", why)


def loso_gate(c: dict, n_sizes: int) -> tuple[str, str]:
    lo = c["loso"]
    if lo is None:
        return ("cannot check", f"{n_sizes} sizes: leaving one out needs 3 or more")
    worst = max(lo["rows"], key=lambda r: max(abs(r["d_alpha"]), abs(r["d_beta"])))
    if worst["error"]:
        return ("FAIL", f"without {worst['size']}: {worst['error']}")
    k = "alpha" if abs(worst["d_alpha"]) >= abs(worst["d_beta"]) else "beta"
    why = f"largest move {k} {worst['d_' + k]:+.3f} without {worst['size']}"
    return ("pass" if lo["worst"] <= LOSO else "FAIL", why)


def params_gate(fit, c: dict, points: list[dict], budgets: int) -> tuple[str, str]:
    """No parameter at a bound, and each exponent's 95% interval, widened by the Birge ratio, within +-0.15."""
    bound, lone, s = c["bound"], single_seed_sizes(points), c["birge"]
    ci = widened_ci(fit, s)
    widths = {k: (ci[k][1] - ci[k][0]) / 2 for k in ("alpha", "beta") if ci.get(k)}
    wide = [f"{k} ±{w:.2f}" for k, w in widths.items() if not w <= EXPONENT_HALF_WIDTH]
    if budgets < 2:
        return ("cannot check", "one budget per size: beta is not identified")
    if lone:  # a parameter at a bound fails whatever the intervals
        one_seed = f"one seed at {', '.join(lone)}: the bootstrap over seeds within sizes cannot vary it (2 or more)"
        return ("FAIL", "; ".join(bound)) if bound else ("cannot check", one_seed)
    if not widths:
        return ("cannot check", "no bootstrap intervals")
    why = "; ".join(bound + wide) or ", ".join(f"{k} ±{w:.2f}" for k, w in widths.items())
    if s > 1:
        why += f" (widened x{s:.2f}, the Birge ratio)"
    return ("pass" if not bound and not wide else "FAIL", why)


def k_gate(arch: str, by_arch: dict, fits: dict, frontiers: dict, birge: dict) -> tuple[str, str]:
    """The frontiers' k(C) at C* has a 95% interval whose upper bound is at most K_RATIO x its lower; the law's k
    there (its interval widened by the larger of the two families' Birge ratios, in log space) beside it."""
    ref_pts, ref_fr = by_arch.get(REFERENCE), frontiers.get(REFERENCE)
    if arch == REFERENCE:
        return ("pass", "the reference (k = 1)")
    if REFERENCE not in fits or not ref_pts:
        return ("cannot check", f"{REFERENCE} was not fitted")
    if not fitted(frontiers.get(arch), ref_fr):
        return ("cannot check", "no compute frontier (its envelope has fewer than 4 points)")
    pts = by_arch[arch]
    c = measured_compute(frontiers[arch], ref_fr, max(p["C"] for p in pts), max(p["C"] for p in ref_pts))
    k = frontiers[arch].multiplier(ref_fr, c)
    law = multiplier(fits[arch], fits[REFERENCE], c, flops_ratio(pts), flops_ratio(ref_pts))
    law_ci = widen(law["value"], law["ci"], max(birge.get(arch, 1.0), birge.get(REFERENCE, 1.0)), log=True)
    why = f"k = {fmt(k['value'], k['ci'])} at C = {c:.3g} (law: {fmt(law['value'], law_ci)})"
    lone = sorted(set(single_seed_sizes(pts)) | set(single_seed_sizes(ref_pts)))
    if lone:
        return ("cannot check", f"{why}; one seed at {', '.join(lone)} (2 or more)")
    if k["ci"] is None:
        return ("cannot check", "no bootstrap intervals")
    lo, hi = k["ci"]
    return ("pass" if lo > 0 and np.isfinite(hi) and hi <= K_RATIO * lo else "FAIL", why)


def gates(by_arch: dict, fits: dict, frontiers: dict, checks: dict) -> dict:
    """Per family, each gate's verdict {gate: (state, why)} for the gates of GATES, and "trusted": every gate
    passed. checks: {arch: family_checks(fit, points)}; frontiers: {arch: Frontier} (zoo's FLOP count)."""
    out = {}
    birge = {arch: c["birge"] for arch, c in checks.items()}
    for arch, pts in by_arch.items():
        fit = fits.get(arch)
        if fit is None:
            out[arch] = {**{k: ("FAIL", "no law was fitted") for k in GATES}, "trusted": False}
            continue
        c, n_sizes = checks[arch], len({p["N"] for p in pts})
        budgets = max(sum(1 for q in pts if q["run"] == r) for r in {p["run"] for p in pts})
        g = {
            "fit": fit_gate(c),
            "lack": lack_gate(c),
            "holdout": holdout_gate(c, n_sizes),
            "reach": reach_gate(c),
            "loso": loso_gate(c, n_sizes),
            "params": params_gate(fit, c, pts, budgets),
            "k": k_gate(arch, by_arch, fits, frontiers, birge),
        }
        out[arch] = {**g, "trusted": all(v[0] == "pass" for v in g.values())}
    return out


def fmt(v: float, ci=None, digits: int = 3) -> str:
    """v [lo, hi] with `digits` significant digits."""
    f = lambda x: "inf" if not np.isfinite(x) else f"{x:.{digits}g}"  # noqa: E731
    return f(v) + (f" [{f(ci[0])}, {f(ci[1])}]" if ci is not None else "")
