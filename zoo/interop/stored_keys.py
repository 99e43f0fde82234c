"""The keys a Hugging Face checkpoint's weight files store, read from the files themselves: transformers' loading
report leaves out the keys its model class ignores (`_keys_to_ignore_on_load_unexpected`, e.g. an old T5's
`decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight`), so zoo.interop.hf reads them here to
name every key it does not convert (tests/test_interop_keys.py)."""

import json
import re
from pathlib import Path

import torch
from torch import nn

# the weight files of a checkpoint directory, newest format first: (one file, the index of its shards)
WEIGHT_FILES = (
    ("model.safetensors", "model.safetensors.index.json"),
    ("pytorch_model.bin", "pytorch_model.bin.index.json"),
)


def weight_files(d: Path) -> list[Path]:
    """The weight files transformers reads from checkpoint directory d: the shards an index names, or the one
    file; the first format found (WEIGHT_FILES' order). [] when d has none."""
    for single, index in WEIGHT_FILES:
        if (d / index).is_file():
            return [d / f for f in sorted(set(json.loads((d / index).read_text())["weight_map"].values()))]
        if (d / single).is_file():
            return [d / single]
    return []


def _tensors(f: Path) -> dict:
    """{key: tensor, read on first use} of one weight file (safetensors' safe_open; torch.load with mmap)."""
    if f.suffix != ".safetensors":
        return torch.load(f, map_location="cpu", weights_only=True, mmap=True)
    from safetensors import safe_open

    with safe_open(str(f), "pt") as h:
        keys = list(h.keys())
    return {k: (lambda k=k: _read(f, k)) for k in keys}


def _read(f: Path, key: str) -> torch.Tensor:
    from safetensors import safe_open

    with safe_open(str(f), "pt") as h:
        return h.get_tensor(key)


def is_recomputed(key: str, value: torch.Tensor, recomputed: dict | None) -> bool:
    """Whether `value` is a table zoo computes itself: recomputed {key pattern: f(tensor) -> zoo's own table}
    (a family's, e.g. Marian's sinusoidal positions, GPT-2's causal mask buffers) has a pattern matching `key`
    and its table is within 1e-5 of `value`."""
    own = next((f for p, f in (recomputed or {}).items() if re.fullmatch(p, key)), None)
    return own is not None and torch.allclose(own(value).to(value.dtype), value, atol=1e-5, rtol=0)


def unreported_keys(d: Path, model: nn.Module, info: dict, recomputed: dict | None = None) -> list[str]:
    """The keys of checkpoint directory d's weight files that transformers neither loaded into `model` nor
    reported (info["unexpected_keys"]): the ones its model class ignores. A stored key counts as loaded when the
    model's state dict has it, with or without its base-model prefix, or holds an equal tensor (a key
    transformers renames as it loads, e.g. a legacy LayerNorm.gamma); an integer buffer (position ids) or a
    table zoo computes (is_recomputed) is computed, not loaded. Only those keys' tensors are read."""
    own = model.state_dict()
    prefix = getattr(model, "base_model_prefix", "") + "."
    reported = set(info.get("unexpected_keys") or ())
    out = []
    for f in weight_files(d):
        for k, v in _tensors(f).items():
            if k in reported or any(n in own for n in (k, k.removeprefix(prefix), prefix + k)):
                continue
            v = v() if callable(v) else v
            if (
                v.is_floating_point()
                and not is_recomputed(k, v, recomputed)
                and not any(t.shape == v.shape and torch.equal(t, v.to(t.dtype)) for t in own.values())
            ):
                out.append(k)
    return sorted(out)


def with_unreported(src, model: nn.Module, info: dict, recomputed: dict | None = None) -> dict:
    """`info` (transformers' loading report of `model`, loaded from `src`) with unreported_keys added to its
    unexpected_keys: those of src's checkpoint directory, a local one or a hub id's downloaded snapshot. As it
    is for a model object, whose state dict is all there is."""
    if isinstance(src, nn.Module):
        return info
    from transformers.utils import cached_file

    d = Path(cached_file(str(src), "config.json")).parent
    extra = unreported_keys(d, model, info, recomputed)
    return {**info, "unexpected_keys": sorted({*(info.get("unexpected_keys") or ()), *extra})}
