"""The report's Scaling section: a law L(N, D) = E + A / N^alpha + B / D^beta fitted per architecture to the points
of runs that differ in size (experiment=scaling), the gates that say whether each law can be trusted, and the
comparisons it supports.

A point is one budget of a run: N = its non-embedding parameters (Kaplan et al. 2020), D = the training tokens,
C = the measured training FLOPs (zoo.model.cost through the objective, so ENTP's re-reading and the encoder's
source tokens count) and the continuation loss (val/cont_loss, the tokens every architecture predicts alike).
experiment=scaling's cells carry their points in results.json (zoo.run.scaling_cell: each a cool-down branch,
or a budget trained alone in a SIZE_seedN_cosine check cell); other LM runs give one point per validation of
their CSV log. The law's frontier in measured compute uses each family's FLOPs per token: C = 6 r N D, with r
the family's mean C / (6 N D) over its points. Beside it, the compute frontier L*(C) = E + A C^-gamma is fitted
to each family's lower envelope of (C, loss) (Kaplan et al. 2020; Tay et al. 2022)."""

import csv
import math
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from zoo.report.refit import fit_options, number, refit_sentence
from zoo.report.runs import arch_label, read_curves
from zoo.report.scaling_tune import tune_section
from zoo.scaling.fit import PARAMS, ScalingError, compute_optimal, fit_scaling_law, resample_weights

LOSS = ("val/cont_loss", "val/loss")  # the metric fitted: the first a run logs
BOOTSTRAP = 200  # resamples of each fit (its intervals and the compute multiplier's)
REFERENCE = "decoder_only"  # the compute multiplier k(C) is relative to its frontier
# the gates (docs/scaling-laws.md)
FIT_RMS = 0.015  # the law's relative residual rms on its own points, at most ...
FIT_NOISE = 2.0  # ... and at most this many times the seed noise
HOLDOUT = 0.03  # every point of the largest size predicted within this (aim 2%) by a fit without it
HOLDOUT_AIM = 0.02
EXPONENT_HALF_WIDTH = 0.15  # each exponent's 95% interval narrower than +- this
K_RATIO = 2.0  # k(C)'s 95% interval: upper bound at most this times the lower
COOLDOWN_CHECK = 0.01  # a cool-down point within this of the budget trained alone
MAX_EPOCHS = 4.0  # training tokens seen at most this often by the largest run (Muennighoff et al. 2023)
POINTS_CSV = ("arch", "size", "seed", "n_params", "tokens", "flops", "loss", "lr")
FITTED_KINDS = ("cooldown", "curve")  # the points a law is fitted to (not a cosine check's, not a tuning run's)


def scaling_points(runs: list[dict]) -> list[dict]:
    """Every point of every finished LM run that records params_non_embedding, as {arch, size, seed, run (the
    group a bootstrap draws whole: a trunk and its branches, or a run's evaluations), N, D (tokens), C, tokens,
    seconds, loss, kind (cooldown, cosine or curve), tokens_per_param, steps}."""
    points = []
    for run in runs:
        if run.get("status", "ok") != "ok" or run.get("task") != "lm" or not run.get("params_non_embedding"):
            continue
        N = float(run["params_non_embedding"])
        cell = run.get("scaling")
        if cell and cell.get("points") is not None:
            for p in cell["points"]:
                points.append(
                    {
                        "arch": arch_label(run),
                        "size": str(p["size"]),
                        "seed": int(p["seed"]),
                        "run": f"{arch_label(run)}|{p['size']}|{p['seed']}|{p['kind']}",
                        "N": float(p["n_params"]),
                        "C": float(p["flops"]),
                        "D": float(p["tokens"]),
                        "tokens": float(p["tokens"]),
                        "seconds": float(p["seconds"]),
                        "loss": float(p["loss"]),
                        "lr": p.get("lr", ""),
                        "kind": p["kind"],
                        "tokens_per_param": float(p["tokens_per_param"]),
                        "steps": int(p["steps"]),
                        "train_tokens": cell.get("train_tokens"),
                    }
                )
            continue
        curves = read_curves(Path(run["run_dir"]))
        metric = next((m for m in LOSS if m in curves), None)
        if metric is None or "cost/flops" not in curves or "cost/tokens" not in curves:
            continue
        cost = {k: dict(curves.get(f"cost/{k}", [])) for k in ("flops", "tokens", "seconds")}
        for step, loss in curves[metric]:
            C, tokens = cost["flops"].get(step), cost["tokens"].get(step)
            if C and tokens:
                points.append(
                    {
                        "arch": arch_label(run),
                        "size": f"N{int(N)}",
                        "seed": run.get("seed"),
                        "run": run["run_dir"],
                        "N": N,
                        "C": C,
                        "D": tokens,
                        "tokens": tokens,
                        "seconds": cost["seconds"].get(step),
                        "loss": loss,
                        "lr": "",
                        "kind": "curve",
                        "tokens_per_param": tokens / N,
                        "steps": int(step) + 1,
                        "train_tokens": None,
                    }
                )
    return points


