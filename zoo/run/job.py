"""One job of `python -m zoo`, before it trains: its config composed (compose_job) and checked, with its
budget applied (checked_config); its data set up (build_data); a task built from its plan (job_task).
zoo.run.train runs a plain job with them, zoo.run.scaling_cell a cell of experiment=scaling."""

import logging

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, open_dict

from zoo.errors import ConfigError
from zoo.interop.init_from import init_source
from zoo.run.budget import apply_budget, ignored_bounds, schedule_bound
from zoo.run.checks.checkpoint import check_checkpoint
from zoo.run.checks.config import check_config
from zoo.run.conf import CONF_DIR, exit_on_bad_arch_or_seed, task_for_data
from zoo.run.loggers import route_lightning_logs
from zoo.run.plan import RunPlan
from zoo.run.results import job_overrides, save_tokenizers
from zoo.run.threads import set_threads
from zoo.scaling import grid as _scaling_grid  # noqa: F401 -- registers experiment=scaling's resolvers
from zoo.training.schedule_fit import check_schedule

log = logging.getLogger("zoo")


def compose_job(overrides: list[str], output_dir: str) -> DictConfig:
    """The composed config of `python -m zoo <overrides>` outside a Hydra run, writing into output_dir; as in a
    real run the job's config has no hydra node, and its ${hydra:...} values resolve against this job until
    another is composed."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
        del cfg["hydra"]
    return cfg


def checked_config(cfg: DictConfig):
    """The config to run (task_for_data), checked, with its budget applied and threads set; the
    model.init_from source (its shape, read before any data work); and the run's plan (zoo.run.plan.RunPlan,
    its objective chosen once). Exits or raises ConfigError on bad input."""
    exit_on_bad_arch_or_seed(cfg)
    route_lightning_logs()
    cfg = task_for_data(cfg)
    plan = check_config(cfg)
    budget = apply_budget(cfg)
    overrides = job_overrides()
    for override in ignored_bounds(budget["kind"], overrides):
        log.warning(
            "%s is ignored: budget.kind=%s ends the run (at budget.value=%g); use budget.kind=steps "
            "budget.value=N to bound it by steps",
            override,
            budget["kind"],
            budget["value"],
        )
    # the warm-up fits in trainer.max_steps, or in the steps of a tokens budget a wsd schedule needs
    check_schedule(cfg, overrides, schedule_bound(cfg, budget))
    try:
        set_threads(cfg)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    check_checkpoint(cfg)
    return cfg, budget, init_source(cfg), plan


def build_data(cfg: DictConfig, choices, extra: dict | None = None):
    """The datamodule (cfg.data with the arguments `extra`, e.g. read_test=False), set up; its model_info
    (vocabulary sizes, classes, tokenizer state, typical lengths); and its data_info (the data actually read: a
    user's data.file=... is not the config group's name)."""
    datamodule = instantiate(cfg.data, _convert_="all", **(extra or {}))  # plain lists and dicts, no omegaconf
    datamodule.prepare_data()
    datamodule.setup()
    info = datamodule.model_info()
    if rank_zero_only.rank == 0:
        save_tokenizers(cfg.paths.output_dir, info["tokenizer"])  # also in every checkpoint's hyperparameters
    data = datamodule.data_info() if hasattr(datamodule, "data_info") else {"dataset": choices.get("data", "?")}
    return datamodule, info, data


def job_task(cfg: DictConfig, info: dict, data_name: str):
    """A task with fresh weights for the job cfg on the data of `info` (no init_from source), built from the
    job's plan (zoo.run.plan.RunPlan; data_name names the data in its errors)."""
    return RunPlan.from_config(cfg).with_data(cfg, info, None, data_name).build_task(cfg, info)
