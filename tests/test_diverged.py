"""A diverging run stops at its first non-finite training loss with one line (the step, the loss, the fix)."""

import json
import math

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from zoo_run import TINY, make_cfg

from zoo.errors import TrainingDiverged
from zoo.run.results import failed_record
from zoo.run.train import handle_error, run

pytestmark = pytest.mark.usefixtures("one_thread")


class Scaled(pl.LightningModule):
    """loss = w * x for batches of one value x: a batch holding inf or nan gives that loss."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.seen = []

    def training_step(self, batch, batch_idx):
        self.seen.append(batch_idx)
        return self.w * batch[0].sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-3)


def fit(values):
    """Fit Scaled on one batch per value with zoo's trainer callbacks; returns the module and the error raised."""
    from zoo.training.callbacks import always_callbacks

    data = DataLoader(TensorDataset(torch.tensor(values)), batch_size=1)
    trainer = pl.Trainer(
        max_steps=len(values), logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, callbacks=always_callbacks(),
    )  # fmt: skip
    module = Scaled()
    with pytest.raises(TrainingDiverged) as err:
        trainer.fit(module, data)
    return module, err.value


@pytest.mark.parametrize("bad", [math.inf, math.nan, -math.inf])
def test_training_stops_at_the_first_non_finite_loss(bad):
    """Batches 0..2 are finite, batch 3 is not: the fit stops right after it (batch 4 is never trained), and
    the one-line message names step 3, the loss and the keys that fix it."""
    module, error = fit([1.0, 2.0, 3.0, bad, 5.0, 6.0])
    assert module.seen == [0, 1, 2, 3] and error.step == 3
    message = str(error)
    assert "\n" not in message and "step 3" in message and f"loss is {float(bad)} at" in message
    for key in ("task.optimizer.lr", "task.scheduler.warmup_steps", "trainer.gradient_clip_val"):
        assert key in message


def test_a_diverged_run_records_its_step_and_exits_non_zero(capsys):
    """handle_error prints the one line (no traceback) and exits 1; the failed results.json names the step."""
    error = TrainingDiverged("training diverged: the training loss is nan at step 7; lower ...", step=7)
    with pytest.raises(SystemExit) as exit_:
        handle_error(error)
    assert exit_.value.code == 1
    assert capsys.readouterr().err == f"zoo: error: {error}\n"
    record = failed_record(make_cfg_plain(), error)
    assert record["status"] == "failed" and record["steps"] == 7


def make_cfg_plain():
    from omegaconf import OmegaConf

    return OmegaConf.create({"arch": "decoder_only", "seed": 1})


@pytest.mark.e2e
def test_a_diverging_lm_run_stops_before_sampling(tmp_path):
    """lr=1000 after one warm-up step: the tiny LM's loss goes non-finite within its 10 steps (at step 3); run()
    raises TrainingDiverged, with callbacks=none too (not sampling's RuntimeError at the validation's end), and
    writes no results.json of a finished run."""
    over = ["logger=csv", "task.optimizer.lr=1000", "task.scheduler.warmup_steps=1", "callbacks=none"]
    with pytest.raises(TrainingDiverged) as err:
        run(make_cfg(tmp_path, TINY + over))
    assert 0 < err.value.step < 10 and "task.optimizer.lr" in str(err.value)
    results = tmp_path / "results.json"
    assert not results.exists() or json.loads(results.read_text())["status"] != "ok"
