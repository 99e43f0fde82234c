"""The check of the metrics that pick something (the best checkpoint, a sweep's objective): the task logs
them, and their directions agree with their modes."""

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from zoo.errors import ConfigError
from zoo.tasks.base import metric_mode


def check_monitors(cfg: DictConfig, metrics, task_name: str) -> None:
    """Every metric that picks something (task.monitor: the best checkpoint; optimized_metric: a sweep's
    objective, whose direction a sweeper such as Optuna's also sets; a callback's own `monitor`, e.g.
    callbacks.model_checkpoint.monitor) must be one the task logs
    (`metrics`; empty: unchecked), and its direction must be its mode's: min for a loss, max for an accuracy
    or BLEU (zoo.tasks.base.metric_mode, the rule of results.json's `best`). A contradiction would keep the
    worst checkpoint, or sweep toward the worst run. Raises ConfigError naming the key and the fix."""
    mode = cfg.task.get("monitor_mode", "min")
    if mode not in ("min", "max"):
        raise ConfigError(f"task.monitor_mode={mode!r} is unknown; allowed: min, max")
    picks = [
        ("task.monitor", cfg.task.get("monitor"), "task.monitor_mode", mode),
        ("optimized_metric", cfg.get("optimized_metric"), "task.monitor_mode", mode),
    ]
    for name, cb in (cfg.get("callbacks") or {}).items():
        if isinstance(cb, DictConfig) and cb.get("monitor") is not None:
            picks.append((f"callbacks.{name}.monitor", cb.monitor, f"callbacks.{name}.mode", cb.get("mode", "min")))
    for key, name, _, _ in picks:
        if metrics and name is not None and name not in metrics:
            raise ConfigError(
                f"{key}={name} is not a validation metric of {task_name} with +arch={cfg.arch}; it "
                f"logs {', '.join(metrics)}"
            )
    monitor, optimized = cfg.task.get("monitor"), cfg.get("optimized_metric")
    if monitor is not None and optimized is not None and metric_mode(monitor) != metric_mode(optimized):
        raise ConfigError(
            f"task.monitor={monitor} and optimized_metric={optimized} point in opposite directions "
            f"(one is better lower, one higher), and task.monitor_mode serves both; choose metrics "
            f"that agree (optimized_metric defaults to task.monitor)"
        )

    def better(name: str) -> str:
        return "lower" if metric_mode(name) == "min" else "higher"

    for key, name, mode_key, its_mode in picks:
        if name is not None and metric_mode(name) != its_mode:  # the best checkpoint (or a sweep) would be the worst
            raise ConfigError(
                f"{key}={name} is better {better(name)}, but {mode_key}={its_mode}; add {mode_key}={metric_mode(name)}"
            )
    direction = HydraConfig.get().sweeper.get("direction") if HydraConfig.initialized() else None
    if isinstance(direction, str) and direction in ("minimize", "maximize") and optimized is not None:
        if direction != metric_mode(optimized) + "imize":  # a sweep (Optuna) toward the worst runs
            raise ConfigError(
                f"hydra.sweeper.direction={direction}, but optimized_metric={optimized} is better "
                f"{better(optimized)}; leave the direction to hparams_search (it follows "
                f"task.monitor_mode)"
            )
