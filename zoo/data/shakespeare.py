"""Char-level Tiny Shakespeare as a LightningDataModule (the nanoGPT shakespeare_char setup).

The text is split 90/10 into train/val by character position. A training "epoch" is a fixed number of
windows at pseudo-random offsets; window i of epoch e depends only on (seed, e, i), so a run can be
reproduced (and resumed) exactly. Validation uses a fixed set of evenly spaced windows.
"""

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo.data.char_tokenizer import CharTokenizer
from zoo.data.resolver import DataError, resolve

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(x: int) -> int:
    """splitmix64: a cheap, well-mixed 64-bit hash of an integer."""
    x = (x + _GOLDEN) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class RandomWindows(Dataset):
    """(x, y) pairs from windows of block_size+1 tokens at pseudo-random start offsets.

    The start offset of item `index` is a hash of (seed, index), so items are deterministic and need no
    state. `index` may be >= len(self): EpochSampler passes epoch * len(self) + i, giving each epoch
    fresh windows.
    """

    def __init__(self, data: torch.Tensor, block_size: int, num_windows: int, seed: int):
        self.data, self.block_size, self.num_windows = data, block_size, num_windows
        self.key = _mix64(seed & _MASK)
        self.num_starts = len(data) - block_size  # valid start offsets: 0 .. num_starts-1

    def __len__(self) -> int:
        return self.num_windows

    def start(self, index: int) -> int:
        return _mix64((self.key + index * _GOLDEN) & _MASK) % self.num_starts

    def __getitem__(self, index: int):
        s = self.start(index)
        w = self.data[s : s + self.block_size + 1]
        return w[:-1], w[1:]


class FixedWindows(Dataset):
    """(x, y) pairs from `num_windows` windows at evenly spaced start offsets (at most one per offset)."""

    def __init__(self, data: torch.Tensor, block_size: int, num_windows: int):
        self.data, self.block_size = data, block_size
        num_starts = len(data) - block_size
        self.starts = torch.linspace(0, num_starts - 1, min(num_windows, num_starts)).round().long()

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int):
        s = int(self.starts[index])
        w = self.data[s : s + self.block_size + 1]
        return w[:-1], w[1:]


class EpochSampler(Sampler):
    """Yields epoch * n + i for i in range(n); Lightning calls set_epoch() at the start of every epoch."""

    def __init__(self, n: int, epoch: int = 0):
        self.n, self.epoch = n, epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        yield from range(self.epoch * self.n, (self.epoch + 1) * self.n)


class TinyShakespeare(pl.LightningDataModule):
    """Tiny Shakespeare, character level: batches of (x, y) token tensors of shape (batch_size, block_size).

    Args:
        block_size: context length T; windows have T+1 tokens (y is x shifted left by one).
        batch_size: batch size B, for train and val.
        num_workers, pin_memory: passed to the DataLoaders.
        val_windows: number of fixed, evenly spaced validation windows.
        train_windows_per_epoch: number of random training windows that make one epoch.
        seed: seed of the training windows.
        data_dir, mirror: passed to zoo.data.resolver.resolve.
        file: resolver name of the text file.

    After setup(): `tokenizer` (CharTokenizer), `vocab_size`, `train_data` / `val_data` (1-D long tensors).
    """

    def __init__(self, block_size: int = 256, batch_size: int = 64, num_workers: int = 0,
                 pin_memory: bool = False, val_windows: int = 500, train_windows_per_epoch: int = 100_000,
                 seed: int = 1337, data_dir=None, mirror=None, file: str = "tiny_shakespeare/input.txt"):
        super().__init__()
        self.save_hyperparameters()
        self.block_size, self.batch_size = block_size, batch_size
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.val_windows, self.train_windows_per_epoch, self.seed = val_windows, train_windows_per_epoch, seed
        self.data_dir, self.mirror, self.file = data_dir, mirror, file
        self.tokenizer: CharTokenizer | None = None
        self.vocab_size: int | None = None
        self.train_data = self.val_data = None

    def prepare_data(self) -> None:
        """Find or download the text file (runs once per node under Lightning)."""
        resolve(self.file, self.data_dir, self.mirror)

    def setup(self, stage: str | None = None) -> None:
        """Read, tokenize and split the text. Idempotent: later calls return at once.

        Raises:
            DataError: if the file cannot be resolved, is empty, is not UTF-8, or a split is shorter
                than block_size + 1 characters.
        """
        if self.train_data is not None:
            return
        path = resolve(self.file, self.data_dir, self.mirror)
        raw = path.read_bytes()
        if not raw:
            raise DataError(f"{path} is empty")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{path} is not valid UTF-8: invalid byte at offset {e.start} ({e.reason})") from None
        tokenizer = CharTokenizer.from_text(text)
        data = torch.tensor(tokenizer.encode(text), dtype=torch.long)
        n = int(0.9 * len(data))
        train_data, val_data = data[:n], data[n:]
        for split, d in (("train", train_data), ("val", val_data)):
            if len(d) < self.block_size + 1:
                raise DataError(f"{path}: the {split} split has {len(d)} characters, fewer than "
                                f"block_size + 1 = {self.block_size + 1}; use a smaller block_size")
        self.tokenizer, self.vocab_size = tokenizer, tokenizer.vocab_size
        self.train_set = RandomWindows(train_data, self.block_size, self.train_windows_per_epoch, self.seed)
        self.val_set = FixedWindows(val_data, self.block_size, self.val_windows)
        self.train_data, self.val_data = train_data, val_data

    def _loader(self, dataset, sampler=None) -> DataLoader:
        return DataLoader(dataset, batch_size=self.batch_size, sampler=sampler, shuffle=False,
                          drop_last=sampler is not None, num_workers=self.num_workers,
                          pin_memory=self.pin_memory, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        self.setup()
        # start at the trainer's epoch so a resumed run draws that epoch's windows from its first batch
        epoch = self.trainer.current_epoch if self.trainer is not None else 0
        return self._loader(self.train_set, EpochSampler(len(self.train_set), epoch))

    def val_dataloader(self) -> DataLoader:
        self.setup()
        return self._loader(self.val_set)
