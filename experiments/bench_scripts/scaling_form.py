"""The report's gates with the law's form as a choice (experiments/RESULTS.md, "The interaction form, stated before it
was fitted"): Chinchilla's sum E + A/N^alpha + B/D^beta (zoo.scaling.fit's objective and starts) or the interaction
form E + [(A/N^alpha)^(1/beta) + (B/D^beta)^(1/beta)]^beta (zoo.scaling.forms.kaplan_e_law), Kaplan et al. 2020's
eq. 1.5 itself (--form kaplan: that form with E held at 0, four parameters), or the coupled law
E + A/N^alpha + B N^g/D^beta (--form coupled, zoo.scaling.coupled; "The coupled law, stated before it was fitted"),
each gate statistic computed as zoo.scaling.checks and zoo.scaling.gates compute it for the report's law:

- fit: the relative residual rms on every point, against the seed noise (zoo.scaling.checks.seed_noise);
- lack of fit: the form fitted to the cell means by weighted least squares, se = the size's relative sd pooled
  over its cells / sqrt(n); chi^2/dof with dof = cells - the parameters fitted (5; kaplan 4, coupled 6), bound the
  95% quantile of F(dof, the smallest size's pooled dof); the Birge ratio sqrt(chi^2/dof) where above 1;
- hold-out and long reach: a fit without the largest size, and on the sizes of N <= N_max / 4, predicting the
  largest size's points;
- leave one size out: alpha and beta refitted without each size (the coupled law's g: its moves printed, not judged);
- parameters: none at a bound; alpha's and beta's 95% percentile intervals over resamples of runs within sizes
  (Rao & Wu's rescaled weights, numpy's default_rng(0), as fit_points), widened by the Birge ratio, within ±0.15
  (g's printed, not judged).

With --form chinchilla the numbers are the report's (experiments/scaling/gates.md), a check of this script.

    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    python experiments/bench_scripts/scaling_form.py experiments/scaling/points.csv --form chinchilla
    python experiments/bench_scripts/scaling_form.py experiments/scaling/points.csv --form kaplan-e
    python experiments/bench_scripts/scaling_form.py experiments/scaling/sinusoidal/points.csv --form kaplan-e
    python experiments/bench_scripts/scaling_form.py experiments/scaling/points.csv --form kaplan
    python experiments/bench_scripts/scaling_form.py experiments/scaling/points.csv --form coupled
    python experiments/bench_scripts/scaling_form.py experiments/scaling/points.csv --form chinchilla \
        --max-tokens-per-param 50
"""

import argparse
import math
import os
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from zoo.scaling.bootstrap import resample_units, resample_weights  # noqa: E402
from zoo.scaling.checks import FLOOR, LONG_REACH_SIZES, at_bound, form_lack_of_fit, seed_noise, widen  # noqa: E402
from zoo.scaling.coupled import coupled_law, fit_coupled  # noqa: E402
from zoo.scaling.forms import fit_kaplan_e, kaplan_e_law  # noqa: E402
from zoo.scaling.gates import EXPONENT_HALF_WIDTH, FIT_NOISE, FIT_RMS, HOLDOUT, LOSO, REACH, REACH_BIAS, REACH_ERROR  # noqa: E402
from zoo.scaling.huber import HuberProblem, best_start, ranked_starts  # noqa: E402
from zoo.scaling.law import scaling_law  # noqa: E402
from zoo.scaling.null import STATISTICS, gate_null  # noqa: E402
from zoo.scaling.points import N_STARTS, by_family, read_points_csv  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
POINTS = REPO / "experiments" / "scaling" / "points.csv"


def fit_chinchilla(N, D, L, weights=None, starts=()):
    """(E, A, B, alpha, beta) of zoo.scaling.fit's objective: L-BFGS-B from `starts` and the N_STARTS best of
    Hoffmann's grid (a resample: from `starts` and the grid's best, as its bootstrap)."""
    problem = HuberProblem(N, D, L)
    ranked = ranked_starts(problem)
    logs = [[math.log(max(v, FLOOR)) for v in t[:3]] for t in starts]  # E, A or B collapsed to 0: just above it
    extra = [problem.to_u(np.array([b, c, a, t[3], t[4]])) for (a, b, c), t in zip(logs, starts)]
    grid = ranked[:1] if starts else ranked[:N_STARTS]
    u = best_start(problem, np.vstack([*extra, *grid]), np.ones(len(N)) if weights is None else weights)[0]
    a, b, e, alpha, beta = problem.to_theta(u)
    return np.array([math.exp(e), math.exp(a), math.exp(b), alpha, beta])