def write_points_csv(points: list[dict], path: Path) -> Path:
    """points.csv: one row per fitted point (FITTED_KINDS), header POINTS_CSV (lr: the peak rate the point's run
    ran, empty where a run does not record it), numbers as fitted (zoo.report.refit.number); refit one
    architecture with zoo.report.refit.refit_command."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(POINTS_CSV)
        for p in points:
            w.writerow(
                [
                    p["arch"],
                    p["size"],
                    p["seed"],
                    number(p["N"]),
                    number(p["tokens"]),
                    f"{p['C']:.6g}",
                    number(p["loss"]),
                    f"{float(p['lr']):g}" if p.get("lr") not in (None, "") else "",
                ]
            )
    return path


def fit_points(points: list[dict], bootstrap: int | None = None, seed: int = 0):
    """fit_scaling_law of the points' (N, D tokens, loss); a bootstrap resample draws whole runs (a trunk and its
    branches share their weights up to the branch, and a run's evaluations are correlated) within each size when
    every size has 2 or more runs (the sizes are the design, the seeds the sampling: every resample keeps every
    size and its number of runs); otherwise across sizes (wider: a resample may lack a size; the gates on the
    intervals then say they cannot check). A run is its (size, seed) and a stratum its size, labelled as
    points.csv's columns (zoo.report.refit.fit_options). Returns a zoo.scaling.fit.ScalingFit; its `options` are
    fit_scaling_law's (refit_command prints them)."""
    N, D, L = (np.array([p[k] for p in points], dtype=float) for k in ("N", "D", "loss"))
    bootstrap = BOOTSTRAP if bootstrap is None else bootstrap
    options = fit_options(points, bootstrap, strata=bool(bootstrap) and not single_seed_sizes(points, "N"))
    fit = fit_scaling_law(N, D, L, **{**options, "seed": seed})
    fit.options = {**options, "seed": seed}
    return fit


def single_seed_sizes(points: list[dict], key: str = "size") -> list:
    """The sizes (their `key`) with one run (seed): a bootstrap over runs within sizes cannot vary them."""
    runs = {}
    for p in points:
        runs.setdefault(p.get(key), set()).add(p["run"])
    return sorted((s for s, r in runs.items() if len(r) < 2), key=str)


def flops_ratio(points: list[dict]) -> float:
    """r = mean of C / (6 N D) over a family's points: its measured FLOPs per token in units of 6 N."""
    return float(np.mean([p["C"] / (6.0 * p["N"] * p["D"]) for p in points]))


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


def _interval(ks: np.ndarray):
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
    return {"value": k, "ci": _interval(ks)}


# --- the compute frontier L*(C) = E + A C^-gamma on the lower envelope ---


def envelope(points: list[dict]) -> list[dict]:
    """The lower envelope of (C, loss): the points with a lower loss than every point of smaller C."""
    out, best = [], math.inf
    for p in sorted(points, key=lambda p: (p["C"], p["loss"])):
        if p["loss"] < best:
            out.append(p)
            best = p["loss"]
    return out


def _fit_frontier(C: np.ndarray, L: np.ndarray) -> np.ndarray | None:
    """(E, A, gamma) of L = E + A C^-gamma by least squares in log L (scipy), E in [0, min L), from a small grid of
    starts; None with fewer than 4 points or no fit."""
    if len(C) < 4:
        return None
    x = np.log(C / np.exp(np.mean(np.log(C))))  # centred log C: A is the excess loss at the mean C

    def resid(u):
        E, logA, g = u
        return np.log(E + np.exp(logA - g * x)) - np.log(L)

    best = None
    for frac in (0.0, 0.5, 0.9):
        for g in (0.05, 0.2, 0.5):
            E0 = frac * L.min()
            u0 = (E0, np.log(max(np.exp(np.mean(np.log(L))) - E0, 1e-6)), g)
            try:
                r = least_squares(resid, u0, bounds=([0.0, -50.0, 1e-4], [L.min() * (1 - 1e-9), 50.0, 5.0]))
            except ValueError:
                continue
            if best is None or r.cost < best.cost:
                best = r
    if best is None:
        return None
    E, logA, g = best.x
    return np.array([E, np.exp(logA) * np.exp(np.mean(np.log(C))) ** g, g])


class Frontier:
    """The compute frontier of one family: (E, A, gamma) on its envelope and `samples`, the refits of bootstrap
    resamples of whole runs, within each size when every size has 2 or more (each resample's own envelope;
    zoo.scaling.fit.resample_weights)."""

    def __init__(self, points: list[dict], bootstrap: int | None = None, seed: int = 0):
        bootstrap = BOOTSTRAP if bootstrap is None else bootstrap
        env = envelope(points)
        C, L = (np.array([p[k] for p in env]) for k in ("C", "loss"))
        self.n_points = len(env)
        self.values = _fit_frontier(C, L)
        runs = sorted({p["run"] for p in points})
        stratified = not single_seed_sizes(points, "N")  # as fit_points (no N: one stratum of every run)
        of_run = {p["run"]: p.get("N") for p in points}
        by_size = {}
        for i, r in enumerate(runs):
            by_size.setdefault(of_run[r], []).append(i)
        units = [np.array(v) for v in by_size.values()] if stratified else [np.arange(len(runs))]
        rng = np.random.default_rng(seed)
        samples = []
        for _ in range(bootstrap if self.values is not None else 0):
            drawn_runs = {runs[i] for i in np.flatnonzero(resample_weights(rng, units, len(runs), stratified))}
            drawn = [p for p in points if p["run"] in drawn_runs]  # the envelope needs which runs, not how often
            e = envelope(drawn)
            u = _fit_frontier(np.array([p["C"] for p in e]), np.array([p["loss"] for p in e]))
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
        return {"value": k, "ci": _interval(ks)}


# --- checks ---


