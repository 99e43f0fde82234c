"""The best-checkpoint callback, whose choice a resumed run continues exactly as the uninterrupted run would."""

import copy
import math

from lightning.pytorch.callbacks import ModelCheckpoint


def validation_due(trainer, batch_idx: int) -> bool:
    """Whether the trainer validates after training batch `batch_idx` of this epoch by its schedule alone
    (trainer.val_check_interval / the epoch end, and check_val_every_n_epoch), not because it stops."""
    every = trainer.check_val_every_n_epoch
    if every is not None and (trainer.current_epoch + 1) % every:
        return False
    last = trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
    interval = trainer.val_check_batch
    return last or (not math.isinf(interval) and (batch_idx + 1) % int(interval) == 0)


class BestCheckpoint(ModelCheckpoint):
    """ModelCheckpoint of the best weights by `monitor`. A validation that trainer.max_steps forced mid-epoch
    (TaskBase.stop_validation: the run stops where its schedule would not validate) is scored and saved as
    usual, so the stopped run's test phase sees its final weights; but the state a resumed run continues from
    (state_dict()["before_stop"]) is the one before that score, so the resumed run saves its best checkpoints
    at the steps the uninterrupted run does. The best checkpoint before that score stays on disk even when the
    forced one replaces it: the resumed run's choice names it, and tests it if nothing later scores better.

    Lightning restores this state from a checkpoint that trainer.test loads as well, so after a test
    best_model_path can name that earlier best: the file a test scored is trainer.ckpt_path (zoo.run.train)."""

    def on_validation_end(self, trainer, pl_module) -> None:
        forced = getattr(pl_module, "stop_validation", False)
        # set first: the checkpoints this validation writes carry it too
        self._before_stop = copy.deepcopy(super().state_dict()) if forced else None
        super().on_validation_end(trainer, pl_module)

    def _remove_checkpoint(self, trainer, filepath: str) -> None:
        before = getattr(self, "_before_stop", None)
        if before is not None and filepath == before.get("best_model_path"):
            return  # the best before a forced score: a resumed run continues from it (see the class docstring)
        super()._remove_checkpoint(trainer, filepath)

    def state_dict(self) -> dict:
        state = super().state_dict()
        if getattr(self, "_before_stop", None) is not None:
            state["before_stop"] = self._before_stop
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        before = state.pop("before_stop", None)
        super().load_state_dict(before if before is not None else state)
