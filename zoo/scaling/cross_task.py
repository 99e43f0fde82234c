"""The cross-task table: each family's law and compute multiplier in two scaling studies side by side (the
language-model study's points.csv and the translation study's), and whether the families rank alike at equal
compute on both. `python -m zoo.scaling cross LM.csv TRANSLATION.csv` prints it (cross_main).

Per family and task: alpha and beta of its law with their 95% intervals widened by its Birge ratio (as the report's
fit table), and k(C*) against REFERENCE, the frontiers' compute multiplier at the largest compute both families
measured (the k(C) gate's C*). The ranking at equal compute: every family's frontier loss L*(C) at the largest
compute every family of the task measured (the smallest of their largest C), lowest first; adjacent families whose
95% intervals of L*(C) overlap are joined by ≈ (not told apart). Losses of two tasks are not compared, only the
orders."""

import json
import math
import sys
from pathlib import Path

import numpy as np

from zoo.scaling.checks import widened_ci
from zoo.scaling.forms import SHAKESPEARE_PLAYS_TRAIN_TOKENS
from zoo.scaling.frontier import Frontier, fitted, measured_compute
from zoo.scaling.gates import fmt
from zoo.scaling.law import ScalingError
from zoo.scaling.points import REFERENCE, read_points_csv
from zoo.scaling.study import Study, analyse
from zoo.scaling.tune import design_path

TASKS = {"zoo.tasks.lm.LanguageModeling": "language modelling", "zoo.tasks.translation.Translation": "translation"}


def family_rows(study: Study) -> dict:
    """{arch: {"trusted", "alpha", "beta" (value, widened ci), "k" ({"value", "ci"} or None), "C_star"}} of the
    fitted families of a study; k None for REFERENCE, or without both frontiers."""
    out, front = {}, study.frontiers["C"]
    ref_pts = study.by_arch.get(REFERENCE)
    for arch, fit in study.fits.items():
        ci = widened_ci(fit, study.birge.get(arch, 1.0))
        row = {"trusted": study.verdicts[arch]["trusted"], "k": None, "C_star": None}
        row |= {k: (fit.values[k], ci[k]) for k in ("alpha", "beta")}
        if arch != REFERENCE and ref_pts and fitted(front.get(arch), front.get(REFERENCE)):
            cmax = max(p["C"] for p in study.by_arch[arch])
            c = measured_compute(front[arch], front[REFERENCE], cmax, max(p["C"] for p in ref_pts))
            row |= {"k": front[arch].multiplier(front[REFERENCE], c), "C_star": c}
        out[arch] = row
    return out


def equal_compute_ranking(study: Study) -> tuple[float, list[tuple[str, float, tuple | None]]] | None:
    """(C, [(arch, L*(C), its 95% interval)]) lowest loss first, at C = the smallest of the families' largest
    measured C; None with fewer than 2 fitted frontiers."""
    front = {a: f for a, f in study.frontiers["C"].items() if fitted(f)}
    if len(front) < 2:
        return None
    C = min(max(p["C"] for p in study.by_arch[a]) for a in front)
    rows = []
    for arch, fr in front.items():
        ci = tuple(np.percentile(Frontier.loss(C, fr.samples), [2.5, 97.5])) if len(fr.samples) else None
        rows.append((arch, float(Frontier.loss(C, fr.values)), ci))
    return C, sorted(rows, key=lambda r: r[1])


def ranking_text(ranking: list[tuple[str, float, tuple | None]]) -> str:
    """ "a 1.23 [1.2, 1.25] < b ..." with ≈ between neighbours whose intervals overlap (or either has none)."""
    text = f"{ranking[0][0]} {fmt(ranking[0][1], ranking[0][2])}"
    for (_, _, lo_ci), (arch, loss, ci) in zip(ranking, ranking[1:]):
        apart = lo_ci is not None and ci is not None and lo_ci[1] < ci[0]
        text += f" {'<' if apart else '≈'} {arch} {fmt(loss, ci)}"
    return text


def _k_cell(arch: str, row: dict) -> str:
    if row["k"] is None:
        return "1 (the reference)" if arch == REFERENCE else "–"
    return f"{fmt(row['k']['value'], row['k']['ci'])} at {row['C_star']:.3g}"


def cross_task_lines(studies: dict) -> list[str]:
    """Markdown lines of the cross-task table of `studies` ({task: Study}, two or more) and the ranking line per
    task, then whether the orders of the families both tasks share agree."""
    lines = [
        f"Each family's law on each task (alpha, beta: 95% intervals widened by the Birge ratio) and its compute "
        f"multiplier k(C*) against {REFERENCE} (the frontiers', at C*: the largest compute both measured; 1 = as "
        "efficient, > 1 = needs more compute).",
        "",
        "| arch | task | gates | alpha | beta | k(C*) at C* |",
        "|---|---|---|---|---|---|",
    ]
    rows = {task: family_rows(s) for task, s in studies.items()}
    for arch in dict.fromkeys(a for r in rows.values() for a in r):
        for task, by in rows.items():
            if arch in by:
                r = by[arch]
                lines.append(
                    f"| {arch} | {task} | {'passed' if r['trusted'] else 'FAILED'} | {fmt(*r['alpha'])} | "
                    f"{fmt(*r['beta'])} | {_k_cell(arch, r)} |"
                )
    return [*lines, "", *ranking_lines(studies)]


