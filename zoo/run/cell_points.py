"""A scaling cell's points.csv (zoo.run.scaling_cell): its columns, and reading and writing it (atomically), and
which row is which budget's point."""

import csv
import io
from pathlib import Path

from zoo.errors import ConfigError
from zoo.run.results import write_text
from zoo.scaling.grid import cell_is_check, cell_is_tune
from zoo.scaling.sizes import Branch
from zoo.scaling.tune import COSINE_TUNE_KIND, TUNE_KIND

# points.csv: experiments/scaling/points.csv's columns first (zoo.report writes that file from these)
POINT_FIELDS = ("arch", "size", "seed", "n_params", "tokens", "flops", "loss", "lr")
EXTRA_FIELDS = ("tokens_per_param", "steps", "kind", "cooldown", "seconds")


# points.csv's number columns and their types (read_points)
NUMBERS = {
    "seed": int,
    "n_params": int,
    "tokens": int,
    "flops": float,
    "loss": float,
    "lr": float,
    "tokens_per_param": float,
    "steps": int,
    "seconds": float,
}


def read_points(path: Path) -> list[dict]:
    """The rows of a cell's points.csv, numbers typed (none when it does not exist). ConfigError naming the file and
    line of a value that is not a number (a file cut off or edited by hand: zoo writes it atomically)."""
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for line, r in enumerate(rows, start=2):
        try:
            for k, typ in NUMBERS.items():
                r[k] = typ(r[k]) if r.get(k) not in (None, "") else ""
            r["cooldown"] = float(r["cooldown"]) if r.get("cooldown") not in (None, "") else ""
        except (TypeError, ValueError):
            raise ConfigError(
                f"{path}, line {line}: a value that is not a number ({dict(r)}): the file was cut off or edited; "
                "repair the line, or move the cell's folder aside to train the cell anew"
            ) from None
    return rows


def write_points(path: Path, rows: list[dict]) -> None:
    """points.csv, atomically (zoo.run.results.write_text): an interrupted write leaves the previous file."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=(*POINT_FIELDS, *EXTRA_FIELDS), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_text(path, buf.getvalue())


def point_kind(cell: str) -> str:
    """The kind of a cell's points: cooldown, cosine (a check cell), tune or tune_cosine (tuning cells)."""
    if cell_is_tune(cell):
        return COSINE_TUNE_KIND if cell_is_check(cell) else TUNE_KIND
    return "cosine" if cell_is_check(cell) else "cooldown"


def same_point(row: dict, br: Branch, kind: str, cooldown: float) -> bool:
    """Whether a points.csv row is this budget's point under this design (kind, budget, end step, cool-down)."""
    same_cooldown = kind in ("cosine", COSINE_TUNE_KIND) or (
        row["cooldown"] != "" and abs(float(row["cooldown"]) - cooldown) < 1e-12
    )
    return row["kind"] == kind and int(row["steps"]) == br.end and same_cooldown
