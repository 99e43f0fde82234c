"""A user's own data files: find them, check their encoding, read their records with Hugging Face `datasets`.

zoo parses no CSV, JSON or Parquet itself: `read_records` hands the file to `datasets.load_dataset` (its
packaged csv / json / parquet builders) and picks columns by name or index. Plain-text layouts (one example a
line) are read line by line here, after the encoding check, so every error names the file and the line.

Line breaks: one rule for every reader (plain and .gz text, SST-2, classification, parallel and corpus files, and
the CSV / TSV / JSON Lines parsers, which follow it too): "\\r\\n", "\\r" and "\\n" end a line, as in Python's text
mode with newline=None; every other character (U+2028, U+2029, U+0085, "\\v", "\\f", "\\x1c".."\\x1e") stays inside
its line. A line break at the end of a file ends its last line (it starts no empty one). text_chunks and
text_lines read by this rule, and never with str.splitlines, which also splits at those other characters.
"""

import codecs
import csv
import gzip
import hashlib
import io
import logging
import re
import zlib
from pathlib import Path
from typing import NamedTuple

from zoo.data.bpe import MODEL_IDS, configured_ids
from zoo.data.resolver import FILES, DataError, dataset_name, file_entry, locate

FORMATS = ("csv", "tsv", "json", "parquet", "lines", "label_first", "regex")
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "json", ".json": "json", ".parquet": "parquet", ".txt": "lines"}
TABLES = ("csv", "tsv", "json", "parquet")
CHUNK = 1 << 20  # bytes decoded at a time
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


def text_chunks(path: Path, encoding: str = "utf-8", chunk: int = CHUNK, fix: str | None = None):
    """The decoded text of a file (gzip when its name ends in .gz), chunk by chunk (memory: one chunk), every
    line break ("\\r\\n", "\\r", "\\n"; the module's rule) written as "\\n", as Python's text mode does.

    Raises DataError naming the file, the line (by that rule) and the byte offset of the first undecodable byte,
    with `fix` (default: convert the file, or set data.encoding); for an unknown encoding; for a bad gzip file.
    """
    try:
        decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder(encoding)(), translate=True)
    except LookupError:
        raise DataError(f"data.encoding={encoding!r} is not an encoding Python knows (e.g. utf-8, latin-1)") from None
    gz = path.suffix == ".gz"
    line, offset = 1, 0
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


def read_records(
    path: Path,
    fmt: str,
    header: bool = True,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    cache_dir: str | None = None,
):
    """The rows of a table file as a `datasets.Dataset` (Hugging Face's csv / json / parquet builders).

    fmt: csv | tsv | json (JSON Lines, or a JSON array) | parquet. header: the first csv / tsv row names the
        columns (else they are "0", "1", ...). delimiter: overrides "," (csv) or a tab (tsv). With a tab
        delimiter (tsv, or csv with delimiter "\\t") quotes are text (QUOTE_NONE), so a quote can never merge
        rows; other csv delimiters read quoting. A blank csv / tsv line is a row of empty fields (the readers
        skip and count it); JSON Lines' blank lines are no rows (read_table counts them).
    Raises DataError naming the file when it has no rows, or `datasets` cannot read it.
    """
    import datasets  # imported here: a second of start-up that only a user's table file needs

    empty = DataError(
        f"{path} has no rows (the file is empty{', or only a header' if header else ''}).\nFix: "
        f"put examples in it, or leave the split out so that it is carved out of train"
    )
    if path.stat().st_size == 0:
        raise empty

    datasets.disable_progress_bars()
    kwargs = _loader_kwargs(path, fmt, header, delimiter, encoding)
    builder = "csv" if fmt == "tsv" else fmt
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir, **kwargs)
    except Exception as e:  # pandas / pyarrow parser errors, wrapped by datasets: the innermost names the line
        if "corresponds to no data" in str(e):  # datasets' word for a file without rows
            raise empty from None
        raise _unreadable(path, fmt, e) from None


