"""The examples of a classification datamodule's files (a file, a {label: file} mapping, a table, a Hugging Face
dataset): read, with val / test carved out of train where they have no file, and checked (ClassificationExamples,
zoo.data.text_classification.TextClassification's base)."""

import logging
from pathlib import Path

from zoo.data.files.lines import compile_pattern, read_lines, split_line
from zoo.data.files.records import column
from zoo.data.files.splits import TABLES, FileSplits, file_format, find
from zoo.data.files.tables import read_table
from zoo.data.labels import class_label, label_key, stratified_split
from zoo.data.limit import first_examples
from zoo.data.resolver import DataError

log = logging.getLogger("zoo")
SPLITS = ("train", "val", "test")


class Example:
    """One example as read: text, label (str), and where it came from (file, line; `unit` "row" for Parquet,
    JSON arrays and Hugging Face datasets, whose `line` is then a 1-based row number) for messages."""

    __slots__ = ("text", "label", "file", "line", "unit")

    def __init__(self, text: str, label: str, file: Path, line: int, unit: str = "line"):
        self.text, self.label, self.file, self.line, self.unit = text, label, file, line, unit

    @property
    def where(self) -> str:
        """Where it is: "FILE, line N" (or "FILE, row N")."""
        return f"{self.file}, {self.unit} {self.line}"


