"""check_config: every check of a composed config before any data is read or a model built, in order; each
raises ConfigError with the key at fault and the fix. The checks live in this package by what they check."""

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from zoo.errors import ConfigError
from zoo.run.checks.model import check_lengths, check_special_ids
from zoo.run.checks.run_length import check_run_end, check_run_length
from zoo.run.checks.task import check_decoding, check_task_and_data, check_task_options
from zoo.run.checks.trainer import check_trainer_values, check_weight_averaging
from zoo.run.plan import RunPlan
from zoo.run.results import job_overrides
from zoo.run.settings_read import check_settings_read


def check_missing(cfg: DictConfig) -> None:
    """Raise ConfigError naming every key the composed config leaves unset (??? in its YAML, e.g. data.file of
    data=text_corpus), before anything reads one and fails with OmegaConf's MissingMandatoryValue."""

    def walk(node, prefix):  # the unresolved config: interpolations (e.g. into hydra's runtime keys) stay text
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if value == "???":
                yield f"{prefix}{key}"
            else:
                yield from walk(value, f"{prefix}{key}.")

    plain = OmegaConf.to_container(cfg, resolve=False)
    missing = sorted(m for k, v in plain.items() if k != "hydra" for m in walk({k: v}, ""))
    if missing:
        keys = ", ".join(missing)
        raise ConfigError(
            f"{keys} {'is' if len(missing) == 1 else 'are'} not set (??? in the config): give "
            f"{' '.join(f'{k}=...' for k in missing)} on the command line (e.g. data.file=PATH for "
            f"data=text_corpus) or in your config"
        )


def given_overrides(cfg: DictConfig) -> list:
    """The command line's overrides of the job `cfg`: its own hydra.overrides.task when it carries them (a config
    composed with its Hydra node), else the running Hydra job's (zoo.run.results.job_overrides)."""
    own = OmegaConf.select(cfg, "hydra.overrides.task", default=None)
    return list(own) if own is not None else job_overrides()


def check_data_keys(cfg: DictConfig) -> None:
    """A dataset is selected, and its config holds only keys its datamodule takes (ConfigError otherwise)."""
    if cfg.get("data") is None:
        raise ConfigError("no dataset selected: add data=tiny_shakespeare (or another option of conf/data/)")
    from zoo.data.config_keys import data_key_problems

    typos = data_key_problems(cfg.data)  # a key the datamodule does not take, e.g. text_colum in a YAML file
    if typos:
        raise ConfigError("\nzoo: error: ".join(typos))


def check_config(cfg: DictConfig) -> RunPlan:
    """Raise ConfigError (a ValueError) for a bad model config or contradictions between groups. Returns the
    run's plan (zoo.run.plan.RunPlan.from_config: the objective, chosen once, with the model fields it reads
    checked), before any data is read."""
    check_missing(cfg)
    check_data_keys(cfg)
    check_run_end(cfg)
    check_settings_read(cfg, given_overrides(cfg))  # a schedule or mask setting the run's choices would not read
    check_trainer_values(cfg)
    task_cls = get_class(cfg.task._target_)
    plan = check_task_and_data(cfg, task_cls)
    check_special_ids(cfg, task_cls)
    check_task_options(cfg)
    check_lengths(cfg, task_cls)
    check_weight_averaging(cfg)
    check_run_length(cfg)
    check_decoding(cfg)
    return plan
