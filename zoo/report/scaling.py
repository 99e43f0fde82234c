"""The report's Scaling section: a law L(N, D) = E + A / N^alpha + B / D^beta fitted per architecture to the points
of runs that differ in size (experiment=scaling), the gates that say whether each law can be trusted, and the
comparisons it supports. The statistics and their tables are zoo.scaling's (zoo.scaling.study, shared with
`python -m zoo.scaling gates points.csv`); this module reads the points from the runs and adds the checks that
need them (the cool-down check, steps, time) and the figures.

The points and points.csv: zoo.report.scaling_points."""

from pathlib import Path

import numpy as np

from zoo.report.scaling_checks import cooldown_check, cooldown_table, steps_bound_lines
from zoo.report.scaling_plots import scaling_plots
from zoo.report.scaling_points import scaling_points, write_points_csv
from zoo.report.scaling_tune import tune_section
from zoo.scaling.checks import residual_rms, seed_noise
from zoo.scaling.gates import HOLDOUT, HOLDOUT_AIM
from zoo.scaling.points import FITTED_KINDS
from zoo.scaling.refit import refit_sentence
from zoo.scaling.schedules import schedule_laws, schedule_table
from zoo.scaling.study import analyse, study_lines

MAX_EPOCHS = 4.0  # training tokens seen at most this often by the largest run (Muennighoff et al. 2023)


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


def _schedules(points: list[dict]) -> list[str]:
    """The law under each schedule (zoo.scaling.schedules), followed by an empty line; nothing without cosine
    points."""
    lines = schedule_table(*schedule_laws(points))
    return [*lines, ""] if lines else []


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


def _no_fit(points: list[dict], fitted: list[dict], scaling_sweep: bool, title: str, out_dir: Path):
    """A study without fitted points of two sizes, in an experiment=scaling directory (else nothing): a line saying
    why nothing is fitted, then its tuning stage where it has one (tune_section: lr_sweep.csv, its table and
    figure), so that a study whose cells have not run yet reports what it has. Returns (lines, figures)."""
    if not (points and scaling_sweep):
        return [], []
    if fitted:
        sizes = ", ".join(f"{n:,.0f}" for n in sorted({p["N"] for p in fitted}))
        why = f"No fit: every run has N = {sizes} non-embedding parameters, and a law needs runs of several sizes"
        why += " (experiment=scaling)."
    else:
        why = "No fit yet: none of the study's cells has a cool-down point."
    tuning, figures = tune_section(points, fitted, out_dir)  # its tuning stage, where it has one
    return [f"## {title}", "", why, *([""] + tuning if tuning else [])], figures


LM_STUDY = {"title": "Scaling", "task": "lm", "D": "the training tokens", "loss": "val/cont_loss"}


def _how_fitted(about: dict, csv_name: str, fits: dict) -> str:
    """The sentence after the gate table: the law, what N, D and the loss are, the intervals, the points' file and
    the commands that refit each family (refit_sentence)."""
    return (
        "L(N, D) = E + A / N^alpha + B / D^beta per architecture (Hoffmann et al. 2022's Huber fit, zoo.scaling.fit):"
        f" N the non-embedding parameters, D {about['D']}, the loss {about['loss']} at each budget; 95% "
        'intervals from a bootstrap over runs (seeds) within sizes, rescaled (docs/scaling-laws.md, "The gates"; '
        "over runs across sizes where a size has one seed), widened by the Birge ratio where chi2/dof > 1. Every "
        f"point is in [{csv_name}]({csv_name}) (`python -m zoo.scaling gates {csv_name}` prints these "
        "tables from it)." + refit_sentence(csv_name, fits)
    )


def scaling_section(
    runs: list[dict], out_dir: Path, scaling_sweep: bool = False, about: dict = LM_STUDY
) -> tuple[list[str], list[Path]]:
    """report.md's Scaling section and its files: the study's tables (zoo.scaling.study.study_lines: the gates
    first, the fit per architecture with intervals, the long reach, leave one size out, the law forms, the
    attention share, the compute frontiers and multipliers under each FLOP convention, the per-target-token view),
    then the hold-out errors, the cool-down check, the law under each schedule (zoo.scaling.schedules), seed
    noise against fit error, the steps-bound check, the rankings at the smallest and largest size, warnings, four
    plots and points.csv (every fitted point). Runs of one size give only a line saying why nothing is fitted (when
    `scaling_sweep`, an experiment=scaling directory); no points, nothing. about: the runs' task, the section's
    title and what D and the loss are (LM_STUDY; zoo.report.scaling_translation's)."""
    points = scaling_points(runs, about["task"])
    fitted = [p for p in points if p["kind"] in FITTED_KINDS]
    if len({p["N"] for p in fitted}) < 2:
        return _no_fit(points, fitted, scaling_sweep, about["title"], out_dir)
    study = analyse(fitted)
    by_arch, fits = study.by_arch, study.fits
    csv_path = write_points_csv(fitted, Path(out_dir) / "points.csv")
    tuning, tune_figures = tune_section(points, fitted, out_dir)
    tables = study_lines(study)
    split = tables.index("", 2) + 1  # after the gate table: how the law is fitted, then the rest
    text = [
        f"## {about['title']}",
        "",
        *tables[:split],
        _how_fitted(about, csv_path.name, fits),
        "",
        *tuning,
        *tables[split:],
        "",
        *_holdouts({arch: c["holdout"] for arch, c in study.checks.items()}),
        "",
        *cooldown_table(cooldown_check(points)),
        "",
        *_schedules(points),
        *_noise(by_arch, fits),
        "",
        *steps_bound_lines(by_arch),
        "",
        *_rankings(fitted),
        "",
        *_time(runs),
    ]
    warned = study.warnings + _warnings(by_arch, fits)
    if warned:
        text += ["Warnings: " + "; ".join(warned), ""]
    figures = (scaling_plots(by_arch, fits, study.frontiers, out_dir) if fits else []) + tune_figures
    if figures:
        text.append("Figures: " + ", ".join(f"[{p.name}]({p.name})" for p in figures))
    return text, figures
