"""A scaling study's statistics from its points, in one pass: the law per family and its gates, the law forms
compared, the compute frontiers under each FLOP convention and per target token. `python -m zoo.scaling gates
points.csv` prints them (gates_main); zoo.report.scaling puts them in the report's Scaling section."""

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from zoo.scaling import tables
from zoo.scaling.budget_rate import budget_rate_table
from zoo.scaling.conventions import CONVENTIONS, family_objective, recount, study_shapes, target_tokens_per_window
from zoo.scaling.forms import SHAKESPEARE_PLAYS_TRAIN_TOKENS, compare_forms, effective_tokens, fit_data_constrained
from zoo.scaling.frontier import Frontier
from zoo.scaling.gates import family_checks, gates
from zoo.scaling.law import ScalingError
from zoo.scaling.null import null_table
from zoo.scaling.objective_cost import objective_table
from zoo.scaling.points import by_family, fit_families, read_points_csv
from zoo.scaling.residuals import residual_table


@dataclass
class Study:
    """by_arch: {arch: points} (with C_half, C_6ND, attention, target where recounted); fits, checks, verdicts:
    per family (zoo.scaling.gates); frontiers: {key: {arch: Frontier}} for zoo's C and, where recounted, every
    convention of CONVENTIONS and "target"; forms: compare_forms's result (None without unique tokens);
    recount_why: why the points were not recounted (None when they were); warnings: families not fitted;
    objectives: {arch: the objective its points trained} (conventions.family_objective)."""

    by_arch: dict
    fits: dict
    checks: dict
    verdicts: dict
    frontiers: dict
    forms: dict | None = None
    unique: float | None = None
    block: int | None = None
    recount_why: str | None = None
    warnings: list = field(default_factory=list)
    objectives: dict = field(default_factory=dict)

    @property
    def birge(self) -> dict:
        return {arch: c["birge"] for arch, c in self.checks.items()}


def analyse(points: list[dict], unique: float | None = None, bootstrap: int | None = None) -> Study:
    """The Study of the fitted points (zoo.scaling.points dicts). unique: the unique training tokens of the law
    forms' comparison (a point's own train_tokens first; None and no point's: no comparison). bootstrap:
    resamples of each fit and frontier (None: zoo.scaling.points.BOOTSTRAP). The FLOPs are recounted at
    conf/experiment/scaling.yaml's shapes (zoo.scaling.conventions)."""
    if unique is None and all(p.get("train_tokens") for p in points):
        unique = float(np.median([p["train_tokens"] for p in points]))
    by_arch = by_family(points)
    objectives = {arch: family_objective(arch, pts) for arch, pts in by_arch.items()}  # one a family, before any fit
    forms = compare_forms(by_arch, unique) if unique else None
    if forms and forms["kept"] == "data-constrained":
        by_arch = {a: _effective(pts, unique) for a, pts in by_arch.items()}
    sizes, block = study_shapes()
    recounted, why = recount([p for pts in by_arch.values() for p in pts], sizes, block)
    if recounted is not None:
        by_arch = by_family(recounted)
    fits, warnings = fit_families(by_arch, bootstrap)
    checks = {arch: family_checks(fit, by_arch[arch]) for arch, fit in fits.items()}
    keys = [*CONVENTIONS, "target"] if recounted is not None else ["C"]
    frontiers = {k: {arch: Frontier(pts, bootstrap, key=k) for arch, pts in by_arch.items()} for k in keys}
    verdicts = gates(by_arch, fits, frontiers["C"], checks)
    return Study(by_arch, fits, checks, verdicts, frontiers, forms, unique, block, why, warnings, objectives)


def _effective(points: list[dict], unique: float) -> list[dict]:
    """The points with D the effective data D' of the data-constrained form, R*_D fitted to all of them."""
    N, D, L = (np.array([p[k] for p in points]) for k in ("N", "tokens", "loss"))
    U = np.array([p.get("train_tokens") or unique for p in points])
    r_star = fit_data_constrained(N, D, L, U)["r_star"]
    return [{**p, "D": float(d)} for p, d in zip(points, effective_tokens(D, U, r_star))]


def study_lines(study: Study) -> list[str]:
    """Every table of the study (zoo.scaling.tables; the cell residuals, zoo.scaling.residuals; the one-rate-per-size
    diagnosis, zoo.scaling.budget_rate), gates first, as
    Markdown lines (each table followed by an empty line)."""
    s = study
    out = [*tables.gate_table(s.verdicts), "", *tables.fit_table(s.by_arch, s.fits, s.verdicts, s.birge), ""]
    out += [*tables.reach_table(s.checks), ""]
    calibrated = null_table(s.by_arch, s.fits, checks=s.checks)  # [] where no long reach
    out += [*calibrated, ""] if calibrated else []
    out += [*tables.loso_table(s.checks), ""]
    out += [*residual_table(s.by_arch, s.fits), ""]
    out += [*budget_rate_table(s.by_arch, s.fits, s.checks), ""]
    if s.forms is not None:
        out += [*tables.forms_table(s.forms, s.unique), ""]
    if s.recount_why is not None:
        out += [f"FLOPs not recounted under other conventions: {s.recount_why}.", ""]
    else:
        out += [*tables.attention_table([p for pts in s.by_arch.values() for p in pts]), ""]
        unequal = objective_table(list(s.by_arch), objectives=s.objectives)  # scored tokens, FLOPs per scored token
        out += [*unequal, ""] if unequal else []
    out += [*tables.frontier_table({k: v for k, v in s.frontiers.items() if k != "target"}), ""]
    keys = [k for k in CONVENTIONS if k in s.frontiers]
    if not tables.has_multiplier(s.by_arch):
        keys = keys[:1]  # no multiplier under any convention: its one line, once
    for key in keys:
        out += [*tables.multiplier_table(s.by_arch, s.fits, s.frontiers[key], s.verdicts, s.birge, key), ""]
    if "target" in s.frontiers:
        per_window = {a: target_tokens_per_window(a, s.block, objective=s.objectives.get(a)) for a in s.by_arch}
        out += [*tables.target_table(s.by_arch, s.frontiers["target"], per_window), ""]
    return out


def gates_main(args) -> int:
    """`python -m zoo.scaling gates FILE.csv [--unique-tokens U] [--bootstrap B]`: print study_lines of the
    file's cool-down points; 2 after a ScalingError (a missing column, a bad value, too few points)."""
    try:
        if args.bootstrap < 40:
            raise ScalingError(f"--bootstrap {args.bootstrap}: give at least 40 resamples (default 200)")
        if args.unique_tokens is not None and not (math.isfinite(args.unique_tokens) and args.unique_tokens > 0):
            raise ScalingError(f"--unique-tokens {args.unique_tokens}: give the training split's token count")
        points = read_points_csv(args.csv)
        if not points:
            raise ScalingError(f"{args.csv}: no cool-down point (kind column) to fit")
        study = analyse(points, args.unique_tokens or SHAKESPEARE_PLAYS_TRAIN_TOKENS, args.bootstrap)
    except ScalingError as e:
        print(f"zoo.scaling: error: {e}", file=sys.stderr)
        return 2
    warned = [f"Warnings: {'; '.join(study.warnings)}"] if study.warnings else []
    print("\n".join(study_lines(study) + warned))
    return 0
