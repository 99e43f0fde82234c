"""A checkpoint written after a fit stopped at trainer.max_steps inside an epoch, made to continue that epoch."""

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerStatus


class CutEpoch(pl.Callback):
    """Lightning counts an epoch completed when max_steps ends a fit inside it, so a checkpoint saved after that
    fit (trainer.save_checkpoint once fit() returned: zoo.run.scaling_cell's trunk) resumes at the next epoch, and
    a datamodule whose batches follow the epoch (zoo.data.batching.EpochBatchSampler: each epoch its own order)
    would read another epoch's batches from there. Such a checkpoint's epoch progress (total and current,
    processed and completed) is counted one less, so the resumed fit continues the cut epoch at its next batch, as
    an uninterrupted fit does. A checkpoint saved while the fit runs, or after an epoch's last batch, is left as
    it is; a stream that counts batches, not epochs (zoo.data.windows.StreamSampler), reads the same either way."""

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        loop = (checkpoint.get("loops") or {}).get("fit_loop")
        if not loop or trainer.state.status != TrainerStatus.FINISHED:
            return
        epochs, batches = loop["epoch_progress"], loop["epoch_loop.batch_progress"]
        current = epochs["current"]
        cut = not batches["is_last_batch"] and batches["current"]["ready"] > 0
        if cut and current["processed"] == current["completed"] >= 1:
            for counts in (epochs["total"], current):
                counts["processed"] -= 1
                counts["completed"] -= 1