def interaction_fitter(floor: bool):
    """zoo.scaling.forms.fit_kaplan_e as a fitter of FORMS (floor=False: E held at 0, Kaplan et al. 2020's eq. 1.5);
    a refit from `starts` (a resample's, a subset's) adds the grid's 2 best."""

    def fit(N, D, L, weights=None, starts=()):
        return fit_kaplan_e(N, D, L, weights, starts, n_grid=2 if starts else 10, floor=floor)

    return fit


def coupled_fitter(N, D, L, weights=None, starts=()):
    """zoo.scaling.coupled.fit_coupled as a fitter of FORMS: a first fit starts from the Chinchilla fit with g = 0
    and the grid's 10 best; a refit from `starts` (a resample's, a subset's) adds the grid's 2 best."""
    if starts:
        return fit_coupled(N, D, L, weights, starts, n_grid=2)
    return fit_coupled(N, D, L, weights, [(*fit_chinchilla(N, D, L), 0.0)], n_grid=10)


FORMS = {  # name: (law, fitter, whether the form has an irreducible loss E)
    "chinchilla": (scaling_law, fit_chinchilla, True),
    "kaplan-e": (kaplan_e_law, interaction_fitter(floor=True), True),
    "kaplan": (kaplan_e_law, interaction_fitter(floor=False), False),
    "coupled": (coupled_law, coupled_fitter, True),
}
JUDGED = ("alpha", "beta")  # the exponents the gates judge; a sixth parameter (the coupled law's g) is printed


def exponent_names(params) -> tuple:
    return ("alpha", "beta", "g")[: len(params) - 3]


def arrays(points: list[dict]):
    return (np.array([p[k] for p in points], dtype=float) for k in ("N", "D", "loss"))


def predict_top(law, fitter, points: list[dict], train: list[dict], start) -> dict:
    """A fit on `train` predicting the largest size's points: largest |error| and mean signed error."""
    top = max(p["N"] for p in points)
    test = [p for p in points if p["N"] == top]
    params = fitter(*arrays(train), starts=[start])
    N, D, L = arrays(test)
    signed = (law(N, D, *params) - L) / L
    return {"worst": float(np.max(np.abs(signed))), "mean": float(np.mean(signed))}


def long_reach(law, fitter, points: list[dict], params) -> dict | None:
    """predict_top from the sizes of N <= N_max / REACH; None with fewer than LONG_REACH_SIZES of them (E, A and
    alpha unidentified), as zoo.scaling.checks.long_reach."""
    top = max(p["N"] for p in points)
    near = [p for p in points if p["N"] <= top / REACH]
    return predict_top(law, fitter, points, near, params) if len({p["N"] for p in near}) >= LONG_REACH_SIZES else None


def leave_one_size_out(fitter, points: list[dict], params) -> dict:
    """{size: (d_alpha, d_beta[, d_g])} of refits without each size, and the largest |move| of alpha and beta."""
    rows = {}
    for n in sorted({p["N"] for p in points}):
        refit = fitter(*arrays([p for p in points if p["N"] != n]), starts=[params])
        rows[next(p["size"] for p in points if p["N"] == n)] = tuple(refit[3:] - params[3:])
    return {"rows": rows, "worst": max(max(abs(m) for m in moves[:2]) for moves in rows.values())}


def resampled_fits(fitter, points: list[dict], params, n_boot: int) -> list[np.ndarray]:
    """n_boot refits (each from `params`) on resamples of the points' runs within sizes: Rao & Wu's rescaled
    weights, numpy's default_rng(0) (fit_points' scheme)."""
    runs = [f"{p['size']}|{p['seed']}" for p in points]
    n = len(points)
    members, units, _ = resample_units(runs, [p["size"] for p in points], n, np.arange(n), n_boot)
    rng, N, D, L = np.random.default_rng(0), *arrays(points)
    fits = []
    for _ in range(n_boot):
        w = resample_weights(rng, units, int(members.max()) + 1, rescaled=True)[members]
        fits.append(fitter(N, D, L, weights=w, starts=[params]))
    return fits


