"""Why decoder_only's law fails its gates: diagnostics of the tuned study's fits (experiments/RESULTS.md, "Scaling:
experiment=scaling_long, each family tuned at each size (issue 45)"). Every law is zoo.scaling's fit (fit_points, no
bootstrap) and every gate statistic zoo.scaling.gates.family_checks', per family of a points.csv (N: non-embedding
parameters, as the study counts them). Eight subcommands:

- decompose: the form's lack-of-fit chi^2 (the weighted fit to the cell means of zoo.scaling.checks.lack_of_fit,
  se = the size's pooled relative sd / sqrt(n)) split by nested models: M0 the law E + A/N^alpha + B/D^beta (5
  parameters); M1 c_s + B/D^beta (an offset per size: N's effect unconstrained); M2 c_s + B_s/D^beta (a D
  amplitude per size); M3 c_s + B_s/D^beta_s (a D exponent per size). Then M1's offsets against an E + A/N^alpha
  curve fitted to them, M2's amplitudes, M3's exponents, and M0's and M1's chi^2 by size. --without S ...: sizes
  left out; --se-from P: each size's sd from the same-named size of another points file (another record's noise).
- variants: the gate statistics of all sizes and without s1, with N non-embedding and total parameters (the
  embeddings counted: each size built by zoo.model at the plays' 84-character vocabulary, embeddings tied and
  shared, as the study trains them).
- cells: the gate statistics without each single cell (a size and a budget; decoder_only's by default), without
  the 4 cells removed greedily (each time the one whose removal lowers the form's chi^2/dof most), and without
  the longest budgets of s2 and s3 (160 and 70 tokens per parameter: 4 and 3.5 times their tuning budgets).
- noise: each family's cell residuals against the cells' standard errors; then for one family (decoder_only) the
  long-reach, hold-out and leave-one-size-out statistics of (b) a null simulation, the fitted law plus the
  family's own seed deviations (each run's vector of deviations from its cell means, drawn whole within its
  size), and (c) a bootstrap of runs within sizes of the real points.
- rates: cells rerun at another rate (experiments/scaling/rate_test.csv: decoder_only one sqrt(2) step down at s2
  and s3, one up at s4, seeds 1-3, every budget; and s2 seed 1 at the study's own rate, which must equal its
  points): each cell's loss against the study's, paired by seed, at d doublings from the budget the rate was
  tuned at; then the gates with each cell at its best rate (the lowest paired mean of the files given). With
  --other rate_test.csv per_budget_rates.csv: decoder_only one sqrt(2) step either side of its tuned rate at
  every size (two up at s4), seeds 1-2. With --other heads_test.csv and --variant: decoder_only's s4 and s5
  cells with 2 heads instead of 4 (so 2 heads, d_head = d_model / 2, at every size), at the study's rate. With
  --other beta2_0.95.csv or beta2_0.999.csv: decoder_only's s2 and s4 cells with AdamW's beta2 changed. With
  --forced heads_test.csv heads_rates.csv and --variant: s4 and s5 at 2 heads, each cell at its best of three rates,
  beside --other's rates for s1-s3. With --other objective_test.csv and --variant: decoder_only trained on the
  continuation alone (task.objective=causal_continuation), seeds 1-5 at every size; with objective_test.csv as
  the points and --other objective_rates.csv: that objective one sqrt(2) step up and down at every size. Under
  RoPE: --other rope_wd0.csv --variant "weight decay 0"; --other --forced rope_batch4.csv --variant "4 windows a
  step" (s1-s3 at half the batch, each cell at the better of two rates; --other with no file: --forced's cells
  alone); --other --forced rope_cosine.csv --variant "cosine to 0, each budget alone" (the schedule). A cell
  pairs with the study's budget within 0.1% (half a batch rounds budgets to whole steps).
  --decompose: the chi^2 decomposition of the changed cells, as `decompose` prints it; with --variant also with
  each paired shift's se added in quadrature to its cell's (the shifts' own noise, which the first leaves out).
- interaction: is the size-by-data interaction a data term whose shape depends on D/N (the design's confound:
  each size spans its own tokens per parameter)? On the cell means, each with an offset per size: M1 a data term
  B/D^b (the law's), M1dn B (N/D)^b, M1g B N^g / D^b (g free: 0 the law's, b a term in D/N), M2 B_s/D^b. The
  sizes' tokens per parameter overlap pairwise, so the two terms predict different cells. Then M1 and M1g each
  with report.md's one-rate-per-size curvature, a factor (1 + c d^2 / 100) in d = log2(D / D_tune): the two alias
  where a size's budgets lie on one side of its tuning budget, and fitted together they are told apart.
- power: each gate's power against another record's misfit (--pattern, e.g. the sinusoidal record; --model M2, its
  size-by-data interaction as decompose's M2 fits it, or M3, or raw: its cell means' residuals from its law, its
  own seed noise included), added to this record's: replicates of this record's design from its own law
  and seed deviations, with and without the pattern, on the same noise; per gate the share failing its fixed bound
  and the share beyond a true law's 95% range. Its lack of fit uses the record's own pooled seed sd (a replicate's
  drawn deviations repeat runs and would understate it).
- common: two records of one design (--other), per family, on the runs (size, seed) both have (--every-run: all of
  each, for records of other seeds): each size's pooled seed sd in each, and the law's chi^2 on the cell means
  and their rms residual with one standard error for both (each size's two sds pooled by their degrees of
  freedom), so that a noisier record's smaller chi^2 is not its noise alone.

Their output, as RESULTS.md quotes it: experiments/scaling/misfit_rope.txt for the RoPE record (decompose, common,
interaction) and experiments/scaling/misfit.txt for the sinusoidal one (each command's lines after its `$` line;
the decompose, variants, cells and noise blocks were printed before points.csv gained encoder_only's rows: a rerun
adds its family and leaves the other three's lines unchanged).

    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    python experiments/bench_scripts/scaling_misfit.py decompose
    python experiments/bench_scripts/scaling_misfit.py decompose experiments/scaling/untuned/points.csv
    python experiments/bench_scripts/scaling_misfit.py variants
    python experiments/bench_scripts/scaling_misfit.py cells
    python experiments/bench_scripts/scaling_misfit.py noise --reps 200 --seed 1
    python experiments/bench_scripts/scaling_misfit.py rates
    python experiments/bench_scripts/scaling_misfit.py interaction
    python experiments/bench_scripts/scaling_misfit.py power experiments/scaling/rope_test.csv \
        --pattern SINUSOIDAL_POINTS.csv --arch decoder_only
    python experiments/bench_scripts/scaling_misfit.py common --other experiments/scaling/rope_test.csv
    python experiments/bench_scripts/scaling_misfit.py rates --other experiments/scaling/heads_test.csv \
        --variant "2 heads instead of 4"
"""

