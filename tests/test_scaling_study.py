"""experiment=scaling's cells (zoo.run.scaling_cell): the warm-up / stable / cool-down schedule against its closed
form, a cell's trunk and cool-down branches, and a study that continues where it was cut off with the points of
an uninterrupted one: interrupted inside the trunk and inside a branch in-process, and (slow) killed with
SIGKILL at random points and rerun."""

import csv
import json
import math
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from conftest import SHARED_DATA
from zoo_run import make_cfg, needs_shared

from zoo.errors import ConfigError
from zoo.run import scaling_cell
from zoo.run.scaling_cell import run_cell
from zoo.training.optim import warmup_stable_decay

pytestmark = [pytest.mark.usefixtures("one_thread"), needs_shared]


@pytest.mark.parametrize("shape", ["1-sqrt", "linear", "cosine"])
def test_warmup_stable_decay_is_its_closed_form(shape):
    """Warm-up 4 steps to 1e-3, constant to step 20, cool-down to 1e-5 at step 30 (Hägele et al. 2024: the
    rate at cool-down progress p = (step - 20) / 10 is lr - (lr - min) sqrt(p) for 1-sqrt)."""
    lr, low = 1e-3, 1e-5
    cool = {
        "1-sqrt": lambda p: lr - (lr - low) * p**0.5,
        "linear": lambda p: lr - (lr - low) * p,
        "cosine": lambda p: low + (lr - low) * (1 + math.cos(math.pi * p)) / 2,
    }[shape]
    want = [lr * (s + 1) / 4 for s in range(4)] + [lr] * 16 + [cool((s - 20) / 10) for s in range(20, 30)] + [low] * 5
    got = [warmup_stable_decay(s, 4, 20, 30, lr, low, shape) for s in range(35)]
    assert got == pytest.approx(want, rel=1e-12, abs=0)
    assert got[20] == lr and got[29] < got[28]  # the first cool-down step at the peak, then down
    trunk = [warmup_stable_decay(s, 4, None, 30, lr, low, shape) for s in range(35)]
    assert trunk[4:] == [lr] * 31  # decay_start None: constant after the warm-up, for ever
    with pytest.raises(ValueError, match="decay_shape='sqrt' is unknown"):
        warmup_stable_decay(25, 4, 20, 30, lr, low, "sqrt")


# a cell of s2 (25,408 non-embedding parameters, 4 windows of 128 a step here: 512 tokens): budgets 0.2, 0.4 and 0.6
# tokens per parameter end at steps 10, 20 and 30 and cool down from steps 8, 16 and 24; trunk checkpoints every
# 5 steps and at each cool-down start
CELL = [
    "experiment=scaling",
    "+benchmark=scaling",
    "scaling.cell=s2_seed1",
    "scaling.budgets=[0.2,0.4,0.6]",
    "scaling.sizes.s2.budgets=null",
    "scaling.sizes.s2.batch_size=4",
    "scaling.sizes.s2.lr=8.0e-3",  # a fixed rate (tests/test_scaling_tune.py: the tuned one)
    "scaling.sizes.s2.lr_grid=null",
    "scaling.warmup_tokens_per_param=0.05",
    "scaling.val_windows=8",
    "scaling.checkpoint_every=5",
    "threads=1",
]


