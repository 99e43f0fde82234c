"""experiment=compare's tuning stage (compare.lr_grid): every architecture's peak rate chosen on its own, per
benchmark, as the scaling study's tuning stage chooses each family's (zoo.scaling.tune).

With a grid, the sweep's `seed` list (${zoo_compare_seeds:...}) puts a pair's tuning runs before its cells:
SEED_tune_lrRATE for each tune seed (1 .. compare.tune_seeds) and rate of the grid, smallest first (run dir
<benchmark>-<arch>-seed1_tune_lr0.001), then the seeds 1 .. compare.seeds. A tuning run is the cell of its seed
at its rate, trained to the same budget, but its datamodule never reads the test split (read_test=False) and it
is not tested: it is scored by its final validation metric (compare.tune_metric, per task); its W&B group is its
cells' group + TUNE_GROUP, so a dashboard of the sweep's group shows the cells alone. A cell reads its
pair's tuning runs (their results.json beside its run directory) and runs the rate whose seed-mean metric is best
(zoo.scaling.tune.best_rate); it refuses missing or failed tuning runs, and a best rate at an edge of the grid or
an edge tied with it (zoo.scaling.tune.edge_best names the rate to add). Without a grid the sweep and its cells are
today's: one shared rate per benchmark (the task's task.optimizer.lr).

results.json's "compare" records it: {"tuning", "tuned", "lr"} and, with a grid, "lr_grid", "metric", and for a
tuned cell "tune_seeds" and "scores" ({rate: seed-mean metric})."""

import inspect
import json
import re
import sys
from pathlib import Path

import lightning.pytorch as pl
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.errors import ConfigError, is_whole
from zoo.run.conf import TASK_OF_BATCH, seed_list
from zoo.run.loggers import wandb_group
from zoo.run.results import arch_config
from zoo.scaling.grid import rate_name
from zoo.scaling.tune import best_rate, check_rates, edge_best
from zoo.tasks.base import metric_mode

TUNE_GROUP = "/tune"  # a tuning run's W&B group: its cells' group with this added (dashboards show the cells)
TUNE = re.compile(r"^(?P<seed>[0-9]+)_tune_lr(?P<lr>[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?)$")


def check_grid(grid, tune_seeds) -> list[float]:
    """compare.lr_grid's rates, smallest first ([] for null). Raises ConfigError for a grid that is not a list of
    at least 3 distinct positive rates, or (with a grid) a compare.tune_seeds that is not a positive whole number."""
    if grid is None:
        return []
    rates = check_rates(grid, "compare.lr_grid", " must be null (no tuning) or")
    if not is_whole(tune_seeds) or tune_seeds < 1:
        raise ConfigError(f"compare.tune_seeds={tune_seeds!r} must be a positive whole number: the seeds of each rate")
    return rates


def sweep_seeds(seeds, grid, tune_seeds) -> str:
    """${zoo_compare_seeds:...}: the sweep's `seed` values of each (arch, benchmark): without a grid "1,2,3"
    (zoo.run.conf.seed_list); with one, its tuning runs first (tune_value for each tune seed and rate),
    then the seeds. Prints the message and exits with 2 for a bad grid (check_grid) or seed count."""
    plain = seed_list(seeds)
    try:
        rates = check_grid(grid, tune_seeds)
    except ConfigError as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        sys.exit(2)
    if not rates:
        return plain
    return ",".join([tune_value(s, r) for s in range(1, int(tune_seeds) + 1) for r in rates] + [plain])


def tune_value(seed: int, lr: float) -> str:
    """The `seed` value of a tuning run: (1, 0.001) -> "1_tune_lr0.001" (the rate as zoo.scaling.grid.rate_name)."""
    return f"{int(seed)}_tune_lr{rate_name(lr)}"