import argparse
import copy
import math
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402
from scipy.stats import chi2 as chi2_dist  # noqa: E402
from scipy.stats import f as f_dist  # noqa: E402

from zoo.model.cost import non_embedding_param_count  # noqa: E402
from zoo.scaling.budget_rate import tuning_budgets  # noqa: E402
from zoo.scaling.checks import lack_of_fit, pooled_sd, seed_noise  # noqa: E402
from zoo.scaling.conventions import study_shapes  # noqa: E402
from zoo.scaling.gates import family_checks  # noqa: E402
from zoo.scaling.law import ScalingError  # noqa: E402
from zoo.scaling.null import STATISTICS, gate_statistics, seed_deviations, simulate  # noqa: E402
from zoo.scaling.points import budget_keys, by_family, cell_means, fit_points, read_points_csv  # noqa: E402
from zoo.scaling.residuals import cell_residuals  # noqa: E402
from zoo.scaling.sizes import family_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
POINTS = REPO / "experiments" / "scaling" / "points.csv"
VOCAB = 84  # the characters of the 42 plays (data=shakespeare_plays)
RATE_TEST = REPO / "experiments" / "scaling" / "rate_test.csv"
LONGEST = ("s2", "s3")  # the sizes whose longest budget `cells` leaves out


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


# ---------------------------------------------------------------- gate statistics of modified point sets


def gate_stats(points: list[dict]) -> dict:
    """The law's fit and its gate statistics (zoo.scaling.gates.family_checks)."""
    law = fit(points)
    return {"fit": law, **family_checks(law, points)}


