"""What every family's config map shares: the Family base class (a config.json dict from a ModelConfig, after
refusing at once every option the family cannot hold), HF's activation names, and the special-token ids."""

from typing import ClassVar

from zoo.interop.blockers import Blockers, Unsupported, hydra_value
from zoo.model.config import ModelConfig

# HF activation names (transformers.activations.ACT2FN) <-> zoo's
ACT_FROM_HF = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
ACT_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "swish"}


def get(c, name, default=None):
    """A field of an HF config (a PretrainedConfig or its dict)."""
    return getattr(c, name, default) if not isinstance(c, dict) else c.get(name, default)


def activation_from_hf(c, key: str, who: str) -> str:
    """zoo's name of the HF activation c.<key>. Raises Unsupported naming it (who: the family, as written)."""
    act = get(c, key)
    if act not in ACT_FROM_HF:
        raise Unsupported(f"{who} {key}={act!r} has no zoo equivalent; zoo has {sorted(ACT_FROM_HF)}")
    return ACT_FROM_HF[act]


def zoo_ids(pad, bos, eos, vocab_size: int) -> dict[str, int]:
    """zoo's distinct pad / bos / eos ids from HF's (each may be None, or equal another, e.g. GPT-2's bos = eos).
    Every HF id in [0, vocab_size) that no earlier role (eos, then pad, then bos) holds is kept; a role left
    without one gets a placeholder, the smallest id that is none of HF's three (so a placeholder never takes a
    real special token's id). Placeholders are zoo-only: to_hf writes HF's own ids back (export_special_ids).
    Returns {"pad_id", "bos_id", "eos_id"}. Raises Unsupported for a vocabulary of fewer than 3 tokens."""
    if vocab_size < 3:
        raise Unsupported(f"vocab_size={vocab_size}: zoo needs 3 distinct special ids (pad, bos, eos)")

    def real(i) -> bool:
        return isinstance(i, int) and not isinstance(i, bool) and 0 <= i < vocab_size

    out: dict[str, int] = {}
    for key, i in (("eos_id", eos), ("pad_id", pad), ("bos_id", bos)):
        if real(i) and i not in out.values():
            out[key] = i
    taken = {i for i in (pad, bos, eos) if real(i)}
    free = (j for j in range(vocab_size) if j not in taken)
    for key in ("eos_id", "pad_id", "bos_id"):
        if key not in out:
            out[key] = next(free)
    return {k: out[k] for k in ("pad_id", "bos_id", "eos_id")}


def ids_from_hf(c, vocab_size: int) -> dict[str, int]:
    """zoo_ids of an HF config's pad / bos / eos token ids."""
    return zoo_ids(get(c, "pad_token_id"), get(c, "bos_token_id"), get(c, "eos_token_id"), vocab_size)


class Family:
    """One Hugging Face family: its model_type (name), task class (hf_class), zoo architecture (arch), the HF
    keys its map does not read (ignore: patterns) or that zoo computes itself (recomputed: {pattern: f(tensor)
    -> zoo's own table}), and what a zoo model needs to be written as it: `requires` {ModelConfig field: the
    value, or a tuple of the values, the family holds} and `final_norm` (whether it has one, and why).
    A family module defines config_from_hf, hf_fields, entries and tied, and may add more_blockers."""

    name: ClassVar[str]
    hf_class: ClassVar[str]
    arch: ClassVar[str]
    prefix: ClassVar[str] = ""  # its base model's key prefix in the task model's state dict
    ignore: ClassVar[tuple[str, ...]] = ()
    recomputed: ClassVar[dict | None] = None
    requires: ClassVar[dict] = {}
    final_norm: ClassVar[tuple[bool, str]]

    @classmethod
    def blockers(cls, cfg: ModelConfig) -> Blockers:
        """Every option of cfg the family cannot hold, in this order: what every family refuses (a classifier or
        length head, grouped-query attention), `requires`, the final norm, then more_blockers."""
        b = Blockers(cfg, cls.name, cls.hf_class)
        if cfg.num_classes:
            b.add(f"model.num_classes={cfg.num_classes}", "a classification head; it needs none", "task=lm")
        if cfg.length_classes:
            why = "a target-length head; it needs none"
            b.add(f"model.length_classes={cfg.length_classes}", why, "task.objective=encoder_ar")
        if cfg.n_kv_heads not in (None, cfg.n_heads):
            b.add(f"model.n_kv_heads={cfg.n_kv_heads}", "grouped-query; it needs n_heads", "model.n_kv_heads=null")
        b.require(**cls.requires)
        needed, why = cls.final_norm
        if cfg.use_final_norm != needed:  # model.final_norm, or the value null gives (model.norm_first's)
            why = (f"null follows model.norm_first={cfg.norm_first}; " if cfg.final_norm is None else "") + why
            b.add(f"model.final_norm={cfg.final_norm!r}", why, f"model.final_norm={hydra_value(needed)}")
        cls.more_blockers(b)
        return b

    @classmethod
    def more_blockers(cls, b: Blockers) -> None:
        """Add the family's own blockers of b.cfg (none by default)."""

    @classmethod
    def config_to_hf(cls, cfg: ModelConfig) -> dict:
        """The config.json dict of cfg. Raises Unsupported naming every option the family cannot hold (blockers),
        each with the override that exports."""
        cls.blockers(cfg).refuse()
        ids = {"pad_token_id": cfg.pad_id, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id}
        return {"model_type": cls.name, "architectures": [cls.hf_class], **cls.hf_fields(cfg), **ids}

    @classmethod
    def hf_fields(cls, cfg: ModelConfig) -> dict:
        """The family's own config.json fields of cfg (an exportable one)."""
        raise NotImplementedError
