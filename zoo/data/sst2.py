"""SST-2 binary sentiment classification: zoo.data.text_classification.TextClassification on SST-2's files.

Files (via the resolver, or your own: train_file / val_file / test_file): sst2/sentiment-train,
sentiment-dev, sentiment-test; UTF-8, one example a line (line breaks: zoo.data.files.lines' rule),
`<sentence> \\t<label>` (lowercased, PTB-tokenized text, a space, a tab, then 0 = negative or 1 = positive).
The published files have 67,349 / 872 / 1,821 lines and no empty ones.

Empty-line policy: a line that is empty or blank, or whose sentence is blank (" \\t1"), is skipped and counted
in `skipped[split]` (reported in the setup line); any other malformed line is an error (DataError).
"""

from pathlib import Path

from zoo.data.classification_examples import Example
from zoo.data.files.lines import text_lines
from zoo.data.resolver import DataError, locate
from zoo.data.text_classification import CHUNK_BATCHES, ClassificationSet, TextClassification, collate_classification

SPLITS = {"train": "sst2/sentiment-train", "val": "sst2/sentiment-dev", "test": "sst2/sentiment-test"}


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file, without their line breaks ("\\r\\n", "\\r" or "\\n": the one rule of
    zoo.data.files.lines; U+2028, U+0085 ... stay inside a line; no empty last line).

    Raises:
        DataError: if the file is not valid UTF-8 (the message gives the line number).
    """
    return text_lines(path, "utf-8")


def parse_sst2(path: Path) -> tuple[list[str], list[int], int, list[int]]:
    """Read an SST-2 file into (sentences, labels, number of skipped blank lines, line number of each).

    Raises:
        DataError: naming the file, line number and value, for a line without a tab or with a label
            that is not 0 or 1 (before any training: the classifier has exactly these two classes).
    """
    sentences, labels, skipped, where = [], [], 0, []
    for n, line in enumerate(read_lines(path), 1):
        sentence, tab, label = line.rpartition("\t")
        if not line.strip() or (tab and not sentence.strip()):
            skipped += 1
            continue
        if not tab:
            raise DataError(f"{path}, line {n}: expected '<sentence>\\t<label>', found no tab in {line[:80]!r}")
        if label.strip() not in ("0", "1"):
            raise DataError(
                f"{path}, line {n}: label {label.strip()!r} is not 0 or 1 (binary sentiment: 0 = "
                f"negative, 1 = positive).\nFix: write 0 or 1 after the tab on that line"
            )
        sentences.append(sentence.strip())
        labels.append(int(label))
        where.append(n)
    return sentences, labels, skipped, where


class SST2(TextClassification):
    """SST-2 (binary sentiment): TextClassification with SST-2's line format (parse_sst2) and classes 0, 1.

    Examples are [CLS] + encode(sentence) + [EOS], at most max_len tokens (longer ones cut, counted in
    `truncated`); batches, bucketing, DDP sharding and resume: TextClassification's. val (the dev file) selects
    the checkpoint, test reports.

    Args:
        batch_size, max_len, vocab_size, tokenizer_path, bucket, num_workers, seed, data_dir, mirror, limit,
            tokenizer, special_tokens:
            TextClassification's.
        train_file, val_file, test_file: each a resolver name (the defaults: SPLITS) or the path of your
            own file in the same format (used as it is, never checksummed; see zoo.data.resolver.locate).
        read_test: False: test_file is never found, opened or read (TextClassification's read_test).

    After setup(), beyond TextClassification's: `skipped` (split -> blank lines skipped).
    """

    def __init__(
        self,
        batch_size: int = 64,
        max_len: int = 128,
        vocab_size: int = 8000,
        tokenizer_path: str | None = None,
        bucket: bool = True,
        num_workers: int = 0,
        seed: int = 1337,
        data_dir=None,
        mirror=None,
        limit: int | None = None,
        train_file: str = SPLITS["train"],
        val_file: str = SPLITS["val"],
        test_file: str = SPLITS["test"],
        tokenizer: str = "bpe",
        special_tokens: dict | None = None,
        read_test: bool = True,
    ):
        super().__init__(
            train=train_file,
            val=val_file,
            test=test_file,
            labels=[0, 1],
            vocab_size=vocab_size,
            tokenizer=tokenizer,
            special_tokens=special_tokens,
            tokenizer_path=tokenizer_path,
            max_len=max_len,
            batch_size=batch_size,
            bucket=bucket,
            num_workers=num_workers,
            seed=seed,
            data_dir=data_dir,
            mirror=mirror,
            limit=limit,
            read_test=read_test,
        )
        self.skipped: dict[str, int] = {}

    def prepare_data(self) -> None:
        """Find or download the three files (runs once per node under Lightning); not the test file with
        read_test=False."""
        for split, name in self.sources.items():
            if split not in self.unread():
                self.path(name)

    def path(self, value: str) -> Path:
        """A file setting as a path (zoo.data.resolver.locate; DataError "not found: PATH" for a missing one)."""
        return locate(value, self.data_dir, self.mirror, names=tuple(SPLITS.values()))

    def _read_split(self, split: str, value) -> list[Example]:
        path = self.path(value)
        sentences, labels, self.skipped[split], where = parse_sst2(path)
        return [Example(t, str(lab), path, n) for t, lab, n in zip(sentences, labels, where)]


__all__ = [
    "SST2",
    "SPLITS",
    "parse_sst2",
    "read_lines",
    "ClassificationSet",
    "collate_classification",
    "CHUNK_BATCHES",
    "DataError",
]
