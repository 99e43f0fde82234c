"""A user's own data files: find them, check their encoding, read their records with Hugging Face `datasets`.

zoo parses no CSV, JSON or Parquet itself: `read_records` hands the file to `datasets.load_dataset` (its
packaged csv / json / parquet builders) and picks columns by name or index. Plain-text layouts (one example a
line) are read line by line here, after the encoding check, so every error names the file and the line.

Line breaks: one rule for every reader (plain and .gz text, SST-2, classification, parallel and corpus files, and
the CSV / TSV / JSON Lines parsers, which follow it too): "\\r\\n", "\\r" and "\\n" end a line, as in Python's text
mode with newline=None; every other character (U+2028, U+2029, U+0085, "\\v", "\\f", "\\x1c".."\\x1e") stays inside
its line. A line break at the end of a file ends its last line (it starts no empty one). text_chunks and
text_lines read by this rule, and never with str.splitlines, which also splits at those other characters.

Byte-order mark: one rule for every reader too. A U+FEFF that starts a file is no text (drop_bom: text_chunks drops
it for every line reader, pandas and pyarrow drop it in tables); a U+FEFF anywhere else is a character of its line.
"""

import codecs
import contextlib
import csv
import gzip
import hashlib
import io
import json
import logging
import re
import sys
import zlib
from pathlib import Path
from typing import NamedTuple

from zoo.data.bpe import MODEL_IDS, configured_ids
from zoo.data.resolver import FILES, DataError, dataset_name, file_entry, locate

FORMATS = ("csv", "tsv", "json", "parquet", "lines", "label_first", "regex")
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "json", ".json": "json", ".parquet": "parquet", ".txt": "lines"}
TABLES = ("csv", "tsv", "json", "parquet")
QUOTINGS = ("csv", "none")  # data.quoting: how quotes read in a csv / tsv file (quote_mode)
CHUNK = 1 << 20  # bytes decoded at a time
BOM = "\ufeff"  # a byte-order mark; at the start of a file it is no text (drop_bom)
log = logging.getLogger("zoo")


def find(value, data_dir=None, mirror=None, names: tuple[str, ...] = ()) -> Path:
    """A file setting (a resolver name, or a path of the user's with "~" expanded) as an existing Path.
    Raises DataError "not found: PATH" (zoo.data.resolver.locate)."""
    return locate(str(value), data_dir, mirror, names=names)


def find_tokenizer(value, data_dir=None, mirror=None) -> Path:
    """The tokenizer.json a data.tokenizer setting names (a folder: its tokenizer.json, as Hugging Face ships
    them), as an existing Path. Raises DataError naming data.tokenizer and the choices for anything else."""
    path = Path(str(value)).expanduser()
    if path.is_dir() and (path / "tokenizer.json").is_file():
        return (path / "tokenizer.json").resolve()
    try:
        return find(value, data_dir, mirror)
    except DataError as e:
        raise DataError(f"data.tokenizer={value!r} is not char, bpe, or a tokenizer.json file: {e}") from None


def file_format(path: Path, fmt: str | None) -> str:
    """The format of `path`: `fmt` when given, else from its suffix (SUFFIXES). Raises DataError for an
    unknown format or suffix."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise DataError(f"data.format={fmt!r} is unknown; allowed: {', '.join(FORMATS)}")
        return fmt
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DataError(
            f"{path}: cannot tell the format from the suffix {suffix or '(none)'!r}.\nFix: set "
            f"data.format to one of {', '.join(FORMATS)}"
        )
    return SUFFIXES[suffix]


def count_breaks(text: str) -> int:
    """The line breaks in `text` by the module's rule: "\\r\\n", "\\r" and "\\n", one each."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def drop_bom(text: str) -> str:
    """`text` less the byte-order mark (U+FEFF) that may start it: the first characters of a file, a stream or
    stdin, as Python's utf-8-sig codec reads them. A U+FEFF anywhere else is text and stays."""
    return text[1:] if text.startswith(BOM) else text


