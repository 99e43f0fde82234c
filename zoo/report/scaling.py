"""The report's Scaling section: a law L(N, D) = E + A / N^alpha + B / D^beta fitted per architecture to the
evaluation points of runs that differ in size (experiment=scaling), and the comparisons it supports.

Each validation of a run is a point: N = its non-embedding parameters (results.json's params_non_embedding,
Kaplan et al. 2020), the training FLOPs C spent so far (cost/flops: zoo.model.cost through the objective, so
ENTP's re-reading and the encoder's source tokens count) and the continuation loss (val/cont_loss, the tokens
every architecture predicts alike). The fit reads D as C / (6 N), the tokens a plain causal model would have
read for that compute, so the frontier L*(C) of every architecture is in the same measured FLOPs
(zoo.scaling.fit, Hoffmann et al. 2022's method). A section over runs of one size says why it fits nothing."""

from pathlib import Path

import numpy as np

from zoo.report.runs import arch_label, read_curves
from zoo.scaling.fit import PARAMS, ScalingError, compute_optimal, fit_scaling_law

LOSS = ("val/cont_loss", "val/loss")  # the metric fitted: the first a run logs
BOOTSTRAP = 200  # resamples of each fit (its intervals and the compute multiplier's)
REFERENCE = "decoder_only"  # the compute multiplier k(C) is relative to its frontier
HOLDOUT_AIM = 0.02  # relative error the hold-out check aims for


def scaling_points(runs: list[dict]) -> list[dict]:
    """Every validation of every finished LM run that records params_non_embedding, as {arch, seed, run, N,
    D (C / 6 N), C, tokens, seconds, loss}; a run without those curves gives none."""
    points = []
    for run in runs:
        if run.get("status", "ok") != "ok" or run.get("task") != "lm" or not run.get("params_non_embedding"):
            continue
        curves = read_curves(Path(run["run_dir"]))
        metric = next((m for m in LOSS if m in curves), None)
        if metric is None or "cost/flops" not in curves:
            continue
        cost = {k: dict(curves.get(f"cost/{k}", [])) for k in ("flops", "tokens", "seconds")}
        N = float(run["params_non_embedding"])
        for step, loss in curves[metric]:
            C = cost["flops"].get(step)
            if C:
                points.append(
                    {
                        "arch": arch_label(run),
                        "seed": run.get("seed"),
                        "run": run["run_dir"],
                        "N": N,
                        "C": C,
                        "D": C / (6.0 * N),
                        "tokens": cost["tokens"].get(step),
                        "seconds": cost["seconds"].get(step),
                        "loss": loss,
                    }
                )
    return points


def fit_points(points: list[dict], bootstrap: int = BOOTSTRAP, seed: int = 0):
    """fit_scaling_law of the points' (N, D, loss); a bootstrap resample draws whole runs (their evaluations
    are correlated). Returns a zoo.scaling.fit.ScalingFit."""
    N, D, L = (np.array([p[k] for p in points], dtype=float) for k in ("N", "D", "loss"))
    return fit_scaling_law(N, D, L, bootstrap=bootstrap, seed=seed, groups=[p["run"] for p in points])


def frontier(C, params) -> np.ndarray:
    """L*(C) of a law: compute_optimal's loss at each C (FLOPs); params: (E, A, B, alpha, beta), each a scalar
    or a column of resamples."""
    return compute_optimal(C, *params)[2]


def matching_compute(loss, params, lo: float, hi: float) -> np.ndarray:
    """The compute C at which the law `params` reaches `loss` on its frontier (bisection in log C between lo
    and hi FLOPs; inf where the law never gets that low: loss <= E, or beyond hi)."""
    loss = np.asarray(loss, dtype=float)
    a, b = np.full(loss.shape, np.log(lo)), np.full(loss.shape, np.log(hi))
    for _ in range(80):
        mid = (a + b) / 2
        above = frontier(np.exp(mid), params) > loss  # still worse than the target: needs more compute
        a, b = np.where(above, mid, a), np.where(above, b, mid)
    C = np.exp((a + b) / 2)
    return np.where(frontier(np.exp(b), params) <= loss * (1 + 1e-9), C, np.inf)