def exponent_intervals(fitter, points: list[dict], params, n_boot: int) -> dict:
    """Each exponent's 95% percentile interval (alpha, beta[, g]) over resampled_fits."""
    draws = [fit[3:] for fit in resampled_fits(fitter, points, params, n_boot)]
    lo, hi = np.percentile(np.array(draws), [2.5, 97.5], axis=0)
    return {k: (float(a), float(b)) for k, a, b in zip(exponent_names(params), lo, hi)}


def family_gates(form: str, points: list[dict], n_boot: int) -> dict:
    """Every gate statistic of one family under `form`, and each gate's verdict."""
    law, fitter, floor = FORMS[form]
    N, D, L = arrays(points)
    params = fitter(N, D, L)
    rms = float(np.sqrt(np.mean(((L - law(N, D, *params)) / L) ** 2)))
    noise, lack = seed_noise(points), form_lack_of_fit(law, params, points, floor=floor)
    top = max(p["N"] for p in points)
    hold = predict_top(law, fitter, points, [p for p in points if p["N"] < top], params)
    reach = long_reach(law, fitter, points, params)
    loso = leave_one_size_out(fitter, points, params)
    ci = exponent_intervals(fitter, points, params, n_boot)
    half, birge = {}, 1.0 if lack is None else lack["birge"]  # lack None: dof < 1, cannot check
    for k, value in zip(exponent_names(params), params[3:]):
        lo, hi = widen(value, ci[k], birge)
        half[k] = (hi - lo) / 2
    values = dict(zip(("E", "A", "B", "alpha", "beta"), params))
    if not floor:
        values["E"] = math.nan  # no floor in the form: none to collapse (at_bound's test of E is then false)
    bound = at_bound(SimpleNamespace(values=values, converged=True, notes=[]), points)
    verdict = {
        "fit": None if noise is None else rms <= FIT_RMS and rms <= FIT_NOISE * noise,
        "lack of fit": None if lack is None else lack["ratio"] <= lack["limit"],
        "hold-out": hold["worst"] <= HOLDOUT,
        "long reach": None if reach is None else reach["worst"] <= REACH_ERROR and abs(reach["mean"]) <= REACH_BIAS,
        "leave one size out": loso["worst"] <= LOSO,
        "parameters": not bound and all(half[k] <= EXPONENT_HALF_WIDTH for k in JUDGED),
    }
    return dict(
        params=params,
        rms=rms,
        noise=noise,
        lack=lack,
        birge=birge,
        hold=hold,
        reach=reach,
        loso=loso,
        half=half,
        verdict=verdict,
    )


def form_statistics(form: str, start):
    """zoo.scaling.null.gate_statistics' dict under `form`: a function of a set of points that fits the form (from
    `start`, the law the null simulates) and returns its long reach, hold-out and leave-one-size-out statistics."""
    law, fitter, _ = FORMS[form]

    def statistics(points: list[dict]) -> dict:
        params = fitter(*arrays(points), starts=[start])
        top, sizes = max(p["N"] for p in points), {p["N"] for p in points}
        reach = long_reach(law, fitter, points, params)
        hold = (
            predict_top(law, fitter, points, [p for p in points if p["N"] < top], params) if len(sizes) >= 3 else None
        )
        loso = leave_one_size_out(fitter, points, params) if len(sizes) >= 3 else None
        return {
            "reach_worst": reach and reach["worst"],
            "reach_mean": reach and reach["mean"],
            "holdout_worst": hold and hold["worst"],
            "holdout_mean": hold and hold["mean"],
            "loso_worst": loso and loso["worst"],
        }

    return statistics


def form_null(form: str, points: list[dict], params, reps: int) -> dict | None:
    """zoo.scaling.null.gate_null with the form's fitted law as the truth and its statistics (form_statistics)."""
    law = FORMS[form][0]
    truth = SimpleNamespace(predict=lambda N, D: law(N, D, *params))
    return gate_null(points, truth, reps=reps, statistics=form_statistics(form, params))


