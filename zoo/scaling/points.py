"""A scaling study's points: read from a points.csv, grouped into runs and cells, and the law fitted to them.

A point is one budget of a run: {arch, size, seed, run (the group a bootstrap draws whole), N (non-embedding
parameters), D (training tokens), C (measured training FLOPs), tokens, loss, kind}. zoo.report builds the same
dicts from a study's results.json files; read_points_csv from the points.csv it writes (docs/scaling-laws.md)."""

import csv
import math
from pathlib import Path

import numpy as np

from zoo.scaling.fit import fit_scaling_law
from zoo.scaling.law import ScalingError
from zoo.scaling.refit import fit_options

BOOTSTRAP = 200  # resamples of each fit (its intervals and the compute multiplier's)
N_STARTS = 20  # L-BFGS-B starts of each fit to all points: the best of Hoffmann's grid (zoo.scaling.fit)
REFERENCE = "decoder_only"  # the compute multiplier k(C) is relative to its frontier
FITTED_KINDS = ("cooldown", "curve")  # the points a law is fitted to: cool-down branches, other runs' evaluations
COLUMNS = ("arch", "size", "seed", "n_params", "tokens", "flops", "loss")


def read_points_csv(path) -> list[dict]:
    """The fitted points of a study's points.csv (header: COLUMNS, and optionally kind, lr, train_tokens and
    objective: task.objective, where not the family's study objective; other columns are ignored). Rows whose kind
    is not a cool-down point (tune, cosine) are left out; without a kind column every row is one. A run is
    arch|size|seed (|lr with an lr column). Raises ScalingError naming the file, line and column of a missing column
    or a value that is not a positive finite number, and both lines of a point given twice (arch, size, seed, lr,
    tokens and objective alike)."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ScalingError(
                    f"{path}: no column {', '.join(map(repr, missing))}; a study's points.csv has the header "
                    f"{','.join(COLUMNS)} (python -m zoo.report writes it)"
                )
            points, lines = [], {}
            for row in reader:
                if (p := _point(row, path, reader.line_num)) is None:
                    continue
                key = (p["run"], p["D"], p["objective"])
                if (first := lines.setdefault(key, reader.line_num)) != reader.line_num:
                    raise ScalingError(
                        f"{path} lines {first} and {reader.line_num}: the same point twice ({p['arch']} {p['size']} "
                        f"seed {p['seed']}, {p['D']:g} tokens); each point once: remove the copy"
                    )
                points.append(p)
            return points
    except OSError as e:
        raise ScalingError(f"{path}: cannot read the file ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise ScalingError(f"{path}: not a UTF-8 CSV file ({e})") from e


def _point(row: dict, path: Path, line: int) -> dict | None:
    """One row as a point, or None for a row whose kind is not a cool-down point."""
    kind = (row.get("kind") or "cooldown").strip()
    if kind != "cooldown":
        return None
    values = {}
    for col in ("n_params", "tokens", "flops", "loss", *(c for c in ("lr", "train_tokens") if row.get(c))):
        try:
            values[col] = float(row[col])
        except (TypeError, ValueError):
            values[col] = math.nan
        if not (math.isfinite(values[col]) and values[col] > 0):
            raise ScalingError(
                f"{path} line {line}: column {col!r} = {row[col]!r}; it must be a positive finite number: fix or "
                "remove the row"
            )
    arch, size, seed = (row[c].strip() for c in ("arch", "size", "seed"))
    lr = f"|{row['lr'].strip()}" if row.get("lr") else ""
    return {
        "arch": arch,
        "size": size,
        "seed": int(seed) if seed.isdigit() else seed,
        "run": f"{arch}|{size}|{seed}{lr}",
        "N": values["n_params"],
        "D": values["tokens"],
        "C": values["flops"],
        "tokens": values["tokens"],
        "loss": values["loss"],
        "kind": "cooldown",
        "tokens_per_param": values["tokens"] / values["n_params"],
        "train_tokens": values.get("train_tokens"),
        "objective": (row.get("objective") or "").strip() or None,
    }


def by_family(points: list[dict], reference: str = REFERENCE) -> dict[str, list[dict]]:
    """{arch: its points}, the reference first, then the families in the points' order."""
    out = {}
    for p in sorted(points, key=lambda p: p["arch"] != reference):
        out.setdefault(p["arch"], []).append(p)
    return out


