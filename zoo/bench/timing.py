"""Interleaved timing: every contender of a comparison runs in one process, repetition by repetition."""

import gc
import statistics
import time
from collections.abc import Callable, Sequence

import torch


class Timed(float):
    """Seconds a contender measured itself (e.g. to leave its set-up out); see `interleaved`."""


def sync(device: str) -> None:
    """Wait for queued GPU work, so that wall-clock time covers it (no-op on CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def order(names: list[str], r: int) -> list[str]:
    """The running order of repetition r: `names` rotated left by r // 2, reversed when r is odd."""
    k = (r // 2) % len(names)
    rotated = names[k:] + names[:k]
    return rotated if r % 2 == 0 else rotated[::-1]


def interleaved(
    contenders: dict[str, Callable[[], object]], reps: int, warmup: int, device: str = "cpu"
) -> dict[str, list[float]]:
    """Time each contender `reps` times, interleaved: repetition r runs every contender once, in the
    order `order(names, r)` (A B C, C B A, B C A, A C B, ...): the order alternates direction, so slow
    drifts of the machine load are shared, and rotates every second repetition, so that no contender is
    always the first one timed or always the one that follows a given other. First `warmup` untimed
    rounds of every contender (allocator, kernels, caches).

    contenders: name -> zero-argument callable. Its wall-clock time (seconds, GPU synchronised before and
    after) is recorded, unless it returns a `Timed`, which is then taken as its own measured seconds.
    Returns name -> list of `reps` durations (seconds), in repetition order.

    Python's cyclic garbage collector runs before each timed call, never inside it: the objects alive at
    the start (models, imported libraries) are frozen out of its scans (gc.freeze), so that a collection
    does not rescan them (a full scan is slow once transformers is imported).
    """
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    gc.freeze()
    try:
        for r in range(reps):
            for name in order(names, r):
                gc.collect()
                sync(device)
                t0 = time.perf_counter()
                out = contenders[name]()
                sync(device)
                elapsed = time.perf_counter() - t0
                times[name].append(float(out) if isinstance(out, Timed) else elapsed)
    finally:
        gc.unfreeze()
    return times


def median(xs: Sequence[float]) -> float:
    """The median of a non-empty sequence (statistics.median)."""
    return statistics.median(xs)
