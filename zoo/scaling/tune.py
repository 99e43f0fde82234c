"""The scaling study's tuning stage: per family and size, each rate of the size's lr_grid trained to its middle
budget with tune_seeds seeds (cells SIZE_seedS_lrR, zoo.scaling.grid); a size with lr: tuned runs its cool-down
cells at its family's best rate, the one with the lowest seed-mean loss. The rate must lie inside its grid: a best
rate at an edge may not be the best, so the study refuses it and names the rate to add.

The tuning points are rows of kind "tune" in the cells' points.csv (zoo.run.scaling_cell), with their `lr`."""

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

from omegaconf import OmegaConf

from zoo.errors import ConfigError, is_number

TUNE_KIND = "tune"  # points.csv's kind of a tuning run
COSINE_TUNE_KIND = "tune_cosine"  # ... of a tuning run of the cool-down check's cosine schedule
SWEEP_FIELDS = ("arch", "size", "seed", "lr", "tokens", "loss")  # lr_sweep.csv's header
DESIGN_SUFFIX = ".design.json"  # beside lr_sweep.csv: each family and size's tuning design (tuning_design)
TUNING_VARIES = ("seed", "data.seed", "scaling.cell", "task.optimizer.lr")  # what differs among a size's runs


def check_rates(grid, key: str, what: str) -> list[float]:
    """A tuning grid's rates, smallest first. ConfigError naming `key` (e.g. compare.lr_grid) unless `grid` is a
    list of at least 3 distinct positive finite rates; `what` follows the value in the message."""
    rates = list(grid) if isinstance(grid, (list, tuple)) or OmegaConf.is_list(grid) else None
    if not rates or len(rates) < 3 or not all(is_number(r) and math.isfinite(r) and r > 0 for r in rates):
        raise ConfigError(
            f"{key}={grid!r}{what} a list of at least 3 positive peak rates, e.g. [4.0e-3, 5.7e-3, 8.0e-3] (the "
            "best must lie inside it)"
        )
    if len(set(map(float, rates))) < len(rates):
        raise ConfigError(f"{key}={list(rates)!r} names a rate twice: give each rate once")
    return sorted(float(r) for r in rates)


