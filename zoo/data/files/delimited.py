"""CSV and TSV files read row by row with Python's csv module: the delimiter and quote mode, the column names,
and why pandas could not read a file (csv_fault). Line numbers follow zoo.data.files.lines' rule."""

import contextlib
import csv
import sys
from pathlib import Path

from zoo.data.files.lines import text_file_lines
from zoo.data.resolver import DataError

QUOTINGS = ("csv", "none")  # data.quoting: how quotes read in a csv / tsv file (quote_mode)


def quote_mode(fmt: str, delimiter: str | None, quoting: str | None) -> tuple[str, str]:
    """(delimiter, quote mode) of a csv / tsv file. The delimiter: `delimiter`, else "," (csv) or a tab (tsv). The
    mode: `quoting` when given, "csv" (RFC 4180: a field in quotes may hold the delimiter, a line break and a doubled
    quote) or "none" (a quote is text, so it never merges rows); else "none" with a tab delimiter and "csv" with any
    other. Raises DataError for another `quoting`."""
    check_quoting(quoting)
    sep = delimiter or ("\t" if fmt == "tsv" else ",")
    return sep, quoting or ("none" if sep == "\t" else "csv")


def check_quoting(quoting: str | None) -> None:
    """Raise DataError unless `quoting` is csv, none or None (quote_mode)."""
    if quoting is not None and quoting not in QUOTINGS:
        raise DataError(
            f"data.quoting={quoting!r} is unknown; allowed: csv (a quoted field may hold the delimiter and line "
            f"breaks), none (quotes are text), or null (none with a tab delimiter, csv with any other)"
        )


@contextlib.contextmanager
def _no_field_limit():
    """Lift Python's csv field size limit (131,072 characters) while the block runs: a long field is no error."""
    old = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def csv_rows(path: Path, sep: str, mode: str, encoding: str = "utf-8"):
    """(first line, last line, fields) of each row of a csv / tsv file, read as read_records reads it (Python's csv
    module, the same dialect as pandas': delimiter `sep`, quote mode "csv" or "none"; no field size limit); line
    numbers by zoo.data.files.lines' rule. A blank line is a row without fields. Raises text_chunks' DataError."""
    quoting = csv.QUOTE_NONE if mode == "none" else csv.QUOTE_MINIMAL
    with _no_field_limit():
        reader = csv.reader(text_file_lines(path, encoding), delimiter=sep, quoting=quoting)
        end = 0
        for row in reader:
            yield end + 1, reader.line_num, row
            end = reader.line_num


def column_names(path: Path, sep: str, mode: str, header: bool, encoding: str = "utf-8") -> list[str] | None:
    """The column names of a csv / tsv file: its first row's cells (header), else "0", "1", ... for its cells;
    None for a file without a row. Raises DataError naming the column and the line for a name that is there twice
    (pandas would rename one "NAME.1" and read the other silently)."""
    first = next(csv_rows(path, sep, mode, encoding), None)
    if first is None:
        return None
    cells = first[2]
    if not header:
        return [str(i) for i in range(max(len(cells), 1))]
    names = cells or [""]
    twice = [n for i, n in enumerate(names) if n in names[:i]]
    if twice:
        raise DataError(
            f"{path}, line 1: the column {twice[0]!r} is named twice in the header row "
            f"({', '.join(map(repr, names))}).\nFix: rename or remove one of the two columns"
        )
    return names


def csv_fault(path: Path, sep: str, mode: str, header: bool, encoding: str = "utf-8") -> DataError | None:
    """Why pandas could not read a csv / tsv file, found by reading it again with Python's csv module (csv_rows):
    the first row whose fields do not fit the first row's count, named by its line; a row that runs over several
    lines there is a quote opened at its first line and not closed where the row should end. None when every row
    fits (the caller then reports pandas' own error)."""
    rows = csv_rows(path, sep, mode, encoding)
    first = next(rows, None)
    if first is None:
        return None
    width, last_row = len(first[2]), first
    for row in rows:
        start, end, cells = row
        last_row = row
        if any(c.strip() for c in cells) and len(cells) != width:  # a blank or white line is no row
            break
    else:  # every row fits: a quote opened in the last row and never closed runs to the end of the file
        start, end, cells = last_row
        if mode != "csv" or end == start or last_row is first:
            return None
        return DataError(
            f'{path}, line {start}: a quote (") opens a field here and is never closed: the row runs to the end '
            f'of the file (line {end}).\nFix: close the quote, or double a quote inside a field (""); if the '
            f"quotes of this file are text, set data.quoting=none"
        )
    names = "the header" if header else "line 1"
    if mode == "csv" and end > start:
        return DataError(
            f'{path}, line {start}: a quote (") opens a field here and runs over lines {start}-{end}, making a row '
            f"of {len(cells)} fields where {names} has {width}: a quote that is never closed merges the rows below "
            f'it.\nFix: close the quote, or double a quote inside a field (""); if the quotes of this file are '
            f"text, set data.quoting=none"
        )
    hint = (
        'quote it ("...") and set data.quoting=csv (quotes are text now; a file that quotes its fields, as pandas '
        "and spreadsheets write a TSV, needs it too)"
        if mode == "none"
        else 'quote it ("...")'
    )
    fix = (
        f"put the delimiter ({sep!r}) between this row's fields (spaces are not one; a field may be empty); if a "
        f"field holds a line break, {hint}"
        if len(cells) < width
        else f"if a field holds the delimiter, {hint}; else set data.delimiter to the file's delimiter"
    )
    return DataError(
        f"{path}, line {start}: {len(cells)} fields where {names} has {width} (delimiter {sep!r}).\nFix: {fix}"
    )
