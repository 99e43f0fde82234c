"""Batch samplers and padding shared by the sentence-level data modules (SST-2, Multi30k).

A training epoch is a list of batches (lists of example indices) that is a pure function of (seed, epoch).
EpochBatchSampler reads the epoch in progress (trainer.current_epoch), and how many of its batches are
already done, from the trainer's loop progress when the epoch's iteration starts, so a run resumed from a
checkpoint sees exactly the batches an uninterrupted run would: from an epoch-end checkpoint (saved at
train-epoch end or at validation end) or a mid-epoch one (max_steps or val_check_interval), with or without
DataLoader workers (tests/test_sst2.py and tests/test_resume.py check these under a real Trainer). With
workers, the DataLoader draws its first batches when Lightning creates the iterator, before it resets the
counters of a resumed run; EpochBatchSampler.position handles that case.
"""

import functools
from collections.abc import Callable, Sequence

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Sampler

from zoo.data.windows import _MASK, _mix64
from zoo.errors import DataError


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A torch.Generator seeded by a hash of (seed, epoch): independent streams for every epoch."""
    return torch.Generator().manual_seed(_mix64(_mix64(seed & _MASK) ^ (epoch & _MASK)))


def shuffled(items: list, g: torch.Generator) -> list:
    """items in a random order drawn from g."""
    return [items[i] for i in torch.randperm(len(items), generator=g).tolist()]


def pack_by_tokens(
    order: Sequence[int], src_lens: Sequence[int], tgt_lens: Sequence[int], max_tokens: int
) -> list[list[int]]:
    """Cut `order` (example indices) greedily into consecutive batches with B * (max S + max T) <= max_tokens.

    Lengths are token counts of the padded source and target rows (tgt_lens: 0 for source-only data).
    On length-sorted input the greedy cut gives the fewest batches any cut of that order can.

    Raises:
        ValueError: if one example alone exceeds max_tokens.
    """
    batches, cur, ms, mt = [], [], 0, 0
    for i in order:
        s, t = src_lens[i], tgt_lens[i]
        if s + t > max_tokens:
            raise ValueError(f"example {i} has {s} + {t} tokens, more than max_tokens={max_tokens}")
        ns, nt = max(ms, s), max(mt, t)
        if cur and (len(cur) + 1) * (ns + nt) > max_tokens:
            batches.append(cur)
            cur, ns, nt = [], s, t
        cur.append(i)
        ms, mt = ns, nt
    if cur:
        batches.append(cur)
    return batches


def padding_fraction(batches: Sequence[Sequence[int]], lengths: Sequence[int]) -> float:
    """Fraction of padding among all positions of the padded (B, max length) tensors of `batches`."""
    total = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    real = sum(lengths[i] for b in batches for i in b)
    return 1.0 - real / total if total else 0.0


def pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token rows into a (B, max length) long tensor; also return its (B, T) bool mask, True = padding."""
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    out = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)
    for k, r in enumerate(rows):
        out[k, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out, torch.arange(out.shape[1])[None, :] >= lengths[:, None]


class EpochBatchSampler(Sampler):
    """Yields this rank's share of the batches of one epoch: make_batches(epoch)[rank::world_size].

    The epoch's batch list is cut to a multiple of world_size first (so every process takes the same number
    of steps; up to world_size - 1 batches, different ones each epoch, are left out), then rank r takes
    batches r, r + world_size, ... The number of batches per epoch must not depend on the epoch (Lightning
    reads len() once and validates at the epoch's last batch).

    Args:
        make_batches: epoch -> list of batches (lists of example indices), deterministic.
        rank, world_size: this process and the number of processes.
        progress_fn: returns the trainer's (epoch in progress, batches of this rank ready in it), read when
            iteration starts (see trainer_hooks); the epoch drawn and the batches skipped follow from it.
            None: draw the epoch given to set_epoch(), from its start.
    """

    def __init__(
        self,
        make_batches: Callable[[int], list[list[int]]],
        rank: int = 0,
        world_size: int = 1,
        progress_fn: Callable[[], tuple[int, int]] | None = None,
    ):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in range(world_size={world_size})")
        self.make_batches, self.rank, self.world_size = make_batches, rank, world_size
        self.progress_fn = progress_fn
        self.epoch = 0
        self._cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch to draw (used when no progress_fn is given)."""
        self.epoch = epoch

    def position(self) -> tuple[int, int]:
        """(epoch to draw, batches of it to skip) now."""
        if self.progress_fn is None:
            return self.epoch, 0
        epoch, ready = (int(x) for x in self.progress_fn())
        if ready >= len(self):  # counters of a finished epoch, not yet reset (resume, iterator made early)
            return epoch + 1, 0
        return epoch, ready

    def all_batches(self, epoch: int) -> list[list[int]]:
        """Every rank's batches of `epoch`, cut to a multiple of world_size (cached for the last epoch asked)."""
        if self._cache is None or self._cache[0] != epoch:
            batches = self.make_batches(epoch)
            self._cache = (epoch, batches[: len(batches) // self.world_size * self.world_size])
        return self._cache[1]

    def batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of `epoch`, in order."""
        return self.all_batches(epoch)[self.rank :: self.world_size]

    def __len__(self) -> int:
        epoch = self._cache[0] if self._cache is not None else self.epoch  # the same for every epoch
        return len(self.all_batches(epoch)) // self.world_size

    def __iter__(self):
        # a generator: nothing is read until the first batch is asked for, i.e. (num_workers=0) after
        # Lightning has set up the epoch (fit_loop.reset, on_advance_start, epoch_loop.reset)
        epoch, skip = self.position()
        yield from self.batches(epoch)[skip:]


def trainer_hooks(trainer) -> tuple[int, int, Callable[[], tuple[int, int]] | None]:
    """(rank, world_size, progress_fn) for EpochBatchSampler from a Lightning trainer (or None: 0, 1, None).

    progress_fn returns the fit loop's completed epoch count (trainer.current_epoch: the epoch in progress)
    and the epoch loop's ready-batch count of that epoch; both are restored from a checkpoint on resume.
    Not the processed count, which Lightning passes to set_epoch: a checkpoint saved in on_train_epoch_end
    has it one ahead (see zoo.training.checkpoint_io.settle_epoch_end).
    """
    if trainer is None:
        return 0, 1, None
    loop = trainer.fit_loop

    def progress_fn() -> tuple[int, int]:
        return loop.epoch_progress.current.completed, loop.epoch_loop.batch_progress.current.ready

    return trainer.global_rank, trainer.world_size, progress_fn


class BatchedDataModule(pl.LightningDataModule):
    """The loaders of datamodules whose batches are lists of example indices: subclasses set `collate`
    (a staticmethod) and define setup(), train_batches(epoch) and eval_batches(dataset), and after
    setup() hold train_set / val_set / test_set, seed and num_workers."""

    collate = None  # collate(items) or, for a module with a pad_id (the tokenizer's), collate(items, pad_id)

    def _loader(self, dataset, batch_sampler) -> DataLoader:
        # its own generator: creating an iterator must not draw from the global RNG (exact resume)
        pad_id = getattr(self, "pad_id", None)
        collate = type(self).collate if pad_id is None else functools.partial(type(self).collate, pad_id=pad_id)
        return DataLoader(
            dataset,
            batch_sampler=batch_sampler,
            collate_fn=collate,
            num_workers=self.num_workers,
            generator=torch.Generator().manual_seed(self.seed),
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        """Training batches of this process for the trainer's current epoch (see the class docstring)."""
        self.setup()
        rank, world, progress_fn = trainer_hooks(self.trainer)
        return self._loader(self.train_set, EpochBatchSampler(self.train_batches, rank, world, progress_fn))

    def val_dataloader(self) -> DataLoader:
        """The validation split, sorted by length, not shuffled; every process evaluates all of it."""
        self.setup()
        return self._loader(self.val_set, self.eval_batches(self.val_set))

    def test_dataloader(self) -> DataLoader:
        """The test split, sorted by length, not shuffled; every process evaluates all of it. DataError for a
        module built with read_test=False (it never reads its test split)."""
        self.setup()
        if not getattr(self, "read_test", True):
            raise DataError(
                f"{type(self).__name__} was built with read_test=False (a tuning run of experiment=compare): it "
                "has no test split to score"
            )
        return self._loader(self.test_set, self.eval_batches(self.test_set))
