"""The records of a table file (CSV, TSV, JSON Lines or a JSON array, Parquet) or of a Hugging Face dataset, read by
Hugging Face `datasets`, and their columns by name or index.

zoo parses no CSV, JSON or Parquet itself: `read_records` hands the file to `datasets.load_dataset` (its packaged
csv / json / parquet builders) after the checks that name the line (encoding, a column named twice), and picks
columns by name or index.
"""

import csv
from pathlib import Path

from zoo.data.files.checks import check_json, check_parquet_columns
from zoo.data.files.delimited import column_names, csv_fault, quote_mode
from zoo.data.files.lines import check_encoding
from zoo.data.resolver import DataError


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
    record's key, with the line), a csv row whose fields do not fit the header (too many or too few, with the line
    where a quote opens and the fix), or `datasets` cannot read it.
    """
    empty = DataError(
        f"{path} has no rows (the file is empty{', or only a header' if header else ''}).\nFix: "
        f"put examples in it, or leave the split out so that it is carved out of train"
    )
    if path.stat().st_size == 0:
        raise empty
    kwargs = _loader_kwargs(path, fmt, header, delimiter, encoding, quoting)
    if kwargs is None:
        raise empty
    try:
        records = _load(path, fmt, kwargs, cache_dir)
    except Exception as e:  # pandas / pyarrow parser errors, wrapped by datasets: the innermost names the line
        if "corresponds to no data" in str(e):  # datasets' word for a file without rows
            raise empty from None
        if fmt in ("csv", "tsv"):
            fault = csv_fault(path, *quote_mode(fmt, delimiter, quoting), header, encoding)
            if fault is not None:
                raise fault from None
        raise _unreadable(path, fmt, e) from None
    if len(records) == 0:
        raise empty
    if fmt in ("csv", "tsv") and _has_empty_field(records):  # pandas pads a short row with empty fields
        fault = csv_fault(path, *quote_mode(fmt, delimiter, quoting), header, encoding)
        if fault is not None:
            raise fault
    return records


def _has_empty_field(records) -> bool:
    """Whether some field of a text table is empty (a blank line, an empty field, or a row short of fields)."""
    import pyarrow.compute as pc

    return any(pc.any(pc.equal(column, "")).as_py() for column in records.data.columns)


def _load(path: Path, fmt: str, kwargs: dict, cache_dir: str | None):
    """The rows of a table file by datasets.load_dataset (its csv builder for a tsv file) with `kwargs`, without
    its progress bars or its own log line of a parser error (ours says more). Raises what `datasets` raises."""
    import datasets  # imported here: a second of start-up that only a user's table file needs

    datasets.disable_progress_bars()
    builder = "csv" if fmt == "tsv" else fmt
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir, **kwargs)
    finally:
        datasets.logging.set_verbosity(verbosity)


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