def fit_points(points: list[dict], bootstrap: int | None = None, seed: int = 0):
    """fit_scaling_law of the points' (N, D tokens, loss); a bootstrap resample draws whole runs (a trunk and its
    branches share their weights up to the branch, and a run's evaluations are correlated) within each size when
    every size has 2 or more runs (the sizes are the design, the seeds the sampling: every resample keeps every
    size and its number of runs); otherwise across sizes (wider: a resample may lack a size; the gates on the
    intervals then say they cannot check). A run is its (size, seed) and a stratum its size, labelled as
    points.csv's columns (zoo.scaling.refit.fit_options). Returns a zoo.scaling.fit.ScalingFit; its `options` are
    fit_scaling_law's (zoo.scaling.refit.refit_command prints them)."""
    N, D, L = (np.array([p[k] for p in points], dtype=float) for k in ("N", "D", "loss"))
    bootstrap = BOOTSTRAP if bootstrap is None else bootstrap
    options = fit_options(points, bootstrap, strata=bool(bootstrap) and not single_seed_sizes(points, "N"))
    fit = fit_scaling_law(N, D, L, **{**options, "seed": seed}, n_starts=N_STARTS)
    fit.options = {**options, "seed": seed}
    return fit


def fit_families(by_arch: dict, bootstrap: int | None = None) -> tuple[dict, list[str]]:
    """{arch: ScalingFit} of every family with at least 6 points (fit_points, `bootstrap` resamples; None:
    BOOTSTRAP), and a warning for each without."""
    fits, warnings = {}, []
    for arch, pts in by_arch.items():
        if len(pts) < 6:
            warnings.append(f"{arch}: {len(pts)} points, too few to fit 5 parameters with a check; not fitted")
            continue
        try:
            fits[arch] = fit_points(pts, bootstrap)
        except ScalingError as e:  # e.g. one size of this architecture: the law cannot be fitted
            warnings.append(f"{arch}: not fitted: {e}")
            continue
        except RuntimeError as e:  # the optimiser stalled on a resample of runs: resample points instead
            warnings.append(
                f"{arch}: the bootstrap over runs stalled ({e}); its intervals resample points (too narrow)"
            )
            N, D, L = (np.array([p[k] for p in pts], dtype=float) for k in ("N", "D", "loss"))
            options = fit_options(pts, bootstrap or BOOTSTRAP, strata=False, by_run=False)
            fits[arch] = fit_scaling_law(N, D, L, **options, n_starts=N_STARTS)
            fits[arch].options = options
    return fits, warnings


def single_seed_sizes(points: list[dict], key: str = "size") -> list:
    """The sizes (their `key`) with one run (seed): a bootstrap over runs within sizes cannot vary them."""
    runs = {}
    for p in points:
        runs.setdefault(p.get(key), set()).add(p["run"])
    return sorted((s for s, r in runs.items() if len(r) < 2), key=str)


def flops_ratio(points: list[dict], key: str = "C") -> float:
    """r = mean of C / (6 N D) over a family's points: its FLOPs per token in units of 6 N (C from `key`)."""
    return float(np.mean([p[key] / (6.0 * p["N"] * p["D"]) for p in points]))


BUDGET_SPREAD = 0.05  # D of one budget across seeds: a translation run's target tokens vary with its seed's batches


def budget_keys(points: list[dict]) -> list[float]:
    """Each point's budget key: at its N, the smallest D of the run of sorted D values within BUDGET_SPREAD
    (relative) of it, never two D values of one run (a run's evaluations along its curve are budgets of their
    own, not seeds). An LM study's seeds train the same D at a budget (the key is D); a translation study's
    target tokens differ by seed by well under 1%, its budgets by 1.4x or more."""
    by_n: dict = {}
    for p in points:
        run = p.get("run", p.get("seed"))  # None: a point of no known run, merged as before
        by_n.setdefault(p["N"], {}).setdefault(p["D"], set()).update(() if run is None else (run,))
    key = {}
    for n, ds in by_n.items():
        start, runs = None, set()
        for d in sorted(ds):
            if start is None or d > start * (1 + BUDGET_SPREAD) or runs & ds[d]:
                start, runs = d, set()
            runs |= ds[d]
            key[n, d] = start
    return [key[p["N"], p["D"]] for p in points]


def cell_means(points: list[dict]) -> list[dict]:
    """The cells of a family (a size and a budget: equal N and budget key, budget_keys): {"N", "D" (the mean of its
    points' D), "key" (the budget key), "size", "n" (seeds), "mean" (of the losses), "se" (their standard error,
    std with ddof 1 / sqrt(n); nan for one seed)}, in N then D order."""
    cells = {}
    for p, k in zip(points, budget_keys(points)):
        cells.setdefault((p["N"], k), []).append(p)
    out = []
    for (N, k), pts in sorted(cells.items()):
        losses = np.array([p["loss"] for p in pts])
        se = float(np.std(losses, ddof=1) / math.sqrt(len(losses))) if len(losses) > 1 else math.nan
        mean, D = float(losses.mean()), float(np.mean([p["D"] for p in pts]))
        out.append({"N": N, "D": D, "key": k, "size": pts[0].get("size"), "n": len(losses), "mean": mean, "se": se})
    return out
