"""The progress bar: Lightning's rich bar, with an epoch label that makes sense for step-bounded runs, updated at
most as often as it is drawn."""

import time

from lightning.pytorch.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    """lightning.pytorch.callbacks.RichProgressBar, except:
    - the training description: zoo's runs are bounded by trainer.max_steps with max_epochs=-1, for which
      Lightning prints "Epoch 3/-2"; here that is "Epoch 3", and "Epoch 3/9" only when max_epochs (10) bounds
      the run;
    - redrawn `refresh_rate` times a second (10), not Lightning's 100: rich redraws from a thread of the
      training process, which competes with a small model's steps for the CPU;
    - the training bar's count and metrics are updated at most `refresh_rate` times a second too, and always
      on an epoch's last batch and at trainer.max_steps (update_due): Lightning updates them after every batch,
      reading the logged metrics each time, a share of a small model's step that a bar drawn 10 times a second
      never shows."""

    def __init__(self, refresh_rate: int = 10, **kwargs):
        super().__init__(refresh_rate=refresh_rate, **kwargs)
        self._updated_at = None  # time.monotonic() of the last update of the training bar

    def _get_train_description(self, current_epoch: int) -> str:
        max_epochs = self.trainer.max_epochs
        text = f"Epoch {current_epoch}" + (f"/{max_epochs - 1}" if max_epochs is not None and max_epochs > 0 else "")
        return f"{text:{len(self.validation_description)}}"  # padded as Lightning's: no flicker between bars

    def update_due(self, now: float, batches: int, trainer) -> bool:
        """Whether the training bar updates after batch number `batches` (1-based, in its epoch) at time `now`
        (seconds, monotonic): the first batch, once 1 / refresh_rate seconds have passed since the last update,
        the epoch's last batch, and the step at which trainer.max_steps ends the run."""
        if self._updated_at is None or now - self._updated_at >= 1.0 / self.refresh_rate:
            return True
        last_step = 0 < trainer.max_steps <= trainer.global_step
        return last_step or batches == trainer.num_training_batches

    def on_train_epoch_start(self, trainer, pl_module):
        super().on_train_epoch_start(trainer, pl_module)
        self._updated_at = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.monotonic()
        if self.is_enabled and not self.update_due(now, batch_idx + 1, trainer):
            return
        self._updated_at = now
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
