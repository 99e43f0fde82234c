"""SST-2 binary sentiment classification as a LightningDataModule, with a BPE tokenizer and length bucketing.

Files (via the resolver, or your own: train_file / val_file / test_file): sst2/sentiment-train,
sentiment-dev, sentiment-test; UTF-8, one example a line,
`<sentence> \\t<label>` (lowercased, PTB-tokenized text, a space, a tab, then 0 = negative or 1 = positive).
The published files have 67,349 / 872 / 1,821 lines and no empty ones.

Empty-line policy: a line that is empty or blank, or whose sentence is blank (" \\t1"), is skipped and counted
in `skipped[split]` (reported once, at setup); any other malformed line is an error (DataError).
"""

from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import Dataset

from zoo.data.batching import BatchedDataModule, epoch_generator, pad, shuffled
from zoo.data.bpe import CLS_ID, EOS_ID, MODEL_IDS, PAD_ID, SubwordTokenizer
from zoo.data.resolver import FILES, DataError, dataset_name, file_entry, locate

SPLITS = {"train": "sst2/sentiment-train", "val": "sst2/sentiment-dev", "test": "sst2/sentiment-test"}
CHUNK_BATCHES = 100  # length bucketing sorts chunks of this many batches


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file ("\\n" separated, a trailing "\\r" removed; no empty last line).

    Raises:
        DataError: if the file is not valid UTF-8 (the message gives the line number).
    """
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}: not valid UTF-8 at line {line}, byte offset {e.start} ({e.reason})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def parse_sst2(path: Path) -> tuple[list[str], list[int], int]:
    """Read an SST-2 file into (sentences, labels, number of skipped blank lines).

    Raises:
        DataError: naming the file, line number and value, for a line without a tab or with a label
            that is not 0 or 1 (before any training: the classifier has exactly these two classes).
    """
    sentences, labels, skipped = [], [], 0
    for n, line in enumerate(read_lines(path), 1):
        sentence, tab, label = line.rpartition("\t")
        if not line.strip() or (tab and not sentence.strip()):
            skipped += 1
            continue
        if not tab:
            raise DataError(f"{path}, line {n}: expected '<sentence>\\t<label>', found no tab in {line[:80]!r}")
        if label.strip() not in ("0", "1"):
            raise DataError(f"{path}, line {n}: label {label.strip()!r} is not 0 or 1 (binary sentiment: 0 = "
                            f"negative, 1 = positive).\nFix: write 0 or 1 after the tab on that line")
        sentences.append(sentence.strip())
        labels.append(int(label))
    return sentences, labels, skipped


class ClassificationSet(Dataset):
    """Token-id rows and labels; item i is (i, ids, label)."""

    def __init__(self, ids: list[list[int]], labels: list[int]):
        self.ids, self.labels = ids, labels
        self.lengths = [len(r) for r in ids]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        return i, self.ids[i], self.labels[i]


def collate_classification(items) -> dict[str, torch.Tensor]:
    """Pad (index, ids, label) items: ids (B, T) long, key_padding_mask (B, T) bool (True = padding),
    labels (B,) long, index (B,) long (the examples' indices in their split)."""
    index, rows, labels = zip(*items)
    ids, mask = pad(rows, PAD_ID)
    return {"ids": ids, "key_padding_mask": mask, "labels": torch.tensor(labels, dtype=torch.long),
            "index": torch.tensor(index, dtype=torch.long)}


class SST2(BatchedDataModule):
    """SST-2 (binary sentiment): batches of padded token ids with labels.

    Each example is ids = [CLS_ID] + encode(sentence) + [EOS_ID], at most max_len tokens (longer sentences
    are cut, keeping CLS and EOS; counted in `truncated`). A batch is a dict:
    "ids" (B, T) long right-padded with PAD_ID, "key_padding_mask" (B, T) bool (True = padding),
    "labels" (B,) long in {0, 1}, "index" (B,) long (the example's index in its split). T = the longest
    example of the batch.

    Training batches (train_dataloader): every epoch is a fixed function of (seed, epoch). With bucket=True
    the examples are shuffled, cut into chunks of 100 * batch_size, each chunk is sorted by length and cut
    into batches, and the batch order is shuffled; with bucket=False, plain shuffled batches. Either way
    there are ceil(n / batch_size) batches per epoch (the last of a chunk may be smaller). Under DDP every
    process takes whole batches (rank::world_size, after cutting the list to a multiple of world_size), so
    the global batch is batch_size * world_size; the epoch and a resumed run's position are read from the
    trainer (see zoo.data.batching). Use Trainer(use_distributed_sampler=False), as zoo's configs do:
    Lightning cannot inject its DistributedSampler into these batch samplers. val (the dev file) and test
    batches hold examples sorted by length, not shuffled; every process gets all of them.

    Args:
        batch_size: examples per batch (per process).
        max_len: most tokens per example, CLS and EOS included (>= 3).
        vocab_size: BPE vocabulary size, special tokens included.
        tokenizer_path: tokenizer.json to load, or to train and save (the caller passes e.g.
            <output_dir>/tokenizer.json); None: train it in memory only. Trained on the training
            sentences only (the first `limit` ones when limit is set).
        bucket: length bucketing of training batches.
        num_workers: DataLoader worker processes.
        seed: seed of the training order.
        data_dir, mirror: passed to zoo.data.resolver.resolve.
        limit: keep only the first `limit` training examples (None: all); for quick runs and tests.
        train_file, val_file, test_file: each a resolver name (the defaults: SPLITS) or the path of your
            own file in the same format (used as it is, never checksummed; see zoo.data.resolver.locate).

    After setup(): `tokenizer` (SubwordTokenizer), `vocab_size`, `num_classes` (2), `pad_id`,
    `train_set` / `val_set` / `test_set` (ClassificationSet), `skipped` and `truncated` (split -> count).
    """

    num_classes = 2
    pad_id = PAD_ID
    special_ids = MODEL_IDS  # model.pad_id / bos_id / eos_id must equal these (zoo.train.check_config)
    collate = staticmethod(collate_classification)

    def __init__(self, batch_size: int = 64, max_len: int = 128, vocab_size: int = 8000,
                 tokenizer_path: str | None = None, bucket: bool = True, num_workers: int = 0,
                 seed: int = 1337, data_dir=None, mirror=None, limit: int | None = None,
                 train_file: str = SPLITS["train"], val_file: str = SPLITS["val"], test_file: str = SPLITS["test"]):
        super().__init__()
        self.save_hyperparameters()
        if batch_size < 1 or max_len < 3:
            raise ValueError(f"need batch_size >= 1 and max_len >= 3, got {batch_size} and {max_len}")
        self.batch_size, self.max_len, self.vocab_size_wanted = batch_size, max_len, vocab_size
        self.tokenizer_path, self.bucket, self.num_workers, self.seed = tokenizer_path, bucket, num_workers, seed
        self.data_dir, self.mirror, self.limit = data_dir, mirror, limit
        self.files = {"train": train_file, "val": val_file, "test": test_file}
        self.tokenizer: SubwordTokenizer | None = None
        self.vocab_size: int | None = None
        self.skipped: dict[str, int] = {}
        self.truncated: dict[str, int] = {}
        self.train_set = self.val_set = self.test_set = None

    def prepare_data(self) -> None:
        """Find or download the three files (runs once per node under Lightning)."""
        for name in self.files.values():
            self.path(name)

    def path(self, value: str) -> Path:
        """A file setting as a path (zoo.data.resolver.locate; DataError "not found: PATH" for a missing one)."""
        return locate(value, self.data_dir, self.mirror, names=tuple(SPLITS.values()))

    def setup(self, stage: str | None = None) -> None:
        """Read, check and tokenize all splits (training the tokenizer if needed). Idempotent.

        Raises:
            DataError: if a file cannot be found or resolved, is not UTF-8, has a malformed line or a label
                other than 0/1 (file and line named), or a saved tokenizer does not match vocab_size.
        """
        if self.train_set is not None:
            return
        data = {}
        for split, name in self.files.items():
            sentences, labels, self.skipped[split] = parse_sst2(self.path(name))
            if split == "train" and self.limit is not None:
                sentences, labels = sentences[: self.limit], labels[: self.limit]
            if not sentences:
                raise DataError(f"the {split} split ({name}) has no examples")
            data[split] = (sentences, labels)
        train_sentences = data["train"][0]
        self.tokenizer = SubwordTokenizer.build(lambda: train_sentences, self.vocab_size_wanted, self.tokenizer_path)
        self.vocab_size = self.tokenizer.vocab_size
        sets = {}
        for split, (sentences, labels) in data.items():
            body = self.max_len - 2
            encoded = self.tokenizer.encode_batch(sentences)
            self.truncated[split] = sum(len(e) > body for e in encoded)
            sets[split] = ClassificationSet([[CLS_ID] + e[:body] + [EOS_ID] for e in encoded], labels)
        self.train_set, self.val_set, self.test_set = sets["train"], sets["val"], sets["test"]
        rank_zero_info(f"SST-2: {', '.join(f'{s} {len(d)}' for s, d in sets.items())} examples; "
                       f"vocab {self.vocab_size}; skipped blank lines {self.skipped}; "
                       f"truncated to max_len={self.max_len}: {self.truncated}")

    def train_batches(self, epoch: int) -> list[list[int]]:
        """All training batches (lists of example indices) of `epoch`, in order, before rank sharding."""
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

    def model_info(self) -> dict:
        """What the model and task take from the data: vocab_size, num_classes, the tokenizer's state,
        seq_len (mean training example length in tokens, for FLOPs per token)."""
        self.setup()
        lengths = [len(x) for x in self.train_set.ids]
        return {"vocab_size": self.vocab_size, "num_classes": self.num_classes,
                "tokenizer": self.tokenizer.state_dict(), "seq_len": round(sum(lengths) / len(lengths))}

    def data_info(self) -> dict:
        """The data this module reads, as plain data (kept in checkpoints and results.json): dataset ("sst2",
        or the resolved paths of your own files), builtin, files {split: resolver name or path}, classes,
        tokenizer {kind: "bpe", file (tokenizer_path resolved, or None), vocab_size}."""
        self.setup()
        path = self.tokenizer_path and str(Path(self.tokenizer_path).expanduser().resolve())
        return {"dataset": dataset_name(self.files.values()), "builtin": all(v in FILES for v in self.files.values()),
                "files": {split: file_entry(v) for split, v in self.files.items()}, "classes": self.num_classes,
                "tokenizer": {"kind": "bpe", "file": path, "vocab_size": self.vocab_size}}
