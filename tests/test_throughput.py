"""zoo.bench's throughput benchmark compares like with like, and the training loop's per-step work that it
measured: logging only on the steps the loggers write, and the garbage collector's frozen objects."""

import csv
import gc

import lightning.pytorch as pl
import pytest
import torch
from zoo_run import needs_shared

from zoo.bench import throughput

pytestmark = needs_shared


@pytest.fixture
def s1_job(tmp_path, monkeypatch):
    """experiment=scaling's smallest decoder_only job, its data set up; runs of 1 + 2 + 1 steps."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(throughput, "WARM_STEPS", 1)
    monkeypatch.setattr(throughput, "TIMED_STEPS", 2)
    fixed = ("scaling.sizes.s1.lr=8.0e-3", "scaling.sizes.s1.lr_grid=null")  # a fixed rate, not a tuned one
    cfg = throughput.job_config("decoder_only", "s1_seed1", str(tmp_path / "run"), ("logger=csv", *fixed))
    datamodule, info, _ = throughput.build_data(cfg, {})
    return cfg, datamodule, info


@pytest.mark.parametrize("fused", [False, None], ids=["pytorch_adamw", "zoo_adamw"])
def test_the_plain_loop_trains_the_same_model_as_zoo(s1_job, fused):
    """Same seed, data, loss, AdamW, schedule and clipping: after the same 4 steps both loops hold the same
    weights (to float rounding), so the benchmark times the loop, not a different computation; with
    PyTorch's AdamW implementation (plain) or zoo's fused kernel (plain+k). Adam divides by the root of the
    squared gradients, which magnifies the other kernel's float rounding in near-zero gradients: that pair is
    compared to 5e-5, a twentieth of one step's largest move (Adam moves a weight by about lr, at most 1.2e-3
    in these first 4 of the 10 warm-up steps to lr 3e-3)."""
    zoo_step_s, _, zoo_task = throughput.zoo_run(*s1_job)
    plain_s, plain_task = throughput.plain_run(*s1_job, fused=fused)
    assert zoo_step_s > 0 and plain_s > 0
    assert zoo_task.trainer.optimizers[0].defaults["fused"] is True  # zoo's runs take the fused kernel on CPU
    zoo_w, plain_w = zoo_task.model.state_dict(), plain_task.model.state_dict()
    cfg, _, info = s1_job
    init = throughput.seeded_task(cfg, info).model.state_dict()  # the weights both loops started from
    assert zoo_w.keys() == plain_w.keys()
    moved, (rtol, atol) = 0, ((1e-5, 1e-6) if fused is None else (1e-3, 5e-5))
    for k in zoo_w:
        torch.testing.assert_close(zoo_w[k], plain_w[k], rtol=rtol, atol=atol)
        moved += not torch.equal(zoo_w[k], init[k])
    assert moved > len(zoo_w) // 2  # the comparison is of trained weights, not of two untouched copies


def test_train_metrics_are_logged_only_on_the_steps_the_loggers_write(s1_job):
    """log_every_n_steps=2 over 4 steps: train/loss and lr at steps 1 and 3 (Lightning writes when
    (step + 1) % 2 == 0), tokens/s from the second logged step on, as the tokens of 2 steps over their time."""
    cfg, datamodule, info = s1_job
    cfg.trainer.log_every_n_steps = 2
    throughput.zoo_run(cfg, datamodule, info)
    with open(f"{cfg.paths.output_dir}/csv/metrics.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/loss")]
    assert [int(r["step"]) for r in rows] == [1, 3]
    assert rows[0]["tokens/s"] == "" and float(rows[1]["tokens/s"]) > 0
    assert all(float(r["lr"]) > 0 for r in rows)


def test_objects_alive_at_train_start_are_frozen_for_training_only(s1_job, monkeypatch):
    counts = []

    class Watch(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            counts.append(gc.get_freeze_count())

    build = throughput.build_trainer

    def with_watch(cfg, tags):
        trainer, loggers = build(cfg, tags)
        trainer.callbacks.append(Watch())
        return trainer, loggers

    monkeypatch.setattr(throughput, "build_trainer", with_watch)
    throughput.zoo_run(*s1_job)
    assert len(counts) == 4 and min(counts) > 1000  # the config, Trainer, model and data: thousands of objects
    assert gc.get_freeze_count() == 0


def test_the_preset_total_weighs_each_size_by_its_steps_and_seeds(monkeypatch):
    """The study line: per-step medians times each cell's steps (the trunk to its last cool-down start, then every
    cool-down: budget b ends at round(b N / (batch x 128)) and cools down from round(0.8 end)) in the quick mode's
    two sizes (no extra seeds there) over the 4 architectures: 20 ms a zoo step, 10 ms a plain one, 15 ms a
    plain+k one."""
    from omegaconf import OmegaConf

    from zoo.bench.options import Options
    from zoo.run.conf import CONF_DIR
    from zoo.scaling.sizes import size_non_embedding

    scaling = OmegaConf.load(f"{CONF_DIR}/experiment/scaling.yaml").scaling
    steps = 0
    for name in (list(scaling.sizes)[0], list(scaling.sizes)[-1]):
        size = scaling.sizes[name]
        budgets = size.get("budgets") or scaling.budgets  # a size's own budgets, else the study's
        ends = [round(b * size_non_embedding(size) / (size.batch_size * 128)) for b in budgets]
        starts = [round(0.8 * e) for e in ends]
        steps += max(starts) + sum(e - s for e, s in zip(ends, starts))
    monkeypatch.setenv("WANDB_MODE", "offline")
    n = throughput.TIMED_STEPS
    monkeypatch.setattr(throughput, "zoo_run", lambda cfg, dm, info: (0.020 * n, 1.0, None))
    monkeypatch.setattr(
        throughput, "plain_run", lambda cfg, dm, info, fused=False: ((0.010 if fused is False else 0.015) * n, None)
    )
    out = throughput.bench_throughput(Options(quick=True, reps=5, warmup=0))
    total = 4 * steps * 0.020
    fmt = throughput.fmt
    assert (
        "Over the preset's 8 jobs at these sizes (each cell's trunk and cool-down steps, times its seeds), at these "
        f"medians: training steps take zoo {fmt(total)} s, plain {fmt(total / 2)} s (plain / zoo 0.500), plain+k "
        f"{fmt(total * 0.75)} s (plain+k / zoo 0.750)."
    ) in out
    row = next(line for line in out.splitlines() if line.startswith("| s5") and "encoder_only" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:6] == ["20.0", "10.0", "15.0"] and cells[8:] == ["0.500 (0/5)", "0.750 (0/5)"]


def test_the_timed_window_spans_whole_logging_periods(monkeypatch):
    """The window starts after the first logged step and holds whole periods of log_every_n_steps: 10 warm and
    20 timed steps fit every 10 or every 5 steps; every 20 (a first log inside the window) or every 3 (a
    window of 6 2/3 periods) are refused, naming the constants to change."""
    throughput.check_window(10)
    throughput.check_window(5)
    for every in (20, 3):
        with pytest.raises(ValueError, match=f"log_every_n_steps={every}.*WARM_STEPS >= {every}"):
            throughput.check_window(every)