def row(label: str, g: dict) -> str:
    """One line: exponents, E, residual rms, the form's and the law's chi^2/dof, hold-out, long reach, LOSO."""
    v, lack, ho, lr, lo = g["fit"].values, g["lack"], g["holdout"], g["reach"], g["loso"]
    s = (
        f"{label:<34} a={v['alpha']:.3f} b={v['beta']:.3f} E={v['E']:.3f} rms={g['rms'] * 100:.2f}% "
        f"LoF form={lack['ratio']:.2f}/{lack['limit']:.2f} cell={lack['ratio_cell']:.2f} "
    )
    if ho is not None:
        s += f"HO={max(ho['errors']) * 100:.2f}%({np.mean(ho['signed']) * 100:+.2f}) "
    if lr is not None:
        s += f"LR[{','.join(lr['sizes'])}]={lr['worst'] * 100:.2f}%({lr['mean'] * 100:+.2f}) "
    if lo is not None:
        w = max(lo["rows"], key=lambda r: max(abs(r["d_alpha"]), abs(r["d_beta"])))
        s += f"LOSO={lo['worst']:.3f}(w/o {w['size']}: {w['d_alpha']:+.3f}/{w['d_beta']:+.3f})"
    return s


def budgets(points: list[dict]) -> dict[str, list[float]]:
    """{size: its budgets D, smallest first}."""
    return {s: sorted({p["D"] for p in points if p["size"] == s}) for s in dict.fromkeys(p["size"] for p in points)}


def drop(points: list[dict], sizes=(), cells=()) -> list[dict]:
    """The points without the `sizes` and the `cells` ((size, budget index from 0) pairs)."""
    bud = budgets(points)
    return [p for p in points if p["size"] not in sizes and (p["size"], bud[p["size"]].index(p["D"])) not in cells]


# ---------------------------------------------------------------- variants


def total_params(arch: str, n_non_embedding: dict[str, float]) -> dict[str, int]:
    """{size: total parameters} of `arch` at experiment=scaling's sizes; raises ValueError where zoo.model's
    non-embedding count is not the points' N (a shape or vocabulary unlike the study's)."""
    sizes = study_shapes()[0]
    out = {}
    for name in n_non_embedding:
        shape = sizes[name]
        model = family_model(arch, **shape, vocab_size=VOCAB, share_embeddings=True, tie_embeddings=True, dropout=0.0)
        if non_embedding_param_count(model) != n_non_embedding[name]:
            raise ValueError(f"{arch} {name}: zoo.model counts {non_embedding_param_count(model)} non-embedding")
        out[name] = sum(p.numel() for p in model.parameters())
    return out


def with_total(points: list[dict], arch: str) -> list[dict]:
    """The points with N = the total parameters (embeddings included)."""
    total = total_params(arch, {p["size"]: p["N"] for p in points})
    out = copy.deepcopy(points)
    for p in out:
        p["N"] = float(total[p["size"]])
        p["tokens_per_param"] = p["D"] / p["N"]
    return out


def cmd_variants(args) -> None:
    for arch, pts in args.families.items():
        total = with_total(pts, arch)
        print(f"\n=== {arch}")
        for label, pp in (
            ("all sizes, N non-emb", pts),
            ("no s1, N non-emb", drop(pts, sizes=("s1",))),
            ("all sizes, N total", total),
            ("no s1, N total", drop(total, sizes=("s1",))),
        ):
            g = gate_stats(pp)
            print(row(label, g))
            loso = "  ".join(f"{r['size']}:{r['d_alpha']:+.3f}/{r['d_beta']:+.3f}" for r in g["loso"]["rows"])
            print(f"    LOSO rows: {loso} | objective {g['fit'].objective:.3f}")


# ---------------------------------------------------------------- cells


def cell_label(cells) -> str:
    return ",".join(f"{s}b{i + 1}" for s, i in cells)


def greedy(points: list[dict], steps: int = 4):
    """Yields the cells removed so far, adding each time the one whose removal lowers the form's chi^2/dof most."""
    cells = [(s, i) for s, ds in budgets(points).items() for i in range(len(ds))]
    ratio = lambda pts: lack_of_fit(fit(pts), pts)["ratio"]  # noqa: E731
    dropped = []
    for _ in range(steps):
        dropped.append(
            min((c for c in cells if c not in dropped), key=lambda c: ratio(drop(points, cells=[*dropped, c])))
        )
        yield list(dropped)


