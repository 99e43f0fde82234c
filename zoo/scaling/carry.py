"""A scaling study carried between machines: its finished cells packed into one text file and unpacked into a
sweep folder, where the same command skips them (their points.csv holds every budget) and trains the rest.

A study longer than one machine's life (a laptop, a preempted node, a session) keeps its finished cells this way,
with no checkpoint: `pack` writes, per cell folder, the small files that say what the cell measured and under
which design (CARRIED), one JSON line a cell; `unpack` writes them back. A cell still training (its results.json
missing, or older than its points.csv) is not packed; rerun the command after unpacking and it trains again from
its start (docs/scaling-laws.md, "A study across machines")."""

import csv
import io
import json
from pathlib import Path

from zoo.data.atomic import atomic_file
from zoo.scaling.law import ScalingError

CARRIED = ("cell.json", "points.csv", "results.json", "translations.json")  # what a cell's folder keeps (if present)
REQUIRED = ("cell.json", "points.csv", "results.json")


def _key(row: dict) -> tuple[int, float]:
    """A point's (steps, loss), as numbers: points.csv holds text, results.json numbers."""
    return int(float(row["steps"])), float(row["loss"])


def finished(folder: Path) -> dict | None:
    """{file name: text} of a finished cell folder (CARRIED files present), or None: a folder without cell.json,
    points.csv or results.json, or whose results.json does not record every point of its points.csv (a cell whose
    last command stopped before its end)."""
    if not all((folder / name).is_file() for name in REQUIRED):
        return None
    files = {name: (folder / name).read_text(encoding="utf-8") for name in CARRIED if (folder / name).is_file()}
    try:
        recorded = json.loads(files["results.json"]).get("scaling", {}).get("points", [])
        rows = {_key(r) for r in csv.DictReader(io.StringIO(files["points.csv"]))}
        done = rows and rows <= {_key(p) for p in recorded}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if not done:
        return None
    return files


def read_carry(path: Path) -> dict[str, dict]:
    """{cell folder name: {file name: text}} of a pack file. ScalingError naming the line of a malformed entry."""
    if not Path(path).is_file():
        raise ScalingError(f"{path} is not a file: give a file written by `python -m zoo.scaling pack`")
    cells = {}
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        try:
            entry = json.loads(line)
            folder, files = entry["folder"], entry["files"]
            ok = isinstance(folder, str) and "/" not in folder and folder not in ("", ".", "..")
            ok = ok and isinstance(files, dict) and all(k in CARRIED and isinstance(v, str) for k, v in files.items())
        except (json.JSONDecodeError, KeyError, TypeError):
            ok = False
        if not ok or not set(REQUIRED) <= set(files):
            raise ScalingError(
                f"{path}, line {i}: not a packed cell ({{'folder': NAME, 'files': {{{', '.join(REQUIRED)}, ...}}}}); "
                "write the file with `python -m zoo.scaling pack`"
            )
        cells[folder] = files
    return cells


def pack(sweep_dir, path) -> tuple[int, int]:
    """Write the finished cells of `sweep_dir` into the pack file `path` (atomically), keeping the cells it already
    holds that the folder does not finish: (cells packed from the folder, cells in the file). ScalingError when the
    folder is missing."""
    sweep, path = Path(sweep_dir), Path(path)
    if not sweep.is_dir():
        raise ScalingError(f"{sweep} is not a folder: give the study's sweep folder (hydra.sweep.dir)")
    cells = read_carry(path) if path.is_file() else {}
    new = {d.name: files for d in sorted(sweep.iterdir()) if d.is_dir() and (files := finished(d)) is not None}
    cells.update(new)
    with atomic_file(path, "w", encoding="utf-8") as f:
        for folder in sorted(cells):
            f.write(json.dumps({"folder": folder, "files": cells[folder]}, sort_keys=True) + "\n")
    return len(new), len(cells)


def unpack(path, sweep_dir) -> tuple[int, int]:
    """Write each packed cell's files into `sweep_dir`/FOLDER: (cells written, cells already there, the same).
    ScalingError, before writing anything, when a folder there holds another points.csv or cell.json than the
    packed one (its own measurements: never overwritten)."""
    cells, sweep = read_carry(path), Path(sweep_dir)
    clashes = [
        f"{folder}/{name}"
        for folder, files in cells.items()
        for name in ("cell.json", "points.csv")
        if (sweep / folder / name).is_file() and (sweep / folder / name).read_text(encoding="utf-8") != files[name]
    ]
    if clashes:
        raise ScalingError(
            f"{sweep}: {len(clashes)} cell file(s) differ from {path}'s, e.g. {clashes[0]}; unpack into another "
            "folder (or a new hydra.sweep.dir), then move the cells you want to keep"
        )
    written = 0
    for folder, files in cells.items():
        out = sweep / folder
        if finished(out) == files:
            continue
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            with atomic_file(out / name, "w", encoding="utf-8") as f:
                f.write(text)
        written += 1
    return written, len(cells) - written
