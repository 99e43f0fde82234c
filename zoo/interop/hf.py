"""Hugging Face interop: `from_hf` reads a transformers checkpoint (GPT-2, BERT, Marian, BART, T5) into zoo's
blocks, `to_hf` writes a zoo model as a checkpoint that `transformers` loads (config.json + model.safetensors
+ the tokenizer).

The per-family config and weight maps are zoo.interop.families; needs the `hf` extra (transformers,
safetensors). Exact in fp32: logits agree with transformers' to ~1e-6 at toy size (tests/test_interop_*.py);
float16 / bfloat16 as transformers runs them, or refused (zoo.interop.precision). Special-token ids and tokenizer
roles survive HF -> zoo -> HF (zoo.interop.special_ids, zoo.interop.hf_tokenizer); every ModelConfig field is
held by the export or refused (tests/test_interop_settings.py). A zoo model from a checkpoint of either kind:
zoo.interop.load.
"""

import json
import logging
from pathlib import Path

import torch
from torch import nn

from zoo.errors import listed
from zoo.interop import args
from zoo.interop.blockers import Unsupported
from zoo.interop.checkpoints import arch_of, check_state
from zoo.interop.families.registry import ARCH_OF, FAMILIES, SUPPORTED, family_for, family_of
from zoo.interop.families.weights import hf_to_zoo, unused_keys, zoo_to_hf
from zoo.interop.hf_tokenizer import write_tokenizer
from zoo.interop.precision import check_dtype, guard_float16, model_dtype
from zoo.interop.special_ids import HF_IDS, export_special_ids, keeps_hf_ids, source_token_ids
from zoo.interop.stored_keys import with_unreported
from zoo.model import ModelConfig, build_model

log = logging.getLogger(__name__)


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError("Hugging Face interop needs transformers and safetensors: pip install 'zoo[hf]'") from None
    return transformers


def is_hf_dir(path: Path) -> bool:
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
    if is_hf_dir(path):
        config = json.loads((path / "config.json").read_text())
    elif path.exists():
        raise FileNotFoundError(f"{src} has no config.json: pass a Hugging Face checkpoint directory")
    else:  # a hub id (needs the network)
        config = tf.AutoConfig.from_pretrained(str(src)).to_dict()
    family = config.get("model_type")
    family_of(family)
    name = FAMILIES[family].hf_class
    if family == "bert" and not any(
        a in " ".join(config.get("architectures") or []) for a in ("MaskedLM", "PreTraining")
    ):
        name = "BertModel"  # no MLM head in the checkpoint: zoo's plain tied head
    model, info = getattr(tf, name).from_pretrained(str(src), output_loading_info=True)
    return model.eval(), info


def state_of(model, fam) -> tuple[dict[str, torch.Tensor], dict]:
    """The HF model's state dict under its task model's key names (a base model's keys get the family's prefix),
    and what is tied or present (the family's `tied`: {"lm_head", "tokens": shared storage; "has_mlm_head";
    "logits_bias": a nonzero final_logits_bias})."""
    sd = dict(model.state_dict())
    p = fam.prefix
    if p and not any(k.startswith(p) for k in sd):  # a base model (GPT2Model, BertModel, BartModel, ...)
        sd = {p + k: v for k, v in sd.items()}
    ptr = {k: v.data_ptr() for k, v in sd.items()}
    return sd, fam.tied(sd, ptr)


def _names(keys) -> str:
    return listed(sorted(keys), 20)


def warn_unused_keys(src, info: dict, unused: list[str]) -> None:
    """Log a warning naming every key of the source checkpoint the conversion does not use: keys transformers
    did not load into the family's model (info["unexpected_keys"], e.g. another task's head, with those it
    ignores unreported, stored_keys.with_unreported), keys it loaded that zoo does not read (`unused`,
    zoo.interop.families.weights.unused_keys: BERT's pooler, zoo has no pooler block), and keys the checkpoint
    lacks, which transformers initialised at random (info["missing_keys"]) and zoo converts as they are."""
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


def _model_type(src) -> str | None:
    """The HF model_type of a transformers model or a checkpoint directory (None for a hub id: read later)."""
    if isinstance(src, nn.Module):
        return getattr(getattr(src, "config", None), "model_type", None)
    path = Path(src)
    return json.loads((path / "config.json").read_text()).get("model_type") if is_hf_dir(path) else None


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
    sd, tied = state_of(hf, fam)
    arch, cfg_fields = fam.config_from_hf(hf.config, tied)
    cfg = ModelConfig(**cfg_fields)
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
