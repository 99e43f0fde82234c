"""The segments of a scaling cell (zoo.run.scaling_cell): Lightning fits of its trunk to each branch start and of
each cool-down branch, from the trunk's checkpoints (written atomically), and the validation that scores them.
Every fit resumes exactly: zoo's RNG state and data stream travel with the checkpoint."""

from pathlib import Path

import lightning.pytorch as pl
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from zoo.run.cell_wandb import CellRun
from zoo.training.callbacks import always_callbacks
from zoo.training.callbacks.cut_epoch import CutEpoch
from zoo.training.callbacks.progress import ProgressBar
from zoo.training.callbacks.rng_state import RNGState
from zoo.training.checkpoint_io import AtomicCheckpointIO


def trunk_checkpoint_steps(trunk_dir: Path) -> set[int]:
    """The steps K of the trunk's checkpoints trunk_dir/stepK.ckpt (none when the folder does not exist)."""
    return {int(p.stem[4:]) for p in Path(trunk_dir).glob("step*.ckpt") if p.stem[4:].isdigit()}


def trunk_segments(have, step: int, every: int) -> list[tuple[int, int]]:
    """The (from, to) steps of the fits that take the trunk to `step` from its checkpoints at the steps `have`:
    from the last one at or before `step` (0: from scratch), ending at every multiple of `every` on the way (0:
    no other stop) and at `step`."""
    at, out = max((k for k in have if k <= step), default=0), []
    while at < step:
        nxt = min(step, (at // every + 1) * every) if every > 0 else step
        out.append((at, nxt))
        at = nxt
    return out


class Cell:
    """The segments of one cell: trunk fits to each branch start, branch fits to each budget, validations."""

    def __init__(self, cfg: DictConfig, info: dict, plan, datamodule, out: Path):
        """plan: the run's zoo.run.plan.RunPlan with its data (with_data): every segment builds its task from it."""
        self.cfg, self.info, self.plan, self.dm, self.out = cfg, info, plan, datamodule, out
        self.trunk_dir = out / "trunk"
        self.every = int(cfg.scaling.get("checkpoint_every") or 0)
        self.train_seconds = 0.0  # training-step seconds of this invocation's fits
        self.wandb: CellRun | None = None  # the cell's W&B run (zoo.run.cell_wandb), None without one

    def _task(self, scheduler: dict):
        cfg = self.cfg.copy()
        with open_dict(cfg):
            for k, v in scheduler.items():
                cfg.task.scheduler[k] = v
        pl.seed_everything(self.cfg.seed, workers=True)  # the same initial weights in every segment from scratch
        return self.plan.build_task(cfg, self.info)

    def _trainer(self, max_steps: int, validate: bool = False):
        return instantiate(
            self.cfg.trainer,
            max_steps=max_steps,
            logger=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=1.0 if validate else 0,
            callbacks=[RNGState(), CutEpoch(), ProgressBar(), *always_callbacks()],  # CutEpoch: resumes in its epoch
            plugins=[AtomicCheckpointIO()],
        )

    def fit(self, max_steps: int, scheduler: dict, ckpt: Path | None, segment: str = "trunk"):
        """Train a fresh task (its schedule: the config's with `scheduler` on top) from `ckpt` (None: from scratch)
        to step max_steps, its metrics logged to the cell's W&B run under `segment`; returns (trainer, task)."""
        task = self._task(scheduler)
        task._log_hyperparams = self.dm._log_hyperparams = False  # the cell's config: logged once, by CellRun
        trainer = self._trainer(max_steps)
        if self.wandb:
            trainer.logger = self.wandb.segment(segment)
        before = None

        class Before(pl.Callback):  # the cost restored from ckpt, read once training starts
            def on_train_start(self, trainer, module):
                nonlocal before
                before = float(module.cost["seconds"])

        trainer.callbacks.append(Before())
        trainer.fit(task, datamodule=self.dm, ckpt_path=str(ckpt) if ckpt else None)
        self.train_seconds += float(task.cost["seconds"]) - (before or 0.0)
        return trainer, task

    def score(self, task) -> float:
        """val/cont_loss of the task's weights on the fixed validation windows."""
        trainer = self._trainer(task.global_step, validate=True)
        metrics = trainer.validate(task, datamodule=self.dm, verbose=False)[0]
        return float(metrics.get("val/cont_loss", metrics["val/loss"]))

    def trunk_checkpoints(self) -> dict[int, Path]:
        return {k: self.trunk_dir / f"step{k}.ckpt" for k in trunk_checkpoint_steps(self.trunk_dir)}

    def trunk_to(self, step: int) -> Path:
        """The trunk's checkpoint at `step`, training the trunk there in the fits of trunk_segments (each
        checkpoint written atomically)."""
        have = self.trunk_checkpoints()
        for at, nxt in trunk_segments(have, step, self.every):
            trainer, _ = self.fit(nxt, {"decay_start": None, "decay_steps": None}, have.get(at))
            self.trunk_dir.mkdir(parents=True, exist_ok=True)
            path = self.trunk_dir / f"step{nxt}.ckpt"
            trainer.save_checkpoint(path)
            have[nxt] = path
        return have[step]