def cmd_cells(args) -> None:
    for arch, pts in args.families.items():
        print(f"\n=== {arch}")
        print(row("all cells", gate_stats(pts)))
        if arch in args.singles:
            cells = [(s, i) for s, ds in budgets(pts).items() for i in range(len(ds))]
            stats = {c: gate_stats(drop(pts, cells=[c])) for c in cells}
            for c, g in sorted(stats.items(), key=lambda kv: kv[1]["lack"]["ratio"]):
                print(row(f"drop {c[0]} b{c[1] + 1}", g))
        for dropped in greedy(pts):
            print(row("greedy drop " + cell_label(dropped), gate_stats(drop(pts, cells=dropped))))
        longest = [(s, len(ds) - 1) for s, ds in budgets(pts).items() if s in LONGEST]
        print(row("drop longest " + cell_label(longest), gate_stats(drop(pts, cells=longest))))


# ---------------------------------------------------------------- noise


def misfit_size(fams: dict) -> None:
    print(
        "(a) cell residuals: rms over the cells (%), median cell se (%), rms of t; seed noise (rms of per-cell rel sd)"
    )
    for arch, pts in fams.items():
        rs = cell_residuals(fit(pts), pts)
        r, t = np.array([x["resid"] for x in rs]) * 100, np.array([x["t"] for x in rs])
        print(
            f"  {arch:<16} cell-resid rms {np.sqrt(np.mean(r**2)):.2f}%  median se {np.median(np.abs(r / t)):.3f}%  "
            f"rms t {np.sqrt(np.mean(t**2)):.1f}  seed noise {seed_noise(pts) * 100:.2f}%"
        )


def reach_stats(points: list[dict]) -> tuple:
    """long reach worst and mean, hold-out worst and mean (relative), leave-one-size-out worst (the report's null
    statistics, zoo.scaling.null.gate_statistics)."""
    return tuple(gate_statistics(points)[key] for key, *_ in STATISTICS)


def boot(points: list[dict], rng) -> list[dict]:
    """The points of runs drawn with replacement within each size (as many as it has)."""
    out = []
    for s in dict.fromkeys(p["size"] for p in points):
        seeds = sorted({p["seed"] for p in points if p["size"] == s})
        for new, sd in enumerate(rng.choice(seeds, len(seeds), replace=True)):
            out += [
                {**p, "seed": 100 + new, "run": f"{s}|{100 + new}"} for p in points if (p["size"], p["seed"]) == (s, sd)
            ]
    return out


def summarize(name: str, rows: list, obs: tuple, null: bool) -> None:
    rows = np.array(rows)
    labels = ("long reach worst", "long reach mean", "hold-out worst", "hold-out mean", "LOSO worst")
    print(f"  {name} (B={len(rows)}):")
    for j, label in enumerate(labels):
        v, o, x, pct = rows[:, j], obs[j], (100 if j < 4 else 1), ("%" if j < 4 else "")
        s = (
            f"    {label:<18} observed {o * x:+.3f}{pct}  replicates: median {np.median(v) * x:+.3f}, "
            f"2.5-97.5% [{np.percentile(v, 2.5) * x:+.3f}, {np.percentile(v, 97.5) * x:+.3f}]"
        )
        print(s + (f", P(|stat| >= observed) = {np.mean(np.abs(v) >= abs(o)):.2f}" if null else ""))


def cmd_noise(args) -> None:
    misfit_size(args.families)
    pts = args.families[args.arch]
    law, devs, obs = fit(pts), seed_deviations(pts), reach_stats(pts)
    print(
        f"\n(b,c) {args.arch}: observed long reach {obs[0] * 100:.2f}% ({obs[1] * 100:+.2f}), hold-out "
        f"{obs[2] * 100:.2f}% ({obs[3] * 100:+.2f}), LOSO {obs[4]:.3f}"
    )
    rng = np.random.default_rng(args.seed)
    null = [reach_stats(simulate(pts, law, devs, rng)) for _ in range(args.reps)]
    summarize("null: the fitted law + resampled seed deviations", null, obs, True)
    summarize(
        "bootstrap of runs within sizes (real points)",
        [reach_stats(boot(pts, rng)) for _ in range(args.reps)],
        obs,
        False,
    )


# ---------------------------------------------------------------- common


def law_wls(points: list[dict], sd: dict):
    """The law's (M0's) weighted least-squares fit to the cell means, each size's relative sd from `sd` ({N: sd}):
    (the cells, M0's prediction of its parameters, the fit, its number of parameters)."""
    c = cell_data(points, sd)
    _, pred, n_params, starts = nested_models(c, fit(points).values)[0]
    return c, pred, wls(pred, c, starts(None)), n_params


