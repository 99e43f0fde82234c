"""The loggers of a run (conf/logger/) and what they are given: Lightning's messages routed to Hydra's
handlers, the W&B group and tags, one nested config per run."""

import logging
import os
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from lightning.pytorch.loggers import CSVLogger
from omegaconf import DictConfig, OmegaConf

from zoo.run.results import keep_csv_history


def route_lightning_logs() -> None:
    """Send Lightning's messages, once each, to the handlers Hydra configured (console and <run dir>/train.log).
    Lightning, imported before Hydra sets up logging, gives its loggers private console handlers ("lightning":
    "INFO: ..."; "lightning.pytorch" and "lightning.fabric" with propagation off), so its messages would
    print twice on the console, or never reach train.log. Those console handlers are removed and the
    messages propagate to the root logger."""
    if not logging.getLogger().handlers:  # logging not configured (zoo.run.train.run called as a library)
        return
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        lightning_log = logging.getLogger(name)
        for handler in list(lightning_log.handlers):
            if type(handler) is logging.StreamHandler:
                lightning_log.removeHandler(handler)
        lightning_log.propagate = True


def wandb_group(cfg: DictConfig) -> str:
    """The W&B group of a run: logger.wandb.group if set; else, in a Hydra multirun (a -m sweep, Optuna,
    submitit), the sweep dir, so one sweep's runs form one group; else experiment_name."""
    group = (cfg.get("logger") or {}).get("wandb", {}).get("group")
    if group:
        return str(group)
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return str(HydraConfig.get().sweep.dir)[-128:]  # W&B's limit
    return str(cfg.get("experiment_name") or cfg.arch)


def run_config(cfg: DictConfig, top: dict) -> dict:
    """The run's config as W&B nests it: the resolved config (`model: {d_model: ...}`, which W&B, its runs table and
    wandb-workspaces' `Config("model.d_model")` address as `model.value.d_model`), with the `top` keys (arch, task,
    dataset, params, ...) beside its groups; a top key that names a config group is that group's `name` (the task's
    name is task.name, beside task.optimizer). A W&B sweep's parameter `model.d_model` (a Hydra override) is the
    value at that path."""
    out = OmegaConf.to_container(cfg, resolve=True)
    for key, value in top.items():
        if isinstance(out.get(key), dict):
            out[key] = {**out[key], "name": value}
        else:
            out[key] = value
    return out


def data_tag(data: dict) -> str:
    """The W&B tag of the data a run read: a built-in dataset's name, or the name a user's config gave it, else
    the user's file names joined by "+" ("file:my.txt"), cut to W&B's 64 characters."""
    name = str(data["dataset"])
    if data.get("builtin", True) or "/" not in name:
        return name[:64]
    paths = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, str) and Path(value).is_absolute():
            paths.append(Path(value).name)

    walk(data.get("files", {}))
    return ("file:" + "+".join(dict.fromkeys(paths)))[:64]


def make_loggers(cfg: DictConfig, tags, wandb: dict | None = None):
    """The loggers of conf/logger/; W&B gets group (wandb_group), job_type = arch, tags and the `wandb` keyword
    arguments (e.g. a run's id and name)."""
    loggers = []
    for lcfg in (cfg.get("logger") or {}).values():
        kwargs = {}
        if lcfg._target_.endswith("WandbLogger"):
            kwargs.update(tags=tags, group=wandb_group(cfg), job_type=cfg.arch, **(wandb or {}))
            if os.environ.get("WANDB_MODE") == "online":
                kwargs["offline"] = False
            Path(cfg.paths.output_dir).mkdir(parents=True, exist_ok=True)
        logger = instantiate(lcfg, **kwargs)
        if isinstance(logger, CSVLogger) and cfg.get("ckpt_path"):
            keep_csv_history(logger, cfg.ckpt_path)
        loggers.append(logger)
    return loggers
