"""The warm-up rules: a warm-up is judged against the schedule's own length (task.scheduler.decay_steps, where
given), so a run trained in legs (trainer.max_steps=2, then resumed to 12) is allowed and follows, step for step,
the closed form of the uninterrupted schedule; task.scheduler.warmup_fraction is the share of the run the
warm-up covers whatever bounds the run (steps, tokens, FLOPs, time) and for both schedules (cosine, noam), so
every cell of experiment=compare warms up over its share; a command line's warm-up wins over a config file's
share, and both on the command line are refused."""

import logging
import math

import pytest
import torch
from test_resume import fit
from zoo_run import make_cfg

from zoo.errors import ConfigError
from zoo.training.optim_config import configure_optimizers
from zoo.training.schedule_fit import check_schedule

LR, MIN_LR = 2.0e-3, 1.0e-4  # conf/task/lm.yaml
LEGS = ["task.scheduler.warmup_steps=5", "task.scheduler.decay_steps=12"]


def lr_closed_form(s: int) -> float:
    """The learning rate of optimizer step s (0-based) of a linear warm-up over 5 steps, then a cosine from LR to
    MIN_LR at step 12 (nanoGPT's get_lr): LR (s + 1) / 5 for s < 5, MIN_LR + (LR - MIN_LR) (1 + cos(pi (s - 5) / 7)) / 2
    up to 12."""
    if s < 5:
        return LR * (s + 1) / 5
    return MIN_LR + 0.5 * (1 + math.cos(math.pi * (s - 5) / 7)) * (LR - MIN_LR)


def test_a_warmup_is_judged_against_decay_steps(tmp_path):
    """warmup_steps=5 with decay_steps=12 fits the schedule, whatever the leg's trainer.max_steps (2); without
    decay_steps the run's 2 steps are the schedule, and 5 is refused."""
    cfg = make_cfg(tmp_path, [*LEGS, "trainer.max_steps=2"])
    check_schedule(cfg, [*LEGS, "trainer.max_steps=2"])
    assert cfg.task.scheduler.warmup_steps == 5
    cfg = make_cfg(tmp_path, [LEGS[0], "trainer.max_steps=2"])
    with pytest.raises(ConfigError, match=r"warmup_steps=5 is longer than the run \(trainer\.max_steps=2\)"):
        check_schedule(cfg, [LEGS[0], "trainer.max_steps=2"])
    cfg = make_cfg(tmp_path, [LEGS[0], "task.scheduler.decay_steps=4", "trainer.max_steps=2"])
    with pytest.raises(ConfigError, match=r"decay_steps=4 ends the cosine before its warm-up"):
        from zoo.run.checks.config import check_config

        check_config(cfg)


@pytest.mark.e2e
@pytest.mark.usefixtures("one_thread")
def test_legs_follow_the_uninterrupted_schedule(tmp_path):
    """Trained in two legs (2 steps, then resumed from last.ckpt to 12), the learning rate at every one of the 12
    steps is lr_closed_form's."""
    first = fit(tmp_path, "lm", [*LEGS, "trainer.max_steps=2"], tmp_path / "leg1.jsonl")
    last = tmp_path / "checkpoints" / "last.ckpt"
    second = fit(tmp_path, "lm", [*LEGS, "trainer.max_steps=12", f"ckpt_path={last}"], tmp_path / "leg2.jsonl")
    rows = first["train"] + second["train"]
    assert [r["step"] for r in rows] == list(range(1, 13))
    for r in rows:  # a row's step is counted after the optimizer step its lr drove
        assert r["lr"] == pytest.approx(lr_closed_form(r["step"] - 1), rel=1e-9), r["step"]


CELLS = {
    "translation": ("encoder_decoder", 0.167),
    "lm": ("decoder_only", 0.1),
    "classification": ("encoder_only", 0.06),
}


@pytest.mark.parametrize("steps", [150, 149])
@pytest.mark.parametrize("benchmark", list(CELLS))
def test_every_compare_cell_warms_up_over_its_share_of_a_step_run(tmp_path, benchmark, steps, caplog):
    """experiment=compare with trainer.max_steps=150 (or 149): each cell warms up over its benchmark's
    warmup_fraction of the run (translation: round(0.167 x 150) = 25 steps, never the whole run), without a
    warning, and the share is consumed (null) so nothing else reads it again."""
    arch, share = CELLS[benchmark]
    overrides = ["experiment=compare", f"+benchmark={benchmark}", "compare.budget=steps", f"trainer.max_steps={steps}"]
    cfg = make_cfg(tmp_path, overrides, arch=arch)
    with caplog.at_level(logging.WARNING, logger="zoo"):
        check_schedule(cfg, overrides)
    assert cfg.task.scheduler.warmup_steps == round(share * steps)
    assert cfg.task.scheduler.warmup_fraction is None and "warmup" not in caplog.text


def test_a_command_line_warmup_wins_over_a_config_share_and_both_are_refused(tmp_path):
    overrides = ["experiment=compare", "+benchmark=translation", "compare.budget=steps", "trainer.max_steps=150"]
    cfg = make_cfg(tmp_path, [*overrides, "task.scheduler.warmup_steps=40"], arch="encoder_decoder")
    check_schedule(cfg, [*overrides, "task.scheduler.warmup_steps=40"])
    assert cfg.task.scheduler.warmup_steps == 40 and cfg.task.scheduler.warmup_fraction is None
    both = [*overrides, "task.scheduler.warmup_steps=40", "task.scheduler.warmup_fraction=0.2"]
    cfg = make_cfg(tmp_path, both, arch="encoder_decoder")
    with pytest.raises(ConfigError, match=r"warmup_steps=40 and task\.scheduler\.warmup_fraction=0\.2 both"):
        check_schedule(cfg, both)


def test_noam_warms_up_over_the_share_of_a_budget():
    """A noam schedule in a tokens / FLOPs / time run with warmup_fraction f: the multiplier at spent share p is
    min(p / f, sqrt(f / p)) (Vaswani et al. 2017's linear rise and inverse square root, in the budget's share
    instead of steps: the same curve when every step costs the same), peaking at p = f; no step count is read."""
    spent = [0.0]
    model = torch.nn.Linear(2, 2)
    sched = {"kind": "noam", "warmup_steps": 150, "warmup_fraction": 0.2}
    opt = configure_optimizers(model, {"lr": 1e-3}, sched, -1, progress=lambda: spent[0])
    fn = opt["lr_scheduler"]["scheduler"].lr_lambdas[0]
    for p, want in ((0.05, 0.25), (0.1, 0.5), (0.2, 1.0), (0.8, 0.5), (1.0, math.sqrt(0.2))):
        spent[0] = p
        assert fn(int(p * 1000)) == pytest.approx(want, rel=1e-9), p