def points(path):
    with open(path, newline="") as f:
        return [{k: r[k] for k in ("tokens_per_param", "steps", "tokens", "flops", "loss")} for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("cell")
    run_cell(make_cfg(out, CELL))
    return out


def test_a_cell_trains_a_trunk_and_one_cool_down_per_budget(uninterrupted):
    rows = points(uninterrupted / "points.csv")
    assert [(r["tokens_per_param"], r["steps"], r["tokens"]) for r in rows] == [
        ("0.2", "10", str(10 * 512)),
        ("0.4", "20", str(20 * 512)),
        ("0.6", "30", str(30 * 512)),
    ]
    losses = [float(r["loss"]) for r in rows]
    assert losses == sorted(losses, reverse=True) and all(math.isfinite(v) for v in losses)
    # the trunk's checkpoints: every 5 steps and at each cool-down start, up to the last one (24)
    have = sorted(int(p.stem[4:]) for p in (uninterrupted / "trunk").glob("step*.ckpt"))
    assert have == [5, 8, 10, 15, 16, 20, 24]


def test_a_branch_equals_one_run_trained_to_its_budget_without_checkpoints(uninterrupted, tmp_path):
    """The reference without any resume: one Lightning fit from step 0 to 30 with the cool-down from step 24 (the
    trunk's 5 segments and the branch, resumed from checkpoints, must give the same loss to the last bit)."""
    from zoo.run.job import build_data, checked_config

    cfg, _, _, plan = checked_config(make_cfg(tmp_path, CELL))
    dm, info, data = build_data(cfg, {})
    cell = scaling_cell.Cell(cfg, info, plan.with_data(cfg, info, None, data["dataset"]), dm, tmp_path)
    _, task = cell.fit(30, {"decay_start": 24, "decay_steps": 30}, None)
    last = points(uninterrupted / "points.csv")[-1]
    assert (last["steps"], float(last["loss"])) == ("30", cell.score(task))


def test_two_threads_give_the_points_of_one_thread(uninterrupted, tmp_path):
    """threads is not part of a cell's identity (zoo.run.scaling_identity): with 2 threads the cell gives its
    1-thread points: the same steps, tokens and FLOPs, and each loss within 1e-6 relative (a float32 sum split
    over two threads may round its last bits apart; a wrong thread count in the identity or data would not)."""
    import torch

    try:
        run_cell(make_cfg(tmp_path, [*CELL[:-1], "threads=2"]))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)  # the module's one_thread
    two, one = points(tmp_path / "points.csv"), points(uninterrupted / "points.csv")
    assert [{k: r[k] for k in r if k != "loss"} for r in two] == [{k: r[k] for k in r if k != "loss"} for r in one]
    assert [float(r["loss"]) for r in two] == pytest.approx([float(r["loss"]) for r in one], rel=1e-6, abs=0)