def ranking_lines(studies: dict) -> list[str]:
    """The ranking at equal compute per task, and the verdict on the families every task ranks: "no" when a pair
    is told apart (95% intervals of L*(C) disjoint) on two tasks in opposite orders; "yes" when every pair is told
    apart on every task in one order; else "cannot tell", naming the pairs some task does not tell apart."""
    lines, ranked = ["Ranking at equal compute (frontier loss L*(C) at the largest C every family measured):", ""], {}
    for task, study in studies.items():
        got = equal_compute_ranking(study)
        if got is None:
            lines.append(f"- {task}: fewer than 2 fitted frontiers, no ranking")
            continue
        C, ranking = got
        ranked[task] = ranking
        lines.append(f"- {task} (C = {C:.3g}): {ranking_text(ranking)}")
    shared = (
        set.intersection(*({a for a, _, _ in r} for r in ranked.values())) if len(ranked) == len(studies) else set()
    )
    if len(shared) < 2:
        return [*lines, "", "The same ranking on every task: cannot tell (fewer than 2 families ranked on each)."]
    kept = {t: [row for row in r if row[0] in shared] for t, r in ranked.items()}
    return [*lines, "", f"The same ranking on every task, of {', '.join(sorted(shared))}: {_verdict(kept)}."]


def _verdict(kept: dict) -> str:
    """yes / no (...) / cannot tell (...) of the rankings `kept` ({task: rows, lowest loss first})."""
    orders = {t: " < ".join(a for a, _, _ in rows) for t, rows in kept.items()}
    pairs = {t: _told_apart(rows) for t, rows in kept.items()}  # {task: {(lower, higher), ...}}
    flipped = any((b, a) in other for told in pairs.values() for a, b in told for other in pairs.values())
    if flipped:
        return "no (" + "; ".join(f"{t}: {o}" for t, o in orders.items()) + ")"
    n = len(next(iter(kept.values())))  # the families every task ranks
    n_pairs = n * (n - 1) // 2
    same = len(set(orders.values())) == 1
    if same and all(len(told) == n_pairs for told in pairs.values()):
        return "yes"
    tied = [
        f"{t}: " + ", ".join(f"{a} ≈ {b}" for a, b in ties)
        for t, rows in kept.items()
        if (ties := _tied(rows, pairs[t]))
    ]
    return "cannot tell (not told apart: " + "; ".join(tied) + "; the pairs told apart are in one order on every task)"


def _told_apart(rows: list) -> set[tuple[str, str]]:
    """(lower, higher) of each pair of families whose 95% intervals of L*(C) are disjoint."""
    return {
        (a[0], b[0])
        for i, a in enumerate(rows)
        for b in rows[i + 1 :]
        if a[2] is not None and b[2] is not None and a[2][1] < b[2][0]
    }


def _tied(rows: list, told: set) -> list[tuple[str, str]]:
    return [(a[0], b[0]) for i, a in enumerate(rows) for b in rows[i + 1 :] if (a[0], b[0]) not in told]


def recorded_task(points_csv) -> str | None:
    """The task ("language modelling" or "translation", TASKS) that a study's lr_sweep.design.json, beside its
    points.csv, records for every tuning design; None without the record, or where its designs name no task of
    TASKS or more than one."""
    path = design_path(Path(str(points_csv)).expanduser().with_name("lr_sweep.csv"))
    if not path.is_file():
        return None
    try:
        designs = json.loads(path.read_text()).values()
        found = {TASKS.get(d["config"].get("task._target_")) for d in designs}
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
    return found.pop() if len(found) == 1 else None


def cross_main(args) -> int:
    """`python -m zoo.scaling cross LM.csv TRANSLATION.csv [--unique-tokens U U] [--bootstrap B]`: print
    cross_task_lines of the two studies' cool-down points; 2 after a ScalingError (both files are read and checked
    before any fit; the same points given twice, or two files whose lr_sweep.design.json records the other task,
    are refused)."""
    try:
        if args.bootstrap < 40:
            raise ScalingError(f"--bootstrap {args.bootstrap}: give at least 40 resamples (default 200)")
        unique = args.unique_tokens or [SHAKESPEARE_PLAYS_TRAIN_TOKENS, None]
        if not all(u is None or (math.isfinite(u) and u > 0) for u in unique):
            raise ScalingError(f"--unique-tokens {unique}: give each training split's token count (D's tokens)")
        tasks = ("language modelling", "translation")
        read = {task: read_points_csv(path) for task, path in zip(tasks, (args.lm, args.translation))}  # before fits
        for task, path in zip(tasks, (args.lm, args.translation)):
            if not read[task]:
                raise ScalingError(f"{path}: no cool-down point (kind column) to fit")
        for task, path in zip(tasks, (args.lm, args.translation)):
            if (found := recorded_task(path)) not in (None, task):
                raise ScalingError(
                    f"{path} is a {found} study (its lr_sweep.design.json), given as the {task} one: give the LM "
                    "study's points.csv first, then the translation study's"
                )
        if read[tasks[0]] == read[tasks[1]]:
            raise ScalingError(
                f"{args.lm} and {args.translation} hold the same points: give the LM study's points.csv, then the "
                "translation study's"
            )
        studies = {task: analyse(read[task], u, args.bootstrap) for task, u in zip(tasks, unique)}
    except ScalingError as e:
        print(f"zoo.scaling: error: {e}", file=sys.stderr)
        return 2
    print("\n".join(cross_task_lines(studies)))
    return 0
