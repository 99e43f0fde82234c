"""zoo checkpoints: reading one (a .ckpt or a run directory) into its model, writing a converted model as one, and
checking a state dict against a zoo model."""

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from zoo.interop import args
from zoo.interop.precision import guard_float16
from zoo.model import ARCHITECTURES, ModelConfig, build_model
from zoo.model.checkpoint_file import read_checkpoint_file, run_checkpoint

# files of a Hugging Face checkpoint directory besides config.json (named when config.json is missing)
HF_FILES = ("pytorch_model.bin", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "vocab.txt")


def check_state(model: nn.Module, state: dict[str, torch.Tensor], allow_missing=()) -> None:
    """Raise ValueError naming the first key of `state` the model lacks, whose shape differs (both shapes), or
    a model key `state` lacks (except those starting with `allow_missing`)."""
    args.optional("check_state", "model", model, nn.Module, "a torch module")
    args.state_dict("check_state", "state", state)
    own = model.state_dict()
    for k, v in state.items():
        if k not in own:
            raise ValueError(f"checkpoint key {k!r} has no place in this zoo model (its keys: {list(own)[:4]} ...)")
        if tuple(v.shape) != tuple(own[k].shape):
            raise ValueError(
                f"shape mismatch at {k!r}: the checkpoint has {tuple(v.shape)}, the zoo model "
                f"{tuple(own[k].shape)}; build the model with the checkpoint's config"
            )
    missing = [k for k in own if k not in state and not k.startswith(tuple(allow_missing))]
    if missing:
        raise ValueError(f"the checkpoint has no {missing[0]!r} (and {len(missing) - 1} more) for this zoo model")


def arch_of(model: nn.Module) -> str:
    """encoder_only | decoder_only | encoder_decoder of a zoo model. Raises ValueError for anything else."""
    for name, cls in ARCHITECTURES.items():
        if type(model) is cls:
            return name
    raise ValueError(
        f"{type(model).__name__} is not a zoo model ({', '.join(c.__name__ for c in ARCHITECTURES.values())})"
    )


def read_zoo_checkpoint(path: str | Path) -> dict:
    """A zoo Lightning checkpoint: a .ckpt file, or a run directory (zoo.model.checkpoint_file.run_checkpoint:
    results.json's best_checkpoint, else checkpoints/last.ckpt, else its newest checkpoints/*.ckpt), read safely
    on the CPU. Raises FileNotFoundError saying what it looked for (and, for a directory of Hugging Face weights
    without config.json, what is missing), ValueError for a file that is not a checkpoint."""
    args.path("read_zoo_checkpoint", "path", path)
    p = Path(path)
    if p.is_dir() and not (p / "results.json").is_file() and not any((p / "checkpoints").glob("*.ckpt")):
        hf_files = sorted(f.name for f in p.iterdir() if f.name in HF_FILES or f.suffix == ".safetensors")
        if hf_files:
            raise FileNotFoundError(
                f"{p} holds Hugging Face files ({', '.join(hf_files)}) but no config.json: transformers' "
                f"save_pretrained writes config.json beside the weights; copy the model's config.json into {p}"
            )
        raise FileNotFoundError(
            f"{p}: no config.json (a Hugging Face checkpoint directory) and no zoo checkpoint (results.json's "
            f"best_checkpoint, checkpoints/last.ckpt or checkpoints/*.ckpt)"
        )
    found, _ = run_checkpoint(p)
    return read_checkpoint_file(found, "pass a zoo .ckpt file, a zoo run's directory or a Hugging Face directory")


def checkpoint_config(hp: dict) -> tuple[ModelConfig, int]:
    """(the ModelConfig that rebuilds a zoo checkpoint's weights, the tokens its objective added past the data's
    vocabulary) from its hyper_parameters: masked_lm adds <mask> (zoo.tasks.lm), 1; every other objective 0.
    A masked_lm checkpoint saved before hyper_parameters held mask_id has the data's vocab_size: one row less
    than its embedding, counted back in here. Raises ValueError for an unknown model key."""
    if not isinstance(hp, Mapping) or not isinstance(hp.get("model"), Mapping):
        raise ValueError(
            f"checkpoint_config: hp must be a checkpoint's hyper_parameters (a dict with a model dict), got {hp!r:.80}"
        )
    model = dict(hp["model"])
    added = 1 if hp.get("objective") == "masked_lm" else 0
    if added and hp.get("mask_id") is None:
        model["vocab_size"] += added
    return ModelConfig.from_dict(model), added


def model_from_checkpoint(ckpt: dict) -> nn.Module:
    """The zoo model of a loaded zoo checkpoint (hyper_parameters {arch, model}, state_dict "model.*"), eval mode,
    in the dtype of its weights when they have one (bfloat16 stays bfloat16); a zoo.convert checkpoint's model
    keeps its HF special ids (hf_special_ids) and generation settings (hf_generation). Raises ValueError for a
    checkpoint that is not zoo's, or whose weights do not fit its config (check_state)."""
    args.optional("model_from_checkpoint", "ckpt", ckpt, Mapping, "a loaded checkpoint (a dict)")
    hp = ckpt.get("hyper_parameters", {})
    if "arch" not in hp or "model" not in hp:
        raise ValueError("not a zoo checkpoint: hyper_parameters needs arch and model")
    model = build_model(hp["arch"], checkpoint_config(hp)[0])
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    check_state(model, state)
    dtypes = {v.dtype for v in state.values() if v.is_floating_point()}
    if len(dtypes) == 1:  # weights saved in bfloat16 (a bf16-true run, a converted model) stay bfloat16
        model.to(dtypes.pop())
    model.load_state_dict(state)
    interop = ckpt.get("zoo_interop") or {}
    if interop.get("hf_special_ids") is not None:
        model.hf_special_ids, model.hf_family = dict(interop["hf_special_ids"]), interop.get("hf_family")
        model.hf_generation = interop.get("hf_generation")
        guard_float16(model, model.hf_family)
    return model.eval()


def zoo_checkpoint(model: nn.Module, tokenizer: dict | None = None, source: str = "") -> dict:
    """A checkpoint dict as zoo's tasks save them (hyper_parameters {arch, model, tokenizer}, state_dict with
    keys "model.*"), loadable by model_from_checkpoint and zoo.generate-style loaders; "zoo_interop" records the
    source and, for a converted model, its HF special ids, family and generation settings."""
    args.optional("zoo_checkpoint", "tokenizer", tokenizer, Mapping, "a tokenizer state (a dict)")
    hp = {"arch": arch_of(model), "model": asdict(model.cfg)}
    if tokenizer is not None:
        hp["tokenizer"] = tokenizer
    interop = {"source": source}
    for key in ("hf_special_ids", "hf_family", "hf_generation"):
        if getattr(model, key, None) is not None:
            interop[key] = getattr(model, key)
    return {
        "hyper_parameters": hp,
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
        "zoo_interop": interop,
    }