def tuning_seed(value) -> tuple[int, float] | None:
    """(seed, rate) of a tuning run's `seed` value ("1_tune_lr0.001" -> (1, 0.001)); None for anything else."""
    m = TUNE.match(value) if isinstance(value, str) else None
    return (int(m["seed"]), float(m["lr"])) if m else None


def task_name(cfg: DictConfig) -> str:
    """The job's task (classification, lm, translation), from its task class's batches."""
    return TASK_OF_BATCH.get(getattr(get_class(cfg.task._target_), "BATCH", ""), "?")


def tune_metric(cfg: DictConfig) -> str:
    """compare.tune_metric of the job's task: a validation metric (ConfigError for none, or a test/ metric)."""
    task = task_name(cfg)
    metric = (cfg.compare.get("tune_metric") or {}).get(task)
    if not isinstance(metric, str) or not metric.startswith("val/"):
        raise ConfigError(
            f"compare.tune_metric.{task}={metric!r} must name a validation metric (val/...) of the {task} task: "
            "tuning runs read no test split, e.g. val/loss"
        )
    return metric


def benchmark(cfg: DictConfig) -> str:
    """The job's +benchmark choice (its task's name when there is none)."""
    from hydra.core.hydra_config import HydraConfig

    choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
    return str(choices.get("benchmark") or task_name(cfg))


def begin(cfg: DictConfig) -> dict | None:
    """Set up a job of experiment=compare before its checks (zoo.run.train.run): a tuning run's seed and rate
    from its `seed` value; a cell with a grid: its pair's tuned rate (chosen_rate). Returns results.json's
    "compare" record; None outside experiment=compare. Raises ConfigError before any data is read."""
    if cfg.get("compare") is None:
        return None
    grid = check_grid(cfg.compare.get("lr_grid"), cfg.compare.get("tune_seeds", 1))
    tune = tuning_seed(cfg.get("seed"))
    record = {"tuning": tune is not None, "tuned": False, "benchmark": benchmark(cfg), "arch": arch_config(cfg)}
    if not grid:
        if tune is not None:
            raise ConfigError(
                f"seed={cfg.seed} names a tuning run, but compare.lr_grid is null; set compare.lr_grid=[...] "
                "or give a seed number"
            )
        return {**record, "lr": float(cfg.task.optimizer.lr)}
    record.update(lr_grid=grid, metric=tune_metric(cfg))
    if tune is not None:
        seed, lr = tune
        if lr not in grid:
            raise ConfigError(f"seed={cfg.seed}: rate {lr:g} is not in compare.lr_grid ({fmt_rates(grid)})")
        with open_dict(cfg):
            cfg.seed, cfg.task.optimizer.lr = seed, lr
            if (cfg.get("logger") or {}).get("wandb") is not None and not cfg.logger.wandb.get("group"):
                cfg.logger.wandb.group = (wandb_group(cfg) + TUNE_GROUP)[-128:]  # not in the cells' group
        data_kwargs(cfg, True)  # a datamodule that could not skip its test split: refused here, before data
        return {**record, "lr": lr}
    k = int(cfg.compare.tune_seeds)
    rate, scores = chosen_rate(Path(cfg.paths.output_dir).parent, record, grid, k)
    with open_dict(cfg):
        cfg.task.optimizer.lr = rate
    scores = {rate_name(r): v for r, v in scores.items()}
    return {**record, "tuned": True, "lr": rate, "tune_seeds": k, "scores": scores}


def fmt_rates(grid) -> str:
    """Rates as text: [0.001, 0.002] -> "0.001, 0.002"."""
    return ", ".join(f"{r:g}" for r in grid)


def tuning_runs(sweep_dir: Path, record: dict) -> list[dict]:
    """The results.json of the tuning runs of record's (benchmark, arch) in sweep_dir's run folders (each gains
    "run_dir"). Raises ConfigError for one that cannot be read."""
    out = []
    for path in sorted(Path(sweep_dir).glob("*/results.json")):
        try:
            res = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read {path} ({e}); delete it or rerun its job") from None
        c = res.get("compare") if isinstance(res, dict) else None
        if (
            isinstance(c, dict)
            and c.get("tuning")
            and (c.get("benchmark"), c.get("arch"))
            == (
                record["benchmark"],
                record["arch"],
            )
        ):
            out.append({**res, "run_dir": str(path.parent)})
    return out


