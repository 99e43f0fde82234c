"""scaling_misfit.py's fits on the cell means: the nested models of `decompose` (M0 .. M3) and the interaction
models of `interaction`, with those two subcommands."""

import math
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402
from scipy.stats import f as f_dist  # noqa: E402

from zoo.scaling.budget_rate import tuning_budgets  # noqa: E402
from zoo.scaling.checks import pooled_sd  # noqa: E402
from zoo.scaling.law import ScalingError  # noqa: E402
from zoo.scaling.points import by_family, cell_means, fit_points, read_points_csv  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def fit(points: list[dict]):
    return fit_points(points, bootstrap=0)


# ---------------------------------------------------------------- decompose


def cell_data(points: list[dict], sd: dict | None = None) -> dict:
    """The cells of 2 or more seeds: N, D, mean, n, se (the size's relative sd / sqrt(n): from `sd`, {N: sd}, where
    given, else pooled over the points' own cells), size index."""
    pooled = pooled_sd(points)
    cs = [c for c in cell_means(points) if c["n"] > 1]
    size = np.array([c["size"] for c in cs])
    sizes = sorted(set(size))
    out = {k: np.array([c[k] for c in cs]) for k in ("N", "D", "mean", "n")}
    out.update(size=size, sizes=sizes, idx=np.array([sizes.index(s) for s in size]), k=len(sizes))
    out["se"] = np.array([(sd[c["N"]] if sd else pooled[c["N"]][0]) / math.sqrt(c["n"]) for c in cs])
    out["nu"] = min(pooled[n][1] for n in set(out["N"]))
    return out


def nested_models(c: dict, v: dict) -> list[tuple]:
    """(name, prediction of parameters u, number of parameters, starts from the model before's fit r) of M0 .. M3
    on the cells `c`; M0 starts from the law's values `v`."""
    idx, k, lN, lD = c["idx"], c["k"], np.log(c["N"] / 1e5), np.log(c["D"] / 1e6)
    u0 = [math.log(v["E"]), math.log(v["A"]) - v["alpha"] * math.log(1e5)]
    u0 += [math.log(v["B"]) - v["beta"] * math.log(1e6), v["alpha"], v["beta"]]
    c0 = [np.mean(c["mean"][idx == j]) - 0.2 for j in range(k)]
    return [
        ("M0 law", lambda u: np.exp(u[0]) + np.exp(u[1] - u[3] * lN) + np.exp(u[2] - u[4] * lD), 5, lambda r: [u0]),
        (
            "M1 c_s + B/D^b",
            lambda u: u[idx] + np.exp(u[k] - u[k + 1] * lD),
            k + 2,
            lambda r: [c0 + [math.log(0.2), b] for b in (0.3, 0.6, 1.0)],
        ),
        (
            "M2 c_s + B_s/D^b",
            lambda u: u[idx] + np.exp(u[k + idx] - u[2 * k] * lD),
            2 * k + 1,
            lambda r: [list(r.x[:k]) + [r.x[k]] * k + [r.x[k + 1]]],
        ),
        (
            "M3 c_s + B_s/D^b_s",
            lambda u: u[idx] + np.exp(u[k + idx] - u[2 * k + idx] * lD),
            3 * k,
            lambda r: [list(r.x[: 2 * k]) + [r.x[2 * k]] * k],
        ),
    ]


def wls(pred, c: dict, starts: list):
    """The least relative chi^2 sum(((mean - pred) / pred / se)^2) over the starts (scipy's least_squares)."""
    best = None
    for u0 in starts:
        try:
            r = least_squares(lambda u: (c["mean"] - pred(u)) / pred(u) / c["se"], u0, max_nfev=20000)
        except ValueError:  # a start whose residuals are not finite
            continue
        if best is None or r.cost < best.cost:
            best = r
    return best


def nested_fits(points: list[dict], extra_se: dict | None = None, sd: dict | None = None) -> tuple[dict, dict]:
    """The cells and {name: (least_squares result, parameters)} of M0 .. M3, each started from the one before.
    extra_se: {(size, D): a relative se} added in quadrature to those cells' se (a paired shift's own noise).
    sd: {N: a relative sd} in place of each size's own pooled one (cell_data)."""
    c = cell_data(points, sd)
    if extra_se:
        extra = [extra_se.get((s, d), 0.0) for s, d in zip(c["size"], c["D"])]
        c["se"] = np.sqrt(c["se"] ** 2 + np.nan_to_num(np.array(extra)) ** 2)
    out, prev = {}, None
    for name, pred, n_params, starts in nested_models(c, fit(points).values):
        prev = wls(pred, c, starts(prev))
        out[name] = (prev, n_params)
    return c, out


