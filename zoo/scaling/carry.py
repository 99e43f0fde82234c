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


def complete(files: dict) -> bool:
    """Whether a cell's {file name: text} is finished: its cell.json is a JSON object and its results.json records
    every point of its points.csv of the kind and cool-down results.json records (a cell whose last command
    stopped before its end is not; rows an earlier scaling.cooldown left beside them do not count)."""
    try:
        design = json.loads(files["cell.json"])
        recorded = json.loads(files["results.json"]).get("scaling", {}).get("points", [])
        schedules = {_schedule(p) for p in recorded}
        rows = _rows(files["points.csv"], schedules)
        return isinstance(design, dict) and bool(rows) and rows <= {_key(p) for p in recorded}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return False


def _schedule(row: dict) -> tuple[str, float | None]:
    """A point's (kind, cool-down share); None for a row without one (written before points kept it)."""
    cooldown = row.get("cooldown")
    return str(row.get("kind", "")), None if cooldown in (None, "") else round(float(cooldown), 12)


def _rows(points_csv: str, schedules: set | frozenset = frozenset()) -> set[tuple[int, float]]:
    """The (steps, loss) of points.csv's rows of `schedules` (all rows where results.json records none; a row
    without a kind, of a points.csv before it kept one, is counted)."""
    rows = list(csv.DictReader(io.StringIO(points_csv)))
    return {_key(r) for r in rows if not schedules or not r.get("kind") or _schedule(r) in schedules}


def _texts(folder: Path, names) -> dict:
    """{file name: text} of the files of `names` that `folder` holds."""
    return {name: (folder / name).read_text(encoding="utf-8") for name in names if (folder / name).is_file()}


def finished(folder: Path) -> dict | None:
    """{file name: text} of a finished cell folder (CARRIED files present), or None: a folder without cell.json,
    points.csv or results.json, or not complete()."""
    files = _texts(folder, CARRIED)
    return files if set(REQUIRED) <= set(files) and complete(files) else None


def unfinished(root: Path) -> list[str]:
    """The cell folders below `root` (a cell.json, at any depth; their paths from `root`) that are not complete():
    still training, cut off or damaged. Reads only REQUIRED files."""
    cells = sorted(p.parent for p in Path(root).rglob("cell.json"))
    return [str(d.relative_to(root)) for d in cells if not complete(_texts(d, REQUIRED))]


def _replaced(old: dict, new: dict) -> str | None:
    """What packing `new` over the file's `old` copy of a cell would lose: "cell.json" (another design),
    "points.csv" (a point the file holds and the folder does not), or None (the same cell, or extended)."""
    if old["cell.json"] != new["cell.json"]:
        return "cell.json"
    if not _rows(old["points.csv"]) <= _rows(new["points.csv"]):
        return "points.csv"
    return None


def read_carry(path: Path) -> dict[str, dict]:
    """{cell folder name: {file name: text}} of a pack file. ScalingError naming the file, or the line of an
    entry that is not a finished cell (malformed, cut off, or a cell still training)."""
    if not Path(path).is_file():
        raise ScalingError(f"{path} is not a file: give a file written by `python -m zoo.scaling pack`")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ScalingError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start}): not a pack file") from None
    cells = {}
    for i, line in enumerate(lines, start=1):
        try:
            entry = json.loads(line)
            folder, files = entry["folder"], entry["files"]
            ok = isinstance(folder, str) and "/" not in folder and folder not in ("", ".", "..")
            ok = ok and isinstance(files, dict) and all(k in CARRIED and isinstance(v, str) for k, v in files.items())
        except (json.JSONDecodeError, KeyError, TypeError):
            ok = False
        if not ok or not set(REQUIRED) <= set(files) or not complete(files):
            raise ScalingError(
                f"{path}, line {i}: not a finished cell ({{'folder': NAME, 'files': {{{', '.join(REQUIRED)}, ...}}}}, "
                "whose results.json records every point of its points.csv); write the file with "
                "`python -m zoo.scaling pack`"
            )
        cells[folder] = files
    if not cells:
        raise ScalingError(f"{path} holds no cells: give a file written by `python -m zoo.scaling pack`")
    return cells


def pack(sweep_dir, path) -> tuple[int, int, list[str]]:
    """Write the finished cells of `sweep_dir` into the pack file `path` (atomically), keeping the cells it already
    holds that the folder does not finish: (cells packed from the folder, cells in the file, the names of the
    folder's cells not finished, left out). ScalingError, before
    writing anything, when the folder is missing or holds no cell folder, `path` is a folder, or a cell the file
    holds would be replaced by another design's (its cell.json) or by a copy missing some of its points (an older
    folder)."""
    sweep, path = Path(sweep_dir), Path(path)
    if not sweep.is_dir():
        raise ScalingError(f"{sweep} is not a folder: give the study's sweep folder (hydra.sweep.dir)")
    if path.is_dir():
        raise ScalingError(f"{path} is a folder: give the pack file's path (e.g. {path / 'cells.jsonl'})")
    cells = read_carry(path) if path.exists() and path.stat().st_size else {}
    folders = [d for d in sorted(sweep.iterdir()) if (d / "cell.json").is_file()]
    if not folders:
        raise ScalingError(
            f"{sweep} holds no cell folder (a folder with a cell.json): give the study's sweep folder, "
            "e.g. outputs/scaling/scaling_translation"
        )
    new = {d.name: files for d in folders if (files := finished(d)) is not None}
    lost = [f"{name}/{what}" for name in new if name in cells and (what := _replaced(cells[name], new[name]))]
    if lost:
        raise ScalingError(
            f"{sweep}: {len(lost)} cell(s) would replace {path}'s copies and lose what they hold, e.g. {lost[0]} "
            "(cell.json: another design; points.csv: a point the file holds and the folder lacks); pack this "
            "folder into another file"
        )
    cells.update(new)
    with atomic_file(path, "w", encoding="utf-8") as f:
        for folder in sorted(cells):
            f.write(json.dumps({"folder": folder, "files": cells[folder]}, sort_keys=True) + "\n")
    return len(new), len(cells), [d.name for d in folders if d.name not in new]


def unpack(path, sweep_dir) -> tuple[int, int]:
    """Write each packed cell's files into `sweep_dir`/FOLDER: (cells written, cells already there, the same).
    ScalingError, before writing anything, when a folder there holds another points.csv or cell.json than the
    packed one (its own measurements: never overwritten)."""
    cells, sweep = read_carry(path), Path(sweep_dir)
    if sweep.exists() and not sweep.is_dir():
        raise ScalingError(f"{sweep} is a file: give the sweep folder to unpack into (hydra.sweep.dir)")
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
