"""What every task's LightningModule shares: step logging, best-metric tracking, the optimizer."""
import time

import lightning.pytorch as pl
import torch

from zoo.tasks.optim_config import configure_optimizers


class TaskBase(pl.LightningModule):
    """Subclasses set self.model (a zoo.model architecture) and save hparams with optimizer, scheduler,
    monitor and monitor_mode. `best` holds the best value of each validation metric ("loss" metrics: min,
    others: max); the monitored one is what zoo.train returns to sweepers."""

    def __init__(self):
        super().__init__()
        self.best = {}
        self._t_last = None

    def log_train_step(self, loss: torch.Tensor, tokens) -> None:
        """Log train/loss, lr and tokens/s (tokens of this batch over the time since the previous step)."""
        now = time.perf_counter()
        if self._t_last is not None:
            self.log("tokens/s", float(tokens) / (now - self._t_last), on_step=True, on_epoch=False)
        self._t_last = now
        self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        self.log("lr", self.trainer.optimizers[0].param_groups[0]["lr"], on_step=True, on_epoch=False)

    def log_validation(self, metrics: dict) -> None:
        """Log the epoch's validation metrics and update `best` (skipped while sanity checking)."""
        self.log_dict(metrics, prog_bar=True)
        if self.trainer.sanity_checking:
            return
        for k, v in metrics.items():
            better = min if k.endswith(("loss", "ppl", "bpc")) else max
            self.best[k] = better(self.best.get(k, float(v)), float(v))
        self._t_last = None  # validation time is not training throughput

    def on_train_batch_start(self, batch, batch_idx) -> None:
        """Keep the step that loggers record equal to the optimizer step. Lightning counts it separately
        (_batches_that_stepped) and adds one when it resumes from a checkpoint it assumes was written inside
        a batch; zoo's last.ckpt is written at the epoch end, so resumed runs would log every step one late."""
        self.trainer.fit_loop.epoch_loop._batches_that_stepped = self.trainer.global_step

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        """Reaching trainer.max_steps mid-epoch sets trainer.should_stop, so Lightning validates (and the
        checkpoint callback scores) the final weights instead of ending on the last epoch's numbers."""
        if 0 < self.trainer.max_steps <= self.trainer.global_step:
            self.trainer.should_stop = True

    def configure_optimizers(self):
        return configure_optimizers(self.model, self.hparams.optimizer, self.hparams.scheduler, self.trainer.max_steps)