def print_chi2(c: dict, fits: dict) -> None:
    n, prev = len(c["mean"]), None
    for name, (r, p) in fits.items():
        chi, dof = 2 * r.cost, n - p
        s = f"  {name:<22} chi2={chi:7.1f} dof={dof:2d} chi2/dof={chi / max(dof, 1):6.2f}"
        if dof > 0:
            s += f" (F-bound {f_dist.ppf(0.95, dof, c['nu']):.2f})"
        if prev is not None:
            dchi, ddof = prev[0] - chi, prev[1] - dof
            bound = f_dist.ppf(0.95, ddof, c["nu"])  # the drop's own F test: per dof against F(ddof, nu)
            s += f"   drop vs previous: {dchi:6.1f} on {ddof} dof (per dof {dchi / ddof:5.1f}, F-bound {bound:.2f})"
        prev = (chi, dof)
        print(s)


def print_sizes(c: dict, fits: dict) -> None:
    """M1's offsets c_s and their departures from E + A/N^alpha fitted to them (unweighted); M3's exponents,
    M2's amplitudes; M0's and M1's chi^2 by size."""
    S, k = c["sizes"], c["k"]
    r0, r1, r2, r3 = (fits[name][0] for name in fits)
    off, lN = r1.x[:k], np.log(np.array([c["N"][c["size"] == s][0] for s in S]) / 1e5)
    rr = least_squares(lambda u: off - (np.exp(u[0]) + np.exp(u[1] - u[2] * lN)), [math.log(1.2), math.log(0.3), 0.5])
    print("  M1 per-size offsets c_s; fit of E+A/N^a to them (unweighted) and each size's departure:")
    print(
        "   ",
        "  ".join(f"{s}: c={off[j]:.4f} dev={-rr.fun[j]:+.4f}" for j, s in enumerate(S)),
        f"| N-curve from c_s: E={math.exp(rr.x[0]):.3f} alpha={rr.x[2]:.3f}; M1 beta={r1.x[k + 1]:.3f}",
    )
    print(
        "   M3 per-size beta:",
        "  ".join(f"{s}:{r3.x[2 * k + j]:.2f}" for j, s in enumerate(S)),
        "| M2 per-size B (rel):",
        "  ".join(f"{s}:{math.exp(r2.x[k + j]):.3f}" for j, s in enumerate(S)),
        f"beta={r2.x[2 * k]:.3f}",
    )
    by_size = lambda r: "  ".join(f"{s}:{np.sum(r.fun[c['size'] == s] ** 2):.0f}" for s in S)  # noqa: E731
    print("   chi2 by size, M0:", by_size(r0), "| M1:", by_size(r1))


def sd_by_name(points: list[dict], other: list[dict]) -> dict:
    """{N of each size of `points`: the pooled relative sd of the size of the same name in `other`} (decompose
    --se-from: one record's fit judged at another record's seed noise)."""
    pooled, names = pooled_sd(other), {p["size"]: p["N"] for p in other}
    missing = sorted({p["size"] for p in points} - set(names))
    if missing:
        raise ScalingError(f"--se-from has no size {', '.join(missing)}: give a points file with the same sizes")
    return {p["N"]: pooled[names[p["size"]]][0] for p in points}


