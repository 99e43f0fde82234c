"""The special-token ids a zoo model writes to Hugging Face: a converted model's own (its source's every
`*_token_id`), else its tokenizer's roles, else its ModelConfig's; never a zoo placeholder (zoo_ids)."""

from torch import nn

from zoo.interop.families.config import zoo_ids
from zoo.interop.hf_tokenizer import roles_of

# the special-token ids of an HF config.json, each an id or None (GPT-2 has no pad, BERT no bos / eos)
HF_IDS = ("pad_token_id", "bos_token_id", "eos_token_id")


def source_token_ids(config) -> dict:
    """Every `*_token_id` of an HF config (pad / bos / eos, decoder_start, BART's and Marian's
    forced_eos_token_id, ...), each an id or None, pad / bos / eos always present: what to_hf writes back."""
    ids = {k: v for k, v in config.to_dict().items() if k.endswith("_token_id")}
    return {**{k: getattr(config, k, None) for k in HF_IDS}, **ids}


def keeps_hf_ids(model: nn.Module) -> bool:
    """Whether `model` was converted from HF (model.hf_special_ids) and its ModelConfig still holds the ids
    HF's became (zoo_ids of them): then its source's ids and generation settings are its own."""
    hf, cfg = getattr(model, "hf_special_ids", None), model.cfg
    return bool(hf) and zoo_ids(*(hf.get(k) for k in HF_IDS), cfg.vocab_size) == {
        "pad_id": cfg.pad_id,
        "bos_id": cfg.bos_id,
        "eos_id": cfg.eos_id,
    }


def export_special_ids(model: nn.Module, tokenizer=None) -> dict:
    """The {pad, bos, eos}_token_id to_hf writes for `model` (each an id, or None for a role the model's
    tokens do not have), never a zoo placeholder id (zoo_ids, SubwordTokenizer.model_ids):
    - a model converted from HF (model.hf_special_ids, from from_hf or a zoo.convert checkpoint) gives HF's own
      ids back, every `*_token_id` of the source's config.json (decoder_start, forced_eos, ...), while its
      ModelConfig still holds the ids they became (zoo_ids of them);
    - else, with a tokenizer that has a tokenizer.json: its pad / bos / eos tokens' ids (zoo.data.bpe's roles;
      None where it has none, e.g. GPT-2's pad);
    - else the ModelConfig's pad_id / bos_id / eos_id (zoo's own tokenizers: 0, 1, 2)."""
    cfg = model.cfg
    own = {"pad_token_id": cfg.pad_id, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id}
    if keeps_hf_ids(model):
        hf = model.hf_special_ids
        return {**{k: hf.get(k) for k in HF_IDS}, **hf}
    roles = roles_of(tokenizer)
    if roles is not None:
        return {f"{r}_token_id": roles.get(r) for r in ("pad", "bos", "eos")}
    return own
