"""Resume is exact: for every task, a run stopped and resumed from its last.ckpt matches the uninterrupted
run in per-step losses, learning rates and batches, and in the steps at which it validates and checkpoints.

Every run here trains 10 steps in epochs of 5 batches (tiny models, `limit`-ed data) with a cosine (lm,
classification) or noam (translation) schedule whose horizon does not depend on max_steps. The two ways a
run stops: max_steps=3 (mid-epoch, no validation due; last.ckpt at step 3), or killed right after a
validation (at step 5, the epoch end, without val_check_interval; at step 7 with val_check_interval=2,
which validates at batches 2 and 4 of each epoch but not at its last, batch 5): it then resumes from the
last.ckpt of step 5. The resumed run writes into the stopped run's folder, as a requeued job does, so the
best-checkpoint callback continues from its saved state (Lightning forgets it in a new folder).

A run that max_steps stops mid-epoch validates its final weights (its own test phase sees them); the
resumed run leaves that score out of its choice of the best checkpoint (zoo.training.callbacks.checkpoint), so it
saves at the very steps the uninterrupted run does.
"""

import hashlib
import json
import warnings
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from zoo_run import TINY, TINY_MODEL, make_cfg

from zoo.run.train import run
from zoo.training.checkpoint_io import settle_epoch_end

SMALL = [
    *TINY_MODEL,
    "trainer.max_steps=10",
    "trainer.enable_model_summary=false",
    "trainer.limit_test_batches=1",
]
# tiny models run fastest on one thread (conftest); two contend badly when the other core is busy (measured
# on a 2-core machine: a training step 20x slower)
pytestmark = pytest.mark.usefixtures("one_thread")
SCHEDULE = ["task.scheduler.warmup_steps=2", "task.scheduler.decay_steps=10"]  # lr changes at every step
TASKS = {  # task: (arch, overrides), each with epochs of 5 batches
    "lm": ("decoder_only", TINY + SCHEDULE + ["task.sample=null"]),
    "classification": (
        "encoder_only",
        SMALL
        + SCHEDULE
        + [
            "data.limit=80",
            "data.batch_size=16",
            "data.vocab_size=300",
            "model.max_len=128",
            "trainer.limit_val_batches=2",
        ],
    ),
    "translation": (
        "encoder_decoder",
        SMALL
        + [
            "data.limit=30",
            "data.vocab_size=300",
            "data.max_tokens=512",
            "task.scheduler.warmup_steps=3",
            "task.beam_size=1",
            "task.max_len_b=2",
            "trainer.limit_val_batches=1",
        ],
    ),
}
# classification with an EMA of the weights (callbacks=ema): the average and its update step travel too
TASKS["classification+ema"] = (
    TASKS["classification"][0],
    [*TASKS["classification"][1], "callbacks=ema", "callbacks.ema.decay=0.7"],
)
MONITOR = {"lm": ("val/loss", "min"), "classification": ("val/acc", "max"), "translation": ("val/bleu", "max")}
MONITOR["classification+ema"] = MONITOR["classification"]
VAL_CHECK = {None: [], 2: ["trainer.val_check_interval=2"]}
KILLED_AFTER = {None: 5, 2: 7}  # the validation the run is killed right after


class Killed(Exception):
    """Raised by Record to end a run the way a crash would: no further hook, no checkpoint."""


def batch_hash(batch) -> str:
    """A digest of every tensor of a batch: (x, y) windows, or a dict of token ids, masks and labels."""
    h = hashlib.sha256()
    for t in batch.values() if isinstance(batch, dict) else batch:
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


