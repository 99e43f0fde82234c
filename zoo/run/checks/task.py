"""Checks of the task config against the architecture and the data: the task trains the arch and reads the
data's batches, its objective, optimizer and scheduler keys, one vocabulary where needed, its options and its
decoding settings."""

import inspect
import math
from pathlib import Path

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from zoo.errors import ConfigError, check_fraction, check_z_loss, is_number, is_whole
from zoo.model.decoding.beam_search import check_early_stopping
from zoo.run.checks.monitors import check_monitors
from zoo.run.conf import CONF_DIR
from zoo.run.plan import RunPlan
from zoo.tasks.objectives import arch_rules
from zoo.training.optim_checks import check_optimizer_and_scheduler


def check_task_and_data(cfg: DictConfig, task_cls) -> RunPlan:
    """The task trains the arch and reads the data's batches; its objective (RunPlan.from_config, the run's
    plan, returned), monitors, optimizer and scheduler keys are valid; one vocabulary where the model or the
    task needs one."""
    if cfg.arch not in task_cls.ARCHS:
        raise ConfigError(
            f"{task_cls.__name__} does not train +arch={cfg.arch} yet; it trains {', '.join(task_cls.ARCHS)}"
        )
    check_batches(cfg, task_cls)
    rules = arch_rules(task_cls.BATCH, cfg.arch)
    plan = RunPlan.from_config(cfg)  # the objective that will train the arch, chosen once, before the data
    check_monitors(cfg, rules["metrics"], task_cls.__name__)
    try:
        check_optimizer_and_scheduler(*(plain(cfg.task.get(k)) for k in ("optimizer", "scheduler")))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    check_vocabularies(cfg, rules)
    return plan


def check_batches(cfg: DictConfig, task_cls) -> None:
    """The datamodule gives the batches the task reads (their BATCH kinds agree); else ConfigError naming the
    conf/data options that fit."""
    data_batch = getattr(get_class(cfg.data._target_), "BATCH", None) if cfg.data.get("_target_") else None
    if data_batch is not None and task_cls.BATCH is not None and data_batch != task_cls.BATCH:
        fits = []
        for p in sorted((Path(CONF_DIR) / "data").glob("*.yaml")):
            target = OmegaConf.load(p).get("_target_")
            if target and getattr(get_class(target), "BATCH", None) == task_cls.BATCH:
                fits.append(p.stem)
        raise ConfigError(
            f"{task_cls.__name__} reads {task_cls.BATCH} batches, but data._target_="
            f"{cfg.data._target_} gives {data_batch} batches; use data={' or data='.join(fits)} (or a "
            f"datamodule whose batches keep {task_cls.__name__}.BATCH_CONTRACT)"
        )


def plain(node) -> dict:
    """A config node as a plain resolved dict ({} for None)."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})


def check_vocabularies(cfg: DictConfig, rules: dict) -> None:
    """One vocabulary for source and target where shared embeddings or the objective (rules: arch_rules)
    need it (ConfigError naming data.joint_vocab)."""
    if cfg.model.get("share_embeddings") and cfg.data.get("joint_vocab") is False:
        if cfg.get("compare") is not None:  # experiment=compare: two embeddings would unmatch the parameter counts
            raise ConfigError(
                "experiment=compare matches the architectures' parameter counts with one embedding for source and "
                "target (model.share_embeddings=true), which needs one vocabulary: set data.joint_vocab=true"
            )
        raise ConfigError(
            "model.share_embeddings=true needs one vocabulary for source and target: set "
            "data.joint_vocab=true (or model.share_embeddings=false)"
        )
    if (
        rules["one_vocabulary"]
        and cfg.data.get("joint_vocab") is False
        and str(cfg.data.get("tokenizer") or "bpe") in ("bpe", "char")
    ):  # zoo trains one tokenizer a side
        raise ConfigError(
            "encoder_only translation reads source and target as one sequence, so it needs "
            "one vocabulary: set data.joint_vocab=true"
        )


def check_task_keys(cfg: DictConfig) -> None:
    """ConfigError for a key of cfg.task that its class (task._target_) does not take: instantiating it would
    raise a TypeError after the data is read (e.g. +task.label_smoothing on the lm task)."""
    target = cfg.task.get("_target_")
    if not target:
        return
    params = inspect.signature(get_class(target).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    for key in cfg.task:
        if not str(key).startswith("_") and key not in params:
            taken = ", ".join(k for k in params if k not in ("self", "arch", "model", "tokenizer"))
            raise ConfigError(
                f"task.{key} is not a setting of this task ({target.rsplit('.', 1)[-1]}): drop it; its settings: "
                f"{taken}"
            )


def check_task_options(cfg: DictConfig) -> None:
    """task.early_stopping (zoo.model.decoding.beam_search.check_early_stopping), task.z_loss
    (zoo.errors.check_z_loss) and task.label_smoothing (in [0, 1): zoo.errors.check_fraction) are valid where set
    (ConfigError), before any data is read."""
    check_task_keys(cfg)
    if "early_stopping" in cfg.task:
        try:
            check_early_stopping(cfg.task.early_stopping)
        except ValueError as e:
            raise ConfigError(f"task.{e}") from None
    if "z_loss" in cfg.task:
        try:
            check_z_loss(cfg.task.z_loss, "task.z_loss")
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if cfg.task.get("label_smoothing") is not None:
        try:
            check_fraction("task.label_smoothing", cfg.task.label_smoothing, "0 = plain cross-entropy, 0.1 the paper's")
        except ValueError as e:
            raise ConfigError(str(e)) from None


def check_decoding(cfg: DictConfig) -> None:
    """The task's decoding settings are in range (ConfigError): task.beam_size a whole number >= 1,
    task.length_penalty a finite number, and the validation sample's temperature >= 0, top_k >= 1 (or null)
    and max_new_tokens >= 0 (zoo.model.decoding.generate.sample_next's ranges)."""
    task = cfg.task
    beam = task.get("beam_size")
    if beam is not None and (not is_whole(beam) or beam < 1):
        raise ConfigError(f"task.beam_size={beam!r} must be a whole number >= 1 (1 = greedy decoding only)")
    alpha = task.get("length_penalty")
    if alpha is not None and (not is_number(alpha) or not math.isfinite(alpha)):
        raise ConfigError(f"task.length_penalty={alpha!r} must be a finite number (GNMT's alpha, e.g. 0.6)")
    sample = task.get("sample") or {}
    temperature, top_k, new = sample.get("temperature"), sample.get("top_k"), sample.get("max_new_tokens")
    if temperature is not None and (not is_number(temperature) or not 0 <= temperature < math.inf):
        raise ConfigError(f"task.sample.temperature={temperature!r} must be a number >= 0 (0 = greedy)")
    if top_k is not None and (not is_whole(top_k) or top_k < 1):
        raise ConfigError(f"task.sample.top_k={top_k!r} must be a whole number >= 1, or null (no top-k cut)")
    if new is not None and (not is_whole(new) or new < 0):
        raise ConfigError(f"task.sample.max_new_tokens={new!r} must be a whole number >= 0 (0 = no sample)")
