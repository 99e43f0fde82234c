"""The file settings of a datamodule that reads a user's files: finding a file or a tokenizer.json, its format, and
FileSplits, the train / val / test settings (files, carved splits, a Hugging Face dataset) as a mixin."""

import hashlib
from collections.abc import Callable
from pathlib import Path

from zoo.data.bpe import MODEL_IDS, SubwordTokenizer, configured_ids
from zoo.data.files.delimited import check_quoting
from zoo.data.files.records import read_hub
from zoo.data.resolver import FILES, DataError, dataset_name, file_entry, locate

FORMATS = ("csv", "tsv", "json", "parquet", "lines", "label_first", "regex")
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "json", ".json": "json", ".parquet": "parquet", ".txt": "lines"}
TABLES = ("csv", "tsv", "json", "parquet")


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


def text_digest(texts, vocab_size: int) -> str:
    """16 hex digits of SHA-256 over the texts and the vocabulary size: the name of a tokenizer trained on them."""
    h = hashlib.sha256(f"{vocab_size}\n".encode())
    for t in texts:
        h.update(t.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


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

    def keep_files(self, train, val, test, format, header, delimiter, quoting, encoding, data_dir, mirror) -> None:
        """Keep the splits' file settings (`sources`), how their files read (format, header, delimiter, quoting:
        check_quoting, encoding) and where a built-in name is found (data_dir, mirror: the resolver's). Raises
        DataError for an unknown quoting."""
        check_quoting(quoting)
        self.sources = {"train": train, "val": val, "test": test}
        self.format, self.header, self.delimiter, self.encoding = format, header, delimiter, encoding
        self.quoting, self.data_dir, self.mirror = quoting, data_dir, mirror

    def read_sources(self, read_file: Callable, read_records: Callable) -> tuple[dict, set[str]]:
        """({split: read_file(split, its file setting)}, then {split: read_records(split, its records)} for the
        splits of the Hugging Face dataset hf_path that have no file (each named in `carved` as
        "HF_PATH[/HF_NAME][SPLIT]"); no split of unread()), and the splits given, read or not: those with a file
        or a hub split, the ones not to carve out of train. Raises the readers' and read_hub's DataError."""
        unread = self.unread()
        data = {s: read_file(s, v) for s, v in self.sources.items() if v is not None and s not in unread}
        given = {s for s, v in self.sources.items() if v is not None}  # splits that are not carved
        if self.hf_path is not None:  # the hub dataset's splits, where no file is given
            for split, records in read_hub(self.hf_path, self.hf_name).items():
                given.add(split)
                if split not in data and split not in unread:
                    self.carved[split] = f"{self.hf_path}{f'/{self.hf_name}' if self.hf_name else ''}[{split}]"
                    data[split] = read_records(split, records)
        return data, given

    def tokenizer_of(self, texts: list[str], place: Callable[[str], Path] | None) -> SubwordTokenizer:
        """The tokenizer of `tokenizer_kind`: a pretrained tokenizer.json, as it is, with special_tokens; else zoo's
        bpe (vocab_size_wanted) or char trained on `texts`, saved at place(key), key a digest of the texts and the
        vocabulary size (text_digest; "char.<digest>" for char), so a tokenizer of other data is never reused; kept
        in memory only with place None."""
        if self.tokenizer_kind not in ("bpe", "char"):
            return SubwordTokenizer.load(
                find_tokenizer(self.tokenizer_kind, self.data_dir, self.mirror), self.special_tokens
            )
        chars = self.tokenizer_kind == "char"
        path = None
        if place is not None:
            path = place(f"{'char.' if chars else ''}{text_digest(texts, 0 if chars else self.vocab_size_wanted)}")
        return SubwordTokenizer.build(lambda: texts, self.vocab_size_wanted, path, chars=chars)

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