def text_chunks(path: Path, encoding: str = "utf-8", chunk: int = CHUNK, fix: str | None = None):
    """The decoded text of a file (gzip when its name ends in .gz), chunk by chunk (memory: one chunk), every
    line break ("\\r\\n", "\\r", "\\n"; the module's rule) written as "\\n", as Python's text mode does, and a
    byte-order mark that starts the file dropped (drop_bom), whatever the encoding.

    Raises DataError naming the file, the line (by that rule) and the byte offset of the first undecodable byte,
    with `fix` (default: convert the file, or set data.encoding); for an unknown encoding; for a bad gzip file.
    """
    try:
        decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder(encoding)(), translate=True)
    except LookupError:
        raise DataError(f"data.encoding={encoding!r} is not an encoding Python knows (e.g. utf-8, latin-1)") from None
    gz = path.suffix == ".gz"
    line, offset, started = 1, 0, False
    with gzip.open(path, "rb") if gz else open(path, "rb") as f:
        while True:
            try:
                block = f.read(chunk)
            except (OSError, EOFError, zlib.error) as e:
                if not gz:
                    raise
                raise DataError(f"{path}: not a valid gzip file ({e})") from None
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as e:
                held = max(len(e.object) - len(block), 0)  # bytes of a character begun in the last block
                pending_cr = decoder.getstate()[1] & 1  # a "\r" held back from the last block
                before = ("\r" if pending_cr else "") + codecs.decode(e.object[: e.start], encoding, "replace")
                raise DataError(
                    f"{path}, line {line + count_breaks(before)}: not valid {encoding.upper()} (byte offset "
                    f"{offset - held + e.start}: {e.reason}).\nFix: "
                    + (fix or f"convert the file to {encoding}, or set data.encoding to the file's encoding")
                ) from None
            if text and not started:  # the file's first characters: a byte-order mark there is no text
                started, text = True, drop_bom(text)
            if text:
                line += text.count("\n")
                yield text
            if not block:
                return
            offset += len(block)


def check_encoding(path: Path, encoding: str = "utf-8", chunk: int = CHUNK) -> None:
    """Decode the whole file in chunks (memory stays at one chunk): text_chunks' errors, else nothing."""
    for _ in text_chunks(path, encoding, chunk):
        pass


def text_lines(path: Path, encoding: str = "utf-8", fix: str | None = None) -> list[str]:
    """Every line of a text file (gzip when its name ends in .gz) by the module's rule, without its line break;
    blank lines kept (so that two files stay aligned). Raises text_chunks' DataError (with `fix`)."""
    lines = "".join(text_chunks(path, encoding, fix=fix)).split("\n")
    if lines[-1] == "":  # the break that ends the last line (or an empty file)
        lines.pop()
    return lines


def read_lines(path: Path, encoding: str = "utf-8") -> tuple[list[tuple[int, str]], int]:
    """((line number, text) of every non-blank line, the number of blank lines), by the module's rule."""
    lines = text_lines(path, encoding)
    kept = [(n, ln) for n, ln in enumerate(lines, 1) if ln.strip()]
    return kept, len(lines) - len(kept)


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


def text_file_lines(path: Path, encoding: str = "utf-8"):
    """The lines of a text file one at a time (memory: one chunk and one line), each ending in "\\n" but perhaps
    the last, by the module's rule (text_chunks). Raises text_chunks' DataError."""
    rest = ""
    for text in text_chunks(path, encoding):
        *lines, rest = (rest + text).split("\n")
        for ln in lines:
            yield ln + "\n"
    if rest:
        yield rest


def csv_rows(path: Path, sep: str, mode: str, encoding: str = "utf-8"):
    """(first line, last line, fields) of each row of a csv / tsv file, read as read_records reads it (Python's csv
    module, the same dialect as pandas': delimiter `sep`, quote mode "csv" or "none"; no field size limit); line
    numbers by the module's rule. A blank line is a row without fields. Raises text_chunks' DataError."""
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


class _RepeatedKey(Exception):
    """A JSON object with a key twice (check_json)."""