def common_chi2(points: list[dict], sd: dict) -> tuple[float, float]:
    """The law's (M0's) least chi^2 on the cell means with each size's relative sd from `sd` ({N: sd}) / sqrt(n),
    and the cell means' rms relative residual at that fit."""
    c, pred, best, _ = law_wls(points, sd)
    res = (c["mean"] - pred(best.x)) / pred(best.x)
    return float(2 * best.cost), float(np.sqrt(np.mean(res**2)))


def shared_runs(one: list[dict], two: list[dict]) -> tuple[list[dict], list[dict]]:
    """Each record's points of the runs (size, seed) both records have."""
    both = {(p["size"], p["seed"]) for p in one} & {(p["size"], p["seed"]) for p in two}
    return tuple([p for p in pts if (p["size"], p["seed"]) in both] for pts in (one, two))


def cmd_common(args) -> None:
    """Two records of one design compared on one standard error: per family in both, each size's pooled seed sd
    in each, then the law's chi^2 and rms residual with the sd of both pooled (weighted by their degrees of freedom),
    so that a noisier record's smaller chi^2 is not its noise alone."""
    other = by_family(read_points_csv(args.other))
    runs = "every run of each" if args.every_run else "the runs both have"
    print(f"== {args.points} against {args.other}: one standard error for both, on {runs}")
    for arch in [a for a in args.families if a in other]:
        one, two = (
            (args.families[arch], other[arch]) if args.every_run else shared_runs(args.families[arch], other[arch])
        )
        a, b = pooled_sd(one), pooled_sd(two)
        if set(a) != set(b):
            print(f"  {arch}: the records' sizes differ (N {sorted(set(a) ^ set(b))}): not one design; left out")
            continue
        common = {N: math.sqrt((a[N][1] * a[N][0] ** 2 + b[N][1] * b[N][0] ** 2) / (a[N][1] + b[N][1])) for N in a}
        (c1, r1), (c2, r2) = (common_chi2(pts, common) for pts in (one, two))
        sds = [" ".join(f"{100 * d[N][0]:.2f}" for N in sorted(common)) for d in (a, b)]
        print(f"  {arch}: seed sd % by size [{sds[0]}] against [{sds[1]}]")
        print(f"  {arch}: chi2 {c1:.1f} against {c2:.1f}; cell means' rms residual {r1:.2%} against {r2:.2%}")


# ---------------------------------------------------------------- power


def misfit_pattern(points: list[dict], model: str = "M2") -> dict:
    """{(size, budget key): a cell's relative misfit from the family's law}: "raw", its mean's residual from the law
    (fit_points), that record's seed noise included; "M2" or "M3" (decompose's models), the nested model's fitted
    departure from the law's weighted fit to the cell means (M0), a misfit without the record's noise."""
    if model == "raw":
        law = fit(points)
        return {(c["size"], c["key"]): c["mean"] / float(law.predict(c["N"], c["D"])) - 1 for c in cell_means(points)}
    c, fits = nested_fits(points)
    models = {name.split()[0]: (pred, fits[name][0].x) for name, pred, _, _ in nested_models(c, fit(points).values)}
    (p0, u0), (pk, uk) = models["M0"], models[model]
    keys = [k["key"] for k in cell_means(points) if k["n"] > 1]
    return {(s, k): float(d) for s, k, d in zip(c["size"], keys, pk(uk) / p0(u0) - 1)}


def with_pattern(points: list[dict], pattern: dict) -> list[dict]:
    """The points, each loss times (1 + its cell's residual in `pattern`). Raises ScalingError for a cell of the
    points that the pattern lacks (records of another design)."""
    out = []
    for p, k in zip(points, budget_keys(points)):
        if (p["size"], k) not in pattern:
            raise ScalingError(f"the pattern's record has no cell at {p['size']}, D {k:,.0f}: another design")
        out.append({**p, "loss": p["loss"] * (1 + pattern[p["size"], k])})
    return out


def power_stats(points: list[dict], pooled: dict, limit: float) -> dict:
    """The null statistics (gate_statistics) and the lack of fit: chi^2/dof of the form's weighted fit to the cell
    means (M0 of decompose) with each size's relative sd from `pooled` (_pooled_sd of the measured record: a
    replicate's own would be too small where its runs drew the same deviations), "lof_limit" its bound: with the
    sd known the chi^2 quantile over dof, not the gate's F quantile (whose sd is estimated)."""
    c, _, best, n_params = law_wls(points, {N: sd for N, (sd, _) in pooled.items()})
    lof = float(2 * best.cost / (len(c["mean"]) - n_params))
    return {**gate_statistics(points), "lof": lof, "lof_limit": limit}