def multiplier(fit, ref, C: float) -> dict:
    """k(C) = C' / C, C' the compute at which `fit`'s frontier reaches `ref`'s loss at C (the compute
    multiplier of Kaplan et al. 2020's architecture comparisons); with the percentile interval over paired
    bootstrap resamples. {"value": k, "ci": (lo, hi) or None}; inf when the law never reaches that loss."""
    point = lambda f: tuple(f.values[k] for k in PARAMS)  # noqa: E731
    k = float(matching_compute(frontier(C, point(ref)), point(fit), C * 1e-9, C * 1e9)) / C
    n = min(len(fit.samples), len(ref.samples))
    if not n:
        return {"value": k, "ci": None}
    cols = lambda f: tuple(f.samples[:n, i] for i in range(5))  # noqa: E731
    with np.errstate(all="ignore"):
        ks = matching_compute(frontier(C, cols(ref)), cols(fit), C * 1e-9, C * 1e9) / C
    ks = np.where(np.isfinite(ks), ks, np.inf)
    lo, hi = np.percentile(ks, [2.5, 97.5])
    return {"value": k, "ci": (float(lo), float(hi))}


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


def final_losses(points: list[dict]) -> dict:
    """{(arch, N): [the last evaluation's loss of each run]}: the largest budget each run reached."""
    last = {}
    for p in points:
        if p["run"] not in last or p["C"] > last[p["run"]]["C"]:
            last[p["run"]] = p
    out = {}
    for p in last.values():
        out.setdefault((p["arch"], p["N"]), []).append(p["loss"])
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
            fits[arch] = fit_scaling_law(N, D, L, bootstrap=BOOTSTRAP, seed=0, n_starts=20)
    return fits, warnings


