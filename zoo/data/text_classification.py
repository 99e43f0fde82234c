"""Text classification from a user's own files, by config alone (conf/data/text_classification.yaml).

Files: CSV, TSV, JSON Lines, Parquet (read by Hugging Face `datasets`, columns by name or index), or plain
text: `lines` (one example a line, with one file per label: `train: {pos: a.txt, neg: b.txt}`),
`label_first` (`<label> <text>`), `regex` (named groups text and label). Each of train / val / test is a file
or a {label: file} mapping; a missing val or test split is carved out of train (stratified by label, seeded).
Labels may be strings or numbers: a whole number is one class whatever its type (1, 1.0, "1" and "1.0" are the
class "1"), a number that is not whole is refused (class_label); the classes are the training split's labels,
sorted (numbers by value), unless `labels` lists them. Batches are collate_classification dicts.
zoo.data.sst2.SST2 is this module with SST-2's own line format.
"""

from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import Dataset

from zoo.data.batching import BatchedDataModule, epoch_generator, pad, shuffled
from zoo.data.bpe import MODEL_IDS, PAD_ID, SubwordTokenizer
from zoo.data.classification_examples import ClassificationExamples
from zoo.data.labels import class_label
from zoo.data.resolver import DataError

CHUNK_BATCHES = 100  # length bucketing sorts chunks of this many batches


class ClassificationSet(Dataset):
    """Token-id rows and labels (class indices); item i is (i, ids, label)."""

    def __init__(self, ids: list[list[int]], labels: list[int]):
        self.ids, self.labels = ids, labels
        self.lengths = [len(r) for r in ids]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        return i, self.ids[i], self.labels[i]


def collate_classification(items, pad_id: int = PAD_ID) -> dict[str, torch.Tensor]:
    """Pad (index, ids, label) items with pad_id: ids (B, T) long, key_padding_mask (B, T) bool (True =
    padding), labels (B,) long, index (B,) long (the examples' indices in their split)."""
    index, rows, labels = zip(*items)
    ids, mask = pad(rows, pad_id)
    return {
        "ids": ids,
        "key_padding_mask": mask,
        "labels": torch.tensor(labels, dtype=torch.long),
        "index": torch.tensor(index, dtype=torch.long),
    }


