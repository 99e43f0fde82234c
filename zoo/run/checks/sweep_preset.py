"""A sweep preset (experiment=compare, experiment=scaling, ...) run without -m: one line saying how to run it."""

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from zoo.errors import ConfigError


def unset_swept_keys(cfg: DictConfig) -> list[str]:
    """The keys of hydra.sweeper.params that a single run (no -m) leaves without a value: a config group with no
    choice (+arch) or a key that is not in the config. [] outside a single run or where nothing is swept."""
    if not HydraConfig.initialized():
        return []
    hc = HydraConfig.get()
    params = hc.sweeper.get("params") or {}
    if hc.mode != RunMode.RUN:
        return []
    choices = hc.runtime.choices
    unset = []
    for key in map(str, params):
        name = key.lstrip("+~")
        value = choices.get(name) if name in choices else OmegaConf.select(cfg, name, default=None)
        if value is None:
            unset.append(key)
    return unset


def check_not_a_lone_sweep(cfg: DictConfig) -> None:
    """Raises ConfigError where the command is a single run (no -m) of an experiment= that sweeps its jobs over
    hydra.sweeper.params and leaves one of those keys without a value: Hydra runs none of the sweep's jobs, and
    the one run it makes is incomplete (no architecture, no benchmark)."""
    unset = unset_swept_keys(cfg)
    if unset:
        name = HydraConfig.get().runtime.choices.get("experiment") or "this config"
        raise ConfigError(
            f"experiment={name} sweeps {', '.join(unset)} (hydra.sweeper.params), which this run leaves unset: "
            f"run the sweep with -m (python -m zoo -m experiment={name} ...), or one of its jobs by giving each "
            "a value"
        )