class ClassificationExamples(FileSplits):
    """The file splits of a classification datamodule: read() and check() the examples of `sources` (and of the
    hub dataset hf_path), with text_column, label_column, pattern, fixed_labels, fractions, split_seed and limit
    set by the datamodule; fills in skipped, header_cells, carved and classes."""

    def _read_file(self, split: str, value, label=None) -> list[Example]:
        path = find(value, self.data_dir, self.mirror)
        fmt = file_format(path, self.format if label is None else (self.format or "lines"))
        if label is not None:  # one file per label: every line is one text
            if fmt != "lines":
                raise DataError(f"{path}: a {{label: file}} mapping reads one text a line (format lines), not {fmt}")
            label = class_label(label, f"data.{split}: the key {label!r} of {path}")
            lines, blank = read_lines(path, self.encoding)
            self.skipped[split] = self.skipped.get(split, 0) + blank
            return [Example(t.strip(), label, path, n) for n, t in lines]
        if fmt == "lines":
            raise DataError(
                f"{path}: format lines has no labels; give {{label: file}} files, or set data.format "
                f"to label_first or regex (or csv / tsv / json / parquet)"
            )
        if fmt in TABLES:
            table = read_table(path, fmt, self.header, self.delimiter, self.encoding, self.quoting)
            names, key = table.records.column_names, self.label_column
            if self.header and fmt in ("csv", "tsv"):  # check: a header whose label cell is a class of the data
                if isinstance(key, int) and not isinstance(key, bool) and str(key) not in names:
                    key = names[key] if 0 <= key < len(names) else key
                self.header_cells.append((path, key))
            self.skipped[split] = self.skipped.get(split, 0) + table.blank
            return self._from_records(split, table.records, path, table.places, table.unit)
        rx = compile_pattern(self.pattern) if fmt == "regex" else None
        lines, blank = read_lines(path, self.encoding)
        self.skipped[split] = self.skipped.get(split, 0) + blank
        out = []
        for n, t in lines:
            text, label = split_line(t, fmt, rx, path, n)
            out.append(Example(text, class_label(label, f"{path}, line {n}"), path, n))
        return out

    def _from_records(self, split: str, records, where, places: list[int], unit: str = "line") -> list[Example]:
        """Examples of a table's rows (text_column, label_column); row i is at `unit` places[i] of `where`.
        Rows without text are skipped and counted in skipped[split]."""
        texts = column(records, self.text_column, where, "text_column")
        labels = column(records, self.label_column, where, "label_column")
        out, skipped = [], 0
        for t, lab, n in zip(texts, labels, places):
            if t is None or not str(t).strip():  # a blank line or a row without text: skipped, counted
                skipped += 1
                continue
            if lab is None or not str(lab).strip():
                quoted = str(t).lstrip().startswith('"') and self.quoting != "csv"
                raise DataError(
                    f"{where}, {unit} {n}: the label is empty.\nFix: write the example's label "
                    f"in data.label_column={self.label_column!r}, or remove the row"
                    + (
                        "; if the file quotes its fields (a TSV with a tab or a line break in a field), set "
                        "data.quoting=csv"
                        if quoted
                        else ""
                    )
                )
            out.append(Example(str(t).strip(), class_label(lab, f"{where}, {unit} {n}"), where, n, unit))
        self.skipped[split] = self.skipped.get(split, 0) + skipped
        return out

    def _read_split(self, split: str, value) -> list[Example]:
        """The examples of one split's file setting (a file, or a {label: file} mapping)."""
        if hasattr(value, "items"):
            return [ex for lab, f in value.items() for ex in self._read_file(split, f, lab)]
        return self._read_file(split, value)

    def read(self) -> dict[str, list[Example]]:
        """Every split's examples; missing val / test carved out of train (logged with their sizes). The splits
        of unread() are not read (a carved one is cut from train, then dropped). data.limit keeps the first
        `limit` examples of the training file (before val / test are carved from it) and of a val or test file."""
        self.skipped, self.header_cells = {s: 0 for s in SPLITS}, []
        data, given = self.read_sources(self._read_split, self._hub_examples)
        data = first_examples(data, self.limit, ("train",))
        left = 1.0  # the part of the training file still in train: each fraction is of the whole file
        for split in ("val", "test"):
            if split in given:
                continue
            keep, carved = stratified_split(
                [e.label for e in data["train"]],
                min(self.fractions[split] / left, 1.0),
                self.split_seed + SPLITS.index(split),
            )
            left -= self.fractions[split]
            data[split] = [data["train"][i] for i in carved]
            data["train"] = [data["train"][i] for i in keep]
            self.carved[split] = f"{self.fractions[split]:g} of train, stratified by label, seed {self.split_seed}"
        data = first_examples(data, self.limit, ("val", "test"))  # a given val / test file: its first `limit` too
        return {s: exs for s, exs in data.items() if s not in self.unread()}

    def _hub_examples(self, split: str, records) -> list[Example]:
        """The examples of a split of the hub dataset (its records' row numbers as their places)."""
        return self._from_records(split, records, Path(self.carved[split]), list(range(1, len(records) + 1)), "row")

    def check(self, data: dict[str, list[Example]]) -> None:
        """The classes, and the refusals of the class docstring; warns about train / test duplicates."""
        seen = {e.label for exs in data.values() for e in exs} | set(self.fixed_labels or ())
        for path, cell in self.header_cells:
            try:
                header_class = class_label(cell, "")
            except DataError:  # a number that is not whole: no class
                continue
            if header_class in seen:
                raise DataError(
                    f"{path}, line 1: data.header=true reads this line as the column names, but its cell in "
                    f"data.label_column={self.label_column!r} is {cell!r}, a class of the data: the file has no "
                    f"header row, and its first example would be lost.\nFix: set data.header=false (and give "
                    f"data.text_column and data.label_column as 0-based indices), or add a header row to the file"
                )
        train_labels = sorted({e.label for e in data["train"]}, key=label_key)
        self.classes = self.fixed_labels or train_labels
        known = set(self.classes)
        for split in (s for s in SPLITS if s in data):
            exs = data[split]
            if not exs:
                raise DataError(f"the {split} split ({self.where(split)}) has no examples")
            for e in exs:
                if e.label not in known:
                    whose = "data.labels" if self.fixed_labels else "the training split"
                    raise DataError(
                        f"{e.where}: label {e.label!r} is not one of the classes of "
                        f"{whose} ({', '.join(self.classes)}).\nFix: correct the label, or "
                        f"{'add it to data.labels' if self.fixed_labels else 'add examples of it to train'}"
                    )
            if len({e.label for e in exs}) < 2 and split == "train":
                raise DataError(
                    f"the train split ({self.where('train')}) has a single class "
                    f"({exs[0].label!r}); classification needs two or more"
                )
        dup = len({e.text for e in data["train"]} & {e.text for e in data.get("test", ())})
        if dup:
            log.warning(
                "%d test texts also appear in train (%s); their test scores measure memory", dup, self.where("test")
            )
