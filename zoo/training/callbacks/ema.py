"""An exponential moving average (EMA) of the weights: validated, checkpointed and tested in place of the
trained weights (Polyak & Juditsky 1992; a running form of the checkpoint averaging of Vaswani et al.
2017, sec. 6.1)."""

from lightning.pytorch.callbacks import WeightAveraging
from lightning.pytorch.trainer.states import TrainerFn
from torch.optim.swa_utils import get_ema_multi_avg_fn

from zoo.errors import check_fraction


class EMA(WeightAveraging):
    """Lightning's WeightAveraging with an EMA: after each training step from update_starting_at_step on,
    ema = decay * ema + (1 - decay) * weights (the first update copies the weights). Validation runs on the
    EMA, every checkpoint's state_dict holds it (the trained weights travel as current_model_state, for
    resume), and training ends with it.

    It differs from Lightning's EMAWeightAveraging in two ways:
    - the update is one foreach lerp over all tensors (torch's get_ema_multi_avg_fn), not a Python loop over them;
    - a checkpoint loaded outside fit (the test of the best checkpoint after training) is used as saved: the
      EMA weights that scored on validation. Lightning's callback reloads the trained weights there, so the
      test would score other weights than the ones validation chose. Resuming a fit restores both, as
      Lightning does.

    decay: the EMA's weight on its past, in [0, 1) (0.995: a horizon of about 1 / (1 - decay) = 200 steps).
    update_starting_at_step: the first (0-based) step averaged; None = 0.
    Not for sharded models (FSDP): the average is a full copy of the weights.
    Raises ValueError for a decay that is not a number in [0, 1), or a negative start.
    """

    def __init__(self, decay: float = 0.995, update_starting_at_step: int | None = None, **kwargs):
        check_fraction("callbacks.ema.decay", decay, "e.g. 0.995")
        if update_starting_at_step is not None and (
            isinstance(update_starting_at_step, bool)
            or not isinstance(update_starting_at_step, int)
            or update_starting_at_step < 0
        ):
            raise ValueError(
                f"callbacks.ema.update_starting_at_step={update_starting_at_step!r} must be a step >= 0, or null (0)"
            )
        super().__init__(multi_avg_fn=get_ema_multi_avg_fn(decay), **kwargs)
        self.decay, self.update_starting_at_step = decay, update_starting_at_step

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        return step_idx is not None and step_idx >= (self.update_starting_at_step or 0)

    def on_load_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        if trainer.state.fn == TrainerFn.FITTING:
            super().on_load_checkpoint(trainer, pl_module, checkpoint)
