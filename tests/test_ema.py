"""zoo.training.callbacks.ema.EMA: the averaged weights against the closed form of an EMA, validation and the test
of the best checkpoint on those weights, and the config that turns it on (callbacks=ema)."""

import warnings

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.training.callbacks.checkpoint import BestCheckpoint
from zoo.training.callbacks.ema import EMA

LR, DECAY, STEPS = 0.5, 0.8, 6
# validation scores -|w - GOAL|: the raw weight w_t = 1 - LR * t overshoots GOAL = -1 at step 4 (w_4 = -1), and the
# EMA lags it; so the best validation of the EMA and that of the raw weights fall at different steps
GOAL = -1.0


class Line(pl.LightningModule):
    """One weight w (init 1) that SGD moves by -LR a step (loss = w, gradient 1); val/score = -|w - GOAL|;
    test_step records the w it sees."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.tested = []

    def training_step(self, batch, batch_idx):
        return self.w * batch[0].sum() / batch[0].sum()

    def validation_step(self, batch, batch_idx):
        self.log("val/score", -(self.w.detach() - GOAL).abs())

    def test_step(self, batch, batch_idx):
        self.tested.append(float(self.w))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=LR)


def ema_closed_form(steps: int, start: int = 0) -> float:
    """The EMA after `steps` steps of w_t = 1 - LR * t, averaged from (0-based) step `start` on: the first
    update copies w_{start+1}, each later one is e = DECAY * e + (1 - DECAY) * w_t."""
    e = None
    for t in range(start + 1, steps + 1):
        w = 1 - LR * t
        e = w if e is None else DECAY * e + (1 - DECAY) * w
    return e


def fit(tmp_path, start=None):
    loader = DataLoader(TensorDataset(torch.ones(STEPS, 1)), batch_size=1)
    best = BestCheckpoint(
        dirpath=tmp_path,
        filename="step{step}",
        auto_insert_metric_name=False,
        monitor="val/score",
        mode="max",
        save_top_k=1,
    )
    best.save_on_train_epoch_end = False
    trainer = pl.Trainer(
        max_steps=STEPS,
        val_check_interval=1,
        callbacks=[EMA(decay=DECAY, update_starting_at_step=start), best],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        accelerator="cpu",
    )
    module = Line()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few batches
        trainer.fit(module, loader, loader)
    return trainer, module, best, loader


@pytest.mark.parametrize("start", [None, 2])
def test_the_average_is_the_closed_form_ema(tmp_path, start):
    """After fit the module holds the EMA of its weight trajectory (closed form above); the trained weight
    itself is 1 - LR * STEPS."""
    _, module, _, _ = fit(tmp_path, start)
    assert float(module.w.detach()) == pytest.approx(ema_closed_form(STEPS, start or 0), abs=1e-6)
    assert ema_closed_form(STEPS, start or 0) != pytest.approx(1 - LR * STEPS)


def test_validation_checkpoint_and_test_all_see_the_ema(tmp_path):
    """The best checkpoint is chosen on the EMA's scores, holds the EMA in its state_dict (the raw weight in
    current_model_state), and its test sees that EMA, not the raw weight of that step."""
    trainer, module, best, loader = fit(tmp_path)
    scores = [-abs(ema_closed_form(t) - GOAL) for t in range(1, STEPS + 1)]
    best_step = 1 + scores.index(max(scores))
    assert best_step != 4  # the raw weights would be best at step 4 (w_4 = GOAL)
    assert best.best_model_path.endswith(f"step{best_step}.ckpt")
    saved = torch.load(best.best_model_path, weights_only=False)
    assert float(saved["state_dict"]["w"]) == pytest.approx(ema_closed_form(best_step), abs=1e-6)
    assert float(saved["current_model_state"]["w"]) == pytest.approx(1 - LR * best_step, abs=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.test(module, loader, ckpt_path=best.best_model_path, verbose=False)
    assert module.tested[0] == pytest.approx(ema_closed_form(best_step), abs=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"decay": 1.0}, r"callbacks.ema.decay=1.0 must be a number in \[0, 1\); e.g. 0.995"),
        ({"decay": "abc"}, r"callbacks.ema.decay='abc' must be a number in \[0, 1\)"),
        ({"decay": None}, r"callbacks.ema.decay=None must be a number in \[0, 1\)"),
        ({"update_starting_at_step": -3}, r"update_starting_at_step=-3 must be a step >= 0, or null \(0\)"),
    ],
    ids=["decay_1", "decay_text", "decay_null", "negative_start"],
)
def test_bad_ema_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EMA(**kwargs)


def test_callbacks_ema_config_and_its_fsdp_refusal(tmp_path):
    """callbacks=ema is default's callbacks plus the EMA (decay 0.995); with trainer=fsdp, which shards the
    weights the average copies, the config is refused before any data is read."""
    from hydra.utils import instantiate
    from zoo_run import make_cfg

    from zoo.errors import ConfigError
    from zoo.run.checks.config import check_config

    cfg = make_cfg(tmp_path, ["callbacks=ema"])
    assert set(cfg.callbacks) == set(make_cfg(tmp_path, []).callbacks) | {"ema"}
    ema = instantiate(cfg.callbacks.ema)
    assert type(ema) is EMA and ema.decay == 0.995
    check_config(cfg)  # one CPU process: fine
    with pytest.raises(ConfigError, match=r"callbacks.ema \(zoo.training.callbacks.ema.EMA\) averages full copies"):
        check_config(make_cfg(tmp_path, ["callbacks=ema", "trainer=fsdp"]))