def _loader_kwargs(path: Path, fmt: str, header: bool, delimiter: str | None, encoding: str) -> dict:
    """The keyword arguments of datasets.load_dataset for a table file (read_records); checks the encoding of a
    csv / tsv / json file first (check_encoding: DataError naming the line)."""
    if fmt in ("csv", "tsv"):
        check_encoding(path, encoding)
        sep = delimiter or ("\t" if fmt == "tsv" else ",")
        return dict(
            sep=sep,
            header=0 if header else None,
            quoting=csv.QUOTE_NONE if sep == "\t" else csv.QUOTE_MINIMAL,
            keep_default_na=False,
            na_filter=False,
            skip_blank_lines=False,
            encoding=encoding,
        )
    if fmt == "json":
        check_encoding(path, encoding)
        return dict(encoding=encoding)
    return {}


def _unreadable(path: Path, fmt: str, e: BaseException) -> DataError:
    """The DataError of a table file `datasets` cannot read, quoting the innermost cause of `e` (it names the line)."""
    while (e.__cause__ or e.__context__) is not None:
        e = e.__cause__ or e.__context__
    first = (str(e).splitlines() or [""])[0][:200]
    return DataError(
        f"{path}: cannot be read as {fmt} ({type(e).__name__}: {first}).\n"
        f"Fix: check data.format, data.header and data.delimiter (a tab or delimiter inside a "
        f"field needs quoting, or another delimiter)"
    )


class Table(NamedTuple):
    """A table file as read_table reads it: `records` (a datasets.Dataset), `places` (each row's first line in
    the file, or its 1-based row number), `unit` ("line" or "row": what `places` count), `blank` (blank lines
    that are no row: JSON Lines'; a blank csv / tsv line is a row of empty fields)."""

    records: object
    places: list[int]
    unit: str
    blank: int


def read_table(
    path: Path, fmt: str, header: bool = True, delimiter: str | None = None, encoding: str = "utf-8"
) -> Table:
    """read_records, with where each row is in the file (line numbers by the module's rule; parquet and JSON
    arrays: row numbers). Logs a warning naming the file and the lines of the first csv row whose quoted field
    holds a line break (a quote never closed merges the rows below it into one). Raises read_records'
    DataError."""
    records = read_records(path, fmt, header, delimiter, encoding)
    n = len(records)
    if fmt == "parquet":
        return Table(records, list(range(1, n + 1)), "row", 0)
    if fmt == "json":
        lines = text_lines(path, encoding)
        filled = [i for i, ln in enumerate(lines, 1) if ln.strip()]
        if not (filled and lines[filled[0] - 1].lstrip().startswith("[")) and len(filled) == n:  # JSON Lines
            return Table(records, filled, "line", len(lines) - len(filled))
        return Table(records, list(range(1, n + 1)), "row", 0)  # a JSON array: rows, not lines
    first, places = first_row_line(fmt, header), []
    strings = [c for c, f in records.features.items() if getattr(f, "dtype", None) in ("string", "large_string")]
    breaks = [0] * n  # line breaks inside the fields of each row (only quoted csv fields hold any)
    if (delimiter or ("\t" if fmt == "tsv" else ",")) != "\t":
        for c in strings:
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
            'it, or double a quote inside a field ("")',
            path,
            places[i],
            places[i] + breaks[i],
            breaks[i] + 1,
            len(merged),
        )
    return Table(records, places, "line", 0)


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
        suffixes = {f.suffix.lower() for f in folder.rglob("*") if f.is_file()}
        if suffixes & {".csv", ".tsv"} and not suffixes & {".json", ".jsonl", ".parquet", ".txt"}:
            kwargs = dict(keep_default_na=False, na_filter=False, skip_blank_lines=False)
            if ".csv" not in suffixes:  # a tab delimiter: quotes are text
                kwargs["quoting"] = csv.QUOTE_NONE
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
            if split in self.carved:
                files[split] = self.carved[split]
            elif hasattr(value, "items"):
                files[split] = {str(k): file_entry(str(f)) for k, f in value.items()}
            else:
                files[split] = file_entry(str(value))
        return files
