"""scaling_misfit.py's `rates`: cells rerun at another rate or design, paired with the study's by seed."""

import copy
import math
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from misfit_core import nested_fits, print_chi2, print_sizes  # noqa: E402
from misfit_variants import gate_stats, row  # noqa: E402

from zoo.scaling.budget_rate import tuning_budgets  # noqa: E402
from zoo.scaling.points import by_family, read_points_csv  # noqa: E402

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
