"""The progress bar: Lightning's rich bar, with an epoch label that makes sense for step-bounded runs."""

from lightning.pytorch.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    """lightning.pytorch.callbacks.RichProgressBar, except the training description: zoo's runs are bounded
    by trainer.max_steps with max_epochs=-1, for which Lightning prints "Epoch 3/-2"; here that is "Epoch 3",
    and "Epoch 3/9" only when max_epochs (10) bounds the run; and redrawn `refresh_rate` times a second (10),
    not Lightning's 100: rich redraws from a thread of the training process, which competes with a small
    model's steps for the CPU."""

    def __init__(self, refresh_rate: int = 10, **kwargs):
        super().__init__(refresh_rate=refresh_rate, **kwargs)

    def _get_train_description(self, current_epoch: int) -> str:
        max_epochs = self.trainer.max_epochs
        text = f"Epoch {current_epoch}" + (f"/{max_epochs - 1}" if max_epochs is not None and max_epochs > 0 else "")
        return f"{text:{len(self.validation_description)}}"  # padded as Lightning's: no flicker between bars
