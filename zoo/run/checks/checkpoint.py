"""The check of a resumed run's checkpoint (ckpt_path): a file of the same task, architecture and model
shape, with steps left to train."""

from pathlib import Path

from hydra.utils import get_class
from omegaconf import DictConfig

from zoo.errors import ConfigError
from zoo.model.checkpoint_file import read_checkpoint_file
from zoo.run.model_config import FROM_DATA, RUNTIME, model_dict


def check_checkpoint(cfg: DictConfig) -> None:
    """ckpt_path must exist and come from the same architecture and model shape (ConfigError otherwise)."""
    path = cfg.get("ckpt_path")
    if path is None:
        return
    if Path(path).is_dir():
        last = Path(path) / "checkpoints" / "last.ckpt"
        hint = f"ckpt_path={last}" if last.is_file() else "a .ckpt file from its checkpoints/ dir"
        raise ConfigError(
            f"ckpt_path={path} is a folder; a resumed run continues from one checkpoint file: pass {hint}"
        )
    if not Path(path).is_file():
        raise ConfigError(f"ckpt_path={path} does not exist; pass a .ckpt file from a run's checkpoints/ dir")
    ckpt = read_checkpoint_file(path, "pass a .ckpt file from a run's checkpoints/ dir", ConfigError)
    hp = ckpt.get("hyper_parameters", {})
    task_name = get_class(cfg.task._target_).__name__
    if ckpt.get("zoo_task", task_name) != task_name:
        raise ConfigError(
            f"ckpt_path={path} was trained by task {ckpt['zoo_task']}, but this run's task is "
            f"{task_name}; resume with the task (and data) it was trained on"
        )
    if hp.get("arch") != cfg.arch:
        raise ConfigError(
            f"ckpt_path={path} was trained with +arch={hp.get('arch')}, but this run is "
            f"+arch={cfg.arch}; resume with +arch={hp.get('arch')} or start without ckpt_path"
        )
    model = {k: v for k, v in model_dict(cfg).items() if k not in FROM_DATA + RUNTIME}
    if cfg.model.get("init_from"):  # the shape is the init checkpoint's (zoo.interop.init_from), checked when built
        model = {}
    diff = {k: (hp["model"].get(k), v) for k, v in model.items() if hp["model"].get(k) != v}
    if diff:
        raise ConfigError(f"ckpt_path={path} was trained with other model settings (checkpoint, now): {diff}")
    max_steps = cfg.trainer.get("max_steps", -1)
    if max_steps is not None and 0 < max_steps <= ckpt.get("global_step", 0):
        raise ConfigError(
            f"ckpt_path={path} has already trained {ckpt['global_step']} steps; resuming needs "
            f"trainer.max_steps above that (now {max_steps})"
        )