def test_a_rerun_of_a_finished_cell_trains_nothing(uninterrupted, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a finished cell trained again")

    monkeypatch.setattr(scaling_cell.Cell, "fit", refuse)
    before = (uninterrupted / "points.csv").read_text()
    run_cell(make_cfg(uninterrupted, CELL))
    assert (uninterrupted / "points.csv").read_text() == before


def test_an_interrupted_cell_resumes_to_the_same_points(uninterrupted, tmp_path, monkeypatch):
    """Cut off at step 12 of the trunk (its last checkpoint: step 10), then at step 18 of the second budget's
    cool-down (from the trunk's step 16); each rerun continues, and the points equal the uninterrupted cell's
    exactly (the same losses, tokens and FLOPs)."""
    import lightning.pytorch as pl

    class Cut(pl.Callback):
        def __init__(self, step, decaying):
            self.step, self.decaying = step, decaying

        def on_train_batch_end(self, trainer, module, *args):
            if trainer.global_step == self.step and (module.hparams.scheduler.get("decay_start") is not None) == (
                self.decaying
            ):
                raise RuntimeError("killed")

    make_trainer = scaling_cell.Cell._trainer
    for step, decaying in ((12, False), (18, True)):

        def cut_trainer(self, max_steps, validate=False, step=step, decaying=decaying):
            trainer = make_trainer(self, max_steps, validate)
            trainer.callbacks.append(Cut(step, decaying))
            return trainer

        monkeypatch.setattr(scaling_cell.Cell, "_trainer", cut_trainer)
        with pytest.raises(RuntimeError, match="killed"):
            run_cell(make_cfg(tmp_path, CELL))
    assert len(points(tmp_path / "points.csv")) == 1  # the first budget survived the cuts
    monkeypatch.setattr(scaling_cell.Cell, "_trainer", make_trainer)
    run_cell(make_cfg(tmp_path, CELL))
    assert points(tmp_path / "points.csv") == points(uninterrupted / "points.csv")


def test_a_folder_of_another_design_is_refused(uninterrupted, tmp_path):
    (tmp_path / "cell.json").write_text((uninterrupted / "cell.json").read_text())
    lr = json.loads((uninterrupted / "cell.json").read_text())["config"]["task.optimizer.lr"]
    with pytest.raises(
        ConfigError, match=rf"holds a scaling cell of another design \(task.optimizer.lr: {lr} there, 0.001 now\)"
    ):
        run_cell(make_cfg(tmp_path, [*CELL, "scaling.sizes.s2.lr=1e-3"]))


@pytest.fixture
def no_training(monkeypatch):
    monkeypatch.setattr(scaling_cell.Cell, "fit", lambda *a, **k: pytest.fail("the cell trained"))


@pytest.mark.parametrize(
    "override, shown",
    [
        ("task.optimizer.weight_decay=0.05", "task.optimizer.weight_decay: 0.1 there, 0.05 now"),
        ("task.optimizer.betas=[0.9,0.95]", "task.optimizer.betas: [0.9, 0.99] there, [0.9, 0.95] now"),
        ("task.optimizer.eps=1e-6", "task.optimizer.eps: 1e-08 there, 1e-06 now"),
        ("model.norm_first=true", "model.norm_first: False there, True now"),
        ("model.activation=gelu", "model.activation: 'relu' there, 'gelu' now"),
        ("model.position=sinusoidal", "model.position: 'rope' there, 'sinusoidal' now"),
        ("model.dropout=0.1", "model.dropout: 0.0 there, 0.1 now"),
        ("model.tie_embeddings=false", "model.tie_embeddings: True there, False now"),
        ("trainer.gradient_clip_val=0.5", "trainer.gradient_clip_val: 1.0 there, 0.5 now"),
        ("task.scheduler.min_lr=1e-4", "task.scheduler.min_lr: 0.0 there, 0.0001 now"),
        ("scaling.cooldown_shape=linear", "scaling.cooldown_shape: '1-sqrt' there, 'linear' now"),
        ("data.split_seed=1", "data.split_seed: 0 there, 1 now"),
        ("data.val_fraction=0.2", "data.val_fraction: 0.1 there, 0.2 now"),
        ("task.z_loss=1e-4", "task.z_loss: 0.0 there, 0.0001 now"),
    ],
)
def test_a_rerun_with_any_setting_of_a_point_changed_is_refused_naming_it(
    uninterrupted, tmp_path, no_training, override, shown
):
    """cell.json holds the whole config but the keys that only choose cells, budgets or logging: a rerun into the
    folder with any other setting changed is refused in one line naming it, before any data is read."""
    (tmp_path / "cell.json").write_text((uninterrupted / "cell.json").read_text())
    with pytest.raises(ConfigError) as e:
        run_cell(make_cfg(tmp_path, [*CELL, override]))
    assert f"holds a scaling cell of another design ({shown}" in str(e.value) and "\n" not in str(e.value)


def test_a_rerun_changing_only_cells_budgets_or_logging_continues(uninterrupted, tmp_path, no_training):
    """Keys of zoo.run.scaling_identity.NOT_IDENTITY (checkpoints, the plan's, other sizes, logging, threads) do not
    change a point: the finished cell reruns with them changed and trains nothing."""
    for name in ("cell.json", "points.csv"):
        (tmp_path / name).write_text((uninterrupted / name).read_text())
    changed = [
        "scaling.checkpoint_every=7",
        "scaling.time_budget_s=5",
        "scaling.sizes.s1.lr=1e-3",
        "scaling.check_sizes=[]",
        "scaling.trunk_tokens_per_param=400",
        "trainer.log_every_n_steps=1",
        "logger=csv",
    ]
    run_cell(make_cfg(tmp_path, [*CELL, *changed]))
    assert (tmp_path / "points.csv").read_text() == (uninterrupted / "points.csv").read_text()


# the cell.json an earlier zoo wrote for CELL (its size, batch, rate, seed, block, validation, warm-up and data)
LEGACY = {
    "arch": "decoder_only",
    "size": {"d_model": 32, "n_heads": 2, "n_layers": 2},
    "batch_size": 4,
    "lr": 8e-3,
    "seed": 1,
    "block_size": 128,
    "val_windows": 8,
    "warmup_tokens_per_param": 0.05,
    "data": "shakespeare_plays",
}


def test_a_cell_json_of_an_earlier_zoo_is_checked_on_its_keys_and_rewritten(uninterrupted, tmp_path, no_training):
    (tmp_path / "points.csv").write_text((uninterrupted / "points.csv").read_text())
    (tmp_path / "cell.json").write_text(json.dumps({**LEGACY, "lr": 1e-3}))
    with pytest.raises(ConfigError, match=r"another design \(lr: 0.001 there, 0.008 now\)"):
        run_cell(make_cfg(tmp_path, CELL))
    (tmp_path / "cell.json").write_text(json.dumps(LEGACY))
    run_cell(make_cfg(tmp_path, CELL))
    assert json.loads((tmp_path / "cell.json").read_text()) == json.loads((uninterrupted / "cell.json").read_text())


def test_the_plan_counts_the_trunk_from_its_last_checkpoint_on_disk(uninterrupted, tmp_path, monkeypatch, capsys):
    """A cell cut off after its first budget (steps 10) with trunk checkpoints at 5, 8, 10 and 15: what is left is
    the trunk 15 -> 16, the cool-down 16 -> 20, the trunk 16 -> 20 -> 24 (checkpoint_every 5) and the cool-down
    24 -> 30: 19 steps in 3 trunk fits, 2 cool-downs and 2 validations (7 Trainers), not from the last budget's
    start (step 8: 26 steps). At 1 s a step (repeats 0.5 to 1.5 s), 10 s a validation and 100 s a Trainer:
    19 + 2 x 10 + 7 x 100 = 739 s, ± 19 x 0.5 s."""
    from zoo.run import plan_timing, scaling_plan
    from zoo.run.job import build_data, checked_config

    folder = tmp_path / "sweep" / "decoder_only-s2_seed1"
    (folder / "trunk").mkdir(parents=True)
    lines = (uninterrupted / "points.csv").read_text().splitlines(keepends=True)
    (folder / "points.csv").write_text("".join(lines[:2]))
    for k in (5, 8, 10, 15):
        (folder / "trunk" / f"step{k}.ckpt").write_bytes(b"")
    monkeypatch.setattr(plan_timing, "measure", lambda *a, **k: plan_timing.Timing(1.0, 0.5, 1.5, 10.0))
    cfg = make_cfg(tmp_path, CELL)
    _, info, _ = build_data(checked_config(make_cfg(tmp_path, CELL))[0], {})
    (row,) = scaling_plan.plan([("decoder_only", cfg)], info, 100.0, tmp_path / "sweep")
    assert (row.steps, row.done, row.evaluations) == (19, 1, 3)
    assert (row.seconds, row.spread) == (739.0, 9.5)
    assert "zoo: scaling plan: timed decoder_only s2 (1/1)" in capsys.readouterr().err


@pytest.mark.slow
def test_a_study_killed_at_random_points_gives_the_points_of_an_uninterrupted_one(tmp_path):
    """The real thing: `python -m zoo -m experiment=scaling` on two architectures at one size, killed with SIGKILL
    at random moments and rerun (the same command) until it finishes; every cell's points.csv equals the
    uninterrupted study's."""
    args = [
        sys.executable,
        "-m",
        "zoo",
        "-m",
        *CELL[:1],
        *[o for o in CELL[3:] if not o.startswith("scaling.cell")],
        "~scaling.sizes.s1",
        "~scaling.sizes.s3",
        "~scaling.sizes.s4",
        "~scaling.sizes.s5",
        "scaling.seed_size=s2",
        "scaling.seeds=1",
        "scaling.check_sizes=[]",
        "+arch=decoder_only,encoder_decoder",
    ]
    env = {**os.environ, "ZOO_DATA_MIRROR": str(SHARED_DATA), "WANDB_MODE": "offline"}

    def study(folder, kill_after=None):
        p = subprocess.Popen(
            [*args, f"hydra.sweep.dir={folder}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if kill_after is None:
            assert p.wait(timeout=900) == 0, p.stderr.read()[-2000:]
            return True
        try:
            return p.wait(timeout=kill_after) == 0
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            return False

    t0 = time.monotonic()
    study(tmp_path / "whole")
    whole = time.monotonic() - t0
    # kills at 20-45% of the uninterrupted time: the first two always land before the study is done (a rerun
    # has at least 55% of it left), later ones at random until one run finishes
    rng, kills = random.Random(0), 0
    while not study(tmp_path / "cut", rng.uniform(0.2, 0.45) * whole):
        kills += 1
        assert kills < 30
    assert kills >= 2
    for arch in ("decoder_only", "encoder_decoder"):
        cell = f"{arch}-s2_seed1"
        assert points(tmp_path / "cut" / cell / "points.csv") == points(tmp_path / "whole" / cell / "points.csv")
