"""The sentence pairs of a parallel corpus's files (a table, or two line-aligned text files, or a Hugging Face
dataset): read, with val / test carved out of train where they have no file, checked, and each pair's place in its
file kept for messages (ParallelPairs, zoo.data.parallel_text.ParallelText's base)."""

import logging
from pathlib import Path

import torch

from zoo.data.files.lines import text_lines
from zoo.data.files.records import column
from zoo.data.files.splits import TABLES, FileSplits, file_format, find
from zoo.data.files.tables import read_table
from zoo.data.limit import first_examples
from zoo.data.resolver import DataError

log = logging.getLogger("zoo")


def aligned_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """Every line of a text file (gzip when it ends in .gz), blank ones kept so that two files stay aligned;
    line breaks are "\\r\\n", "\\r" and "\\n" (zoo.data.files.lines.text_lines: U+2028, U+0085 ... stay inside a
    line, never str.splitlines). Raises DataError for a bad gzip file or encoding (with the line)."""
    return text_lines(path, encoding)


class ParallelPairs(FileSplits):
    """The file splits of a translation datamodule: read() the (source, target) pairs of `sources` (and of the hub
    dataset hf_path), with columns (src, tgt), src_lang, tgt_lang, fractions, split_seed and limit set by the
    datamodule; fills in skipped, carved and origins ({split: (file(s), an offset, "line" | "row", each kept
    pair's place less the offset)}, for origin())."""

    def read_pairs(self, split: str, value) -> tuple[list[str], list[str]]:
        """(sources, targets) of one split, blank pairs (and JSON Lines' blank lines) dropped, counted in
        skipped[split]. With data.header=true and columns given by index, logs that line 1 is taken as the
        column names (a file without a header loses its first pair there: data.header=false)."""
        read = self._file_pairs if hasattr(value, "items") else self._table_pairs
        src, tgt, origin, places, blank = read(split, value)
        keep = [i for i in range(len(src)) if src[i].strip() and tgt[i].strip()]
        self.skipped[split] = len(src) - len(keep) + blank
        self.origins[split] = (*origin, keep if places is None else [places[i] for i in keep])
        return [src[i] for i in keep], [tgt[i] for i in keep]

    def _file_pairs(self, split: str, value):
        """(sources, targets, (the files, 1, "line"), None: pair i is at line i + 1, 0 blank lines that are no pair)
        of {src: FILE, tgt: FILE}. Raises DataError for other keys, or files of different lengths."""
        if set(value) != {"src", "tgt"}:
            raise DataError(f"data.{split} as two files needs exactly the keys src and tgt, got {sorted(value)}")
        paths = [find(value[k], self.data_dir, self.mirror) for k in ("src", "tgt")]
        src, tgt = (aligned_lines(p, self.encoding) for p in paths)
        if len(src) != len(tgt):
            raise DataError(
                f"parallel files differ in length: {paths[0]} has {len(src)} lines, {paths[1]} "
                f"has {len(tgt)} lines; they must be line-aligned"
            )
        return src, tgt, (f"{paths[0]} and {paths[1]}", 1, "line"), None, 0

    def _table_pairs(self, split: str, value):
        """(sources, targets, (the file, 0, its unit), each row's place, blank lines that are no row) of a table
        file's two columns; logs that a header row is read as the column names when columns are given by index.
        Raises DataError for a file that is not a table, and read_table's and column's."""
        path = find(value, self.data_dir, self.mirror)
        fmt = file_format(path, self.format)
        if fmt not in TABLES:
            raise DataError(
                f"{path}: a parallel corpus in one file must be a table (csv, tsv, json, parquet), "
                f"not {fmt}; or give data.{split}={{src: FILE, tgt: FILE}}"
            )
        table = read_table(path, fmt, self.header, self.delimiter, self.encoding, self.quoting)
        src = [str(x) for x in column(table.records, self.columns[0], path, "src_column")]
        tgt = [str(x) for x in column(table.records, self.columns[1], path, "tgt_column")]
        by_index = [c for c in self.columns if isinstance(c, int) and not isinstance(c, bool)]
        if self.header and fmt in ("csv", "tsv") and by_index:
            log.warning(
                "%s, line 1: data.header=true reads it as the column names (%s), not as a %s-%s pair; if "
                "the file has no header row, set data.header=false",
                path,
                ", ".join(map(repr, table.records.column_names)),
                self.src_lang,
                self.tgt_lang,
            )
        return src, tgt, (str(path), 0, table.unit), table.places, table.blank

    def _hub_pairs(self, split: str, records) -> tuple[list[str], list[str]]:
        """(sources, targets) of a split of the hub dataset (columns src / tgt), blank pairs dropped and counted."""
        src, tgt = (
            column(records, c, Path(self.carved[split]), k) for c, k in zip(self.columns, ("src_column", "tgt_column"))
        )
        keep = [i for i in range(len(src)) if str(src[i]).strip() and str(tgt[i]).strip()]
        self.skipped[split] = len(src) - len(keep)
        self.origins[split] = (self.carved[split], 1, "row", keep)
        return [str(src[i]) for i in keep], [str(tgt[i]) for i in keep]

    def read(self) -> dict[str, tuple[list[str], list[str]]]:
        """Every split's pairs; a missing val / test carved out of train in a seeded random order. The splits of
        unread() are not read (a carved one is cut from train, then dropped). data.limit keeps the first `limit`
        pairs of the training file (before val / test are carved from it) and of a val or test file. Raises
        DataError for a split without pairs; warns about test pairs that are in train too."""
        data, given = self.read_sources(self.read_pairs, self._hub_pairs)
        data = self._first(data, ("train",))
        self._carve(data, given)
        data = self._first(data, ("val", "test"))  # a given val / test file: its first `limit` pairs too
        data = {s: pairs for s, pairs in data.items() if s not in self.unread()}
        for split, (src, _) in data.items():
            if not src:
                raise DataError(f"the {split} split ({self.where(split)}) has no {self.src_lang}-{self.tgt_lang} pairs")
        dup = len(set(zip(*data["train"])) & set(zip(*data.get("test", ((), ())))))
        if dup:
            log.warning(
                "%d test pairs also appear in train (%s); their test scores measure memory", dup, self.where("test")
            )
        return data

    def _first(self, data: dict, splits: tuple) -> dict:
        """data.limit: `data` and self.origins with each of `splits` cut to its first `limit` pairs."""
        if self.limit is None:
            return data
        for split in (s for s in splits if s in self.origins):
            where, first, unit, rows = self.origins[split]
            self.origins[split] = (where, first, unit, rows[: self.limit])
        return first_examples(data, self.limit, splits)

    def _carve(self, data: dict, given: set[str]) -> None:
        """Cut val and test, where not `given`, out of data["train"]: fractions[split] of the whole training file
        each, in a seeded random order (split_seed; + 1 for test), their origins kept."""
        left = 1.0  # the part of the training file still in train: each fraction is of the whole file
        for i, split in enumerate(("val", "test")):
            if split in given:
                continue
            src, tgt = data["train"]
            n = max(1, round(len(src) * self.fractions[split] / left))
            left -= self.fractions[split]
            order = torch.randperm(len(src), generator=torch.Generator().manual_seed(self.split_seed + i)).tolist()
            carved, keep = sorted(order[:n]), sorted(order[n:])
            data[split] = ([src[j] for j in carved], [tgt[j] for j in carved])
            data["train"] = ([src[j] for j in keep], [tgt[j] for j in keep])
            where, first, unit, rows = self.origins["train"]
            self.origins[split] = (where, first, unit, [rows[j] for j in carved])
            self.origins["train"] = (where, first, unit, [rows[j] for j in keep])
            self.carved[split] = f"{self.fractions[split]:g} of train, seed {self.split_seed}"

    def origin(self, split: str, i: int) -> str:
        """Where pair i of a split (after blank pairs are dropped and splits carved) is in the user's file:
        "FILE, line N" (1-based; two files: both, the same line), "FILE, row N" for Parquet and the hub."""
        where, first, unit, rows = self.origins[split]
        return f"{where}, {unit} {first + rows[i]}"