def _unique_pairs(pairs):
    """object_pairs_hook of json: a dict, or _RepeatedKey(key) for a key given twice."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise _RepeatedKey(k)
        out[k] = v
    return out


def check_json(path: Path, encoding: str = "utf-8") -> None:
    """Refuse a JSON Lines file, or a JSON array, with a record that gives a key twice (pyarrow and ujson would keep
    one silently or fail with another message) or that is not JSON. Raises DataError naming the file, the line
    (JSON Lines) or the record and its line (an array), and the key."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_pairs)
    first = next((ln for ln in text_file_lines(path, encoding) if ln.strip()), "")
    if first.lstrip().startswith("["):  # an array: read whole, as datasets reads it
        text = "".join(text_chunks(path, encoding))
        pos, n = text.index("[") + 1, 0
        while True:
            while pos < len(text) and text[pos] in " \t\n,":
                pos += 1
            if pos >= len(text) or text[pos] == "]":
                return
            n += 1
            try:
                _, pos = decoder.raw_decode(text, pos)
            except _RepeatedKey as e:
                raise DataError(_repeated(path, f"record {n} (line {_line_at(text, pos)})", e.args[0])) from None
            except json.JSONDecodeError as e:
                raise DataError(f"{path}, line {e.lineno}: not valid JSON ({e.msg})") from None
    for n, ln in enumerate(text_file_lines(path, encoding), 1):
        if not ln.strip():
            continue
        try:
            decoder.decode(ln)
        except _RepeatedKey as e:
            raise DataError(_repeated(path, f"line {n}", e.args[0])) from None
        except json.JSONDecodeError as e:
            raise DataError(
                f"{path}, line {n}: not a JSON record ({e.msg}).\nFix: write one JSON object a line (JSON Lines), "
                f"or the whole file as one JSON array"
            ) from None


def _line_at(text: str, pos: int) -> int:
    """The line (1-based) of character `pos` of `text`, whose line breaks are "\\n"."""
    return text.count("\n", 0, pos) + 1


def _repeated(path: Path, where: str, key: str) -> str:
    """The message of a JSON record with a key twice."""
    return (
        f"{path}, {where}: the key {key!r} is given twice in one record; a reader would keep one of the two "
        f"silently.\nFix: rename or remove one of them"
    )


