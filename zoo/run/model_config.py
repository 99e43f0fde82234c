"""The model fields a run takes from its config and its data: `from_data` gives the ModelConfig fields of the
model group (conf/model/), the data (its sizes and special ids; with model.init_from, the checkpoint's
shape); zoo.run.plan.RunPlan.with_data adds the objective's fields to them, once, before the task is built.
The task saves what it is given, so a checkpoint rebuilds the same shapes. ModelConfig.validate checks the
result."""

from omegaconf import DictConfig, OmegaConf

from zoo.errors import ConfigError
from zoo.interop.init_from import init_model_config

# model keys the datamodule fills in (the special ids: its tokenizer's, zoo.data.bpe)
FROM_DATA = ("vocab_size", "src_vocab_size", "num_classes", "pad_id", "bos_id", "eos_id")
# model keys that do not change the math: free to change on resume
RUNTIME = ("compile", "compile_scope", "activation_checkpointing")


def model_dict(cfg: DictConfig) -> dict:
    """The model group as ModelConfig keyword arguments (resolved, without _target_)."""
    return {
        k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k not in ("_target_", "init_from")
    }  # init_from: weights to start from (zoo.interop.init_from)


def from_data(cfg: DictConfig, info: dict, source, data_name: str) -> dict:
    """The run's ModelConfig fields: the model group's, with the data's vocabulary sizes, class count and
    special ids (`info`, the datamodule's model_info); with model.init_from (`source`, zoo.interop.init_from), the
    checkpoint's shape. Raises ConfigError for a model.num_classes the data does not have."""
    model = model_dict(cfg)
    wanted = model.get("num_classes") or 0  # 0 (conf/model): the data's count
    if "num_classes" in info and wanted and wanted != info["num_classes"]:
        classes = info.get("classes") or []
        raise ConfigError(
            f"model.num_classes={wanted}, but the data ({data_name}) has {info['num_classes']} classes"
            + (f" ({', '.join(map(str, classes))})" if 0 < len(classes) <= 10 else "")
            + "; drop the override (model.num_classes=0, the default, takes the data's count)"
        )
    model.update({k: info[k] for k in FROM_DATA if k in info})
    if source is not None:
        model = init_model_config(source, model, info)
    return model
