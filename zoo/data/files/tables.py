"""A table file's records with where each row is in the file (its line, or its row number), and the warnings about
its quotes: read_table."""

import logging
from pathlib import Path
from typing import NamedTuple

from zoo.data.files.delimited import csv_rows, quote_mode
from zoo.data.files.lines import count_breaks, text_lines
from zoo.data.files.records import read_records

log = logging.getLogger("zoo")


class Table(NamedTuple):
    """A table file as read_table reads it: `records` (a datasets.Dataset), `places` (each row's first line in
    the file, or its 1-based row number), `unit` ("line" or "row": what `places` count), `blank` (blank lines
    that are no row: JSON Lines'; a blank csv / tsv line is a row of empty fields)."""

    records: object
    places: list[int]
    unit: str
    blank: int


def read_table(
    path: Path,
    fmt: str,
    header: bool = True,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    quoting: str | None = None,
) -> Table:
    """read_records, with where each row is in the file (line numbers by zoo.data.files.lines' rule; parquet and
    JSON arrays: row numbers). Logs a warning naming the file and the lines of the first csv / tsv row whose quoted
    field holds a line break (quote mode "csv"; a quote never closed merges the rows below it into one). Raises
    read_records' DataError."""
    records = read_records(path, fmt, header, delimiter, encoding, quoting=quoting)
    n = len(records)
    if fmt == "parquet":
        return Table(records, list(range(1, n + 1)), "row", 0)
    if fmt == "json":
        return _json_table(path, records, encoding)
    sep, mode = quote_mode(fmt, delimiter, quoting)
    places, breaks = _row_lines(path, records, fmt, header, sep, mode, encoding)
    _warn_merged(path, places, breaks)
    if mode == "none":
        _warn_quotes_as_text(path, records, places)
    return Table(records, places, "line", 0)


def _json_table(path: Path, records, encoding: str) -> Table:
    """The Table of a JSON file's records: JSON Lines' by line (its blank lines counted), a JSON array's by row."""
    n = len(records)
    lines = text_lines(path, encoding)
    filled = [i for i, ln in enumerate(lines, 1) if ln.strip()]
    if not (filled and lines[filled[0] - 1].lstrip().startswith("[")) and len(filled) == n:  # JSON Lines
        return Table(records, filled, "line", len(lines) - len(filled))
    return Table(records, list(range(1, n + 1)), "row", 0)  # a JSON array: rows, not lines


def _row_lines(path: Path, records, fmt: str, header: bool, sep: str, mode: str, encoding: str):
    """(the first line of each row of a csv / tsv file, the line breaks inside each row's fields): a row after one
    whose quoted fields hold line breaks starts that many lines further down (quote mode "csv")."""
    first, places = first_row_line(fmt, header), []
    if header and mode == "csv":  # a quoted header cell may hold line breaks too
        first = next(csv_rows(path, sep, mode, encoding))[1] + 1
    breaks = [0] * len(records)  # line breaks inside the fields of each row (only quoted fields hold any)
    if mode == "csv":
        for c in records.column_names:
            for i, v in enumerate(records[c]):
                if v and ("\n" in v or "\r" in v):
                    breaks[i] += count_breaks(v)
    line = first
    for b in breaks:
        places.append(line)
        line += 1 + b
    return places, breaks


def _warn_merged(path: Path, places: list[int], breaks: list[int]) -> None:
    """Log a warning naming the lines of the first row whose quoted field runs over several lines, if any."""
    merged = [i for i, b in enumerate(breaks) if b]
    if merged:
        i = merged[0]
        log.warning(
            "%s, lines %d-%d: a quoted field runs over %d lines (%d such rows in the file). If that is not "
            'meant, a quote (") opens the field and is never closed, merging the rows below it into one: close '
            'it, or double a quote inside a field (""); if the quotes of the file are text, set data.quoting=none',
            path,
            places[i],
            places[i] + breaks[i],
            breaks[i] + 1,
            len(merged),
        )


def _warn_quotes_as_text(path: Path, records, places: list[int]) -> None:
    """Log a warning naming the first line of a csv / tsv file read with quotes as text (quote mode "none") whose
    field starts with a quote: pandas and spreadsheets quote a field that holds a tab or a line break, and such a
    file needs data.quoting=csv."""
    quoted = sorted({i for c in records.column_names for i, v in enumerate(records[c]) if v and v.startswith('"')})
    if quoted:
        log.warning(
            '%s, line %d: a field starts with a quote ("), read as text (data.quoting=none, the default with a tab '
            "delimiter; %d such rows). If the file quotes its fields, as pandas and spreadsheets write a TSV, set "
            "data.quoting=csv",
            path,
            places[quoted[0]],
            len(quoted),
        )


def first_row_line(fmt: str, header: bool) -> int:
    """The file line of the first record (1-based) for error messages: after the header of a csv / tsv."""
    return 2 if fmt in ("csv", "tsv") and header else 1
