"""Hugging Face interop: `from_hf` reads a transformers checkpoint (GPT-2, BERT, Marian, BART, T5) into zoo's
blocks, `to_hf` writes a zoo model as a checkpoint that `transformers` loads (config.json + model.safetensors
+ the tokenizer), `load_into` fills an already built zoo model from either kind of checkpoint.

The per-family config and weight maps are zoo.interop.families; needs the `hf` extra (transformers,
safetensors). Exact in fp32: logits agree with transformers' to ~1e-6 at toy size (tests/test_interop_*.py);
float16 / bfloat16 as transformers runs them, or refused (check_dtype). Special-token ids and tokenizer roles
survive HF -> zoo -> HF (export_special_ids, hf_tokenizer_state); every ModelConfig field is held by the
export or refused (tests/test_interop_settings.py).
"""

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, fields
from functools import partial
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from zoo.data.bpe import ROLES
from zoo.interop import args
from zoo.interop.families import (
    ARCH_OF,
    FAMILIES,
    HF_CLASSES,
    SUPPORTED,
    Unsupported,
    family_for,
    family_of,
    zoo_ids,
)
from zoo.interop.stored_keys import with_unreported
from zoo.model import ARCHITECTURES, ModelConfig, build_model
from zoo.model.checkpoint_file import read_checkpoint_file, run_checkpoint

log = logging.getLogger(__name__)

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

_PREFIX = {"gpt2": "transformer.", "bert": "bert.", "marian": "model.", "bart": "model.", "t5": ""}
# the special-token ids of an HF config.json, each an id or None (GPT-2 has no pad, BERT no bos / eos)
HF_IDS = ("pad_token_id", "bos_token_id", "eos_token_id")
# the special-token roles of an HF tokenizer_config.json (SpecialTokensMixin.SPECIAL_TOKENS_ATTRIBUTES), kept as
# they are from a converted checkpoint's tokenizer
HF_ROLES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
    "additional_special_tokens",
    "extra_special_tokens",
)
# files of a Hugging Face checkpoint directory besides config.json (named when config.json is missing)
HF_FILES = ("pytorch_model.bin", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "vocab.txt")
# zoo's roles (zoo.data.bpe.ROLES) -> HF's role names ("pad" -> "pad_token")
_ZOO_ROLES = {role: f"{role}_token" for role in ROLES}


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError("Hugging Face interop needs transformers and safetensors: pip install 'zoo[hf]'") from None
    return transformers


def _is_hf_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def load_hf_model(src) -> tuple[nn.Module, dict]:
    """(the transformers model of `src` (a PreTrainedModel, a local checkpoint directory, or a hub id when
    online) in eval mode, transformers' loading info: {"unexpected_keys", "missing_keys", ...}, empty for a
    model). Raises Unsupported naming the supported families for any other model_type."""
    args.source("load_hf_model", "src", src)
    tf = _transformers()
    if isinstance(src, nn.Module):
        family_of(getattr(getattr(src, "config", None), "model_type", None))
        return src.eval(), {}
    path = Path(src)
    if _is_hf_dir(path):
        config = json.loads((path / "config.json").read_text())
    elif path.exists():
        raise FileNotFoundError(f"{src} has no config.json: pass a Hugging Face checkpoint directory")
    else:  # a hub id (needs the network)
        config = tf.AutoConfig.from_pretrained(str(src)).to_dict()
    family = config.get("model_type")
    family_of(family)
    name = HF_CLASSES[family]
    if family == "bert" and not any(
        a in " ".join(config.get("architectures") or []) for a in ("MaskedLM", "PreTraining")
    ):
        name = "BertModel"  # no MLM head in the checkpoint: zoo's plain tied head
    model, info = getattr(tf, name).from_pretrained(str(src), output_loading_info=True)
    return model.eval(), info