def _fit_table(by_arch: dict, fits: dict) -> list[str]:
    """The per-architecture table of the law's parameters with their 95% bootstrap intervals."""
    lines = [
        "| arch | runs | sizes | points | E | A | B | alpha | beta | a (N_opt ∝ C^a) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arch, fit in fits.items():
        pts = by_arch[arch]
        cells = [fmt(fit.values[k], fit.ci[k]) for k in ("E", "A", "B", "alpha", "beta", "a")]
        lines.append(
            f"| {arch} | {len({p['run'] for p in pts})} | {len({p['N'] for p in pts})} | {len(pts)} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def _multipliers(fits: dict, points: list[dict]) -> list[str]:
    """k(C) of each architecture against REFERENCE at the smallest and largest measured C and 10x beyond."""
    if REFERENCE not in fits or len(fits) < 2:
        return [f"No compute multiplier: {REFERENCE} was not fitted."]
    cs = [min(p["C"] for p in points), max(p["C"] for p in points)]
    cs.append(10 * cs[1])
    lines = [
        f"The compute multiplier k(C): how many times {REFERENCE}'s compute C an architecture needs to reach "
        f"{REFERENCE}'s frontier loss at C (1 = as efficient, > 1 = needs more; 95% intervals over paired "
        "bootstrap resamples of runs).",
        "",
        "| arch | " + " | ".join(f"C = {c:.3g}" + (" (10x beyond)" if i == 2 else "") for i, c in enumerate(cs)) + " |",
        "|---|" + "---|" * len(cs),
    ]
    for arch, fit in fits.items():
        if arch != REFERENCE:
            ks = [multiplier(fit, fits[REFERENCE], c) for c in cs]
            lines.append(f"| {arch} | " + " | ".join(fmt(k["value"], k["ci"]) for k in ks) + " |")
    return lines


def _holdouts(by_arch: dict) -> list[str]:
    """The hold-out check of every architecture: its largest size predicted by a fit without it."""
    lines = [
        f"Hold-out: each law refitted without its largest size predicts that size's points (aim: error "
        f"<= {HOLDOUT_AIM:.0%} of the loss).",
        "",
    ]
    for arch, pts in by_arch.items():
        h = holdout(pts)
        if h is None:
            lines.append(f"- {arch}: too few points without the largest size to refit")
            continue
        worst = max(h["errors"])
        mark = "within" if worst <= HOLDOUT_AIM else "OVER"
        lines.append(
            f"- {arch}: N = {h['N']:,.0f}, relative errors {', '.join(f'{e:.2%}' for e in h['errors'])} "
            f"(largest {worst:.2%}, {mark} the aim)"
        )
    return lines


def _noise(points: list[dict], fits: dict) -> list[str]:
    """Seed noise at the repeated size next to each fit's residuals (both relative to the loss)."""
    finals = final_losses(points)
    lines = ["| arch | N | seeds | seed sd / loss | fit residual rms / loss |", "|---|---|---|---|---|"]
    for (arch, N), losses in finals.items():
        if len(losses) < 2 or arch not in fits:
            continue
        pts = [p for p in points if p["arch"] == arch]
        pred = fits[arch].predict(np.array([p["N"] for p in pts]), np.array([p["D"] for p in pts]))
        resid = np.array([(p["loss"] - q) / p["loss"] for p, q in zip(pts, pred)])
        sd = float(np.std(losses, ddof=1) / np.mean(losses))
        lines.append(f"| {arch} | {N:,.0f} | {len(losses)} | {sd:.2%} | {float(np.sqrt(np.mean(resid**2))):.2%} |")
    if len(lines) == 2:
        return ["Seed noise: no size has runs of several seeds."]
    return ["Seed noise against fit error (a gap between families smaller than these is noise):", "", *lines]


def _rankings(points: list[dict]) -> list[str]:
    """The architectures ranked by their last evaluation's loss at the smallest and the largest size."""
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
        f"Rankings by the last evaluation's loss (best first): smallest size {' < '.join(rank['smallest'])}; "
        f"largest size {' < '.join(rank['largest'])}: they {agree}."
    ]


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
    """The design and fit warnings: parameters outside the fitter's start grid (alpha, beta in 0 .. 2), fewer
    than 3 sizes or budgets, one tokens-per-parameter ratio, and residuals that grow at the smallest size."""
    out = []
    for arch, pts in by_arch.items():
        sizes = sorted({p["N"] for p in pts})
        budgets = max(sum(q["run"] == r for q in pts) for r in {p["run"] for p in pts})
        if len(sizes) < 3 or budgets < 3:
            out.append(f"{arch}: {len(sizes)} sizes and at most {budgets} budgets per run; a law wants 3 or more each")
        if len({round(p["tokens"] / p["N"], 1) for p in pts if p["tokens"]}) < 2:
            out.append(f"{arch}: every point has one tokens-per-parameter ratio; D's exponent is not identified")
        fit = fits.get(arch)
        if fit is None:
            continue
        for k in ("alpha", "beta"):
            if not 0.0 < fit.values[k] < 2.0:
                out.append(f"{arch}: {k} = {fit.values[k]:.3g}, outside the fitter's start grid (0 .. 2)")
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
    return out or ["none"]


def _plots(by_arch: dict, fits: dict, out_dir: Path) -> list[Path]:
    """scaling_frontier.png (loss against C, log-log: points, frontier L*(C) and its 95% band), scaling_isoflop.png
    (the fitted loss against N at three fixed C) and scaling_nopt.png (N_opt against C with its band); one
    colour per architecture in all three."""
    from zoo.report.plots import _plt

    plt = _plt()
    allc = [p["C"] for pts in by_arch.values() for p in pts]
    C = np.geomspace(min(allc) / 2, 10 * max(allc), 60)
    colors = {arch: f"C{i}" for i, arch in enumerate(by_arch)}
    return [
        _save(_plot_frontier(plt, by_arch, fits, C, colors), out_dir / "scaling_frontier.png", plt),
        _save(_plot_isoflop(plt, by_arch, fits, allc, colors), out_dir / "scaling_isoflop.png", plt),
        _save(_plot_nopt(plt, fits, C, colors), out_dir / "scaling_nopt.png", plt),
    ]


def _plot_frontier(plt, by_arch: dict, fits: dict, C: np.ndarray, colors: dict):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for arch, pts in by_arch.items():
        ax.loglog([p["C"] for p in pts], [p["loss"] for p in pts], "o", ms=3, alpha=0.6, color=colors[arch], label=arch)
        if arch in fits:
            al = fits[arch].allocation(C)
            ax.loglog(C, al["loss"]["value"], "-", color=colors[arch])
            if al["loss"]["ci"]:
                lo, hi = np.array(al["loss"]["ci"]).T
                ax.fill_between(C, lo, hi, color=colors[arch], alpha=0.15)
    ax.set(
        xlabel="training FLOPs C", ylabel="validation loss (nats/token)", title="Loss against compute: frontier L*(C)"
    )
    ax.legend(fontsize=8)
    return fig


def _plot_isoflop(plt, by_arch: dict, fits: dict, allc: list, colors: dict):
    """The y axis spans the measured losses (a fit far off the data, at a bound, would squash every curve)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for c, style in zip(np.geomspace(min(allc), max(allc), 3), ("-", "--", ":")):
        for arch, fit in fits.items():
            Ns = np.geomspace(min(p["N"] for p in by_arch[arch]) / 4, max(p["N"] for p in by_arch[arch]) * 4, 50)
            with np.errstate(all="ignore"):
                y = fit.predict(Ns, c / (6 * Ns))
            ax.semilogx(Ns, y, style, color=colors[arch], label=f"{arch}, C = {c:.2g}")
    losses = [p["loss"] for pts in by_arch.values() for p in pts]
    ax.set_ylim(0.8 * min(losses), 1.5 * max(losses))
    ax.set(xlabel="non-embedding parameters N", ylabel="fitted loss", title="IsoFLOP curves (the fits at fixed C)")
    ax.legend(fontsize=6)
    return fig


def _plot_nopt(plt, fits: dict, C: np.ndarray, colors: dict):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for arch, fit in fits.items():
        al = fit.allocation(C)
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
    """report.md's Scaling section and its figures: the fit per architecture with intervals, the compute
    multipliers, the hold-out check, seed noise against fit error, the rankings at the smallest and largest
    size, warnings and three plots. Runs of one size give only a line saying why nothing is fitted (when
    `scaling_sweep`, an experiment=scaling directory, or they carry evaluation points); no points, nothing."""
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
    by_arch = {}
    for p in sorted(points, key=lambda p: p["arch"] != REFERENCE):  # the reference first, then the runs' order
        by_arch.setdefault(p["arch"], []).append(p)
    fits, warnings = _fits(by_arch)
    text = [
        "## Scaling",
        "",
        "L(N, D) = E + A / N^alpha + B / D^beta per architecture (Hoffmann et al. 2022's Huber fit, zoo.scaling.fit):"
        " N the non-embedding parameters, D = C / (6 N) from the measured training FLOPs C, the loss val/cont_loss"
        " at every evaluation; 95% intervals from a bootstrap over runs.",
        "",
        *_fit_table(by_arch, fits),
        "",
        *_multipliers(fits, points),
        "",
        *_holdouts(by_arch),
        "",
        *_noise(points, fits),
        "",
        *_rankings(points),
        "",
        *_time(runs),
        "Warnings: " + "; ".join(warnings + _warnings(by_arch, fits)),
        "",
    ]
    figures = _plots(by_arch, fits, out_dir) if fits else []
    text.append("Figures: " + ", ".join(f"[{p.name}]({p.name})" for p in figures))
    return text, figures
