"""Checks of the trainer config's values Lightning would take without a clear message: gradient clipping,
precision, and a weight-averaging callback under FSDP."""

from hydra.utils import get_class
from omegaconf import DictConfig

from zoo.errors import ConfigError, is_number

# the values lightning.pytorch.Trainer(precision=...) accepts (Lightning 2.x), as a command line spells them
PRECISIONS = (
    "32-true",
    "bf16-mixed",
    "16-mixed",
    "bf16-true",
    "16-true",
    "64-true",
    "32",
    "16",
    "bf16",
    "64",
    "transformer-engine",
    "transformer-engine-float16",
)


def check_trainer_values(cfg: DictConfig) -> None:
    """trainer.gradient_clip_val is a number >= 0 (or null), trainer.precision one of PRECISIONS (ConfigError)."""
    clip = cfg.trainer.get("gradient_clip_val")
    if clip is not None and (not is_number(clip) or not clip >= 0):
        raise ConfigError(
            f"trainer.gradient_clip_val={clip!r} must be a number >= 0: the largest gradient norm (0 or null: "
            f"no clipping)"
        )
    precision = cfg.trainer.get("precision")
    if precision is not None and str(precision) not in PRECISIONS:
        raise ConfigError(
            f"trainer.precision={precision!r} is not a precision Lightning runs; pick one of {', '.join(PRECISIONS)} "
            f"(32-true on any machine; bf16-mixed on a recent CPU or GPU)"
        )


def check_weight_averaging(cfg: DictConfig) -> None:
    """A weight-averaging callback (callbacks=ema) keeps a full copy of the weights, which FSDP's shards
    cannot give it: refuse the two together (ConfigError)."""
    from lightning.pytorch.callbacks import WeightAveraging

    strategy = cfg.trainer.get("strategy")
    target = strategy.get("_target_") if isinstance(strategy, DictConfig) else strategy
    if "fsdp" not in str(target or "").lower():
        return
    for name, cb in (cfg.get("callbacks") or {}).items():
        if isinstance(cb, DictConfig) and cb.get("_target_") and issubclass(get_class(cb._target_), WeightAveraging):
            raise ConfigError(
                f"callbacks.{name} ({cb._target_}) averages full copies of the weights, and trainer=fsdp shards "
                f"them: use trainer=ddp with it, or another callbacks option (callbacks=default)"
            )