def cmd_decompose(args) -> None:
    path = args.points.resolve()
    print(f"points: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    other = by_family(read_points_csv(args.se_from)) if args.se_from else {}
    for arch, pts in args.families.items():
        pts = drop(pts, sizes=args.without)
        sd = sd_by_name(pts, other[arch]) if arch in other else None
        c, fits = nested_fits(pts, sd=sd)
        note = "".join(
            [f"; without {', '.join(args.without)}" if args.without else "", f"; se from {args.se_from}" if sd else ""]
        )
        print(f"\n== {arch}: {len(c['mean'])} cells, nu_min={c['nu']}{note}")
        print_chi2(c, fits)
        print_sizes(c, fits)


# ---------------------------------------------------------------- interaction


M1G = "M1g c_s + B N^g/D^b"  # interaction_models' data term growing with N, the start of its curvature fit


def interaction_models(c: dict, m1) -> list[tuple]:
    """(name, prediction of u, number of parameters, starts) on the cells `c`, each with an offset c_s per size and
    a data term beside nested_models' M1 (B / D^b, in D as the law's) and M2 (B_s / D^b, an amplitude per size):
    M1dn B (N/D)^b (its shape a function of D/N alone); M1g B N^g / D^b (g free: 0 is M1, b is M1dn). m1: M1's
    fit, the start."""
    idx, k, lN, lD = c["idx"], c["k"], np.log(c["N"] / 1e5), np.log(c["D"] / 1e6)
    x1 = list(m1.x)
    return [
        ("M1dn c_s + B(N/D)^b", lambda u: u[idx] + np.exp(u[k] - u[k + 1] * (lD - lN)), k + 2, [x1]),
        (
            M1G,
            lambda u: u[idx] + np.exp(u[k] + u[k + 2] * lN - u[k + 1] * lD),
            k + 3,
            [x1 + [g] for g in (0.0, x1[k + 1])],
        ),
    ]


def curvature_models(c: dict, m1, m1g) -> list[tuple]:
    """M1 and M1g each times (1 + c d^2 / 100), d = log2(D / D_tune) the doublings from the size's tuning budget
    (zoo.scaling.budget_rate.tuning_budgets): the one-rate-per-size curvature of report.md beside the interaction
    g, so that the two can be told apart (they alias where a size's budgets sit on one side of D_tune)."""
    idx, k, lN, lD = c["idx"], c["k"], np.log(c["N"] / 1e5), np.log(c["D"] / 1e6)
    tune = tuning_budgets([{"N": n, "tokens": d} for n, d in zip(c["N"], c["D"])])
    d2 = np.log2(c["D"] / np.array([tune[n] for n in c["N"]])) ** 2 / 100
    x1, xg = list(m1.x), list(m1g.x)
    return [
        (
            "M1+c c_s+B/D^b, c d^2",
            lambda u: (u[idx] + np.exp(u[k] - u[k + 1] * lD)) * (1 + u[k + 2] * d2),
            k + 3,
            [x1 + [cc] for cc in (0.0, 0.2)],
        ),
        (
            "M1g+c c_s+BN^g/D^b, c d^2",
            lambda u: (u[idx] + np.exp(u[k] + u[k + 2] * lN - u[k + 1] * lD)) * (1 + u[k + 3] * d2),
            k + 4,
            [xg + [cc] for cc in (0.0, 0.2)] + [x1 + [0.0, cc] for cc in (0.0, 0.2)],
        ),
    ]


def interaction_fits(c: dict, v: dict) -> dict:
    """{name: (least_squares result, number of parameters)} on the cells `c`: nested_models' M1 (started from the
    law's values `v`), interaction_models' M1dn and M1g from M1's fit, curvature_models' M1+c and M1g+c, and
    nested_models' M2 from M1's fit."""
    _, (m1_name, m1_pred, m1_params, m1_starts), (m2_name, m2_pred, m2_params, m2_starts), _ = nested_models(c, v)
    m1 = wls(m1_pred, c, m1_starts(None))
    fits = {m1_name: (m1, m1_params)}
    fits |= {name: (wls(pred, c, starts), n) for name, pred, n, starts in interaction_models(c, m1)}
    m1g = fits[M1G][0]
    fits |= {name: (wls(pred, c, starts), n) for name, pred, n, starts in curvature_models(c, m1, m1g)}
    return fits | {m2_name: (wls(m2_pred, c, m2_starts(m1)), m2_params)}


def standard_errors(r, dof: int) -> np.ndarray:
    """1 se of each parameter of a weighted least_squares result: sqrt(diag((J^T J)^-1)), widened by the Birge
    ratio sqrt(chi^2/dof) where it is above 1."""
    cov = np.linalg.pinv(r.jac.T @ r.jac)
    return np.sqrt(np.diag(cov) * max(1.0, 2 * r.cost / max(dof, 1)))


def estimates(name: str, r, dof: int, k: int) -> str:
    """The interaction g and exponent b (M1g, M1g+c) and the curvature c (M1+c, M1g+c) of a fit, each ± 1 se
    (standard_errors); "" for the other models."""
    interaction, curvature = name.startswith("M1g"), "c d^2" in name
    if not (interaction or curvature):
        return ""
    se, parts = standard_errors(r, dof), []
    if interaction:
        parts.append(f"g={r.x[k + 2]:+.3f} ± {se[k + 2]:.3f}, b={r.x[k + 1]:.3f} ± {se[k + 1]:.3f}")
    if curvature:
        parts.append(f"c={r.x[-1]:+.3f} ± {se[-1]:.3f} %/doubling^2")
    return f"   {', '.join(parts)} (1 se, Birge-widened)"


def cmd_interaction(args) -> None:
    """Is the size-by-data interaction a data term whose shape depends on D/N? The sizes' tokens per parameter
    overlap pairwise (s1 50-400, s2 20-160, s3 10-70, s4 6.5-26, s5 5-20), so a term in D/N and a term in D
    predict different cells."""
    for arch, pts in args.families.items():
        c = cell_data(pts)
        k, n = c["k"], len(c["mean"])
        print(f"\n== {arch}: {n} cells, nu_min={c['nu']}")
        for name, (r, n_params) in interaction_fits(c, fit(pts).values).items():
            chi, dof = 2 * r.cost, n - n_params
            line = f"  {name:<24} chi2={chi:7.1f} dof={dof:2d} chi2/dof={chi / max(dof, 1):6.2f}"
            line += f" (F-bound {f_dist.ppf(0.95, dof, c['nu']):.2f})" if dof > 0 else ""
            print(line + estimates(name, r, dof, k))


def budgets(points: list[dict]) -> dict[str, list[float]]:
    """{size: its budgets D, smallest first}."""
    return {s: sorted({p["D"] for p in points if p["size"] == s}) for s in dict.fromkeys(p["size"] for p in points)}


def drop(points: list[dict], sizes=(), cells=()) -> list[dict]:
    """The points without the `sizes` and the `cells` ((size, budget index from 0) pairs)."""
    bud = budgets(points)
    return [p for p in points if p["size"] not in sizes and (p["size"], bud[p["size"]].index(p["D"])) not in cells]