def holdout(points: list[dict]) -> dict | None:
    """Refit without the largest size and predict its points: {"N": that size, "errors": relative errors
    |predicted - measured| / measured, in C order}; None with fewer than 6 points, or one size, left to fit."""
    top = max(p["N"] for p in points)
    train = [p for p in points if p["N"] < top]
    test = sorted((p for p in points if p["N"] == top), key=lambda p: p["C"])
    if len(train) < 6 or not test or len({p["N"] for p in train}) < 2:  # one size left: no law to refit
        return None
    fit = fit_points(train, bootstrap=0)
    pred = fit.predict(np.array([p["N"] for p in test]), np.array([p["D"] for p in test]))
    return {"N": top, "errors": [abs(float(q) - p["loss"]) / p["loss"] for q, p in zip(pred, test)]}


def residual_rms(fit, points: list[dict]) -> float:
    """The law's relative residual rms on the points: sqrt(mean(((L - L_hat) / L)^2))."""
    pred = fit.predict(np.array([p["N"] for p in points]), np.array([p["D"] for p in points]))
    resid = np.array([(p["loss"] - q) / p["loss"] for p, q in zip(points, pred)])
    return float(np.sqrt(np.mean(resid**2)))


def seed_noise(points: list[dict]) -> float | None:
    """The seed noise of a family: at every (size, budget) with runs of several seeds, the relative sd of their
    losses (ddof 1); the rms over those. None without repeated seeds."""
    groups = {}
    for p in points:
        groups.setdefault((p["N"], round(p["tokens_per_param"], 6)), {})[p["seed"]] = p["loss"]
    sds = [np.std(list(g.values()), ddof=1) / np.mean(list(g.values())) for g in groups.values() if len(g) > 1]
    return float(np.sqrt(np.mean(np.square(sds)))) if sds else None


def at_bound(fit, points: list[dict]) -> list[str]:
    """The fitted parameters at a bound of the law's search: E collapsed to 0 (below 0.1% of the lowest loss), an
    exponent at 0 (below 0.005) or running away (above 3, outside Hoffmann's start grid 0 .. 2 by half of it);
    and a fit whose optimiser did not converge (zoo.scaling.fit's ScalingFit.converged)."""
    out = []
    if fit.values["E"] < 1e-3 * min(p["loss"] for p in points):
        out.append(f"E = {fit.values['E']:.3g} (collapsed to 0)")
    for k in ("alpha", "beta"):
        if not 0.005 < fit.values[k] < 3.0:
            out.append(f"{k} = {fit.values[k]:.3g}")
    if not fit.converged:
        out.append("the optimiser did not converge (" + "; ".join(fit.notes) + ")")
    return out


def steps_bound(points: list[dict]) -> dict:
    """The steps-bound check: for each pair of adjacent sizes and each point of the smaller one at a step count
    the larger also spans, the larger size's loss interpolated (linearly in log steps) at that step must be lower.
    {"pairs": checked comparisons, "failed": [(smaller N, larger N, steps, smaller loss, larger loss)]}."""
    by_size = {}
    for p in points:
        if p["seed"] == min(q["seed"] for q in points if q["N"] == p["N"]):
            by_size.setdefault(p["N"], []).append((p["steps"], p["loss"]))
    sizes = sorted(by_size)
    checked, failed = 0, []
    for small, large in zip(sizes, sizes[1:]):
        curve = sorted(by_size[large])
        s, loss = np.log([c[0] for c in curve]), np.array([c[1] for c in curve])
        for steps, l_small in sorted(by_size[small]):
            if len(curve) < 2 or not s[0] <= np.log(steps) <= s[-1]:
                continue
            checked += 1
            l_large = float(np.interp(np.log(steps), s, loss))
            if not l_large < l_small:
                failed.append((small, large, steps, l_small, l_large))
    return {"pairs": checked, "failed": failed}


def cooldown_check(points: list[dict]) -> list[dict]:
    """Each cosine-check point beside the cool-down point of the same family, size, seed and budget:
    {arch, size, tokens_per_param, cooldown, cosine, diff (relative to the cosine run's loss)}."""
    out = []
    for p in points:
        if p["kind"] != "cosine":
            continue
        twin = next(
            (
                q
                for q in points
                if q["kind"] == "cooldown"
                and (q["arch"], q["size"], q["seed"]) == (p["arch"], p["size"], p["seed"])
                and abs(q["tokens_per_param"] - p["tokens_per_param"]) < 1e-9
            ),
            None,
        )
        if twin is not None:
            out.append(
                {
                    "arch": p["arch"],
                    "size": p["size"],
                    "tokens_per_param": p["tokens_per_param"],
                    "cooldown": twin["loss"],
                    "cosine": p["loss"],
                    "rates": (twin.get("lr", ""), p.get("lr", "")),
                    "diff": (twin["loss"] - p["loss"]) / p["loss"],
                }
            )
    return out


def fmt(v: float, ci=None, digits: int = 3) -> str:
    """v [lo, hi] with `digits` significant digits."""
    f = lambda x: "inf" if not np.isfinite(x) else f"{x:.{digits}g}"  # noqa: E731
    return f(v) + (f" [{f(ci[0])}, {f(ci[1])}]" if ci is not None else "")