def check_parquet_columns(path: Path) -> None:
    """Refuse a Parquet file with a column name twice (naming it). Raises DataError; reads the schema only."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001 -- not Parquet: read_records reports it
        return
    twice = [n for i, n in enumerate(names) if n in names[:i]]
    if twice:
        raise DataError(
            f"{path}: the column {twice[0]!r} is named twice ({', '.join(map(repr, names))}).\nFix: rename or "
            f"remove one of the two columns"
        )


def read_records(
    path: Path,
    fmt: str,
    header: bool = True,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    cache_dir: str | None = None,
    quoting: str | None = None,
):
    """The rows of a table file as a `datasets.Dataset` (Hugging Face's csv / json / parquet builders).

    fmt: csv | tsv | json (JSON Lines, or a JSON array) | parquet. header: the first csv / tsv row names the
        columns (else they are "0", "1", ...). delimiter: overrides "," (csv) or a tab (tsv). quoting: csv | none
        | None (quote_mode: None is "none" with a tab delimiter, so a quote can never merge rows, and "csv" with
        any other). Every csv / tsv column is read as text (types are the readers' to decide, over the whole
        column: pandas would type each chunk of 10,000 rows from its first). A blank csv / tsv line is a row of
        empty fields (the readers skip and count it); JSON Lines' blank lines are no rows (read_table counts them).
    Raises DataError naming the file when it has no rows, a column named twice (csv / tsv header, Parquet, a JSON
    record's key, with the line), a csv row whose fields do not fit the header (with the line where a quote opens
    and the fix), or `datasets` cannot read it.
    """
    import datasets  # imported here: a second of start-up that only a user's table file needs

    empty = DataError(
        f"{path} has no rows (the file is empty{', or only a header' if header else ''}).\nFix: "
        f"put examples in it, or leave the split out so that it is carved out of train"
    )
    if path.stat().st_size == 0:
        raise empty

    datasets.disable_progress_bars()
    kwargs = _loader_kwargs(path, fmt, header, delimiter, encoding, quoting)
    if kwargs is None:
        raise empty
    builder = "csv" if fmt == "tsv" else fmt
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its own log line of a parser error: ours says more
    try:
        records = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir, **kwargs)
    except Exception as e:  # pandas / pyarrow parser errors, wrapped by datasets: the innermost names the line
        if "corresponds to no data" in str(e):  # datasets' word for a file without rows
            raise empty from None
        if fmt in ("csv", "tsv"):
            fault = csv_fault(path, *quote_mode(fmt, delimiter, quoting), header, encoding)
            if fault is not None:
                raise fault from None
        raise _unreadable(path, fmt, e) from None
    finally:
        datasets.logging.set_verbosity(verbosity)
    if len(records) == 0:
        raise empty
    return records


def _loader_kwargs(
    path: Path, fmt: str, header: bool, delimiter: str | None, encoding: str, quoting: str | None
) -> dict | None:
    """The keyword arguments of datasets.load_dataset for a table file (read_records); None for a csv / tsv file
    without a row. Checks the encoding of a csv / tsv / json file first (check_encoding: DataError naming the
    line), and refuses a column named twice (column_names, check_json, check_parquet_columns)."""
    if fmt in ("csv", "tsv"):
        import datasets

        check_encoding(path, encoding)
        sep, mode = quote_mode(fmt, delimiter, quoting)
        names = column_names(path, sep, mode, header, encoding)
        if names is None:
            return None
        return dict(
            sep=sep,
            header=0 if header else None,
            column_names=names,
            features=datasets.Features({n: datasets.Value("string") for n in names}),  # text: typed by the readers
            quoting=csv.QUOTE_NONE if mode == "none" else csv.QUOTE_MINIMAL,
            keep_default_na=False,
            na_filter=False,
            skip_blank_lines=False,
            encoding=encoding,
        )
    if fmt == "json":
        check_encoding(path, encoding)
        check_json(path, encoding)
        return dict(encoding=encoding)
    check_parquet_columns(path)
    return {}


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
        if cells and len(cells) != width:
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
    return DataError(
        f"{path}, line {start}: {len(cells)} fields where {names} has {width} (delimiter {sep!r}).\nFix: if a field "
        f"holds the delimiter, {hint}; else set data.delimiter to the file's delimiter"
    )


def _unreadable(path: Path, fmt: str, e: BaseException) -> DataError:
    """The DataError of a table file `datasets` cannot read, quoting the innermost cause of `e` (it names the line)."""
    while (e.__cause__ or e.__context__) is not None:
        e = e.__cause__ or e.__context__
    first = (str(e).splitlines() or [""])[0][:200]
    fix = {
        "json": "check data.format: a .json / .jsonl file is JSON Lines (one object a line) or one JSON array",
        "parquet": "check data.format, and that the file is a Parquet file",
    }.get(
        fmt,
        "check data.format, data.header, data.delimiter and data.quoting (a tab or delimiter inside a field needs "
        "quoting, or another delimiter)",
    )
    return DataError(f"{path}: cannot be read as {fmt} ({type(e).__name__}: {first}).\nFix: {fix}")


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
    """read_records, with where each row is in the file (line numbers by the module's rule; parquet and JSON
    arrays: row numbers). Logs a warning naming the file and the lines of the first csv / tsv row whose quoted
    field holds a line break (quote mode "csv"; a quote never closed merges the rows below it into one). Raises
    read_records' DataError."""
    records = read_records(path, fmt, header, delimiter, encoding, quoting=quoting)
    n = len(records)
    if fmt == "parquet":
        return Table(records, list(range(1, n + 1)), "row", 0)
    if fmt == "json":
        lines = text_lines(path, encoding)
        filled = [i for i, ln in enumerate(lines, 1) if ln.strip()]
        if not (filled and lines[filled[0] - 1].lstrip().startswith("[")) and len(filled) == n:  # JSON Lines
            return Table(records, filled, "line", len(lines) - len(filled))
        return Table(records, list(range(1, n + 1)), "row", 0)  # a JSON array: rows, not lines
    sep, mode = quote_mode(fmt, delimiter, quoting)
    first, places = first_row_line(fmt, header), []
    if header and mode == "csv":  # a quoted header cell may hold line breaks too
        first = next(csv_rows(path, sep, mode, encoding))[1] + 1
    breaks = [0] * n  # line breaks inside the fields of each row (only quoted fields hold any)
    if mode == "csv":
        for c in records.column_names:
            for i, v in enumerate(records[c]):
                if v and ("\n" in v or "\r" in v):
                    breaks[i] += count_breaks(v)
    line = first
    for b in breaks:
        places.append(line)
        line += 1 + b
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
    if mode == "none":
        _warn_quotes_as_text(path, records, places)
    return Table(records, places, "line", 0)


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


def column(records, key, path: Path, what: str) -> list:
    """Column `key` (a name, or an index into the columns) of `records`. Raises DataError listing the
    columns when there is no such column."""
    names = records.column_names
    if isinstance(key, int) and not isinstance(key, bool) and str(key) not in names:
        if not 0 <= key < len(names):
            raise DataError(
                f"{path}: data.{what}={key} is out of range: the file has {len(names)} columns ({', '.join(names)})"
            )
        key = names[key]
    if str(key) not in names:
        raise DataError(
            f"{path}: no column {key!r} for data.{what}; the columns are: {', '.join(names)}.\n"
            f"Fix: set data.{what} to one of them (or to a 0-based index); if line 1 of a csv / tsv file is an "
            f"example, not the column names, set data.header=false and give the columns as 0-based indices"
        )
    return list(records[str(key)])


def first_row_line(fmt: str, header: bool) -> int:
    """The file line of the first record (1-based) for error messages: after the header of a csv / tsv."""
    return 2 if fmt in ("csv", "tsv") and header else 1


def split_line(text: str, fmt: str, pattern: re.Pattern | None, path: Path, n: int) -> tuple[str, str]:
    """(text, label) of one line: label_first `<label> <text>`, or regex with named groups text and label.
    Raises DataError naming the file and line when the line does not fit."""
    if fmt == "label_first":
        label, _, body = text.strip().partition(" ")
        if not body.strip():
            raise DataError(f"{path}, line {n}: expected '<label> <text>', found {text[:80]!r}")
        return body.strip(), label
    m = pattern.fullmatch(text.strip())
    if m is None:
        raise DataError(f"{path}, line {n}: does not match data.pattern={pattern.pattern!r}: {text[:80]!r}")
    return m.group("text").strip(), m.group("label")


def compile_pattern(pattern: str | None) -> re.Pattern:
    """data.pattern as a regex with groups `text` and `label`. Raises DataError otherwise."""
    if not pattern:
        raise DataError(
            "data.format=regex needs data.pattern, a regex with named groups (?P<label>...) and "
            "(?P<text>...), e.g. '(?P<label>\\S+?):\\S+ (?P<text>.*)'"
        )
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise DataError(f"data.pattern={pattern!r} is not a valid regex: {e}") from None
    if not {"text", "label"} <= set(rx.groupindex):
        raise DataError(f"data.pattern={pattern!r} needs named groups (?P<text>...) and (?P<label>...)")
    return rx


def text_digest(texts, vocab_size: int) -> str:
    """16 hex digits of SHA-256 over the texts and the vocabulary size: the name of a tokenizer trained on them."""
    h = hashlib.sha256(f"{vocab_size}\n".encode())
    for t in texts:
        h.update(t.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


HUB_SPLITS = {"train": "train", "validation": "val", "valid": "val", "dev": "val", "test": "test"}


def read_hub(hf_path: str, hf_name: str | None = None, cache_dir: str | None = None) -> dict:
    """{split: datasets.Dataset} of a Hugging Face dataset: a hub id (online), or a local folder of data files
    named by split (train.csv, test.jsonl, ...; offline; csv / tsv files read as read_records reads them). Split
    names map through HUB_SPLITS (validation -> val). Raises DataError naming the dataset when `datasets` cannot
    load it, or it has no train split."""
    import datasets

    datasets.disable_progress_bars()
    kwargs = {}
    folder = Path(hf_path).expanduser()
    if folder.is_dir():  # a folder of csv / tsv files: read as read_records reads them (text "NA" is text)
        files = sorted(f for f in folder.rglob("*") if f.is_file())
        suffixes = {f.suffix.lower() for f in files}
        if suffixes & {".csv", ".tsv"} and not suffixes & {".json", ".jsonl", ".parquet", ".txt"}:
            kwargs = dict(keep_default_na=False, na_filter=False, skip_blank_lines=False)
            fmt = "csv" if ".csv" in suffixes else "tsv"
            sep, mode = quote_mode(fmt, None, None)
            if mode == "none":  # a tab delimiter: quotes are text
                kwargs["quoting"] = csv.QUOTE_NONE
            tables = [f for f in files if f.suffix.lower() in (".csv", ".tsv")]
            headers = {tuple(column_names(f, sep, mode, True) or ()) for f in tables}
            if len(headers) == 1 and () not in headers:  # every column text, as read_records reads it
                kwargs["features"] = datasets.Features({n: datasets.Value("string") for n in headers.pop()})
    try:
        loaded = datasets.load_dataset(hf_path, hf_name, cache_dir=cache_dir, **kwargs)
    except Exception as e:  # offline, unknown id, missing config name: many types, one message
        raise DataError(
            f"data.hf_path={hf_path}{f' data.hf_name={hf_name}' if hf_name else ''} cannot be loaded "
            f"({type(e).__name__}: {str(e).splitlines()[0][:200]}).\nFix: check the id (and that "
            f"this machine is online), or pass local files as data.train / val / test"
        ) from None
    out = {HUB_SPLITS[k]: v for k, v in loaded.items() if k in HUB_SPLITS}
    if "train" not in out:
        raise DataError(f"data.hf_path={hf_path} has no train split (it has {', '.join(loaded)})")
    return out


def check_fractions(val, test, val_fraction: float, test_fraction: float) -> None:
    """Raise DataError for a split fraction outside (0, 1), or two carved splits that leave no training data."""
    for key, f in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 < f < 1.0:
            raise DataError(f"data.{key}={f} must be in (0, 1)")
    if val is None and test is None and val_fraction + test_fraction >= 1.0:
        raise DataError(
            f"data.val_fraction + data.test_fraction = {val_fraction + test_fraction:g} leaves no "
            f"training data; their sum must be below 1"
        )


class FileSplits:
    """The train / val / test settings of a datamodule that reads a user's files: `sources` {split: a file
    setting, a {key: file} mapping, or None}, and `carved` {split: how a split without a file came about}."""

    sources: dict
    carved: dict
    SPECIAL_ROLES: tuple[str, ...] = ()  # the special tokens the batches hold
    DISTINCT_ROLES: tuple[str, ...] = ()  # of those, the ones that must have distinct ids
    name: str | None = None
    hf_path: str | None = None
    hf_name: str | None = None
    read_test: bool = True  # False: the test split is never read, checked or encoded (zoo.run.compare_tune)

    def unread(self) -> set[str]:
        """The splits this module does not read: {"test"} with read_test=False, else none. A test split carved
        out of train is still cut from train (so train is the same), and dropped unread."""
        return set() if self.read_test else {"test"}

    @classmethod
    def config_ids(cls, data) -> dict:
        """The special ids of the data config `data` (a mapping of the class's arguments), read before any data
        work: zoo.data.bpe.configured_ids. Raises DataError for a tokenizer.json without a role of
        SPECIAL_ROLES, or without distinct ids for DISTINCT_ROLES."""
        kind = str(data.get("tokenizer") or "bpe")
        return configured_ids(
            kind,
            data.get("special_tokens"),
            cls.SPECIAL_ROLES,
            cls.DISTINCT_ROLES,
            MODEL_IDS,
            lambda: find_tokenizer(kind, data.get("data_dir"), data.get("mirror")),
            f"data={cls.__name__}",
        )

    @staticmethod
    def check_settings(train, hf_path, tokenizer: str, special_tokens, val, test, fractions, train_forms: str) -> None:
        """The checks of a file datamodule's arguments that need no file: special_tokens only with a
        tokenizer.json, a train setting or a hub dataset (train_forms: what data.train may be), split fractions
        (check_fractions; fractions = (val_fraction, test_fraction)). Raises DataError."""
        if special_tokens and tokenizer in ("bpe", "char"):
            configured_ids(tokenizer, special_tokens, (), (), MODEL_IDS, None)  # DataError: not for zoo's own
        if train is None and hf_path is None:
            raise DataError(f"data.train is not set: give {train_forms}, or a Hugging Face dataset (data.hf_path)")
        check_fractions(val, test, *fractions)

    def where(self, split: str) -> str:
        """Where a split's examples come from, for messages."""
        value = self.sources[split]
        return self.carved.get(split) or (
            ", ".join(map(str, value.values())) if hasattr(value, "items") else str(value)
        )

    def file_settings(self) -> list[str]:
        """Every file setting of the splits that have one, in order."""
        return [
            str(f) for v in self.sources.values() if v is not None for f in (v.values() if hasattr(v, "items") else [v])
        ]

    def dataset_name(self) -> str:
        """`name`, else the Hugging Face dataset and the built-in datasets' folders and the user's files' paths
        (resolver.dataset_name)."""
        hub = self.hf_path and (self.hf_path + (f"/{self.hf_name}" if self.hf_name else ""))
        files = self.file_settings()
        return self.name or ", ".join(x for x in (hub, files and dataset_name(files)) if x)

    @property
    def builtin(self) -> bool:
        """Whether every split is a built-in dataset of the resolver's."""
        return self.hf_path is None and all(f in FILES for f in self.file_settings())

    def files_info(self) -> dict:
        """{split: a resolver name or resolved path, {key: ...} for a mapping, or how the split came about}."""
        files = {}
        for split, value in self.sources.items():
            if split in self.unread():
                files[split] = "not read (read_test=false)"
            elif split in self.carved:
                files[split] = self.carved[split]
            elif hasattr(value, "items"):
                files[split] = {str(k): file_entry(str(f)) for k, f in value.items()}
            else:
                files[split] = file_entry(str(value))
        return files
