"""The W&B run of an experiment=scaling cell (zoo.run.scaling_cell): one run per cell, through the W&B logger of
conf/logger/ (zoo.run.loggers.make_loggers: offline by default, the group, job type and tags of any run), so that
`python -m zoo.dashboard`'s scaling panels show the study. No W&B logger in the config: no run.

What the run holds:
- config: the cell's resolved config, nested as any run's (zoo.run.loggers.run_config), with arch, the task's
  name (task.name), dataset, objective, params, params_non_embedding, flops_per_token, scaling_size and scaling_kind;
- history: each segment's training metrics under its name, "trunk/train/loss", "trunk/lr", "cooldown_5/train/loss"
  (the branch to 5 tokens per parameter; "cosine_5" in a check cell; "." in a budget written "_"), against
  trainer/global_step; and each point at its end step: val/cont_loss, cost/flops, cost/tokens, tokens_per_param,
  the names an ordinary LM run logs its validations under;
- the table POINTS of every point of the cell, and the summary: val/cont_loss and cost/train_flops of its largest
  budget, params, flops_per_token, wall_seconds.

A rerun that continues the cell continues its W&B run (the run id is kept in <cell>/wandb_id); a rerun with nothing
left to train starts none.
"""

import secrets
from pathlib import Path

from lightning.pytorch.loggers import Logger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig

from zoo.run.loggers import make_loggers, run_config

POINTS = "scaling/points"  # the W&B table of the cell's points (points.csv's rows)
ID_FILE = "wandb_id"


def segment_name(kind: str, tokens_per_param: float | None) -> str:
    """A segment's metric prefix: "trunk" (tokens_per_param None), else "<kind>_<budget>" (kind "cooldown" or
    "cosine"; the budget in tokens per parameter, "." written "_": cooldown_0_2)."""
    return "trunk" if tokens_per_param is None else f"{kind}_{tokens_per_param:g}".replace(".", "_")


class SegmentLogger(Logger):
    """A Lightning logger of one segment's fit: its metrics go to the cell's W&B run under "<segment>/<name>" (the
    W&B logger's trainer/global_step beside them); hyperparameters are the cell's, logged once (CellRun)."""

    def __init__(self, wandb_logger: WandbLogger, segment: str):
        super().__init__()
        self._wandb, self.segment = wandb_logger, segment

    @property
    def name(self) -> str:
        return self.segment

    @property
    def version(self) -> str:
        return str(self._wandb.version)

    @rank_zero_only
    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        self._wandb.log_metrics({f"{self.segment}/{k}": v for k, v in metrics.items() if k != "epoch"}, step)

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        """Nothing: the cell's config is logged once, by CellRun."""


class CellRun:
    """The W&B run of one cell (module docstring). `start` makes it; None where the config has no W&B logger."""

    def __init__(self, wandb_logger: WandbLogger):
        self.logger = wandb_logger

    @classmethod
    def start(cls, cfg: DictConfig, name: str, tags: list, top: dict) -> "CellRun | None":
        """The cell's run, named `name` unless logger.wandb.name is set, its config run_config(cfg, top) and the
        summary's params and flops_per_token; None without a W&B logger."""
        wandb_cfg = [lc for lc in (cfg.get("logger") or {}).values() if str(lc.get("_target_")).endswith("WandbLogger")]
        if not wandb_cfg:
            return None
        id_file = Path(cfg.paths.output_dir) / ID_FILE
        run_id = id_file.read_text().strip() if id_file.is_file() else secrets.token_hex(4)
        extra = {"id": run_id, "resume": "allow", **({} if wandb_cfg[0].get("name") else {"name": name})}
        (logger,) = (lg for lg in make_loggers(cfg, tags, extra) if isinstance(lg, WandbLogger))
        _finish_other_run(run_id)
        logger.log_hyperparams(run_config(cfg, top))
        logger.experiment.summary.update({"params": top["params"], "flops_per_token": top["flops_per_token"]})
        id_file.write_text(run_id + "\n")
        return cls(logger)

    def segment(self, name: str) -> SegmentLogger:
        """The Lightning logger of one segment's Trainer (segment_name)."""
        return SegmentLogger(self.logger, name)

    def point(self, row: dict) -> None:
        """Log one point (a points.csv row) at its end step under an LM run's validation names."""
        metrics = {"val/cont_loss": row["loss"], "cost/flops": row["flops"], "cost/tokens": row["tokens"]}
        self.logger.log_metrics({**metrics, "tokens_per_param": row["tokens_per_param"]}, step=int(row["steps"]))

    def finish(self, rows: list[dict], wall_seconds: float) -> None:
        """The table of every point (`rows`, points.csv's, by budget), the summary of the largest budget, and the end
        of the run."""
        import wandb

        run = self.logger.experiment
        if rows:
            columns = list(rows[0])
            run.log({POINTS: wandb.Table(columns=columns, data=[[r[c] for c in columns] for r in rows])})
            run.summary.update({"val/cont_loss": rows[-1]["loss"], "cost/train_flops": rows[-1]["flops"]})
        run.summary.update({"wall_seconds": wall_seconds})
        run.finish()


def _finish_other_run(run_id: str) -> None:
    """End a W&B run of this process that is not this cell's (one an interrupted cell left open): Lightning's
    W&B logger would log into it instead of starting this cell's."""
    import wandb

    if wandb.run is not None and wandb.run.id != run_id:
        wandb.run.finish(exit_code=1)