def _fits(by_arch: dict) -> tuple[dict, list[str]]:
    """{arch: ScalingFit} of every architecture with at least 6 points, and a warning for each without."""
    fits, warnings = {}, []
    for arch, pts in by_arch.items():
        if len(pts) < 6:
            warnings.append(f"{arch}: {len(pts)} points, too few to fit 5 parameters with a check; not fitted")
            continue
        try:
            fits[arch] = fit_points(pts)
        except ScalingError as e:  # e.g. one size of this architecture: the law cannot be fitted
            warnings.append(f"{arch}: not fitted: {e}")
            continue
        except RuntimeError as e:  # the optimiser stalled on a resample of runs: resample points instead
            warnings.append(
                f"{arch}: the bootstrap over runs stalled ({e}); its intervals resample points (too narrow)"
            )
            N, D, L = (np.array([p[k] for p in pts], dtype=float) for k in ("N", "D", "loss"))
            options = fit_options(pts, BOOTSTRAP, strata=False, by_run=False)  # BOOTSTRAP read at call time
            fits[arch] = fit_scaling_law(N, D, L, **options)
            fits[arch].options = options
    return fits, warnings


def fitted(*frontiers) -> bool:
    """Every one of the frontiers exists and was fitted (its envelope had 4 or more points)."""
    return all(fr is not None and fr.values is not None for fr in frontiers)


def measured_compute(fr: "Frontier", ref: "Frontier", cmax: float, cmax_ref: float) -> float:
    """The largest compute c of the reference at which k(c) is measured on both sides: c within the reference's
    largest measured C (cmax_ref), and the family's frontier reaching the reference's loss at c within its own
    largest measured C (cmax): c* = min(cmax_ref, C_ref(L_fam(cmax))), from the frontiers' point estimates."""
    return min(cmax_ref, float(Frontier.compute(Frontier.loss(cmax, fr.values), ref.values)))


def gates(by_arch: dict, fits: dict, holdouts: dict, frontiers: dict) -> dict:
    """Per architecture, each gate's verdict: {"fit": (state, why), "holdout": ..., "params": ..., "k": ...,
    "trusted": bool}; state is "pass", "FAIL" or "cannot check" (a design that cannot judge it). holdouts:
    {arch: holdout(points)}; frontiers: {arch: Frontier}. The k(C) gate judges the frontier's multiplier at
    measured_compute, the largest compute both families measured (the law's k(C) there, printed beside it, takes
    the law's compute-optimal N and D, which may lie beyond the measured ones)."""
    out = {}
    cmax_ref = max(p["C"] for p in by_arch.get(REFERENCE, [])) if REFERENCE in by_arch else None
    lone_ref = single_seed_sizes(by_arch.get(REFERENCE, []))
    ref_fr = frontiers.get(REFERENCE)
    for arch, pts in by_arch.items():
        fit, g = fits.get(arch), {}
        sizes = {p["N"] for p in pts}
        budgets = max(sum(1 for q in pts if q["run"] == r) for r in {p["run"] for p in pts})
        if fit is None:
            g = {k: ("FAIL", "no law was fitted") for k in ("fit", "holdout", "params", "k")}
            out[arch] = {**g, "trusted": False}
            continue
        rms, noise = residual_rms(fit, pts), seed_noise(pts)
        if noise is None:
            g["fit"] = (
                "cannot check" if rms <= FIT_RMS else "FAIL",
                f"rms {rms:.2%}; no repeated seeds to compare with",
            )
        else:
            ok = rms <= FIT_RMS and rms <= FIT_NOISE * noise
            g["fit"] = ("pass" if ok else "FAIL", f"rms {rms:.2%}, {rms / noise:.1f}x the seed noise {noise:.2%}")
        h = holdouts[arch] if len(sizes) >= 3 else None
        if h is None:
            g["holdout"] = ("cannot check", f"{len(sizes)} sizes: a fit without the largest needs 2 or more left")
        else:
            worst = max(h["errors"])
            g["holdout"] = ("pass" if worst <= HOLDOUT else "FAIL", f"largest error {worst:.2%} at N = {h['N']:,.0f}")
        bound = at_bound(fit, pts)
        widths = {k: (fit.ci[k][1] - fit.ci[k][0]) / 2 for k in ("alpha", "beta") if fit.ci.get(k)}
        wide = [f"{k} ±{w:.2f}" for k, w in widths.items() if not w <= EXPONENT_HALF_WIDTH]
        lone = single_seed_sizes(pts)
        one_seed = f"one seed at {', '.join(lone)}: the bootstrap over seeds within sizes cannot vary it (2 or more)"
        if budgets < 2:
            g["params"] = ("cannot check", "one budget per size: beta is not identified")
        elif lone:  # a parameter at a bound fails whatever the intervals
            g["params"] = ("FAIL", "; ".join(bound)) if bound else ("cannot check", one_seed)
        elif not widths:
            g["params"] = ("cannot check", "no bootstrap intervals")
        else:
            why = "; ".join(bound + wide) or ", ".join(f"{k} ±{w:.2f}" for k, w in widths.items())
            g["params"] = ("pass" if not bound and not wide else "FAIL", why)
        if arch == REFERENCE:
            g["k"] = ("pass", "the reference (k = 1)")
        elif REFERENCE not in fits or cmax_ref is None:
            g["k"] = ("cannot check", f"{REFERENCE} was not fitted")
        elif not fitted(frontiers.get(arch), ref_fr):
            g["k"] = ("cannot check", "no compute frontier (its envelope has fewer than 4 points)")
        else:
            c = measured_compute(frontiers[arch], ref_fr, max(p["C"] for p in pts), cmax_ref)
            k = frontiers[arch].multiplier(ref_fr, c)
            law_k = multiplier(fit, fits[REFERENCE], c, flops_ratio(pts), flops_ratio(by_arch[REFERENCE]))
            why = f"k = {fmt(k['value'], k['ci'])} at C = {c:.3g} (law: {fmt(law_k['value'], law_k['ci'])})"
            if lone or lone_ref:
                at = ", ".join(sorted(set(lone) | set(lone_ref)))
                g["k"] = ("cannot check", f"{why}; one seed at {at} (2 or more)")
            elif k["ci"] is None:
                g["k"] = ("cannot check", "no bootstrap intervals")
            else:
                lo, hi = k["ci"]
                ok = lo > 0 and np.isfinite(hi) and hi <= K_RATIO * lo
                g["k"] = ("pass" if ok else "FAIL", why)
        out[arch] = {**g, "trusted": all(v[0] == "pass" for v in g.values())}
    return out