class TextClassification(BatchedDataModule, ClassificationExamples):
    """Classification batches from files: "ids" (B, T) long (<cls> text </s>, right-padded with the pad id),
    "key_padding_mask" (B, T) bool (True = padding), "labels" (B,) long class indices, "index" (B,) long.

    Args:
        train, val, test: a file (resolver name or path, "~" expanded) or a {label: file} mapping (one file
            per label, format lines); val / test may be None: carved from train (val_fraction, test_fraction).
        format: csv | tsv | json | parquet | lines | label_first | regex; None = from the suffix.
        text_column, label_column: column names or 0-based indices (table formats).
        header: the first csv / tsv row names the columns; a first row whose label cell is a class of the data
            is refused (the file has no header; its first example would be lost). delimiter: overrides csv's
            "," / tsv's tab. quoting: csv (a quoted field may hold the delimiter and line breaks) | none (quotes
            are text) | None: none with a tab delimiter, csv otherwise (zoo.data.files.delimited.quote_mode).
        encoding: of every text file (checked line by line). pattern: the regex of format=regex.
        labels: the classes, in order (None = the sorted labels of train); any other label is refused. Labels
            are classes by class_label: 1, 1.0 and "1" are one class; 1.7 is refused.
        val_fraction, test_fraction: in (0, 1), used for a missing split. split_seed: their random order.
        tokenizer: bpe (trained on the training texts, vocab_size), char (one token per character), or the
            path of a pretrained tokenizer.json (or its folder), with its own special ids (zoo.data.bpe: cls,
            eos and pad are needed). special_tokens: {role: token} for such a file, where its token names differ
            (e.g. {pad: "<|endoftext|>", cls: "<|endoftext|>"} for GPT-2's). tokenizer_path: where the trained
            BPE is saved (and reused when it was trained on the same texts).
        max_len: most tokens per example, <cls> and </s> included; truncate: cut longer ones (counted, logged)
            or refuse them. batch_size, bucket, num_workers, seed: as zoo.data.sst2.SST2.
        data_dir, mirror: the resolver's (for built-in names). limit: keep the first `limit` training examples.
        name: the dataset's name in reports (None = the files' paths).
        hf_path, hf_name: a Hugging Face dataset (hub id when online, or a local folder of split files), for
            the splits no file is given for (its validation split is val); columns as for a table.
        read_test: False: the test split is never read (its file is not opened; a carved one is cut from train
            and dropped; a hub dataset's is dropped unparsed), test_set is None and test_dataloader refuses.
    After setup(): `tokenizer`, `vocab_size`, `pad_id` (the tokenizer's), `model_ids` ({pad_id, bos_id, eos_id},
    given to the model), train_set / val_set / test_set, classes, `skipped` ({split: blank lines and rows
    without text skipped}, logged).
    Raises DataError (at setup, before any training) for missing files, columns, labels or encodings, empty or
    one-class splits, fractions outside (0, 1), labels of val / test that train lacks, a label that is a number
    but not whole, a header row that is an example, too-long examples with truncate=false, a tokenizer.json
    without a cls, eos or pad token (the message names data.special_tokens).
    """

    pad_id = PAD_ID  # zoo's tokenizers'; after setup, the tokenizer's
    special_ids = MODEL_IDS  # the model ids of zoo's own tokenizers (bpe, char); config_ids: of any setting
    SPECIAL_ROLES = ("cls", "eos", "pad")  # the special tokens the batches hold
    collate = staticmethod(collate_classification)  # collate(items, pad_id)
    BATCH = "classification"

    def __init__(
        self,
        train=None,
        val=None,
        test=None,
        format: str | None = None,
        text_column="text",
        label_column="label",
        header: bool = True,
        delimiter: str | None = None,
        quoting: str | None = None,
        encoding: str = "utf-8",
        pattern: str | None = None,
        labels: list | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        split_seed: int = 0,
        tokenizer: str = "bpe",
        vocab_size: int = 8000,
        tokenizer_path: str | None = None,
        max_len: int = 128,
        truncate: bool = True,
        batch_size: int = 64,
        bucket: bool = True,
        num_workers: int = 0,
        seed: int = 1337,
        data_dir=None,
        mirror=None,
        limit: int | None = None,
        name: str | None = None,
        hf_path: str | None = None,
        hf_name: str | None = None,
        special_tokens: dict | None = None,
        read_test: bool = True,
    ):
        super().__init__()
        self.save_hyperparameters()
        self._check_args(
            train, val, test, hf_path, tokenizer, special_tokens, (val_fraction, test_fraction), batch_size, max_len
        )
        self.keep_files(train, val, test, format, header, delimiter, quoting, encoding, data_dir, mirror)
        self.text_column, self.label_column, self.pattern = text_column, label_column, pattern
        self.fixed_labels = [class_label(x, "data.labels") for x in labels] if labels is not None else None
        self.fractions = {"val": val_fraction, "test": test_fraction}
        self.split_seed, self.tokenizer_kind, self.vocab_size_wanted = split_seed, tokenizer, vocab_size
        self.tokenizer_path, self.max_len, self.truncate = tokenizer_path, max_len, truncate
        self.batch_size, self.bucket, self.num_workers, self.seed = batch_size, bucket, num_workers, seed
        self.limit, self.name = limit, name
        self.hf_path, self.hf_name, self.special_tokens, self.read_test = hf_path, hf_name, special_tokens, read_test
        self._init_state()

    def _check_args(self, train, val, test, hf_path, tokenizer, special_tokens, fractions, batch_size, max_len):
        """The constructor's checks that need no file (check_settings, then batch_size >= 1 and max_len >= 3);
        fractions = (val_fraction, test_fraction). Raises DataError."""
        self.check_settings(
            train,
            hf_path,
            tokenizer,
            special_tokens,
            val,
            test,
            fractions,
            "the training file (data.train=PATH), a {label: file} mapping",
        )
        if batch_size < 1 or max_len < 3:
            raise DataError(f"need data.batch_size >= 1 and data.max_len >= 3, got {batch_size} and {max_len}")

    def _init_state(self) -> None:
        """What setup() fills in: model_ids (zoo's until then), the three sets and the classes (None), and the
        per-split counts of the examples read."""
        self.model_ids = dict(MODEL_IDS)
        self.train_set = self.val_set = self.test_set = None
        self.classes: list[str] | None = None
        self.truncated: dict[str, int] = {}
        self.carved: dict[str, str] = {}
        self.skipped: dict[str, int] = {}  # {split: blank lines and table rows without text}
        self.header_cells: list[tuple[Path, object]] = []  # (csv / tsv file, its header's label cell)

    @property
    def skipped_rows(self) -> int:
        """Blank lines and table rows without text skipped, in all splits."""
        return sum(self.skipped.values())

    # ---- setup -----------------------------------------------------------------------------------------
    def build_tokenizer(self, texts: list[str]) -> SubwordTokenizer:
        """bpe (or char: one token per character, zoo.data.bpe.train_chars): trained on `texts`, saved at
        tokenizer_path with a digest of them and the vocabulary size in its name (<stem>.<digest>.json: reused
        only for the same data); else the given tokenizer.json, as it is, with special_tokens (tokenizer_of)."""
        place = None
        if self.tokenizer_path is not None:  # keyed by the training texts, not only by the vocabulary size
            p = Path(self.tokenizer_path).expanduser()
            place = lambda key: p.with_name(f"{p.stem}.{key}{p.suffix or '.json'}")  # noqa: E731
        return self.tokenizer_of(texts, place)

    def setup(self, stage: str | None = None) -> None:
        """Read, check, tokenize (idempotent). Raises DataError as the class docstring says."""
        if self.train_set is not None:
            return
        data = self.read()
        self.check(data)
        self.tokenizer = self.build_tokenizer([e.text for e in data["train"]])
        self.vocab_size = self.tokenizer.vocab_size
        self.model_ids = self.tokenizer.model_ids(self.SPECIAL_ROLES, (), f"data={type(self).__name__}")
        cls_id, eos_id, self.pad_id = (self.tokenizer.id_of(r) for r in self.SPECIAL_ROLES)
        index = {c: i for i, c in enumerate(self.classes)}
        body, sets = self.max_len - 2, {}
        for split, exs in data.items():
            encoded = self.tokenizer.encode_batch([e.text for e in exs])
            long = [i for i, ids in enumerate(encoded) if len(ids) > body]
            if long and not self.truncate:
                e = exs[long[0]]
                raise DataError(
                    f"{len(long)} {split} examples are longer than data.max_len={self.max_len} tokens, "
                    f"the first at {e.where}.\nFix: raise data.max_len (and "
                    f"model.max_len), or set data.truncate=true to cut them"
                )
            self.truncated[split] = len(long)
            sets[split] = ClassificationSet(
                [[cls_id] + ids[:body] + [eos_id] for ids in encoded], [index[e.label] for e in exs]
            )
        self.train_set, self.val_set, self.test_set = sets["train"], sets["val"], sets.get("test")
        rank_zero_info(
            f"{self.dataset_name()}: {', '.join(f'{s} {len(d)}' for s, d in sets.items())} examples; "
            f"{len(self.classes)} classes ({', '.join(self.classes)}); vocab {self.vocab_size}; truncated "
            f"to data.max_len={self.max_len}: {self.truncated}; skipped (blank lines, rows without "
            f"text): {self.skipped}" + "".join(f"; {s} = {how}" for s, how in self.carved.items())
        )

    @property
    def num_classes(self) -> int:
        self.setup()
        return len(self.classes)

    def train_batches(self, epoch: int) -> list[list[int]]:
        """All training batches of `epoch` before rank sharding: shuffled, with bucket=True sorted by length
        within chunks of CHUNK_BATCHES batches, then the batch order shuffled (a function of (seed, epoch))."""
        n, b = len(self.train_set), self.batch_size
        g = epoch_generator(self.seed, epoch)
        order = torch.randperm(n, generator=g).tolist()
        if not self.bucket:
            return [order[i : i + b] for i in range(0, n, b)]
        lengths, batches = self.train_set.lengths, []
        for c in range(0, n, CHUNK_BATCHES * b):
            chunk = sorted(order[c : c + CHUNK_BATCHES * b], key=lengths.__getitem__)  # stable
            batches += [chunk[i : i + b] for i in range(0, len(chunk), b)]
        return shuffled(batches, g)

    def eval_batches(self, dataset: ClassificationSet) -> list[list[int]]:
        """Batches of batch_size examples in order of length (ties by index)."""
        order = sorted(range(len(dataset)), key=dataset.lengths.__getitem__)
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    # ---- what the run records --------------------------------------------------------------------------
    def model_info(self) -> dict:
        """vocab_size, num_classes, the tokenizer's state, classes, seq_len (mean training length, tokens), and
        pad_id, bos_id, eos_id (model_ids)."""
        self.setup()
        lengths = self.train_set.lengths
        return {
            "vocab_size": self.vocab_size,
            "num_classes": len(self.classes),
            "classes": list(self.classes),
            "tokenizer": self.tokenizer.state_dict(),
            "seq_len": round(sum(lengths) / len(lengths)),
            **self.model_ids,
        }

    def data_info(self) -> dict:
        """The data this module reads (checkpoints, results.json): dataset, builtin, files {split: path
        or carving}, classes (the label of each class index), tokenizer {kind, file, vocab_size}."""
        self.setup()
        files = self.files_info()
        return {
            "dataset": self.dataset_name(),
            "builtin": self.builtin,
            "files": files,
            "classes": list(self.classes),
            "tokenizer": {
                "kind": self.tokenizer_kind if self.tokenizer_kind in ("bpe", "char") else "pretrained",
                "file": self.tokenizer.path and str(self.tokenizer.path),
                "vocab_size": self.vocab_size,
            },
        }
