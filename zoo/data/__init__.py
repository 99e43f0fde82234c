"""Datasets for zoo: a checksum-verifying file resolver and Lightning data modules."""

from zoo.data.bpe import (
    BOS_ID,
    CLS_ID,
    EOS_ID,
    MASK_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    SubwordTokenizer,
    load_or_train,
    train_bpe,
)

_LAZY = {"SST2": "zoo.data.sst2", "Multi30k": "zoo.data.multi30k"}  # import lightning only when used

__all__ = [
    "BOS_ID",
    "CLS_ID",
    "EOS_ID",
    "MASK_ID",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "UNK_ID",
    "SubwordTokenizer",
    "load_or_train",
    "train_bpe",
    *_LAZY,
]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'zoo.data' has no attribute {name!r}")