POWER_BOUNDS = (  # (key, label, fails): each gate's fixed bound (zoo.scaling.gates); lack of fit with a known sd
    ("lof", "lack of fit, known sd", lambda s: s["lof"] > s["lof_limit"]),
    ("reach_worst", "long reach: largest", lambda s: s["reach_worst"] > 0.03),
    ("reach_mean", "long reach: mean", lambda s: abs(s["reach_mean"]) > 0.01),
    ("holdout_worst", "hold-out: largest", lambda s: s["holdout_worst"] > 0.03),
    ("loso_worst", "leave one size out", lambda s: s["loso_worst"] > 0.10),
)


def power_rows(points: list[dict], pattern: dict, reps: int, seed: int) -> tuple[list, list]:
    """power_stats of `reps` replicates of the points' design from their own law and seed deviations
    (zoo.scaling.null.simulate), and of each replicate with `pattern` added (with_pattern: the same noise)."""
    law, devs, rng = fit(points), seed_deviations(points), np.random.default_rng(seed)
    dof = lack_of_fit(law, points)["dof"]
    pooled, limit = pooled_sd(points), float(chi2_dist.ppf(0.95, dof) / dof)  # the sd known: chi^2, not F
    null, shifted = [], []
    for _ in range(reps):
        base = simulate(points, law, devs, rng)
        null.append(power_stats(base, pooled, limit))
        shifted.append(power_stats(with_pattern(base, pattern), pooled, limit))
    return null, shifted


def power_table(null: list[dict], shifted: list[dict]) -> list[tuple]:
    """Per gate of POWER_BOUNDS: (label, the share of `null` failing its bound, the share of `shifted` failing it,
    the share of `shifted` beyond a true law's range: above the 95th percentile of `null`, or for the signed mean
    outside its 2.5-97.5% range)."""
    out = []
    for key, label, fails in POWER_BOUNDS:
        v0, v1 = (np.array([s[key] for s in rows], dtype=float) for rows in (null, shifted))
        lo, hi = np.percentile(v0, [2.5, 97.5])
        beyond = np.mean((v1 < lo) | (v1 > hi)) if key == "reach_mean" else np.mean(v1 > np.percentile(v0, 95))
        out.append((label, np.mean([fails(s) for s in null]), np.mean([fails(s) for s in shifted]), float(beyond)))
    return out


def cmd_power(args) -> None:
    """Each gate's power against a misfit: replicates of the record's design from its own law and seed deviations
    (zoo.scaling.null.simulate), each also with the pattern's misfit added (same noise); power_table printed."""
    pts = args.families[args.arch]
    source = by_family(read_points_csv(args.pattern))
    if args.arch not in source:
        raise SystemExit(f"--pattern {args.pattern} has no {args.arch}; it has {', '.join(source)}")
    pattern = misfit_pattern(source[args.arch], args.model)
    null, shifted = power_rows(pts, pattern, args.reps, args.seed)
    size = max(abs(v) for v in pattern.values())
    print(
        f"== {args.arch}: {args.points} with the {args.model} misfit of {args.pattern} (cells up to {size:.2%}), "
        f"B={args.reps}"
    )
    for label, fail0, fail1, beyond in power_table(null, shifted):
        print(
            f"  {label:<22} fails its bound: true law {fail0:.2f}, with the misfit {fail1:.2f}; beyond a true law's "
            f"range {beyond:.2f}"
        )


# ---------------------------------------------------------------- command line


# ---------------------------------------------------------------- rates


def rate_of(p: dict) -> float:
    """The peak rate of a point's run (zoo.scaling.points names a run arch|size|seed|lr)."""
    return float(p["run"].rsplit("|", 1)[1])


PAIR_TOLERANCE = 1e-3  # another design's budget may differ by whole steps (half the batch: up to 512 tokens)


def paired_point(study: dict, q: dict) -> dict:
    """The study's point of q's size and seed at q's budget: the same D within PAIR_TOLERANCE (relative); an error
    naming q's cell when there is none."""
    for p in study.get((q["size"], q["seed"]), ()):
        if abs(p["D"] / q["D"] - 1) <= PAIR_TOLERANCE:
            return p
    raise SystemExit(f"no study point pairs with {q['size']} seed {q['seed']} at D = {q['D']:,.0f} (within 0.1%)")