def chosen_rate(sweep_dir: Path, record: dict, grid: list[float], seeds: int) -> tuple[float, dict]:
    """(the tuned rate, {rate: seed-mean metric}) of record's pair: the rate of `grid` whose tuning runs (seeds
    1 .. seeds) have the best seed-mean final record["metric"] (lower for a loss, zoo.tasks.base.metric_mode; a
    non-finite value is the worst). Raises ConfigError when a tuning run is missing, failed or lacks the metric, or
    when the best rate is an edge of the grid (naming the rate to add)."""
    metric, pair = record["metric"], f"{record['arch']} on {record['benchmark']}"
    have, failed = {}, []
    for r in tuning_runs(sweep_dir, record):
        key = (int(r.get("seed", 0)), float(r["compare"]["lr"]))
        if r.get("status", "ok") != "ok":
            failed.append(f"{r['run_dir']} ({str(r.get('error', 'failed')).splitlines()[0][:120]})")
        elif key[1] in grid and key[0] <= seeds:
            if metric not in (r.get("final") or {}):
                raise ConfigError(
                    f"the tuning run {r['run_dir']} recorded no final {metric}; set compare.tune_metric to a metric "
                    f"its task logs ({', '.join(k for k in r.get('final') or {} if k.startswith('val/'))})"
                )
            have[key] = float(r["final"][metric])
    missing = [tune_value(s, lr) for s in range(1, seeds + 1) for lr in grid if (s, lr) not in have]
    if missing:
        raise ConfigError(
            f"{pair} is tuned over compare.lr_grid, but {len(missing)} of its {len(grid) * seeds} tuning runs are "
            f"not done (seed={','.join(missing)})"
            + (f"; failed: {'; '.join(failed)}" if failed else "")
            + ": run the whole sweep (-m experiment=compare: the tuning runs come first) into this folder"
        )
    sign = 1.0 if metric_mode(metric) == "min" else -1.0
    scores = {lr: sum(have[(s, lr)] for s in range(1, seeds + 1)) / seeds for lr in grid}
    signed = {lr: [sign * v] for lr, v in scores.items()}
    best = best_rate(signed)  # a non-finite score ranks last (mean_loss)
    edge = edge_best(signed, grid, best)  # an edge tied with the best is refused too
    if edge is not None:
        raise ConfigError(
            f"{pair}: the best tuning rate {edge[0]:g} (seed-mean final {metric} {scores[edge[0]]:.4g}) is an edge of "
            f"compare.lr_grid ({fmt_rates(grid)}), so a better one may lie beyond it: add {edge[1]:.3g} to the grid "
            "and rerun the sweep"
        )
    return best, scores


def data_kwargs(cfg: DictConfig, tuning: bool) -> dict:
    """The datamodule's extra arguments: for a tuning run {"read_test": False} (nothing for data without a test
    split). Raises ConfigError for a datamodule with a test split that cannot leave it unread."""
    if not tuning:
        return {}
    cls = get_class(cfg.data._target_)
    if "read_test" in inspect.signature(cls).parameters:
        return {"read_test": False}
    if getattr(cls, "test_dataloader", None) in (None, pl.LightningDataModule.test_dataloader):
        return {}
    raise ConfigError(
        f"data={cls.__name__} has a test split but no read_test argument, so a tuning run (compare.lr_grid) "
        "would read it; tune on a datamodule that takes read_test, or set compare.lr_grid=null"
    )


OmegaConf.register_new_resolver("zoo_compare_seeds", sweep_seeds, replace=True)