def _state_of(model, family: str) -> tuple[dict[str, torch.Tensor], dict]:
    """The HF model's state dict under its task model's key names, and what is tied or present
    ({"lm_head", "tokens": shared storage; "has_mlm_head"; "logits_bias": a nonzero final_logits_bias})."""
    sd = dict(model.state_dict())
    p = _PREFIX[family]
    if p and not any(k.startswith(p) for k in sd):  # a base model (GPT2Model, BertModel, BartModel, ...)
        sd = {p + k: v for k, v in sd.items()}
    ptr = {k: v.data_ptr() for k, v in sd.items()}
    tied = {"has_mlm_head": "cls.predictions.transform.dense.weight" in sd}
    if family == "gpt2":
        sd.setdefault("lm_head.weight", sd["transformer.wte.weight"])
        tied["lm_head"] = sd["lm_head.weight"].data_ptr() == ptr["transformer.wte.weight"]
    elif family == "bert":
        emb = "bert.embeddings.word_embeddings.weight"
        tied["lm_head"] = tied["has_mlm_head"] and ptr["cls.predictions.decoder.weight"] == ptr[emb]
        if not tied["has_mlm_head"]:
            sd["cls.predictions.decoder.weight"] = sd[emb]
    elif family in ("marian", "bart"):
        dec = "model.decoder.embed_tokens.weight"
        sd.setdefault("lm_head.weight", sd[dec])
        sd.setdefault("final_logits_bias", torch.zeros(1, sd["lm_head.weight"].shape[0]))
        tied.update(
            lm_head=sd["lm_head.weight"].data_ptr() == ptr[dec],
            tokens=ptr["model.encoder.embed_tokens.weight"] == ptr[dec],
            logits_bias=bool(sd["final_logits_bias"].ne(0).any()),
        )
    elif family == "t5":
        sd.setdefault("lm_head.weight", sd["shared.weight"])
        tied.update(
            lm_head=sd["lm_head.weight"].data_ptr() == ptr["shared.weight"],
            tokens=ptr["encoder.embed_tokens.weight"] == ptr["decoder.embed_tokens.weight"],
        )
    return sd, tied


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


# transformers' half-precision guards zoo's blocks lack, per (family, dtype): that precision is refused
HALF_REFUSED = {
    ("t5", torch.float16): (
        "Hugging Face t5 does not run in torch.float16 in zoo: transformers keeps T5's feed-forward output "
        "projection (wo, _keep_in_fp32_modules) in float32 and clamps every block's output to the float16 "
        "range (modeling_t5.py), guards zoo's blocks do not have, and T5's activations overflow float16 without "
        "them (inf, then NaN); use dtype=torch.bfloat16 (the precision T5 was trained in) or torch.float32"
    ),
}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_dtype(family: str, dtype: torch.dtype) -> None:
    """Raise Unsupported unless a converted `family` model runs in `dtype` as transformers runs it: float32 and
    bfloat16 always; float16 except T5 (HALF_REFUSED says why). In float16 / bfloat16 zoo's logits are then as
    far from the float32 ones as transformers' own model's in that dtype, within a factor of 2, and past
    float16's range a float16 forward raises Float16Overflow (guard_float16) where transformers returns inf /
    NaN (tests/test_interop_half.py)."""
    if dtype not in DTYPES:
        raise Unsupported(f"dtype={dtype}: zoo converts to {', '.join(map(str, DTYPES))}")
    if (family, dtype) in HALF_REFUSED:
        raise Unsupported(HALF_REFUSED[family, dtype])


def _names(keys) -> str:
    keys = sorted(keys)
    return ", ".join(keys[:20]) + (f" and {len(keys) - 20} more" if len(keys) > 20 else "")


def warn_unused_keys(src, info: dict, unused: list[str]) -> None:
    """Log a warning naming every key of the source checkpoint the conversion does not use: keys transformers
    did not load into the family's model (info["unexpected_keys"], e.g. another task's head, with those it
    ignores unreported, stored_keys.with_unreported), keys it loaded
    that zoo does not read (`unused`, families.unused_keys: BERT's pooler, zoo has no pooler block), and keys
    the checkpoint lacks, which transformers initialised at random (info["missing_keys"]) and zoo converts
    as they are."""
    where = src if isinstance(src, (str, Path)) else type(src).__name__
    unexpected, missing = info.get("unexpected_keys") or (), info.get("missing_keys") or ()
    if unexpected:
        log.warning(
            "%s: keys of the checkpoint that transformers did not load, so zoo does not convert them: %s",
            where,
            _names(unexpected),
        )
    if unused:
        pooler = " (zoo has no pooler block)" if any(k.startswith("bert.pooler.") for k in unused) else ""
        log.warning("%s: weights zoo's model does not use, dropped%s: %s", where, pooler, _names(unused))
    if missing:
        log.warning(
            "%s: weights the checkpoint lacks, which transformers initialised at random and zoo converts as "
            "they are (fine-tune them, or give a complete checkpoint): %s",
            where,
            _names(missing),
        )


