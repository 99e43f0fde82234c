"""The CSV reader of `python -m zoo.scaling fit`: a file of points (any runs, not only zoo's) with the columns the
command names, checked before any fitting (docs/scaling-laws.md, "The gates from a points file")."""

import csv
import math
import sys
from pathlib import Path

from zoo.scaling.law import ScalingError


def _named_columns(params, loss, tokens, flops, group, strata):
    """(wanted {flag: column} of the numbers, keyed {flag: [columns]} of --group / --strata, named {label:
    column} of every column the file must have). ScalingError for an empty name in --group or --strata, or a
    column named for two of N, D (or C), the loss and the group."""
    wanted = {
        "--params": params,
        **({"--tokens": tokens} if tokens is not None else {"--flops": flops}),
        "--loss": loss,
    }
    keyed = {
        flag: [c.strip() for c in cols.split(",")] for flag, cols in (("--group", group), ("--strata", strata)) if cols
    }
    for flag, cols in keyed.items():
        if not all(cols):
            raise ScalingError(f"{flag} {','.join(cols)!r}: an empty column name; give COL or COL1,COL2")
    named = {**wanted, **{f"--group {c}": c for c in keyed.get("--group", [])}}
    flags = {}
    for flag, col in named.items():  # --strata may name any column (e.g. n_params: the size)
        if col in flags:
            raise ScalingError(
                f"{flags[col].split()[0]} and {flag.split()[0]} both name column {col!r}: each of N, D (or C), the "
                "loss and the group is its own column"
            )
        flags[col] = flag
    named.update({f"--strata {c}": c for c in keyed.get("--strata", [])})
    return wanted, keyed, named


def _check_header(path, header, named: dict, where) -> None:
    """ScalingError for an empty file, a column named twice in the header, or a named column it lacks."""
    if not header:
        raise ScalingError(f"{path}: empty file; give a CSV with a header row and one row per point")
    twice = [c for i, c in enumerate(header) if c in header[:i]]
    if twice:  # csv.DictReader would keep the last of the two silently
        raise ScalingError(
            f"{path}, line 1: the column {twice[0]!r} is named twice in the header row; rename or remove one"
        )
    missing = [f"{flag.split()[0]} {col!r}" for flag, col in named.items() if col not in header]
    missing += [f"--where {col!r}" for col in where or {} if col not in header]
    if missing:
        raise ScalingError(f"{path}: no column {', '.join(missing)}; the columns are: {', '.join(map(repr, header))}")


def _row_keys(row: dict, label: str, keyed: dict) -> dict:
    """{flag: the row's texts of its --group / --strata columns joined by "|"}; ScalingError for an empty one."""
    out = {}
    for flag, cols in keyed.items():
        empty = [c for c in cols if not (row[c] or "").strip()]
        if empty:
            what = "group (its run)" if flag == "--group" else "stratum (its size)"
            raise ScalingError(
                f"{label}: column {empty[0]!r} ({flag}) is empty; each point needs its {what}: fill it in or remove "
                "the row"
            )
        out[flag] = "|".join(row[c].strip() for c in cols)
    return out


def _row_numbers(row: dict, label: str, wanted: dict) -> dict:
    """{flag: the row's number in its column}; ScalingError for one that is not a positive finite number."""
    out = {}
    for flag, col in wanted.items():
        cell = row[col]
        try:
            value = float(cell)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ScalingError(
                f"{label}: column {col!r} ({flag}) = {cell!r}; parameters, tokens, FLOPs and loss must be positive "
                "finite numbers: fix or remove the row"
            )
        out[flag] = value
    return out


def _scan(path: Path, wanted: dict, keyed: dict, named: dict, where: dict | None):
    """({flag: [number]}, labels, {flag: [key]}) of the rows of `path` that `where` keeps (read_points' errors)."""
    limit = csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # a long field (a column not read) is no error
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            _check_header(path, reader.fieldnames, named, where)
            columns = {flag: [] for flag in wanted}
            labels, keys = [], {flag: [] for flag in keyed}
            for row in reader:
                label = f"{path} line {reader.line_num}"
                if any((row[col] or "").strip() != value for col, value in (where or {}).items()):
                    continue
                for flag, key in _row_keys(row, label, keyed).items():
                    keys[flag].append(key)
                for flag, value in _row_numbers(row, label, wanted).items():
                    columns[flag].append(value)
                labels.append(label)
    except OSError as e:
        raise ScalingError(f"{path}: cannot read the file ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise ScalingError(
            f"{path}: not a UTF-8 CSV file ({e}); give a text CSV with a header row and one row per point"
        ) from e
    except csv.Error as e:
        raise ScalingError(f"{path} line {reader.line_num}: not a valid CSV row ({e}); fix the row") from e
    finally:
        csv.field_size_limit(limit)
    return columns, labels, keys


def read_points(
    path: Path,
    params: str,
    loss: str,
    tokens: str | None = None,
    flops: str | None = None,
    group: str | None = None,
    where: dict | None = None,
    strata: str | None = None,
):
    """(N, D, L, labels, groups, strata) from a CSV with a header row: N from column `params`, D from `tokens` or
    D = C / (6 N) from `flops` (C in FLOPs), L from `loss`; labels[i] = "FILE line k"; groups[i] the texts of the
    columns named in `group` (comma-separated, e.g. "size,seed": a run), joined by "|" (None without it); strata[i]
    likewise of `strata` (e.g. "size"). Raises ScalingError (a ValueError) naming the file, line and column of a
    missing column, an empty file, a value that is not a positive finite number or an empty group; a column named
    for two flags, or named twice in the header; a file that is not UTF-8 text, or a row that is not CSV; a `where`
    ({column: value}: only the rows whose column holds that text) that names no column or keeps no row. A field
    has no size limit."""
    wanted, keyed, named = _named_columns(params, loss, tokens, flops, group, strata)
    columns, labels, keys = _scan(path, wanted, keyed, named, where)
    if where and not labels:
        shown = " ".join(f"{c}={v}" for c, v in where.items())
        raise ScalingError(f"{path}: no row has --where {shown}; check the column's values")
    N, L = columns["--params"], columns["--loss"]
    D = columns["--tokens"] if tokens is not None else [c / (6.0 * n) for c, n in zip(columns["--flops"], N)]
    return N, D, L, labels, keys.get("--group"), keys.get("--strata")
