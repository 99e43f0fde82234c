"""Argument checks at the top of zoo.interop's public functions: a wrong type or an empty path is refused with a
ValueError naming the function, the argument and the value, before anything is loaded or written (an empty path
would otherwise read or write the current directory)."""

import os
from pathlib import Path

import torch
from torch import nn


def path(func: str, name: str, value) -> Path:
    """`value` as a Path: a non-empty str or os.PathLike. Raises ValueError naming func, name and value."""
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ValueError(f"{func}: {name}={value!r} is not a path; give a file or directory path")
    return Path(value)


def source(func: str, name: str, value, *also: type) -> None:
    """`value` is a transformers / zoo model (nn.Module), one of `also`'s types, or a path (path)."""
    if not isinstance(value, (nn.Module, *also)):
        path(func, name, value)


def out_dir(func: str, value) -> Path:
    """`value` as the Path of a directory to write: a path that is not an existing file."""
    p = path(func, "out_dir", value)
    if p.exists() and not p.is_dir():
        raise ValueError(
            f"{func}: out_dir={str(value)!r} is a file; it writes a folder (config.json, weights): name one"
        )
    return p


def optional(func: str, name: str, value, kind: type | tuple[type, ...], what: str) -> None:
    """`value` is None or an instance of `kind` (described as `what`); raises ValueError naming it."""
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"{func}: {name}={value!r} ({type(value).__name__}) is not {what}")


def state_dict(func: str, name: str, value) -> None:
    """`value` is a {str: torch.Tensor} dict; raises ValueError naming the first bad key or value."""
    if not isinstance(value, dict):
        raise ValueError(f"{func}: {name} must be a dict of tensors, got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, torch.Tensor):
            raise ValueError(f"{func}: {name}[{k!r}] is a {type(v).__name__}; a state dict maps names to tensors")
