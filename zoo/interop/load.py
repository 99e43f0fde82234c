"""Any checkpoint zoo reads (a Hugging Face directory or model, a zoo .ckpt or run directory) read once as a
Checkpoint, and its weights loaded into an already built zoo model (load_into: model.init_from)."""

from dataclasses import fields
from pathlib import Path
from typing import NamedTuple

from torch import nn

from zoo.interop import args
from zoo.interop.checkpoints import arch_of, check_state, checkpoint_config, read_zoo_checkpoint
from zoo.interop.hf import from_hf, is_hf_dir
from zoo.model import ModelConfig

# ModelConfig fields that do not change a model's weights or math (load_into does not compare them)
FREE_FIELDS = (
    "dropout",
    "attn_dropout",
    "init",
    "num_classes",
    "pooling",
    "length_classes",
    "pad_id",
    "bos_id",
    "eos_id",
    "decoder_start_id",
    "max_len",
    "prefix_len",
    "window",
    "activation_checkpointing",
    "compile",
    "compile_scope",
    "loss_chunk_size",
)
# zoo weights a fine-tuning model may add on top of a converted checkpoint (initialised fresh)
NEW_HEADS = ("classifier.", "length_head.")


class Checkpoint(NamedTuple):
    """A checkpoint read once (read_checkpoint): its architecture, ModelConfig, zoo state dict, where it was read
    from (for messages), the tokens its objective added past the data's vocabulary (checkpoint_config), and the
    HF family it was converted from (None for a zoo run's)."""

    arch: str
    cfg: ModelConfig
    state: dict
    source: str
    added_tokens: int = 0
    family: str | None = None


def read_checkpoint(dir_or_ckpt) -> Checkpoint:
    """An HF checkpoint directory or model (converted as from_hf does), or a zoo .ckpt / run directory, as a
    Checkpoint. Raises Unsupported (from_hf), and OSError / KeyError for an unreadable zoo checkpoint."""
    args.source("read_checkpoint", "dir_or_ckpt", dir_or_ckpt, Checkpoint)
    if isinstance(dir_or_ckpt, Checkpoint):
        return dir_or_ckpt
    if isinstance(dir_or_ckpt, nn.Module) or is_hf_dir(Path(dir_or_ckpt)):
        model, cfg = from_hf(dir_or_ckpt)
        return Checkpoint(
            arch_of(model),
            cfg,
            model.state_dict(),
            str(dir_or_ckpt) if not isinstance(dir_or_ckpt, nn.Module) else type(dir_or_ckpt).__name__,
            family=model.hf_family,
        )
    ckpt = read_zoo_checkpoint(dir_or_ckpt)
    hp = ckpt["hyper_parameters"]
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    cfg, added = checkpoint_config(hp)
    family = (ckpt.get("zoo_interop") or {}).get("hf_family")
    return Checkpoint(hp["arch"], cfg, state, str(dir_or_ckpt), added, family)


def config_of(dir_or_ckpt) -> tuple[str, ModelConfig]:
    """(arch, ModelConfig) a checkpoint's weights need (read_checkpoint). For model.init_from: build the model
    from these fields (data-given vocab / ids / num_classes may override; load_into checks the rest)."""
    ckpt = read_checkpoint(dir_or_ckpt)
    return ckpt.arch, ckpt.cfg


def load_into(zoo_model: nn.Module, dir_or_ckpt) -> nn.Module:
    """Copy the weights of an HF checkpoint directory (or model), a zoo .ckpt / run directory, or a Checkpoint
    already read, into an already built zoo model of the same architecture and config (FREE_FIELDS may differ;
    new classifier / length heads keep their init). Returns zoo_model. Raises ValueError naming the first
    config field that differs, or the mismatching key and both shapes."""
    arch, cfg, state, where = read_checkpoint(dir_or_ckpt)[:4]
    if arch != arch_of(zoo_model):
        raise ValueError(
            f"{where} holds a {arch} model, but this model is {arch_of(zoo_model)}; build it with +arch={arch}"
        )
    for f in fields(ModelConfig):
        if f.name in FREE_FIELDS:
            continue
        a, b = getattr(cfg, f.name), getattr(zoo_model.cfg, f.name)
        if a != b:
            raise ValueError(
                f"model.{f.name}: the checkpoint {where} has {a!r}, this model {b!r}; set "
                f"model.{f.name}={a} (zoo.interop.load.config_of gives the whole config)"
            )
    own = zoo_model.state_dict()
    state = {k: v for k, v in state.items() if not k.startswith(NEW_HEADS) or (k in own and own[k].shape == v.shape)}
    check_state(zoo_model, state, allow_missing=NEW_HEADS)
    zoo_model.load_state_dict(state, strict=False)
    return zoo_model
