"""English -> Spanish Bible verses (King James Version, Reina-Valera 1909; public domain): the corpus of
experiment=scaling_translation. zoo.data.parallel_text.ParallelText on the resolver's
bible_en_es/kjv_rv1909.clean.tsv (header ref, en, es; 30,646 verse pairs, SOURCE.txt), split by chapter.

The split: whole chapters (or books) go to val, test or train by a hash of their name, so no chapter is in two
splits (verses of one chapter share names, phrasing and context) and the split is the same on every machine,
for every seed and family, and for a subset of the file (a chapter's split does not depend on the others).
"""

import hashlib
import re

from zoo.data.files.records import column
from zoo.data.files.splits import find
from zoo.data.files.tables import read_table
from zoo.data.limit import first_examples
from zoo.data.parallel_text import ParallelText
from zoo.data.resolver import DataError

FILE = "bible_en_es/kjv_rv1909.clean.tsv"
REF = re.compile(r"^(?P<book>.+?)[. ](?P<chapter>[0-9]+)[.:](?P<verse>[0-9]+)$")  # Gen.1.1 or "Gen 1:1"
SPLIT_BY = ("chapter", "book")


def group_of(ref: str, split_by: str = "chapter") -> str | None:
    """The chapter ("Gen.1") or book ("Gen") a verse reference (Gen.1.1, or "Gen 1:1") belongs to; None for a
    reference that is not BOOK.CHAPTER.VERSE."""
    m = REF.match(ref.strip())
    if m is None:
        return None
    return m["book"] if split_by == "book" else f"{m['book']}.{int(m['chapter'])}"


def split_of(group: str, val_fraction: float, test_fraction: float, salt: int = 0) -> str:
    """ "val", "test" or "train" for a chapter or book: u = the first 8 bytes of sha256("salt:group") as a
    fraction of 2^64; val when u < val_fraction, test when u < val_fraction + test_fraction, else train."""
    u = int.from_bytes(hashlib.sha256(f"{salt}:{group}".encode()).digest()[:8], "big") / 2**64
    return "val" if u < val_fraction else ("test" if u < val_fraction + test_fraction else "train")


class BibleEnEs(ParallelText):
    """Verse pairs of the Bible, src_lang -> tgt_lang (en -> es by default), split by chapter (split_by=chapter)
    or book: each chapter's split is split_of(its name, val_fraction, test_fraction, split_seed), so about
    val_fraction of the chapters (not exactly of the verses) are the validation set. Batches and tokenizers:
    ParallelText's (tokenizer char by default: about 95 characters, joint).

    Args:
        file: the table (a resolver name, or a path to a TSV with the same columns).
        ref_column: the column of verse references (BOOK.CHAPTER.VERSE, e.g. Gen.1.1, or "Gen 1:1").
        split_by: chapter or book. max_len 512 and max_tokens 1024 by default (characters: one verse of 30,646 is
            cut). The rest: ParallelText's.
    After setup(): `groups` {split: the chapters (or books) in it}. Raises DataError for a reference that is not
    BOOK.CHAPTER.VERSE (naming its line), an unknown split_by, or a split left empty.
    """

    def __init__(
        self,
        file: str = FILE,
        src_lang: str = "en",
        tgt_lang: str = "es",
        ref_column: str = "ref",
        split_by: str = "chapter",
        val_fraction: float = 0.05,
        test_fraction: float = 0.05,
        split_seed: int = 0,
        tokenizer: str = "char",
        max_len: int = 512,
        max_tokens: int = 1024,
        **kwargs,
    ):
        if split_by not in SPLIT_BY:
            raise DataError(f"data.split_by={split_by!r} must be one of {', '.join(SPLIT_BY)}")
        kwargs.setdefault("name", "bible_en_es" if file == FILE else None)
        super().__init__(
            train=file,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            format="tsv",
            quoting="none",
            val_fraction=val_fraction,
            test_fraction=test_fraction,
            split_seed=split_seed,
            tokenizer=tokenizer,
            max_len=max_len,
            max_tokens=max_tokens,
            **kwargs,
        )
        self.ref_column, self.split_by = ref_column, split_by
        self.groups: dict[str, list[str]] = {}

    def read(self) -> dict[str, tuple[list[str], list[str]]]:
        """The three splits' (sources, targets), whole chapters (or books) each (split_of); blank pairs dropped
        and counted in skipped["train"]; data.limit keeps the first `limit` pairs of each split."""
        path = find(self.sources["train"], self.data_dir, self.mirror)
        table = read_table(path, "tsv", True, None, self.encoding, "none")
        refs = [str(r) for r in column(table.records, self.ref_column, path, "ref_column")]
        src = [str(x) for x in column(table.records, self.columns[0], path, "src_column")]
        tgt = [str(x) for x in column(table.records, self.columns[1], path, "tgt_column")]
        data = {s: ([], []) for s in ("train", "val", "test")}
        places = {s: [] for s in data}
        groups = {s: set() for s in data}
        for i, ref in enumerate(refs):
            if not (src[i].strip() and tgt[i].strip()):
                continue
            group = group_of(ref, self.split_by)
            if group is None:
                raise DataError(
                    f"{path}, line {table.places[i]}: {self.ref_column}={ref!r} is not a verse reference "
                    "BOOK.CHAPTER.VERSE (e.g. Gen.1.1); the split needs each verse's chapter"
                )
            split = split_of(group, self.fractions["val"], self.fractions["test"], self.split_seed)
            data[split][0].append(src[i])
            data[split][1].append(tgt[i])
            places[split].append(table.places[i])
            groups[split].add(group)
        self.skipped["train"] = len(refs) - sum(len(p) for p in places.values())
        data, places = first_examples(data, self.limit), first_examples(places, self.limit)
        for split in data:
            if not data[split][0]:
                raise DataError(
                    f"no {self.split_by} of {path} fell into the {split} split (data.val_fraction="
                    f"{self.fractions['val']}, data.test_fraction={self.fractions['test']}); raise its fraction"
                )
            self.origins[split] = (str(path), 0, "line", places[split])
            if split != "train":
                self.carved[split] = (
                    f"{self.fractions[split]:g} of the {self.split_by}s by hash, split_seed {self.split_seed}"
                )
        self.groups = {s: sorted(g) for s, g in groups.items()}
        return data
