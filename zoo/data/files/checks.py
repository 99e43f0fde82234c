"""The checks of a table file before `datasets` reads it: a JSON record that gives a key twice, or is not JSON, and
a Parquet column named twice (a reader would keep one of the two silently)."""

import json
from pathlib import Path

from zoo.data.files.lines import text_chunks, text_file_lines
from zoo.data.resolver import DataError


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
