"""Char-level Tiny Shakespeare as a LightningDataModule (the nanoGPT shakespeare_char setup).

The text is split 90/10 into train/val by character position. A training "epoch" is a fixed number of
windows at pseudo-random offsets; window k of the stream depends only on (seed, k), so a run can be
reproduced (and resumed) exactly. Validation uses a fixed set of evenly spaced windows.

The text is tokenized once into a memory-mapped token file (zoo.data.token_file, uint16 ids) under
`token_dir`; every later run, DDP rank and DataLoader worker reads windows from that file, so resident
memory does not grow with the corpus.
"""

import os
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo.data.char_tokenizer import CharTokenizer
from zoo.data.resolver import FILES, DataError, dataset_name, file_entry, locate, sha256sum
from zoo.data.token_file import Tokens, open_token_file, write_token_file

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(x: int) -> int:
    """splitmix64: a cheap, well-mixed 64-bit hash of an integer."""
    x = (x + _GOLDEN) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _pairs(data, starts, block_size: int) -> list:
    """[(x, y)] for windows of block_size + 1 tokens at `starts`; x, y: (block_size,) long tensors.
    A Tokens `data` reads them all with one mapping of its file."""
    if isinstance(data, Tokens):
        w = data.windows(starts, block_size + 1)
        return [(r[:-1], r[1:]) for r in w]
    windows = [data[s:s + block_size + 1] for s in starts]
    return [(w[:-1], w[1:]) for w in windows]


class RandomWindows(Dataset):
    """(x, y) pairs from windows of block_size+1 tokens at pseudo-random start offsets.

    The start offset of item `index` is a hash of (seed, index), so items are deterministic and need no
    state. `index` may be >= len(self): StreamSampler passes batches_done * batch_size + i, giving each epoch
    fresh windows. `data` is a 1-D token sequence: Tokens (a token file) or a long tensor.
    """

    def __init__(self, data: "Tokens | torch.Tensor", block_size: int, num_windows: int, seed: int):
        self.data, self.block_size, self.num_windows = data, block_size, num_windows
        self.key = _mix64(seed & _MASK)
        self.num_starts = len(data) - block_size  # valid start offsets: 0 .. num_starts-1

    def __len__(self) -> int:
        return self.num_windows

    def start(self, index: int) -> int:
        return _mix64((self.key + index * _GOLDEN) & _MASK) % self.num_starts

    def __getitem__(self, index: int):
        return _pairs(self.data, [self.start(index)], self.block_size)[0]

    def __getitems__(self, indices) -> list:
        """A whole batch at once (the DataLoader calls this): one read of the token file per batch."""
        return _pairs(self.data, [self.start(i) for i in indices], self.block_size)


class FixedWindows(Dataset):
    """(x, y) pairs from `num_windows` windows at evenly spaced start offsets (at most one per offset)."""

    def __init__(self, data: "Tokens | torch.Tensor", block_size: int, num_windows: int):
        self.data, self.block_size = data, block_size
        num_starts = len(data) - block_size
        self.starts = torch.linspace(0, num_starts - 1, min(num_windows, num_starts)).round().long()

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int):
        return _pairs(self.data, [int(self.starts[index])], self.block_size)[0]

    def __getitems__(self, indices) -> list:
        return _pairs(self.data, [int(self.starts[i]) for i in indices], self.block_size)


class StreamSampler(Sampler):
    """An endless stream of window indices, n per epoch: the epoch that starts after `batches_done()`
    training batches yields batches_done() * batch_size + i for this rank's share of i in range(n)
    (i = rank, rank + world_size, ...). Counting from the trainer's batch progress (restored from a
    checkpoint) rather than its epoch number makes a resumed run draw exactly the windows an uninterrupted
    run would; sharding here (not with Lightning's DistributedSampler) keeps every step's global batch the
    same for any number of processes."""

    def __init__(self, n: int, batch_size: int, batches_done=lambda: 0, rank: int = 0, world_size: int = 1):
        self.n, self.batch_size, self.batches_done = n, batch_size, batches_done
        self.rank, self.world_size = rank, world_size

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.world_size))

    def __iter__(self):
        start = self.batches_done() * self.batch_size
        yield from (start + i for i in range(self.rank, self.n, self.world_size))


