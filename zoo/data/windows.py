"""Language-model windows over a token sequence: a training stream of windows at pseudo-random offsets
(window k depends only on (seed, k), so a run can be reproduced and resumed exactly) and fixed, evenly spaced
validation windows, and WindowedDataModule, their DataLoaders. zoo.data.text_corpus.TextCorpus draws its batches
with them.
"""

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo.data.token_file import Tokens
from zoo.errors import DataError

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
    windows = [data[s : s + block_size + 1] for s in starts]
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


class WindowedDataModule(pl.LightningDataModule):
    """The loaders of datamodules of language-model windows: subclasses set `train_set` (RandomWindows) and
    `val_set` (FixedWindows) at setup(), and `batch_size` (the global batch), `num_workers`, `pin_memory`, `seed`."""

    def _loader(self, dataset, sampler=None, batch_size=None) -> DataLoader:
        # its own generator: creating an iterator must not draw from the global RNG (exact resume)
        return DataLoader(
            dataset,
            batch_size=batch_size or self.batch_size,
            sampler=sampler,
            shuffle=False,
            drop_last=sampler is not None,
            num_workers=self.num_workers,
            generator=torch.Generator().manual_seed(self.seed),
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0,
        )

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
            raise DataError(
                f"data.batch_size={self.batch_size} (the global batch) is not divisible by the "
                f"{world} training processes; choose a multiple of {world}"
            )
        sampler = StreamSampler(len(self.train_set), self.batch_size, done, rank, world)
        return self._loader(self.train_set, sampler, self.batch_size // world)

    def val_dataloader(self) -> DataLoader:
        """Every process evaluates the whole fixed validation set (the mean is the same on all)."""
        self.setup()
        return self._loader(self.val_set)