class Record(pl.Callback):
    """Appends one JSON line to `path` per training step (step, epoch, batch digest, lr, loss), validation
    (step, its val/ metrics) and checkpoint save (step; "best" if saved at validation end, else "last");
    raises Killed when a training step would start at kill_at."""

    def __init__(self, path: str, kill_at: int | None = None):
        self.path, self.kill_at = Path(path), kill_at

    def _write(self, **row) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.kill_at is not None and trainer.global_step >= self.kill_at:
            raise Killed(f"killed at step {trainer.global_step}")
        self._lr, self._batch = trainer.optimizers[0].param_groups[0]["lr"], batch_hash(batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._write(
            kind="train",
            step=trainer.global_step,
            epoch=trainer.current_epoch,
            batch=self._batch,
            lr=self._lr,
            loss=float(outputs["loss"]),
        )

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:  # runs before the checkpoint callbacks' on_validation_end
            metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
            self._write(kind="val", step=trainer.global_step, metrics=metrics)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self._write(kind="ckpt", step=trainer.global_step, saved="best" if trainer.validating else "last")


def fit(run_dir: Path, task: str, extra: list, record: Path, kill_at: int | None = None) -> dict:
    """Run zoo's main job for `task` with Record writing to `record`; returns its rows by kind:
    {"train": [...], "val": [...], "ckpt": [...]}."""
    arch, overrides = TASKS[task]
    args = [
        *overrides,
        *extra,
        "logger=csv",
        "+callbacks.record._target_=test_resume.Record",
        f"+callbacks.record.path={record}",
        f"+callbacks.record.kill_at={'null' if kill_at is None else kill_at}",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few batches, non-resumable loader, changed checkpoint dirpath
        if kill_at is None:
            run(make_cfg(run_dir, args, arch=arch))
        else:
            with pytest.raises(Killed):
                run(make_cfg(run_dir, args, arch=arch))
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    out = {"train": [], "val": [], "ckpt": []}
    for r in rows:
        out[r.pop("kind")].append(r)
    return out


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """get(task, val_check): the records of that 10-step run, run once (by the first test that asks)."""
    done = {}

    def get(task, val_check):
        if (task, val_check) not in done:
            root = tmp_path_factory.mktemp(f"{task}-{val_check}-full")
            done[task, val_check] = fit(root, task, VAL_CHECK[val_check], root / "record.jsonl")
        return done[task, val_check]

    return get


def after(records: dict, step: int) -> dict:
    """The records of the steps after `step`."""
    return {kind: [r for r in rows if r["step"] > step] for kind, rows in records.items()}


def steps(rows, saved=None) -> list:
    """The steps of `rows`; of checkpoint rows, only those saved as `saved` ("best" or "last") if given."""
    return [r["step"] for r in rows if saved is None or r["saved"] == saved]


def improving(val_rows, task) -> list:
    """Steps of the validations whose monitored metric beats every earlier one (the first one too): where
    ModelCheckpoint(save_top_k=1) saves."""
    monitor, mode = MONITOR[task]
    out, best = [], None
    for r in val_rows:
        score = r["metrics"][monitor]
        if best is None or (score < best if mode == "min" else score > best):
            out.append(r["step"])
            best = score
    return out


def check_resume(uninterrupted, tmp_path, task, val_check, stop):
    full = uninterrupted(task, val_check)
    assert [r["epoch"] for r in full["train"]] == [0] * 5 + [1] * 5  # the stop points below mean what they say
    assert len({r["lr"] for r in full["train"]}) >= 5 and len({r["batch"] for r in full["train"]}) >= 5
    assert steps(full["ckpt"], "best") == improving(full["val"], task)  # the rule `improving` states
    assert steps(full["ckpt"], "last") == [5, 10]
    extra = VAL_CHECK[val_check]
    if stop == "max_steps":
        resume_step = 3
        assert resume_step not in steps(full["val"])
        stopped = fit(tmp_path, task, extra + ["trainer.max_steps=3"], tmp_path / "stopped.jsonl")
        assert steps(stopped["val"]) == [s for s in steps(full["val"]) if s < 3] + [3]  # it scores its weights
    else:
        killed_at, resume_step = KILLED_AFTER[val_check], 5
        assert killed_at in steps(full["val"])
        stopped = fit(tmp_path, task, extra, tmp_path / "stopped.jsonl", kill_at=killed_at)
        assert stopped["val"] == [r for r in full["val"] if r["step"] <= killed_at]
        assert stopped["ckpt"] == [r for r in full["ckpt"] if r["step"] <= killed_at]
    assert stopped["train"] == full["train"][: len(stopped["train"])]
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == resume_step
    resumed = fit(
        tmp_path, task, extra + [f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"], tmp_path / "resumed.jsonl"
    )
    expected = after(full, resume_step)
    assert [r["batch"] for r in resumed["train"]] == [r["batch"] for r in expected["train"]]
    assert [r["lr"] for r in resumed["train"]] == [r["lr"] for r in expected["train"]]
    assert steps(resumed["val"]) == steps(expected["val"])
    assert steps(resumed["ckpt"], "last") == steps(expected["ckpt"], "last")
    assert resumed["train"] == expected["train"]  # steps, epochs and losses too
    assert resumed["val"] == expected["val"]  # and the same scores
    assert resumed["ckpt"] == expected["ckpt"]  # the very checkpoint saves of the uninterrupted run


CASES = [
    (task, val_check, stop)
    for task in TASKS
    for val_check in VAL_CHECK
    for stop in ("max_steps", "validation")
    if task != "classification+ema" or val_check is None  # its val_check cases repeat the plain task's
]


@pytest.mark.parametrize("task, val_check, stop", CASES)
@pytest.mark.e2e
def test_resume_matches_the_uninterrupted_run(uninterrupted, tmp_path, task, val_check, stop):
    """Stopped (by max_steps mid-epoch, or killed right after a validation) and resumed from last.ckpt: the
    same batches, lr, losses, validations and checkpoint saves at every later step as the run never stopped."""
    check_resume(uninterrupted, tmp_path, task, val_check, stop)


def loop_state(epoch: tuple, ready: int, last: bool) -> dict:
    """A Lightning fit-loop state dict with epoch progress (ready, started, processed, completed) and the
    epoch loop's batch progress of `ready` batches."""
    counts = dict(zip(("ready", "started", "processed", "completed"), epoch))
    batches = {"total": dict.fromkeys(counts, 12), "current": dict.fromkeys(counts, ready), "is_last_batch": last}
    step = {"total": {"ready": 12, "completed": 12}, "current": {"ready": ready, "completed": ready}}
    optim = {"optimizer": {"step": step}}
    return {
        "loops": {
            "fit_loop": {
                "epoch_progress": {"total": dict(counts), "current": dict(counts)},
                "epoch_loop.batch_progress": batches,
                "epoch_loop.automatic_optimization.optim_progress": optim,
            }
        }
    }


def test_settle_epoch_end_counts_the_epoch_as_it_stands():
    """An on_train_epoch_end checkpoint (processed = completed + 1): a finished epoch becomes completed with
    the next epoch's per-epoch counters at 0; one cut by max_steps becomes unprocessed, to be continued.
    Totals (the Tiny Shakespeare stream position, global_step) never change; other checkpoints stay as they are."""
    finished = loop_state((3, 3, 3, 2), 5, True)
    settle_epoch_end(finished)
    fit_loop = finished["loops"]["fit_loop"]
    assert fit_loop["epoch_progress"]["current"] == {"ready": 3, "started": 3, "processed": 3, "completed": 3}
    assert fit_loop["epoch_progress"]["total"]["completed"] == 3
    assert fit_loop["epoch_loop.batch_progress"]["current"] == dict.fromkeys(
        ("ready", "started", "processed", "completed"), 0
    )
    assert not fit_loop["epoch_loop.batch_progress"]["is_last_batch"]
    assert set(fit_loop["epoch_loop.batch_progress"]["total"].values()) == {12}
    step = fit_loop["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]["step"]
    assert step == {"total": {"ready": 12, "completed": 12}, "current": {"ready": 0, "completed": 0}}
    cut = loop_state((3, 3, 3, 2), 2, False)
    settle_epoch_end(cut)
    assert cut["loops"]["fit_loop"]["epoch_progress"]["current"] == {
        "ready": 3,
        "started": 3,
        "processed": 2,
        "completed": 2,
    }
    assert cut["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["ready"] == 2
    for other in (loop_state((3, 3, 2, 2), 2, False), loop_state((3, 3, 2, 2), 5, True), {"state_dict": {}}):
        before = json.dumps(other)
        settle_epoch_end(other)  # mid-epoch and validation-end checkpoints, weights-only files
        assert json.dumps(other) == before
    with pytest.raises(ValueError, match="has no 'epoch_loop.batch_progress'"):
        settle_epoch_end(
            {
                "loops": {
                    "fit_loop": {
                        "epoch_progress": finished["loops"]["fit_loop"]["epoch_progress"]
                        | {"current": {"processed": 1, "completed": 0}}
                    }
                }
            }
        )