def paired_shifts(points: list[dict], other: list[dict]) -> dict:
    """{(size, D, rate): (mean, se, n)}: each cell's loss at `other`'s rate relative to the study's, paired by seed
    ((other - study) / study; se over seeds, nan for one), D the study's (paired_point)."""
    study: dict = {}
    for p in points:
        study.setdefault((p["size"], p["seed"]), []).append(p)
    diffs = {}
    for q in other:
        p = paired_point(study, q)
        diffs.setdefault((q["size"], p["D"], rate_of(q)), []).append(q["loss"] / p["loss"] - 1)
    return {
        k: (np.mean(d), np.std(d, ddof=1) / math.sqrt(len(d)) if len(d) > 1 else math.nan, len(d))
        for k, d in diffs.items()
    }


def envelope(points: list[dict], shifts: dict, every: bool = False, forced: dict | None = None) -> list[dict]:
    """The study's points with each cell at its best rate: where another rate's paired mean is lower, every seed
    of the cell is scaled by (1 + the lowest such mean); every=True: each cell of `shifts` is scaled. `forced`
    (shifts of another design's cells, e.g. 2 heads): each of its cells takes the lowest of its means, lower
    than the study's or not, and `shifts` leaves it alone."""
    better: dict = {}
    for (s, d, _), (m, _, _) in shifts.items():
        if every or m < min(0.0, better.get((s, d), 0.0)):
            better[s, d] = m
    chosen: dict = {}
    for (s, d, _), (m, _, _) in (forced or {}).items():
        chosen[s, d] = min(m, chosen.get((s, d), math.inf))
    better.update(chosen)
    out = copy.deepcopy(points)
    for p in out:
        p["loss"] *= 1 + better.get((p["size"], p["D"]), 0.0)
    return out


def print_shifts(shifts: dict, tune: dict, pts: list[dict], study_rate: dict, variant: str | None) -> None:
    """One line per (size, budget, rate) of `shifts`: its paired mean +- se, at d doublings from the tuning
    budget."""
    for (size, d, rate), (m, se, n) in sorted(shifts.items()):
        if variant:
            what = f"{variant} at {rate:g}"
        elif rate != study_rate[size]:
            what = f"{rate:g} vs {study_rate[size]:g}"
        else:
            what = "the study's own rate, " + ("equal to the study's points" if m == 0 else "NOT the study's points")
        d_tune = math.log2(d / tune[next(p["N"] for p in pts if p["size"] == size)])
        print(f"  {size} D={d:>9,.0f} d={d_tune:+.2f} {what}: {m * 100:+.2f}% +- {se * 100:.2f} (n={n})")