def print_null(null: dict | None) -> None:
    """Each statistic of form_null: observed, a true law's 95% range over the replicates, P and the fixed bound."""
    if null is None:
        return
    for key, what, _, bound in STATISTICS:
        if key in null["stats"]:
            st = null["stats"][key]
            lo, hi = st["range"]
            line = f"{st['observed']:+.4f}; a true law's 95%: {lo:+.4f} .. {hi:+.4f}; P = {st['p']:.2f} (bound {bound})"
            print(f"  null, {what:<38} {line}")


def print_family(arch: str, g: dict) -> None:
    E, A, B, alpha, beta, *extra = g["params"]
    v = {k: "cannot check" if ok is None else "pass" if ok else "FAIL" for k, ok in g["verdict"].items()}
    worst = max(g["loso"]["rows"].items(), key=lambda kv: max(map(abs, kv[1][:2])))
    coupling = f" g={extra[0]:+.3f}" if extra else ""
    print(f"\n== {arch}: E={E:.4g} A={A:.4g} B={B:.4g} alpha={alpha:.3f} beta={beta:.3f}{coupling}")
    noise = "none: no repeated seeds" if g["noise"] is None else f"{g['noise']:.2%}"
    print(f"  fit                {v['fit']}: rms {g['rms']:.2%}, seed noise {noise}")
    lack = g["lack"]
    ratio = "dof < 1" if lack is None else f"chi2/dof = {lack['ratio']:.2f} (bound {lack['limit']:.2f})"
    print(f"  lack of fit        {v['lack of fit']}: {ratio}")
    print(f"  hold-out           {v['hold-out']}: largest {g['hold']['worst']:.2%}, mean {g['hold']['mean']:+.2%}")
    if g["reach"] is None:
        print(f"  long reach         cannot check: fewer than {LONG_REACH_SIZES} sizes of N <= N_max / {REACH:g}")
    else:
        print(
            f"  long reach         {v['long reach']}: largest {g['reach']['worst']:.2%}, mean {g['reach']['mean']:+.2%}"
        )
    rows = "  ".join(f"{s}: " + "/".join(f"{m:+.3f}" for m in moves) for s, moves in g["loso"]["rows"].items())
    print(f"  leave one size out {v['leave one size out']}: {g['loso']['worst']:.3f} (w/o {worst[0]}) | {rows}")
    half = ", ".join(f"{k} ±{h:.2f}" for k, h in g["half"].items())
    print(f"  parameters         {v['parameters']}: {half} (widened x{g['birge']:.2f})")
    read = {k: g["verdict"][k] for k in ("lack of fit", "long reach", "leave one size out")}
    unread = " and ".join(k for k, ok in read.items() if ok is None)
    reading = (
        "no"
        if False in read.values()
        else "YES"
        if all(read.values())
        else f"cannot say (the {unread} cannot be checked)"
    )
    print(f"  carries the misfit (lack of fit, long reach, leave one size out all pass): {reading}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("points", nargs="?", type=Path, default=POINTS, help="a points.csv (default: %(default)s)")
    p.add_argument("--form", choices=tuple(FORMS), default="kaplan-e", help="the law's form (default kaplan-e)")
    p.add_argument("--bootstrap", type=int, default=200, help="resamples of the exponents' intervals (default 200)")
    p.add_argument("--arch", nargs="*", help="only these families (default: every family of the points)")
    p.add_argument("--max-tokens-per-param", type=float, help="only the cells of at most this many tokens a parameter")
    p.add_argument("--null", type=int, default=0, help="replicates of the gates' null under the form (default 0: none)")
    args = p.parse_args(argv)
    families = by_family(read_points_csv(args.points))
    for arch in args.arch or families:
        if arch not in families:
            p.error(f"--arch {arch!r} is not in {args.points}; it has {', '.join(families)}")
        cap = args.max_tokens_per_param or float("inf")
        points = [q for q in families[arch] if q["D"] / q["N"] <= cap * (1 + 1e-6)]
        gates = family_gates(args.form, points, args.bootstrap)
        print_family(arch, gates)
        if args.null:
            print_null(form_null(args.form, points, gates["params"], args.null))


if __name__ == "__main__":
    main()