class Float16Overflow(FloatingPointError):
    """A converted model's output is not finite in float16: raised instead of returning inf / NaN."""


# the outputs of a zoo model guard_float16 checks: every path that gives logits or scores ends in one of them
_OUTPUTS = ("lm_head", "classifier", "length_head")


def _check_float16(module, args, output, family: str = "", where: str = "") -> None:
    """Forward hook: raise Float16Overflow when a float16 output holds inf / NaN (one check, float16 only)."""
    if isinstance(output, torch.Tensor) and output.dtype == torch.float16 and not torch.isfinite(output).all():
        raise Float16Overflow(
            f"the converted {family} model's {where} output is not finite in torch.float16: an activation "
            f"passed float16's range (65504), where transformers' own float16 {family} overflows too or clamps "
            f"(zoo's blocks do not); run it in torch.bfloat16 (float32's range) or torch.float32"
        )


def guard_float16(model: nn.Module, family: str) -> nn.Module:
    """Make a converted model raise Float16Overflow instead of returning inf / NaN from a float16 forward
    (_OUTPUTS' forward hooks; other dtypes pass unchecked, at no cost): past float16's range transformers'
    GPT-2, BERT, BART and Marian give inf / NaN as well, and its T5 clamps (zoo refuses T5 in float16,
    HALF_REFUSED; a model cast with model.half() is guarded all the same). Returns model."""
    for where in _OUTPUTS:
        module = getattr(model, where, None)
        if isinstance(module, nn.Module):
            module.register_forward_hook(partial(_check_float16, family=family, where=where))
    return model


def _model_type(src) -> str | None:
    """The HF model_type of a transformers model or a checkpoint directory (None for a hub id: read later)."""
    if isinstance(src, nn.Module):
        return getattr(getattr(src, "config", None), "model_type", None)
    path = Path(src)
    return json.loads((path / "config.json").read_text()).get("model_type") if _is_hf_dir(path) else None


def from_hf(
    hf_model_or_dir, family: str | None = None, dtype: torch.dtype | None = None
) -> tuple[nn.Module, ModelConfig]:
    """(zoo model in eval mode, its ModelConfig) with the weights of a transformers GPT-2 / BERT / Marian / BART /
    T5 model, a checkpoint directory of one, or a hub id (online). dtype: the model's dtype (None = float32;
    check_dtype). The model keeps its family as `hf_family` and HF's own special-token ids as `hf_special_ids`
    ({pad, bos, eos}_token_id, each an id or None), which to_hf writes back where zoo's ModelConfig needed
    placeholders (zoo_ids). Raises Unsupported for another family, a setting zoo cannot express or a refused
    dtype (the message names it)."""
    args.source("from_hf", "hf_model_or_dir", hf_model_or_dir)
    args.optional("from_hf", "family", family, str, "a family name (gpt2, bert, marian, bart, t5)")
    if dtype is not None:
        check_dtype(family or _model_type(hf_model_or_dir), dtype)  # before loading anything
    hf, info = load_hf_model(hf_model_or_dir)
    fam = family_of(family or hf.config.model_type)
    info = with_unreported(hf_model_or_dir, hf, info, getattr(fam, "recomputed", None))  # keys it ignores unsaid
    if dtype is not None:
        check_dtype(fam.name, dtype)
    sd, tied = _state_of(hf, fam.name)
    arch, cfg_fields = fam.config_from_hf(hf.config, tied)
    cfg = ModelConfig(**cfg_fields)
    from zoo.interop.families import hf_to_zoo, unused_keys

    entries = fam.entries(cfg)
    state = hf_to_zoo(entries, sd, fam.ignore)
    warn_unused_keys(hf_model_or_dir, info, unused_keys(entries, sd, getattr(fam, "recomputed", None)))
    model = build_model(arch, cfg)
    check_state(model, state)
    model.load_state_dict(state)
    model.hf_special_ids = source_token_ids(hf.config)
    model.hf_family = fam.name
    model.hf_generation = source_generation(hf)
    guard_float16(model, fam.name)
    return model.eval().to(dtype or torch.float32), cfg