class TinyShakespeare(pl.LightningDataModule):
    """Tiny Shakespeare, character level: batches of (x, y) token tensors of shape (batch_size, block_size).

    Args:
        block_size: context length T; windows have T+1 tokens (y is x shifted left by one).
        batch_size: global batch size B (split over DDP processes), for train and val.
        num_workers: DataLoader worker processes (0 = load in the training process); each worker maps
            the token file itself.
        pin_memory: page-locked batches for faster host-to-GPU copies (no effect on the CPU).
        val_windows: number of fixed, evenly spaced validation windows.
        batches_per_epoch: training batches that make one epoch (batches_per_epoch * batch_size random
            windows); zoo validates and checkpoints at each epoch end, so a resumed run restarts exactly.
        seed: seed of the training windows.
        data_dir, mirror: passed to zoo.data.resolver.resolve.
        file: resolver name of the text file, or the path of your own UTF-8 text file (used as it is, never
            checksummed; see zoo.data.resolver.locate).
        token_dir: where the token file is written (once per distinct text); default <data_dir>/tokens,
            where data_dir is as for the resolver (data_dir, else $ZOO_DATA_DIR, else ./data).

    After setup(): `tokenizer` (CharTokenizer), `vocab_size`, `train_data` / `val_data` (Tokens: 1-D,
    read-only views of the token file; slicing gives long tensors), `token_path` (the token file).
    """

    def __init__(self, block_size: int = 256, batch_size: int = 64, num_workers: int = 0,
                 pin_memory: bool = False, val_windows: int = 500, batches_per_epoch: int = 250,
                 seed: int = 1337, data_dir=None, mirror=None, file: str = "tiny_shakespeare/input.txt",
                 token_dir=None):
        super().__init__()
        self.save_hyperparameters()
        self.block_size, self.batch_size = block_size, batch_size
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.val_windows, self.seed = val_windows, seed
        self.train_windows_per_epoch = batches_per_epoch * batch_size
        self.data_dir, self.mirror, self.file = data_dir, mirror, file
        self.token_dir = Path(token_dir or Path(data_dir or os.environ.get("ZOO_DATA_DIR") or "data") / "tokens")
        self.token_path: Path | None = None
        self.tokenizer: CharTokenizer | None = None
        self.vocab_size: int | None = None
        self.train_data = self.val_data = None

    def prepare_data(self) -> None:
        """Find or download the text file and write its token file (runs once per node under Lightning)."""
        self._tokens(self.path())

    def path(self) -> Path:
        """`file` as a dataset name known to the resolver (checksummed), or a path to any local text file.
        Raises DataError ("not found: PATH" for a missing file of yours; see zoo.data.resolver.locate)."""
        return locate(self.file, self.data_dir, self.mirror, names=("tiny_shakespeare/input.txt",))

    def data_info(self) -> dict:
        """The data this module reads, as plain data (kept in checkpoints and results.json): dataset (the
        built-in "tiny_shakespeare", or the resolved path of your own file), builtin, files {"text": resolver
        name or path}, tokenizer {kind: "char", file: the token file holding it, vocab_size}."""
        self.setup()
        return {"dataset": dataset_name([self.file]), "builtin": self.file in FILES,
                "files": {"text": file_entry(self.file)},
                "tokenizer": {"kind": "char", "file": str(self.token_path.resolve()), "vocab_size": self.vocab_size}}

    def _tokens(self, path: Path) -> Tokens:
        """The token file of the text at `path`: opened if a complete one made from this exact text (by
        SHA-256) exists, else written atomically (ranks that race write identical files)."""
        sha = sha256sum(path)
        self.token_path = self.token_dir / f"{path.stem}.char.{sha[:16]}.bin"
        tokens = open_token_file(self.token_path, source_sha256=sha)
        if tokens is not None:
            return tokens
        raw = path.read_bytes()
        if not raw:
            raise DataError(f"{path} is empty")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{path} is not valid UTF-8: invalid byte at offset {e.start} ({e.reason})") from None
        tokenizer = CharTokenizer.from_text(text)
        ids = np.array(tokenizer.encode(text), dtype=np.int64)
        try:
            return write_token_file(self.token_path, [ids], tokenizer.vocab_size, source_sha256=sha,
                                    meta={"tokenizer": tokenizer.state_dict(), "source": str(path)})
        except OSError as e:
            raise DataError(f"cannot write the token file {self.token_path}: {e}. Set data.token_dir "
                            f"(or data.data_dir) to a writable folder") from None

    def setup(self, stage: str | None = None) -> None:
        """Open (or build, on first use) the token file and split it. Idempotent: later calls return at once.

        Raises:
            DataError: if the file cannot be resolved, is empty, is not UTF-8, or a split is shorter
                than block_size + 1 characters, or the token file cannot be written.
        """
        if self.train_data is not None:
            return
        path = self.path()
        data = self._tokens(path)
        tokenizer = CharTokenizer.from_state_dict(data.info["meta"]["tokenizer"])
        n = int(0.9 * len(data))
        train_data, val_data = data.view(0, n), data.view(n, len(data))
        for split, d in (("train", train_data), ("val", val_data)):
            if len(d) < self.block_size + 1:
                raise DataError(f"{path}: the {split} split has {len(d)} characters, fewer than "
                                f"block_size + 1 = {self.block_size + 1}; use a smaller block_size")
        self.tokenizer, self.vocab_size = tokenizer, tokenizer.vocab_size
        self.train_set = RandomWindows(train_data, self.block_size, self.train_windows_per_epoch, self.seed)
        self.val_set = FixedWindows(val_data, self.block_size, self.val_windows)
        self.train_data, self.val_data = train_data, val_data

    def model_info(self) -> dict:
        """What the model and task take from the data: vocab_size, the tokenizer's state, seq_len (tokens)."""
        self.setup()
        return {"vocab_size": self.vocab_size, "tokenizer": self.tokenizer.state_dict(), "seq_len": self.block_size}

    def _loader(self, dataset, sampler=None, batch_size=None) -> DataLoader:
        # its own generator: creating an iterator must not draw from the global RNG (exact resume)
        return DataLoader(dataset, batch_size=batch_size or self.batch_size, sampler=sampler, shuffle=False,
                          drop_last=sampler is not None, num_workers=self.num_workers,
                          generator=torch.Generator().manual_seed(self.seed),
                          pin_memory=self.pin_memory, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        """batch_size is the global batch: each of the trainer's world_size processes loads
        batch_size / world_size windows of every step (DataError if not divisible)."""
        self.setup()
        rank, world, done = 0, 1, lambda: 0
        if self.trainer is not None:
            rank, world = self.trainer.global_rank, self.trainer.world_size
            progress = self.trainer.fit_loop.epoch_loop.batch_progress
            done = lambda: progress.total.completed  # noqa: E731  training batches so far, resumed runs included
        if self.batch_size % world:
            raise DataError(f"data.batch_size={self.batch_size} (the global batch) is not divisible by the "
                            f"{world} training processes; choose a multiple of {world}")
        sampler = StreamSampler(len(self.train_set), self.batch_size, done, rank, world)
        return self._loader(self.train_set, sampler, self.batch_size // world)

    def val_dataloader(self) -> DataLoader:
        """Every process evaluates the whole fixed validation set (the mean is the same on all)."""
        self.setup()
        return self._loader(self.val_set)