def tune_rows(sweep_dir: Path, kind: str = TUNE_KIND) -> list[dict]:
    """Every tuning point of `kind` (TUNE_KIND, COSINE_TUNE_KIND) in a sweep folder's cells (SWEEP_DIR/*/points.csv),
    numbers typed."""
    rows = []
    for path in sorted(Path(sweep_dir).glob("*/points.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if r.get("kind") == kind:
                    rows.append({**r, "seed": int(r["seed"]), "lr": float(r["lr"]), "loss": float(r["loss"])})
    return rows


def read_sweep_table(path) -> list[dict]:
    """The rows of an earlier study's lr_sweep.csv (scaling.tuning_table), numbers typed. ConfigError when the file
    is missing, its header is not SWEEP_FIELDS, or a row's seed, rate, tokens or loss is not a number."""
    path = Path(str(path)).expanduser()
    key = f"scaling.tuning_table={str(path)!r}"
    if not path.is_file():
        raise ConfigError(f"{key} is not a file: give the path of a study's lr_sweep.csv, or null to tune here")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != SWEEP_FIELDS:
            raise ConfigError(
                f"{key} has the header {reader.fieldnames}, not {','.join(SWEEP_FIELDS)}: give an lr_sweep.csv "
                "as zoo.report writes it"
            )
        rows = list(reader)
    typed = []
    for i, r in enumerate(rows, start=2):
        try:
            typed.append(
                {
                    **r,
                    "seed": int(r["seed"]),
                    "lr": float(r["lr"]),
                    "tokens": int(r["tokens"]),
                    "loss": float(r["loss"]),
                }
            )
        except (TypeError, ValueError):
            raise ConfigError(f"{key}, line {i}: {r} has a seed, lr, tokens or loss that is not a number") from None
    return typed


def tuning_design(cell: dict) -> dict:
    """A tuning cell's design (its cell.json: {"arch", "config"}, zoo.run.scaling_identity.design) without what
    differs among the runs of one family and size (TUNING_VARIES): the same for every rate and seed."""
    return {"arch": cell["arch"], "config": {k: v for k, v in cell["config"].items() if k not in TUNING_VARIES}}


def design_path(table) -> Path:
    """The design record beside an lr_sweep.csv: lr_sweep.design.json."""
    path = Path(str(table)).expanduser()
    return path.with_name(path.stem + DESIGN_SUFFIX)


def write_designs(designs: dict, table: Path) -> Path | None:
    """lr_sweep.design.json beside `table`: {"ARCH|SIZE": tuning_design}; nothing without designs."""
    if not designs:
        return None
    path = design_path(table)
    path.write_text(json.dumps({f"{a}|{s}": d for (a, s), d in sorted(designs.items())}, indent=1, sort_keys=True))
    return path


def table_design(table, arch: str, size: str) -> dict:
    """The tuning design of `arch` at `size` recorded beside lr_sweep.csv `table`. ConfigError when the record or
    its entry is missing: without it a table of another design (objective, data, schedule) could pass."""
    path = design_path(table)
    designs = json.loads(path.read_text()) if path.is_file() else None
    if designs is None or f"{arch}|{size}" not in designs:
        what = f"{path.name} has no entry {arch}|{size}" if designs is not None else f"{path} is missing"
        raise ConfigError(
            f"scaling.tuning_table={str(table)!r}: {what}, the record of the design the table was tuned under "
            "(zoo.report writes it beside lr_sweep.csv); without it the table cannot be checked against this "
            "study: set scaling.tuning_table=null to tune here"
        )
    return designs[f"{arch}|{size}"]


def table_row(rows: list[dict], arch: str, size: str, seed: int, lr: float) -> dict | None:
    """The lr_sweep.csv row of one tuning run (family label, size, seed, rate: within 1e-5, as the file writes rates
    to 6 significant digits), or None."""
    for r in rows:
        if (r["arch"], r["size"], r["seed"]) == (arch, size, seed) and math.isclose(r["lr"], lr, rel_tol=1e-5):
            return r
    return None


def seed_means(rows: list[dict], arch: str, size: str) -> dict[float, list[float]]:
    """{rate: [loss of each seed]} of one family (arch label) and size: one loss a seed (its last row)."""
    out = defaultdict(dict)
    for r in rows:
        if r["arch"] == arch and r["size"] == size:
            out[float(r["lr"])][int(r["seed"])] = float(r["loss"])
    return {rate: list(by_seed.values()) for rate, by_seed in out.items()}


def mean_loss(losses: list[float]) -> float:
    """The seed-mean loss of one rate; inf when a seed's loss is not finite (a diverged run ranks last)."""
    mean = sum(losses) / len(losses)
    return mean if math.isfinite(mean) else math.inf


def best_rate(losses: dict[float, list[float]]) -> float:
    """The rate whose seed-mean loss is lowest (a tie: the smaller rate; a rate with a diverged seed: last).
    ConfigError when no rate has a finite loss."""
    best = min(sorted(losses), key=lambda r: mean_loss(losses[r]))
    if not math.isfinite(mean_loss(losses[best])):
        raise ConfigError(
            f"every tuning rate ({', '.join(f'{r:g}' for r in sorted(losses))}) diverged (a loss not finite): "
            "lower the grid's rates"
        )
    return best


def rate_beyond(grid, best: float) -> float | None:
    """The rate to add when `best` is an edge of the grid (sorted, >= 2 rates): a step of the grid's ratio at that
    edge beyond it (below the smallest, above the largest); None when `best` lies inside."""
    grid = sorted(float(r) for r in grid)
    if best == grid[0]:
        return best / (grid[1] / grid[0])
    if best == grid[-1]:
        return best * (grid[-1] / grid[-2])
    return None


def edge_best(losses: dict[float, list[float]], grid, best: float) -> tuple[float, float] | None:
    """(the edge, the rate to add beyond it) when an edge of `grid` is the best rate or ties its seed-mean loss
    (mean_loss), at either end; None when the best lies strictly inside the grid."""
    grid = sorted(float(r) for r in grid)
    tied = [r for r in (grid[0], grid[-1]) if mean_loss(losses[r]) == mean_loss(losses[best])]
    return (tied[0], rate_beyond(grid, tied[0])) if tied else None


def tuned_rate(rows: list[dict], arch: str, size: str, grid, seeds: int) -> float:
    """The family's tuned rate at a size: best_rate over its lr_grid, each rate with `seeds` seeds. Raises
    ConfigError when the tuning stage has not run every rate and seed, or when the best rate is an edge of the grid
    (naming the rate to add, a step of the grid's ratio beyond it)."""
    losses = seed_means(rows, arch, size)
    grid = sorted(float(r) for r in grid)
    missing = [(r, seeds - len(losses.get(r, []))) for r in grid if len(losses.get(r, [])) < seeds]
    if missing:
        left = sum(n for _, n in missing)
        raise ConfigError(
            f"{arch} at size {size} has lr: tuned, but {left} of its {len(grid) * seeds} tuning runs are not done "
            f"(rates {', '.join(f'{r:g}' for r, _ in missing)}): run the sweep's tuning cells first (they come "
            f"first in the sweep; scaling.stage=tune runs them alone)"
        )
    best = best_rate({r: losses[r] for r in grid})
    edge = edge_best(losses, grid, best)
    if edge is not None:
        raise ConfigError(
            f"{arch} at size {size}: the best tuning rate {edge[0]:g} is an edge of scaling.sizes.{size}.lr_grid "
            f"({', '.join(f'{r:g}' for r in grid)}), so a better one may lie beyond it: add {edge[1]:.3g} to the "
            "grid and rerun the sweep (the runs done are kept)"
        )
    return best


def sweep_table(rows: list[dict]) -> list[dict]:
    """lr_sweep.csv's rows (SWEEP_FIELDS), sorted by family, size, rate and seed."""
    keep = [{k: r[k] for k in SWEEP_FIELDS} for r in rows]
    return sorted(keep, key=lambda r: (r["arch"], r["size"], r["lr"], r["seed"]))


def within(losses: dict[float, list[float]], rate: float, tolerance: float = 0.005) -> bool:
    """Whether `rate`'s seed-mean loss is within `tolerance` (relative) of the best rate's (mean_loss: a diverged
    rate is never the best, nor within it)."""
    mean = {r: mean_loss(v) for r, v in losses.items()}
    return rate in mean and math.isfinite(mean[rate]) and mean[rate] <= min(mean.values()) * (1 + tolerance)