def _gate_table(verdicts: dict) -> list[str]:
    lines = [
        "Can each law be trusted? The gates (docs/scaling-laws.md): **fit** the law's relative residual rms "
        f"<= {FIT_RMS:.1%} and <= {FIT_NOISE:g}x the seed noise; **hold-out** every point of the largest size "
        f"predicted within {HOLDOUT:.0%} by a fit without it; **parameters** none at a bound, each exponent's 95% "
        f"interval narrower than ±{EXPONENT_HALF_WIDTH}; **k(C)** the compute multiplier against {REFERENCE}, from "
        "the compute frontiers at the largest C both families measured (C* = the smaller of the reference's largest "
        "C and the C at which the reference reaches the family's best frontier loss), has a 95% interval whose "
        f"upper bound is at most {K_RATIO:g}x its lower (the law's k at C* in parentheses).",
        "",
        "| arch | law trusted | fit | hold-out | parameters | k(C) |",
        "|---|---|---|---|---|---|",
    ]
    for arch, g in verdicts.items():
        cells = [f"{g[k][0]}: {g[k][1]}" for k in ("fit", "holdout", "params", "k")]
        lines.append(f"| {arch} | {'yes' if g['trusted'] else 'NO'} | " + " | ".join(cells) + " |")
    return lines