def source_token_ids(config) -> dict:
    """Every `*_token_id` of an HF config (pad / bos / eos, decoder_start, BART's and Marian's
    forced_eos_token_id, ...), each an id or None, pad / bos / eos always present: what to_hf writes back."""
    ids = {k: v for k, v in config.to_dict().items() if k.endswith("_token_id")}
    return {**{k: getattr(config, k, None) for k in HF_IDS}, **ids}


# GenerationConfig keys that describe the file, not the generation
_GENERATION_META = ("transformers_version", "_from_model_config")


def source_generation(hf) -> dict | None:
    """The generation settings of an HF model that generates (its generation_config, as the non-default
    values GenerationConfig.to_diff_dict gives: beams, forced tokens, banned words, its token ids), which to_hf
    writes back as generation_config.json; None for a model that does not generate (BERT)."""
    gen = getattr(hf, "generation_config", None)
    if gen is None or not hf.can_generate():
        return None
    return {k: v for k, v in gen.to_diff_dict().items() if k not in _GENERATION_META}


def arch_of(model: nn.Module) -> str:
    """encoder_only | decoder_only | encoder_decoder of a zoo model. Raises ValueError for anything else."""
    for name, cls in ARCHITECTURES.items():
        if type(model) is cls:
            return name
    raise ValueError(
        f"{type(model).__name__} is not a zoo model ({', '.join(c.__name__ for c in ARCHITECTURES.values())})"
    )


def hf_config(model: nn.Module, family: str | None = None, tokenizer=None) -> dict:
    """The config.json dict of `model`'s HF family (default: family_for its arch and position), with the
    special-token ids export_special_ids(model, tokenizer) gives. Raises Unsupported naming a zoo option the
    family cannot express."""
    arch, cfg = arch_of(model), model.cfg
    family = family or family_for(arch, cfg)
    if family not in FAMILIES:
        raise Unsupported(f"family={family!r} is not supported; supported families: {', '.join(SUPPORTED)}")
    if ARCH_OF[family] != arch:
        raise Unsupported(f"a zoo {arch} model cannot be written as Hugging Face {family} ({ARCH_OF[family]})")
    return {**FAMILIES[family].config_to_hf(cfg), **export_special_ids(model, tokenizer)}


def _tokenizer_state(tokenizer) -> dict | None:
    """The state dict ({"json", "special_tokens"?, "hf_roles"?}) of the tokenizer written as tokenizer.json (for
    {"src", "tgt"} states the source one), or None for a tokenizer without that form (zoo's character one)."""
    if isinstance(tokenizer, dict):
        if "json" in tokenizer:
            return tokenizer
        return _tokenizer_state(tokenizer["src"]) if "src" in tokenizer else None
    if hasattr(tokenizer, "state_dict"):
        return _tokenizer_state(tokenizer.state_dict())
    if hasattr(tokenizer, "to_str"):
        return {"json": tokenizer.to_str()}
    return None


def _roles_of(tokenizer) -> dict[str, int] | None:
    """{zoo role: id} of a tokenizer with a tokenizer.json form (zoo.data.bpe.special_roles, with the state's
    data.special_tokens overrides), or None (no tokenizer, or a character tokenizer)."""
    state = _tokenizer_state(tokenizer) if tokenizer is not None else None
    if state is None:
        return None
    from tokenizers import Tokenizer

    from zoo.data.bpe import special_roles

    return special_roles(Tokenizer.from_str(state["json"]), state.get("special_tokens"))


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
    roles = _roles_of(tokenizer)
    if roles is not None:
        return {f"{r}_token_id": roles.get(r) for r in ("pad", "bos", "eos")}
    return own


