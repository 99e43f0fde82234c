"""Atomic checkpoint writes (a crash mid-write never leaves a truncated checkpoint behind), and the loop
progress of epoch-end checkpoints made unambiguous for an exact resume (settle_epoch_end)."""

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from zoo.data.atomic import atomic_file


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write the checkpoint to a temporary file in the same folder, fsync it, then os.replace() it onto
    the final name (atomic on POSIX; zoo.data.atomic, with the mode open() gives). Checkpoints hold only
    tensors and plain Python data, so they load with torch.load(path, weights_only=True)."""

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        with atomic_file(path) as f:
            torch.save(checkpoint, f)


def _zero_current(progress: dict) -> None:
    """Set every per-epoch ("current") counter in a Lightning progress state dict, nested ones too, to 0."""
    for key, value in progress.items():
        if key == "current":
            progress[key] = dict.fromkeys(value, 0)
        elif isinstance(value, dict):
            _zero_current(value)


def settle_epoch_end(checkpoint: dict) -> None:
    """Rewrite, in place, the fit-loop progress of a checkpoint saved in on_train_epoch_end (zoo's last.ckpt),
    so that Lightning resumes it exactly where the uninterrupted run goes on; other checkpoints are untouched.

    Lightning saves such a checkpoint after counting the epoch processed but before counting it completed
    (epoch_progress processed = completed + 1), whether its batches are all done or max_steps cut it short.
    With max_steps set it then re-enters that epoch on resume: a cut epoch continues under the next epoch's
    number (processed, what it passes to set_epoch), and a finished one reruns its epoch-end hooks and trains
    one batch more when its last batch is not a validation batch (a val_check_interval that does not divide
    the epoch), which shifts every later validation. Here a finished epoch (is_last_batch) is counted
    completed and its per-epoch counters start the next epoch at 0 (what Lightning does when no max_steps is
    set); a cut one is counted not yet processed, so Lightning continues it mid-epoch under its own number.

    Raises:
        ValueError: if the checkpoint's fit-loop state lacks the epoch or batch progress.
    """
    loop = (checkpoint.get("loops") or {}).get("fit_loop")
    if not loop:
        return
    try:
        epochs, batches = loop["epoch_progress"], loop["epoch_loop.batch_progress"]
        if epochs["current"]["processed"] != epochs["current"]["completed"] + 1:
            return
        finished, both = batches["is_last_batch"], (epochs["total"], epochs["current"])
    except KeyError as e:
        raise ValueError(f"the checkpoint's loops.fit_loop state has no {e}: not written by Lightning 2") from None
    for counts in both:
        if finished:
            counts["completed"] = counts["processed"]
        else:
            counts["processed"] = counts["completed"]
    if finished:
        for key in (
            "batch_progress",
            "scheduler_progress",
            "automatic_optimization.optim_progress",
            "manual_optimization.optim_step_progress",
        ):
            _zero_current(loop.get(f"epoch_loop.{key}", {}))
        batches["is_last_batch"] = False