def _fit_table(by_arch: dict, fits: dict, verdicts: dict) -> list[str]:
    """The per-architecture table of the law's parameters with their 95% bootstrap intervals; a law that failed
    a gate is marked so on its row."""
    lines = [
        "| arch | gates | runs | sizes | points | E | A | B | alpha | beta | a (N_opt ∝ C^a) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arch, fit in fits.items():
        pts = by_arch[arch]
        cells = [fmt(fit.values[k], fit.ci[k]) for k in ("E", "A", "B", "alpha", "beta", "a")]
        mark = "passed" if verdicts[arch]["trusted"] else "FAILED: not to quote"
        lines.append(
            f"| {arch} | {mark} | {len({p['run'] for p in pts})} | {len({p['N'] for p in pts})} | {len(pts)} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def _frontier_table(frontiers: dict) -> list[str]:
    lines = [
        "The compute frontier L*(C) = E + A C^-gamma fitted to each family's lower envelope of (C, loss) (Kaplan et "
        "al. 2020; 95% intervals over resamples of whole runs):",
        "",
        "| arch | envelope points | E | A | gamma |",
        "|---|---|---|---|---|",
    ]
    for arch, fr in frontiers.items():
        if fr.values is None:
            lines.append(f"| {arch} | {fr.n_points} | – | – | – (fewer than 4 envelope points) |")
            continue
        cells = [fmt(fr.values[i], fr.ci(i)) for i in range(3)]
        lines.append(f"| {arch} | {fr.n_points} | " + " | ".join(cells) + " |")
    return lines


def _multipliers(by_arch: dict, fits: dict, frontiers: dict, verdicts: dict, points: list[dict]) -> list[str]:
    """k(C) of each architecture against REFERENCE at REFERENCE's smallest and largest measured C, at C* (the
    largest C both measured: measured_compute, the k(C) gate's) and, for a law that passed its gates, 10x beyond,
    from the law and the compute frontier."""
    if REFERENCE not in by_arch:
        return [f"No compute multiplier: no {REFERENCE} points to compare with."]
    if len(by_arch) < 2:
        return [f"No compute multiplier: {REFERENCE} is the only architecture."]
    cs = [min(p["C"] for p in by_arch[REFERENCE]), max(p["C"] for p in by_arch[REFERENCE])]
    lines = [
        f"The compute multiplier k(C): how many times {REFERENCE}'s compute C an architecture needs to reach "
        f"{REFERENCE}'s loss at C (1 = as efficient, > 1 = needs more; 95% intervals over paired bootstrap "
        "resamples of runs within sizes), from the law L(N, D) and the compute frontier L*(C). 10x beyond the "
        "largest C is an extrapolation, shown only for laws that passed every gate. C*: the largest C both "
        "families measured (the k(C) gate's; the family reaches decoder_only's loss there within its own largest C).",
        "",
        "| arch | from | " + " | ".join(f"C = {c:.3g}" for c in cs) + f" | C* | C = {10 * cs[1]:.3g} (10x beyond) |",
        "|---|---|" + "---|" * (len(cs) + 2),
    ]
    ref_fit, ref_fr = fits.get(REFERENCE), frontiers.get(REFERENCE)
    for arch in by_arch:
        if arch == REFERENCE:
            continue
        trusted = verdicts[arch]["trusted"] and verdicts[REFERENCE]["trusted"]
        fr = frontiers.get(arch)
        has_frontiers = fitted(fr, ref_fr)
        cstar = measured_compute(fr, ref_fr, max(p["C"] for p in by_arch[arch]), cs[1]) if has_frontiers else None
        if arch in fits and ref_fit is not None:
            r, r_ref = flops_ratio(by_arch[arch]), flops_ratio(by_arch[REFERENCE])
            ks = [multiplier(fits[arch], ref_fit, c, r, r_ref) for c in cs]
            cells = [fmt(k["value"], k["ci"]) for k in ks]
            if cstar is None:
                cells.append("–")
            else:
                k = multiplier(fits[arch], ref_fit, cstar, r, r_ref)
                cells.append(f"{fmt(k['value'], k['ci'])} at {cstar:.3g}")
            beyond = multiplier(fits[arch], ref_fit, 10 * cs[1], r, r_ref)
            cells.append(fmt(beyond["value"], beyond["ci"]) if trusted else "– (a gate failed)")
            lines.append(f"| {arch} | law{'' if trusted else ' (gate FAILED)'} | " + " | ".join(cells) + " |")
        if has_frontiers:
            ks = [fr.multiplier(ref_fr, c) for c in (*cs, cstar)]
            cells = [fmt(k["value"], k["ci"]) for k in ks]
            cells[-1] += f" at {cstar:.3g}"
            lines.append(f"| {arch} | frontier | " + " | ".join(cells) + " | – |")
    return lines


def _holdouts(holdouts: dict) -> list[str]:
    """The hold-out check of every architecture ({arch: holdout(points)}): its largest size predicted by a fit
    without it."""
    lines = [
        f"Hold-out: each law refitted without its largest size predicts that size's points (gate: every error "
        f"<= {HOLDOUT:.0%}; aim {HOLDOUT_AIM:.0%}).",
        "",
    ]
    for arch, h in holdouts.items():
        if h is None:
            lines.append(f"- {arch}: too few points without the largest size to refit")
            continue
        worst = max(h["errors"])
        mark = "within the aim" if worst <= HOLDOUT_AIM else ("within the gate" if worst <= HOLDOUT else "OVER")
        lines.append(
            f"- {arch}: N = {h['N']:,.0f}, relative errors {', '.join(f'{e:.2%}' for e in h['errors'])} "
            f"(largest {worst:.2%}, {mark})"
        )
    return lines


def final_losses(points: list[dict]) -> dict:
    """{(arch, N): [each seed's loss at the largest budget of that size]}: a size's seeds as one row."""
    last = {}
    for p in points:
        key = (p["arch"], p["N"], p["seed"])
        if key not in last or p["C"] > last[key]["C"]:
            last[key] = p
    out = {}
    for p in last.values():
        out.setdefault((p["arch"], p["N"]), []).append(p["loss"])
    return out


def _noise(by_arch: dict, fits: dict) -> list[str]:
    """Seed noise beside each fit's residuals (both relative to the loss)."""
    lines = ["| arch | seeds at a size | seed noise / loss | fit residual rms / loss |", "|---|---|---|---|"]
    for arch, pts in by_arch.items():
        noise = seed_noise(pts)
        if noise is None or arch not in fits:
            continue
        seeds = max(len({p["seed"] for p in pts if p["N"] == n}) for n in {p["N"] for p in pts})
        lines.append(f"| {arch} | {seeds} | {noise:.2%} | {residual_rms(fits[arch], pts):.2%} |")
    if len(lines) == 2:
        return ["Seed noise: no size has runs of several seeds."]
    return ["Seed noise against fit error (a gap between families smaller than these is noise):", "", *lines]


def _rankings(points: list[dict]) -> list[str]:
    """The architectures ranked by their largest budget's loss (mean over seeds) at the smallest and largest size."""
    finals = final_losses(points)
    sizes = {}
    for arch, N in finals:
        sizes.setdefault(arch, []).append(N)
    rank = {}
    for end, pick in (("smallest", min), ("largest", max)):
        loss = {a: float(np.mean(finals[(a, pick(ns))])) for a, ns in sizes.items()}
        rank[end] = sorted(loss, key=loss.get)
    agree = "agree" if rank["smallest"] == rank["largest"] else "DIFFER"
    return [
        f"Rankings by the largest budget's loss (best first): smallest size {' < '.join(rank['smallest'])}; "
        f"largest size {' < '.join(rank['largest'])}: they {agree}."
    ]


def _steps_bound(by_arch: dict) -> list[str]:
    lines = [
        "Steps-bound check: at equal optimizer steps a larger size must reach a lower loss (otherwise the loss is "
        "bound by steps, a term L(N, D) does not have): each point of a size against the next size's losses "
        "interpolated at the same steps.",
        "",
    ]
    for arch, pts in by_arch.items():
        c = steps_bound([p for p in pts if p["kind"] != "cosine"])
        if not c["pairs"]:
            lines.append(f"- {arch}: no size's steps overlap the next size's; cannot check")
            continue
        worst = "; ".join(
            f"N {a:,.0f} at {s} steps {la:.4f} vs N {b:,.0f} {lb:.4f}" for a, b, s, la, lb in c["failed"][:3]
        )
        lines.append(
            f"- {arch}: {c['pairs'] - len(c['failed'])} of {c['pairs']} comparisons lower at the larger size"
            + (f" (not: {worst})" if c["failed"] else "")
        )
    return lines


def _cooldown_table(rows: list[dict]) -> list[str]:
    if not rows:
        return ["Cool-down check: no SIZE_seedN_cosine cells (scaling.check_sizes) to compare with."]
    lines = [
        "Cool-down check: each budget's cool-down point against a run trained to that budget alone (cosine from "
        f"the peak rate to 0, the same seed and data); gate: within {COOLDOWN_CHECK:.0%}.",
        "",
        "| arch | size | tokens / param | cool-down | cosine | difference | rates (cool-down, cosine) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = "" if abs(r["diff"]) <= COOLDOWN_CHECK else " OVER"
        rates = ", ".join(f"{float(x):g}" if x not in (None, "") else "?" for x in r.get("rates", ("", "")))
        lines.append(
            f"| {r['arch']} | {r['size']} | {r['tokens_per_param']:g} | {r['cooldown']:.4f} | {r['cosine']:.4f} | "
            f"{r['diff']:+.2%}{mark} | {rates} |"
        )
    passed = sum(abs(r["diff"]) <= COOLDOWN_CHECK for r in rows)
    lines += ["", f"{passed} of {len(rows)} within {COOLDOWN_CHECK:.0%}."]
    return lines


def _time(runs: list[dict]) -> list[str]:
    """Where the sweep's time went: its runs' seconds in training steps (cost.train_seconds) against their
    wall seconds (setup, validation and checkpoints included)."""
    ok = [r for r in runs if r.get("status", "ok") == "ok" and r.get("cost", {}).get("train_seconds")]
    if not ok:
        return []
    train, wall = sum(r["cost"]["train_seconds"] for r in ok), sum(r["wall_seconds"] for r in ok)
    return [
        f"Time: {train:,.0f} s of the runs' {wall:,.0f} s wall time in training steps ({train / wall:.0%}); the rest "
        "is setup, validation and checkpoints.",
        "",
    ]


def _warnings(by_arch: dict, fits: dict) -> list[str]:
    """The design and fit warnings: fewer than 3 sizes or budgets, one tokens-per-parameter ratio, training tokens
    seen more than MAX_EPOCHS times, and residuals that grow at the smallest size."""
    out = []
    for arch, pts in by_arch.items():
        sizes = sorted({p["N"] for p in pts})
        budgets = max(sum(q["run"] == r for q in pts) for r in {p["run"] for p in pts})
        if len(sizes) < 3 or budgets < 3:
            out.append(f"{arch}: {len(sizes)} sizes and at most {budgets} budgets per run; a law wants 3 or more each")
        if len({round(p["tokens"] / p["N"], 1) for p in pts if p["tokens"]}) < 2:
            out.append(f"{arch}: every point has one tokens-per-parameter ratio; D's exponent is not identified")
        seen = [p["tokens"] / p["train_tokens"] for p in pts if p.get("train_tokens")]
        if seen and max(seen) > MAX_EPOCHS:
            out.append(
                f"{arch}: the largest run reads its training tokens {max(seen):.1f} times (more than "
                f"{MAX_EPOCHS:g}: Muennighoff et al. 2023); repeated data bends the law"
            )
        fit = fits.get(arch)
        if fit is None:
            continue
        pred = fit.predict(np.array([p["N"] for p in pts]), np.array([p["D"] for p in pts]))
        err = {n: [] for n in sizes}
        for p, q in zip(pts, pred):
            err[p["N"]].append(abs(p["loss"] - q) / p["loss"])
        small, rest = np.mean(err[sizes[0]]), np.median([np.mean(err[n]) for n in sizes[1:]] or [np.inf])
        if len(sizes) > 2 and small > 2 * rest:
            out.append(
                f"{arch}: residuals at N = {sizes[0]:,.0f} are {small / rest:.1f}x the other sizes' median: the law "
                "may not hold down there"
            )
    return out


def _plots(by_arch: dict, fits: dict, frontiers: dict, out_dir: Path) -> list[Path]:
    """scaling_frontier.png (loss against C, log-log: points, the law's frontier L*(C) with its 95% band, and the
    envelope fit dashed), scaling_isoflop.png (the fitted loss against N at three fixed C) and scaling_nopt.png
    (N_opt against C with its band); one colour per architecture in all three."""
    from zoo.report.plots import _plt

    plt = _plt()
    allc = [p["C"] for pts in by_arch.values() for p in pts]
    C = np.geomspace(min(allc) / 2, 10 * max(allc), 60)
    colors = {arch: f"C{i}" for i, arch in enumerate(by_arch)}
    return [
        _save(_plot_frontier(plt, by_arch, fits, frontiers, C, colors), out_dir / "scaling_frontier.png", plt),
        _save(_plot_isoflop(plt, by_arch, fits, allc, colors), out_dir / "scaling_isoflop.png", plt),
        _save(_plot_nopt(plt, by_arch, fits, C, colors), out_dir / "scaling_nopt.png", plt),
    ]


def _plot_frontier(plt, by_arch: dict, fits: dict, frontiers: dict, C: np.ndarray, colors: dict):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for arch, pts in by_arch.items():
        ax.loglog([p["C"] for p in pts], [p["loss"] for p in pts], "o", ms=3, alpha=0.6, color=colors[arch], label=arch)
        if arch in fits:
            r = flops_ratio(pts)
            al = fits[arch].allocation(C / r)
            ax.loglog(C, al["loss"]["value"], "-", color=colors[arch])
            if al["loss"]["ci"]:
                lo, hi = np.array(al["loss"]["ci"]).T
                ax.fill_between(C, lo, hi, color=colors[arch], alpha=0.15)
        fr = frontiers.get(arch)
        if fr is not None and fr.values is not None:
            ax.loglog(C, Frontier.loss(C, fr.values), "--", lw=1, color=colors[arch])
    ax.set(
        xlabel="training FLOPs C",
        ylabel="validation loss (nats/token)",
        title="Loss against compute: law frontier (band), envelope fit (dashed)",
    )
    ax.legend(fontsize=8)
    return fig


def _plot_isoflop(plt, by_arch: dict, fits: dict, allc: list, colors: dict):
    """The y axis spans the measured losses (a fit far off the data, at a bound, would squash every curve)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for c, style in zip(np.geomspace(min(allc), max(allc), 3), ("-", "--", ":")):
        for arch, fit in fits.items():
            r = flops_ratio(by_arch[arch])
            Ns = np.geomspace(min(p["N"] for p in by_arch[arch]) / 4, max(p["N"] for p in by_arch[arch]) * 4, 50)
            with np.errstate(all="ignore"):
                y = fit.predict(Ns, c / (6 * r * Ns))
            ax.semilogx(Ns, y, style, color=colors[arch], label=f"{arch}, C = {c:.2g}")
    losses = [p["loss"] for pts in by_arch.values() for p in pts]
    ax.set_ylim(0.8 * min(losses), 1.5 * max(losses))
    ax.set(xlabel="non-embedding parameters N", ylabel="fitted loss", title="IsoFLOP curves (the fits at fixed C)")
    ax.legend(fontsize=6)
    return fig


def _plot_nopt(plt, by_arch: dict, fits: dict, C: np.ndarray, colors: dict):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for arch, fit in fits.items():
        al = fit.allocation(C / flops_ratio(by_arch[arch]))
        if all(v is not None for v in al["N_opt"]["value"]):
            ax.loglog(C, al["N_opt"]["value"], color=colors[arch], label=arch)
            if al["N_opt"]["ci"]:
                lo, hi = np.array(al["N_opt"]["ci"]).T
                ax.fill_between(C, lo, hi, color=colors[arch], alpha=0.15)
    ax.set(xlabel="training FLOPs C", ylabel="compute-optimal N_opt", title="N_opt against C (95% band)")
    ax.legend(fontsize=8)
    return fig


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def scaling_section(runs: list[dict], out_dir: Path, scaling_sweep: bool = False) -> tuple[list[str], list[Path]]:
    """report.md's Scaling section and its files: the gates table first, then the fit per architecture with
    intervals, the compute frontiers, the compute multipliers, the hold-out check, the cool-down check, seed noise
    against fit error, the steps-bound check, the rankings at the smallest and largest size, warnings, three
    plots and points.csv (every fitted point). Runs of one size give only a line saying why nothing is fitted
    (when `scaling_sweep`, an experiment=scaling directory); no points, nothing."""
    points = scaling_points(runs)
    sizes = sorted({p["N"] for p in points})
    if len(sizes) < 2:
        if points and scaling_sweep:
            return [
                "## Scaling",
                "",
                f"No fit: every run has N = {', '.join(f'{n:,.0f}' for n in sizes)} "
                "non-embedding parameters, and a law needs runs of several sizes (experiment=scaling).",
            ], []
        return [], []
    fitted = [p for p in points if p["kind"] in FITTED_KINDS]
    by_arch = {}
    for p in sorted(fitted, key=lambda p: p["arch"] != REFERENCE):  # the reference first, then the runs' order
        by_arch.setdefault(p["arch"], []).append(p)
    fits, warnings = _fits(by_arch)
    frontiers = {arch: Frontier(pts) for arch, pts in by_arch.items()}
    holdouts = {arch: holdout(pts) for arch, pts in by_arch.items()}
    verdicts = gates(by_arch, fits, holdouts, frontiers)
    csv_path = write_points_csv(fitted, Path(out_dir) / "points.csv")
    tuning, tune_figures = tune_section(points, fitted, out_dir)
    text = [
        "## Scaling",
        "",
        *_gate_table(verdicts),
        "",
        "L(N, D) = E + A / N^alpha + B / D^beta per architecture (Hoffmann et al. 2022's Huber fit, zoo.scaling.fit):"
        " N the non-embedding parameters, D the training tokens, the loss val/cont_loss at each budget; 95% "
        'intervals from a bootstrap over runs (seeds) within sizes, rescaled (docs/scaling-laws.md, "The gates"; '
        f"over runs across sizes where a size has one seed). Every point is in [{csv_path.name}]({csv_path.name})."
        + refit_sentence(csv_path.name, fits),
        "",
        *_fit_table(by_arch, fits, verdicts),
        "",
        *tuning,
        *_frontier_table(frontiers),
        "",
        *_multipliers(by_arch, fits, frontiers, verdicts, fitted),
        "",
        *_holdouts(holdouts),
        "",
        *_cooldown_table(cooldown_check(points)),
        "",
        *_noise(by_arch, fits),
        "",
        *_steps_bound(by_arch),
        "",
        *_rankings(fitted),
        "",
        *_time(runs),
    ]
    warned = warnings + _warnings(by_arch, fits)
    if warned:
        text += ["Warnings: " + "; ".join(warned), ""]
    figures = (_plots(by_arch, fits, frontiers, out_dir) if fits else []) + tune_figures
    if figures:
        text.append("Figures: " + ", ".join(f"[{p.name}]({p.name})" for p in figures))
    return text, figures
