"""Checks of the model config against the data: the special ids the data's tokenizer gives, a valid
ModelConfig, and the data's sizes within model.max_len."""

import re
from dataclasses import fields

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from zoo.errors import ConfigError, is_whole
from zoo.model import ModelConfig
from zoo.run.model_config import model_dict
from zoo.tasks.objectives import arch_rules


def _ids_fit(model: dict) -> int:
    """A vocabulary size that holds every special id of `model` (the data gives the real one, checked then)."""
    ids = [v for k, v in model.items() if k.endswith("_id") and isinstance(v, int) and not isinstance(v, bool)]
    return max([0, *ids]) + 1


def check_special_ids(cfg: DictConfig, task_cls) -> None:
    """The special ids the data gives the model (zoo's fixed ones, or a pretrained tokenizer.json's, read
    here) agree with the model config's, and the model config is a valid ModelConfig."""
    from zoo.data.bpe import FIXED_IDS

    data_cls = get_class(cfg.data._target_) if cfg.data.get("_target_") else None
    ids = (
        data_cls.config_ids(cfg.data)
        if hasattr(data_cls, "config_ids")
        else {"model": getattr(data_cls, "special_ids", {}), "roles": None, "pretrained": None}
    )
    set_here = (
        {o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}
        if HydraConfig.initialized()
        else set()
    )
    default = {f.name: f.default for f in fields(ModelConfig)}
    model = model_dict(cfg)
    if ids["pretrained"]:  # its ids replace the config's (a contradicting override is refused below)
        model.update(ids["model"])
    try:
        ModelConfig(**{**model, "vocab_size": model.get("vocab_size") or _ids_fit(model)})  # or from the data
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    for key, data_id in ids["model"].items():
        value = cfg.model.get(key, data_id)
        # zoo's tokenizers: any other value; a pretrained one: a value set on purpose (not the model default)
        if value != data_id and (not ids["pretrained"] or value != default[key] or f"model.{key}" in set_here):
            whose = (
                f"the tokenizer {ids['pretrained']}"
                if ids["pretrained"]
                else f"data={cfg.data._target_.rsplit('.', 1)[-1]}'s tokenizer"
            )
            raise ConfigError(
                f"model.{key}={value}, but {whose} puts that token at {data_id}; set "
                f"model.{key}={data_id} (or drop the override)"
            )
    if ids["pretrained"] and arch_rules(task_cls.BATCH, cfg.arch)["fixed_ids"]:
        # the non-autoregressive task writes zoo.data.bpe's constants (CLS_ID, MASK_ID, ...) into its inputs
        wrong = {
            r: ids["roles"].get(r) for r in ("pad", "bos", "eos", "mask", "cls") if ids["roles"].get(r) != FIXED_IDS[r]
        }
        if wrong:
            raise ConfigError(
                f"+arch=encoder_only translation (non-autoregressive) needs zoo's fixed special ids "
                f"({', '.join(f'{r}={FIXED_IDS[r]}' for r in wrong)}), but the tokenizer "
                f"{ids['pretrained']} has {', '.join(f'{r}={i}' for r, i in wrong.items())}; use "
                f"data.tokenizer=bpe (or a tokenizer.json zoo trained), or +arch=encoder_decoder or "
                f"decoder_only"
            )


def check_lengths(cfg: DictConfig, task_cls) -> None:
    """The data's sizes are positive integers, and its sequences fit in model.max_len."""
    for key in (
        "block_size",
        "batch_size",
        "max_len",
        "max_tokens",
        "vocab_size",
        "batches_per_epoch",
        "val_windows",
        "limit",
    ):
        n = cfg.data.get(key)
        if n is not None and (not is_whole(n) or n < 1):
            raise ConfigError(f"data.{key}={n!r} must be a positive integer")
    for key in ("block_size", "max_len"):
        n = cfg.data.get(key)
        if n is None:
            continue
        if arch_rules(task_cls.BATCH, cfg.arch)["joins"]:
            n, key = 2 * n, f"2 x data.{key} (source + target in one sequence)"
        else:
            key = source_key(cfg.data, key, "data")
        if n > cfg.model.max_len:
            raise ConfigError(
                f"{key}={n} is larger than model.max_len={cfg.model.max_len}; lower it or raise model.max_len"
            )


def source_key(node: DictConfig, key: str, path: str) -> str:
    """The key a message names for node[key] (at `path`): scaling.block_size when its value is the plain
    interpolation ${scaling.block_size} (experiment=scaling's data.block_size), the key the user sets; else
    path.key."""
    raw = OmegaConf.to_container(node, resolve=False).get(key)
    m = re.fullmatch(r"\$\{([A-Za-z_][\w.]*)\}", raw) if isinstance(raw, str) else None
    return m.group(1) if m else f"{path}.{key}"