def to_hf(zoo_model: nn.Module, out_dir: str | Path, tokenizer=None, family: str | None = None) -> Path:
    """Write `zoo_model` as a transformers checkpoint in out_dir: config.json (its "dtype" the tensors' dtype,
    model_dtype), model.safetensors (tied weights stored once, under the key transformers ties the others to),
    generation_config.json for the families that generate (generation_config) and, when given, the tokenizer (a zoo
    SubwordTokenizer, its state {"json": ...}, {"src", "tgt"} states, or a tokenizers.Tokenizer) as
    tokenizer.json + tokenizer_config.json. The special-token ids are export_special_ids(zoo_model, tokenizer): a
    converted model's own, never a zoo placeholder. Returns out_dir. Raises Unsupported naming an option the
    family cannot hold (every ModelConfig field: tests/test_interop_settings.py), before writing anything."""
    args.out_dir("to_hf", out_dir)
    tf = _transformers()
    from safetensors.torch import save_file

    from zoo.interop.families import zoo_to_hf

    d = hf_config(zoo_model, family, tokenizer)
    fam = FAMILIES[d["model_type"]]
    dtype = model_dtype(zoo_model)
    state = zoo_to_hf(fam.entries(zoo_model.cfg), zoo_model.state_dict(), zoo_model.cfg.vocab_size)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = tf.CONFIG_MAPPING[d["model_type"]](**{k: v for k, v in d.items() if k != "model_type"})
    config.dtype = dtype  # config.json's "dtype": the tensors' own, as transformers' save_pretrained writes it
    config.save_pretrained(out)
    tensors = {k: v.to(dtype).contiguous() for k, v in state.items()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    if d["model_type"] != "bert":  # the families that generate
        generation_config(zoo_model, config).save_pretrained(out)
    if tokenizer is not None:
        write_tokenizer(tokenizer, out, zoo_model.cfg, {k: d.get(k) for k in HF_IDS})
    return out


def model_dtype(model: nn.Module) -> torch.dtype:
    """The one floating dtype of a model's parameters and buffers in its state dict (float32, bfloat16, ...).
    Raises ValueError naming them when they differ (cast the model first, e.g. model.bfloat16())."""
    dtypes = {v.dtype for v in model.state_dict().values() if v.is_floating_point()}
    if len(dtypes) != 1:
        raise ValueError(
            f"the model's weights mix {sorted(map(str, dtypes))}: cast it to one dtype before exporting "
            f"(model.float() or model.bfloat16())"
        )
    return dtypes.pop()


def generation_config(model: nn.Module, config):
    """The transformers GenerationConfig to_hf writes: a converted model's source settings (model.hf_generation,
    source_generation: its beams, forced tokens, banned words and token ids) while it keeps HF's ids
    (keeps_hf_ids), else the one transformers derives from config (GenerationConfig.from_model_config: its
    pad / bos / eos / decoder start ids)."""
    tf = _transformers()
    source = getattr(model, "hf_generation", None)
    if source is not None and keeps_hf_ids(model):
        return tf.GenerationConfig(**source)
    return tf.GenerationConfig.from_model_config(config)


def _tokenizer_json(tokenizer) -> str | None:
    if isinstance(tokenizer, dict):
        if "json" in tokenizer:
            return tokenizer["json"]
        if "src" in tokenizer and "tgt" in tokenizer:
            src, tgt = _tokenizer_json(tokenizer["src"]), _tokenizer_json(tokenizer["tgt"])
            if src != tgt:
                log.warning(
                    "source and target tokenizers differ: tokenizer.json is the source one, "
                    "target_tokenizer/tokenizer.json the target one"
                )
            return src
        return None  # a character tokenizer ({"chars"}) has no tokenizer.json
    if hasattr(tokenizer, "state_dict"):
        return _tokenizer_json(tokenizer.state_dict())
    if hasattr(tokenizer, "to_str"):
        return tokenizer.to_str()
    return None


def write_tokenizer(tokenizer, out: Path, cfg: ModelConfig, special_ids: dict | None = None) -> bool:
    """tokenizer.json + tokenizer_config.json (PreTrainedTokenizerFast) in out; False (and a warning) for a
    tokenizer with no tokenizer.json form (zoo's character tokenizer). The roles tokenizer_config.json names: a
    converted checkpoint's own, as its tokenizer_config.json had them (the state's "hf_roles",
    hf_tokenizer_state); else the tokens of special_ids ({pad, bos, eos}_token_id, None = no such role; default
    cfg's pad / bos / eos ids) and the tokenizer's unk / mask / cls tokens (zoo.data.bpe.special_roles)."""
    if not args.path("write_tokenizer", "out", out).is_dir():
        raise ValueError(f"write_tokenizer: out={str(out)!r} is not a directory; to_hf creates it first")
    text = _tokenizer_json(tokenizer)
    if text is None:
        log.warning("this tokenizer has no tokenizer.json form (character tokenizer?); wrote no tokenizer")
        return False
    (out / "tokenizer.json").write_text(text)
    if isinstance(tokenizer, dict) and "src" in tokenizer and _tokenizer_json(tokenizer["tgt"]) != text:
        (out / "target_tokenizer").mkdir(exist_ok=True)
        (out / "target_tokenizer" / "tokenizer.json").write_text(_tokenizer_json(tokenizer["tgt"]))
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(text)
    state = _tokenizer_state(tokenizer)
    if state.get("hf_roles") is not None:
        special = dict(state["hf_roles"])
    else:
        ids = special_ids or {"pad_token_id": cfg.pad_id, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id}
        named = {_ZOO_ROLES[r]: i for r, i in _roles_of(tokenizer).items() if r in ("unk", "mask", "cls")}
        named.update({k[: -len("_id")]: i for k, i in ids.items()})
        special = {k: tok.id_to_token(i) for k, i in named.items() if i is not None and tok.id_to_token(i) is not None}
    (out / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg.max_len, **special}, indent=2)
    )
    return True


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


