"""`model.init_from=DIR`: start a run from converted weights instead of a fresh init (fine-tuning).

DIR is a Hugging Face checkpoint directory (GPT-2, BERT, Marian, BART, T5: zoo.interop.hf), a zoo .ckpt or a
zoo run directory. The model's shape comes from the checkpoint (zoo.interop.load.config_of); the run may still
set what does not change the weights (USER_FIELDS: dropout, compile, ...), and the data sets the class count
and the special ids. A tokenizer.json in DIR becomes the data's tokenizer (its ids are the embedding's rows)
unless data.tokenizer names another file. New heads (a classifier on a BERT, a length head) start fresh.
"""

import logging
from dataclasses import asdict
from pathlib import Path

import torch
from omegaconf import DictConfig, open_dict

from zoo.errors import InitFromError

log = logging.getLogger("zoo")

# model keys a fine-tuning run may set itself; the rest of the shape is the checkpoint's
USER_FIELDS = (
    "dropout",
    "attn_dropout",
    "activation_checkpointing",
    "compile",
    "compile_scope",
    "loss_chunk_size",
    "num_classes",
    "length_classes",
)
FROM_DATA_IDS = ("num_classes", "pad_id", "bos_id", "eos_id")


def init_source(cfg: DictConfig) -> dict | None:
    """Read model.init_from (None: no init) before any data work, once: {"path", "arch", "model": the
    checkpoint's ModelConfig fields, "checkpoint": the zoo.interop.load.Checkpoint that load_weights copies}.
    Points data.tokenizer at DIR/tokenizer.json when DIR has one and the data would train its own (bpe / char).
    "model" holds the data's vocab_size: a masked_lm checkpoint's embedding has one row more, its <mask>.
    Raises InitFromError for a missing path, an unreadable checkpoint, an architecture other than +arch, or a
    trainer.precision the checkpoint's HF family does not run in (zoo.interop.precision.HALF_REFUSED: T5 in float16)."""
    raw = cfg.model.get("init_from")
    if not raw:
        return None
    path = Path(str(raw)).expanduser()
    if not path.exists():
        raise InitFromError(
            f"model.init_from={raw}: not found; pass a Hugging Face checkpoint directory, a zoo .ckpt "
            f"or a zoo run directory"
        )
    from zoo.interop.load import read_checkpoint

    try:
        checkpoint = read_checkpoint(path)
    except (ValueError, KeyError, OSError) as e:
        raise InitFromError(f"model.init_from={raw}: {e}") from None
    arch = checkpoint.arch
    if arch != cfg.arch:
        raise InitFromError(
            f"model.init_from={raw} holds a {arch} model, but this run is +arch={cfg.arch}; use +arch={arch}"
        )
    precision = str(cfg.get("trainer", {}).get("precision", "32-true"))
    if checkpoint.family is not None and precision.startswith("16"):
        from zoo.interop.precision import HALF_REFUSED

        why = HALF_REFUSED.get((checkpoint.family, torch.float16))
        if why is not None:
            raise InitFromError(f"model.init_from={raw} with trainer.precision={precision}: {why}")
    tok = path / "tokenizer.json" if path.is_dir() else None
    if tok is not None and tok.is_file() and cfg.data.get("tokenizer", "bpe") in ("bpe", "char"):
        with open_dict(cfg):
            cfg.data.tokenizer = str(tok)
        log.info("data.tokenizer=%s (the checkpoint's own, whose ids are its embedding rows)", tok)
    model = asdict(checkpoint.cfg)
    model["vocab_size"] -= checkpoint.added_tokens  # the data's vocabulary: the task adds masked_lm's <mask> again
    return {"path": str(path), "arch": arch, "model": model, "checkpoint": checkpoint}


def init_model_config(source: dict, run_model: dict, info: dict) -> dict:
    """The ModelConfig fields of a run that starts from `source` (init_source): the checkpoint's, with the
    run's USER_FIELDS and the data's class count and special ids. Raises InitFromError when the data's
    vocabulary size differs from the checkpoint's (the tokenizer is not the checkpoint's)."""
    model = dict(source["model"])
    for key in ("vocab_size", "src_vocab_size"):
        want, have = model.get(key), info.get(key)
        if key == "src_vocab_size" and want is None:
            want = model["vocab_size"]
        if have is not None and want is not None and have != want:
            raise InitFromError(
                f"model.init_from={source['path']} has {key}={want}, but the data's tokenizer gives "
                f"{have}; train with the checkpoint's tokenizer (data.tokenizer=<its tokenizer.json>)"
            )
    model.update({k: run_model[k] for k in USER_FIELDS if k in run_model and run_model[k] is not None})
    model.update({k: info[k] for k in FROM_DATA_IDS if k in info})
    return model


def load_weights(model, source: dict) -> None:
    """Copy the checkpoint's weights into the built model (zoo.interop.load.load_into). Raises InitFromError
    naming the first field or key that differs."""
    from zoo.interop.load import load_into

    try:
        load_into(model, source["checkpoint"])
    except ValueError as e:
        raise InitFromError(f"model.init_from={source['path']}: {e}") from None
    log.info("model.init_from: weights of %s", source["path"])