def cmd_rates(args) -> None:
    other = by_family([p for path in args.other for p in read_points_csv(path)])
    forced = by_family([p for path in args.forced for p in read_points_csv(path)]) if args.forced else {}
    for arch in sorted(set(other) | set(forced)):
        pts = args.families[arch]
        study_rate = {p["size"]: rate_of(p) for p in pts}
        tune = tuning_budgets(pts)
        shifts = paired_shifts(pts, other[arch]) if arch in other else {}
        as_variant = args.variant if not args.forced else None
        change = as_variant or "another rate"
        if shifts:
            print(f"\n=== {arch}: each cell at {change}, against the study's (paired by seed)")
            print_shifts(shifts, tune, pts, study_rate, as_variant)
        forced_shifts = paired_shifts(pts, forced[arch]) if arch in forced else None
        if forced_shifts:
            lead = "" if shifts else "\n"
            print(f"{lead}=== {arch}: {args.variant} (--forced), against the study's (paired by seed)")
            print_shifts(forced_shifts, tune, pts, study_rate, args.variant)
        print(row("the study", gate_stats(pts)))
        parts = [f"its cells at {change}" if as_variant else "each cell at its best rate"] if shifts else []
        if forced_shifts:
            parts.append(f"{args.variant} at its best rate where measured")
        label = "; ".join(parts)
        changed = envelope(pts, shifts, every=bool(as_variant), forced=forced_shifts)
        print(row(label, gate_stats(changed)))
        if args.decompose:
            c, fits = nested_fits(changed)
            print_chi2(c, fits)
            print_sizes(c, fits)
            if as_variant:
                noise = {(s, d): se for (s, d, _), (_, se, _) in shifts.items()}
                print("  with each shift's se added in quadrature to its cell's se:")
                print_chi2(*nested_fits(changed, noise))


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    cmds = {
        "decompose": cmd_decompose,
        "variants": cmd_variants,
        "cells": cmd_cells,
        "noise": cmd_noise,
        "rates": cmd_rates,
        "interaction": cmd_interaction,
        "power": cmd_power,
        "common": cmd_common,
    }
    helps = {
        "decompose": "the form's lack-of-fit chi2 split by nested models M0 .. M3",
        "variants": "gate statistics without s1, and with N the total parameters",
        "cells": "gate statistics without single cells, the greedy 4, the longest budgets of s2 and s3",
        "noise": "cell residuals vs se; a seed-noise null simulation and a bootstrap of runs",
        "rates": "cells rerun at another rate: paired shifts, and the gates with each cell at its better rate",
        "interaction": "is the size-by-data interaction a data term in D/N? M1, M1dn, M1g, M2 on the cell means",
        "power": "each gate's power: a true law's replicates with and without another record's misfit added",
        "common": "two records of one design: seed sd per size, and the law's chi^2 with one standard error for both",
    }
    for name, func in cmds.items():
        s = sub.add_parser(name, help=helps[name])
        s.add_argument("points", nargs="?", type=Path, default=POINTS, help="a points.csv (default: %(default)s)")
        s.set_defaults(func=func)
    sub.choices["cells"].add_argument(
        "--singles", nargs="*", default=["decoder_only"], help="families to drop each cell of"
    )
    dec = sub.choices["decompose"]
    dec.add_argument("--without", nargs="*", default=[], help="sizes left out (e.g. s2)")
    dec.add_argument("--se-from", type=Path, help="a points.csv whose same-named sizes' seed noise sets the se")
    sub.choices["noise"].add_argument("--arch", default="decoder_only", help="the family simulated and resampled")
    sub.choices["noise"].add_argument("--reps", type=positive, default=40, help="replicates of each (default 40)")
    sub.choices["rates"].add_argument(
        "--other",
        type=Path,
        nargs="*",
        default=[RATE_TEST],
        help="the cells at other rates (default: %(default)s; none: --forced's cells alone)",
    )
    sub.choices["rates"].add_argument(
        "--decompose", action="store_true", help="also decompose the chi^2 of the cells at their best rates"
    )
    sub.choices["rates"].add_argument(
        "--variant", help="what --other's cells changed, where it is not the rate (e.g. '2 heads at s4')"
    )
    sub.choices["rates"].add_argument(
        "--forced",
        type=Path,
        nargs="+",
        help="cells of another design (named by --variant) at one or more rates: each of their cells takes its "
        "best of them, better than the study's or not; --other's rates apply to the other cells",
    )
    sub.choices["noise"].add_argument("--seed", type=int, default=1, help="numpy's generator seed (default 1)")
    sub.choices["common"].add_argument("--other", type=Path, required=True, help="the other record's points.csv")
    sub.choices["common"].add_argument(
        "--every-run", action="store_true", help="every run of each record, not the (size, seed) runs both have"
    )
    power = sub.choices["power"]
    power.add_argument("--pattern", type=Path, required=True, help="the points.csv whose misfit is added")
    power.add_argument("--arch", default="decoder_only", help="the family (default decoder_only)")
    power.add_argument("--reps", type=positive, default=100, help="replicates (default 100)")
    power.add_argument("--seed", type=int, default=1, help="numpy's generator seed (default 1)")
    power.add_argument(
        "--model", choices=("M2", "M3", "raw"), default="M2", help="the misfit: a nested model's (default M2) or raw"
    )
    return p


def main(argv=None) -> None:
    p = parser()
    args = p.parse_args(argv)
    if getattr(args, "forced", None) and not args.variant:
        p.error("--forced needs --variant: name what its cells changed (e.g. --variant '2 heads instead of 4')")
    try:
        args.families = by_family(read_points_csv(args.points))
    except ScalingError as e:
        p.error(str(e))
    if args.command in ("noise", "power") and args.arch not in args.families:
        p.error(f"--arch {args.arch!r} is not in {args.points}; it has {', '.join(args.families)}")
    args.func(args)


if __name__ == "__main__":
    main()