def _plain_role(value):
    """A tokenizer_config.json role as plain text: an AddedToken dict becomes its content (its flags live in
    tokenizer.json's added_tokens)."""
    if isinstance(value, dict):
        return value.get("content", value)
    if isinstance(value, list):
        return [_plain_role(v) for v in value]
    return value


def hf_tokenizer_state(path: str | Path) -> dict | None:
    """{"json": tokenizer.json text, "hf_roles": {role: token}} of an HF checkpoint directory: the special-token
    roles (HF_ROLES) its tokenizer_config.json and special_tokens_map.json name, as they name them (write_tokenizer
    writes them back); no "hf_roles" when it has neither file. None when it has no tokenizer.json (e.g.
    Marian's SentencePiece files)."""
    if not args.path("hf_tokenizer_state", "path", path).is_dir():
        raise ValueError(f"hf_tokenizer_state: path={str(path)!r} is not a directory; give an HF checkpoint directory")
    d = Path(path)
    if not (d / "tokenizer.json").is_file():
        return None
    state = {"json": (d / "tokenizer.json").read_text()}
    files = [d / name for name in ("tokenizer_config.json", "special_tokens_map.json") if (d / name).is_file()]
    if files:
        roles = {}
        for f in files:
            roles.update({k: _plain_role(v) for k, v in json.loads(f.read_text()).items() if k in HF_ROLES})
        state["hf_roles"] = {k: v for k, v in roles.items() if v is not None}
    return state


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
    if isinstance(dir_or_ckpt, nn.Module) or _is_hf_dir(Path(dir_or_ckpt)):
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
                f"model.{f.name}={a} (zoo.interop.hf.config_of gives the whole config)"
            )
    own = zoo_model.state_dict()
    state = {k: v for k, v in state.items() if not k.startswith(NEW_HEADS) or (k in own and own[k].shape == v.shape)}
    check_state(zoo_model, state, allow_missing=NEW_HEADS)
    zoo_model.load_state_dict(state, strict=False)
    return zoo_model
