"""Stop a diverging run at its first non-finite training loss, with one line naming the step, the loss and the
fix: training on would only write NaN weights, and sampling from them fails later with a traceback."""

import lightning.pytorch as pl
import torch

from zoo.errors import TrainingDiverged


def diverged_message(step: int, loss: str, lr: float | None, clip) -> str:
    """The one line of a run whose training loss at optimizer step `step` is `loss` (nan, inf or -inf), at
    learning rate `lr` then, with trainer.gradient_clip_val `clip`."""
    at_lr = f" (learning rate {lr:.3g} then)" if lr is not None else ""
    clipping = "clip gradients (trainer.gradient_clip_val=1.0)"
    if clip:
        clipping = f"clip gradients harder (trainer.gradient_clip_val, now {clip:g})"
    return (
        f"training diverged: the training loss is {loss} at step {step}{at_lr}; lower task.optimizer.lr, "
        f"lengthen the warm-up (task.scheduler.warmup_steps) or {clipping}"
    )


class FiniteLoss(pl.Callback):
    """Raises TrainingDiverged at the end of the first training batch whose loss is not finite, on every process
    at once (one rank's NaN is every rank's decision, so none is left waiting in a collective)."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._step = trainer.global_step  # the step the loggers record this batch's loss at

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if not isinstance(loss, torch.Tensor):
            return
        bad = not bool(torch.isfinite(loss.detach()).all())
        if trainer.world_size > 1:
            bad = trainer.strategy.reduce_boolean_decision(bad, all=False)
        if bad:
            step = getattr(self, "_step", trainer.global_step)
            lr = trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else None
            local = float(loss.detach().float().sum())
            value = str(local) if local != local or abs(local) == float("inf") else "not finite on another process"
            raise TrainingDiverged(diverged_message(step, value, lr, trainer.gradient_clip_val), step=step)
