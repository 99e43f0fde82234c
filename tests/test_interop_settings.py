"""Every ModelConfig field x every Hugging Face family: to_hf either writes a model that holds the setting (a
non-default value changes nothing between zoo's logits and the exported model's, and the config.json keys that
carry it hold it) or refuses, naming the field. A field without an entry in SETTINGS fails its test."""

from dataclasses import fields

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import assert_close, perturb, right_padded, seeded  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402
from zoo.interop.checkpoints import arch_of  # noqa: E402
from zoo.model import ModelConfig, build_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

V = 40
SIZE = dict(vocab_size=V, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=32, dropout=0.0)
# the zoo config of each family's layout (what from_hf gives), at the toy size
BASE = {
    "gpt2": (
        "decoder_only",
        dict(position="learned", norm_first=True, final_norm=True, scale_embeddings=False, activation="gelu_tanh"),
    ),
    "bert": (
        "encoder_only",
        dict(
            position="learned",
            scale_embeddings=False,
            activation="gelu",
            embed_norm=True,
            type_vocab_size=2,
            lm_head_transform=True,
            lm_head_bias=True,
        ),
    ),
    "bart": (
        "encoder_decoder",
        dict(
            position="learned",
            position_offset=2,
            embed_norm=True,
            share_tokens=True,
            scale_embeddings=False,
            activation="gelu",
        ),
    ),
    "marian": ("encoder_decoder", dict(position="sinusoidal", sinusoidal_layout="split", activation="silu")),
    "t5": (
        "encoder_decoder",
        dict(
            position="t5_relative",
            rel_buckets=8,
            rel_max_distance=20,
            norm="rmsnorm",
            norm_eps=1e-6,
            bias=False,
            norm_first=True,
            attn_scale=1.0,
            scale_embeddings=False,
            share_embeddings=True,
            lm_head_scale=True,
        ),
    ),
}
FAMILIES = tuple(BASE)
AUTO = {"decoder_only": "AutoModelForCausalLM", "encoder_only": "AutoModelForMaskedLM"}


def held(over: dict, **hf_config):
    """The exported model holds `over`: its logits are zoo's, and its config has the hf_config values."""
    return ("held", over, hf_config)


def refused(over: dict):
    """to_hf refuses `over`, naming the field."""
    return ("refused", over, {})


def each(case_of_family):
    """The same kind of case for every family: case_of_family(family)."""
    return {f: case_of_family(f) for f in FAMILIES}


def inert(over: dict):
    """A setting that changes nothing in this architecture / position scheme, or only how zoo trains (compile,
    activation checkpointing, ...): the export is the same model."""
    return held(over)


SEQ2SEQ = ("bart", "marian", "t5")
DROPOUT_KEYS = {
    "gpt2": ("resid_pdrop", "embd_pdrop"),
    "bert": ("hidden_dropout_prob",),
    "bart": ("dropout",),
    "marian": ("dropout",),
    "t5": ("dropout_rate",),
}
ATTN_DROPOUT_KEY = {"gpt2": "attn_pdrop", "bert": "attention_probs_dropout_prob", "bart": "attention_dropout"}
ATTN_DROPOUT_KEY["marian"] = "attention_dropout"
ENC_LAYERS = {"bert": "num_hidden_layers", "bart": "encoder_layers", "marian": "encoder_layers", "t5": "num_layers"}
DEC_LAYERS = {"gpt2": "n_layer", "bart": "decoder_layers", "marian": "decoder_layers", "t5": "num_decoder_layers"}
MAX_LEN_KEY = {"gpt2": "n_positions", "bert": "max_position_embeddings", "t5": "n_positions"}
MAX_LEN_KEY["bart"] = MAX_LEN_KEY["marian"] = "max_position_embeddings"
EPS_KEY = {"gpt2": "layer_norm_epsilon", "bert": "layer_norm_eps", "t5": "layer_norm_epsilon"}


def _dropout(f):
    return [
        held({"dropout": 0.3}, **{k: 0.3 for k in DROPOUT_KEYS[f]}, **({ATTN_DROPOUT_KEY[f]: 0.3} if f != "t5" else {}))
    ]


SETTINGS = {
    "vocab_size": each(lambda f: [held({"vocab_size": 50}, vocab_size=50)]),
    "src_vocab_size": {
        "gpt2": [inert({"src_vocab_size": 30})],
        "bert": [inert({"src_vocab_size": 30})],
        "bart": [refused({"src_vocab_size": 30, "share_tokens": False, "tie_embeddings": False})],
        "marian": [held({"src_vocab_size": 30}, vocab_size=30, decoder_vocab_size=V)],
        "t5": [held({"src_vocab_size": V}), refused({"src_vocab_size": 30, "share_embeddings": False})],
    },
    "d_model": each(lambda f: [held({"d_model": 24})]),
    "n_heads": each(lambda f: [held({"n_heads": 4})]),
    "n_kv_heads": each(lambda f: [refused({"n_kv_heads": 1})]),
    "d_ff": each(lambda f: [held({"d_ff": 48})]),
    "n_layers": each(lambda f: [held({"n_layers": 2})]),
    "n_encoder_layers": each(
        lambda f: (
            [held({"n_encoder_layers": 2}, **{ENC_LAYERS[f]: 2})]
            if f in ENC_LAYERS
            else [inert({"n_encoder_layers": 2})]
        )
    ),
    "n_decoder_layers": each(
        lambda f: (
            [held({"n_decoder_layers": 2}, **{DEC_LAYERS[f]: 2})]
            if f in DEC_LAYERS
            else [inert({"n_decoder_layers": 2})]
        )
    ),
    "dropout": each(_dropout),
    "attn_dropout": each(
        lambda f: (
            [refused({"attn_dropout": 0.2})]
            if f == "t5"
            else [held({"attn_dropout": 0.2}, **{ATTN_DROPOUT_KEY[f]: 0.2})]
        )
    ),
    "activation": {
        **each(lambda f: [held({"activation": "relu"}), refused({"activation": "swiglu"})]),
        "bert": [held({"activation": "relu"}, hidden_act="relu"), held({"activation": "silu"})],  # gated: no MLM head
        "t5": [held({"activation": "geglu_tanh"}, feed_forward_proj="gated-gelu"), refused({"activation": "geglu"})],
    },
    "norm": each(lambda f: [refused({"norm": "layernorm" if f == "t5" else "rmsnorm"})]),
    "norm_eps": each(
        lambda f: (
            [refused({"norm_eps": 1e-2})] if f in ("bart", "marian") else [held({"norm_eps": 0.5}, **{EPS_KEY[f]: 0.5})]
        )
    ),
    "bias": each(lambda f: [refused({"bias": f == "t5"})]),
    "norm_first": each(lambda f: [refused({"norm_first": f not in ("gpt2", "t5")})]),
    "final_norm": each(lambda f: [refused({"final_norm": f not in ("gpt2", "t5")})]),
    "position": each(
        lambda f: [refused({"position": "rope"}), refused({"position": "sinusoidal" if f != "marian" else "learned"})]
    ),
    "max_len": each(lambda f: [held({"max_len": 48}, **{MAX_LEN_KEY[f]: 48})]),
    "rope_base": each(lambda f: [inert({"rope_base": 500.0})]),
    "mask": {
        **each(lambda f: [refused({"mask": "sliding", "window": 3}), held({"mask": "causal"})]),
        "gpt2": [refused({"mask": "prefix", "prefix_len": 3}), held({"mask": "causal"})],
        "bert": [refused({"mask": "causal"}), held({"mask": "bidirectional"})],
    },
    "prefix_len": each(lambda f: [inert({"prefix_len": 3})]),
    "window": each(lambda f: [inert({"window": 3})]),
    "scale_embeddings": {
        **each(lambda f: [refused({"scale_embeddings": True})]),
        "bart": [held({"scale_embeddings": True}, scale_embedding=True)],
        "marian": [held({"scale_embeddings": False}, scale_embedding=False)],
    },
    "tie_embeddings": {
        **each(lambda f: [held({"tie_embeddings": False}, tie_word_embeddings=False)]),
        "bart": [
            refused({"tie_embeddings": False}),
            held({"tie_embeddings": False, "share_tokens": False}, tie_word_embeddings=False),
        ],
        "t5": [held({"tie_embeddings": False})],  # its tie_word_embeddings is the output rescale (lm_head_scale)
    },
    "share_embeddings": {
        "gpt2": [inert({"share_embeddings": True})],
        "bert": [inert({"share_embeddings": True})],
        "bart": [refused({"share_embeddings": True})],
        "marian": [held({"share_embeddings": True}, share_encoder_decoder_embeddings=True)],
        "t5": [refused({"share_embeddings": False})],
    },
    "init": each(lambda f: [inert({"init": "gpt2"})]),
    "rel_buckets": {
        **each(lambda f: [inert({"rel_buckets": 16})]),
        "t5": [held({"rel_buckets": 16}, relative_attention_num_buckets=16)],
    },
    "rel_max_distance": {
        **each(lambda f: [inert({"rel_max_distance": 40})]),
        "t5": [held({"rel_max_distance": 6}, relative_attention_max_distance=6)],
    },
    "position_offset": {
        **each(lambda f: [refused({"position_offset": 2})]),
        "bart": [refused({"position_offset": 0})],
        "marian": [inert({"position_offset": 2})],  # sinusoidal positions have no offset
        "t5": [inert({"position_offset": 2})],
    },
    "sinusoidal_layout": {
        **each(lambda f: [inert({"sinusoidal_layout": "split"})]),
        "marian": [refused({"sinusoidal_layout": "interleaved"})],
    },
    "attn_scale": {
        **each(lambda f: [refused({"attn_scale": 1.0})]),
        "gpt2": [held({"attn_scale": 1.0}, scale_attn_weights=False), refused({"attn_scale": 0.5})],
        "t5": [refused({"attn_scale": 0.5}), refused({"attn_scale": None})],
    },
    "embed_norm": each(lambda f: [refused({"embed_norm": f not in ("bert", "bart")})]),
    "type_vocab_size": {
        **each(lambda f: [refused({"type_vocab_size": 2})]),
        "bert": [held({"type_vocab_size": 3}, type_vocab_size=3), refused({"type_vocab_size": 0})],
    },
    "share_tokens": {
        "gpt2": [inert({"share_tokens": True})],
        "bert": [inert({"share_tokens": True})],
        "bart": [refused({"share_tokens": False})],
        "marian": [held({"share_tokens": True}, share_encoder_decoder_embeddings=True)],
        "t5": [held({"share_tokens": True, "share_embeddings": False})],
    },
    "lm_head_transform": each(lambda f: [refused({"lm_head_transform": f != "bert"})]),
    "lm_head_bias": {
        **each(lambda f: [refused({"lm_head_bias": True})]),
        "bert": [refused({"lm_head_bias": False})],
        "bart": [held({"lm_head_bias": True})],
        "marian": [held({"lm_head_bias": True})],
    },
    "lm_head_scale": {
        **each(lambda f: [refused({"lm_head_scale": True})]),
        "t5": [held({"lm_head_scale": False}, scale_decoder_outputs=False)],
    },
    "decoder_start_id": each(
        lambda f: (
            [held({"decoder_start_id": 5}, decoder_start_token_id=5)]
            if f in SEQ2SEQ
            else [inert({"decoder_start_id": 5})]
        )
    ),
    "num_classes": each(lambda f: [refused({"num_classes": 2})]),
    "pooling": each(lambda f: [inert({"pooling": "cls"})]),
    "length_classes": each(lambda f: [refused({"length_classes": 4})]),
    "pad_id": each(lambda f: [held({"pad_id": 5}, pad_token_id=5)]),
    "bos_id": each(lambda f: [held({"bos_id": 6}, bos_token_id=6)]),
    "eos_id": each(lambda f: [held({"eos_id": 7}, eos_token_id=7)]),
    "activation_checkpointing": each(lambda f: [inert({"activation_checkpointing": True})]),
    "compile": each(lambda f: [inert({"compile": True})]),
    "compile_scope": each(lambda f: [inert({"compile_scope": "model"})]),
    "loss_chunk_size": each(lambda f: [inert({"loss_chunk_size": 0})]),
}


def zoo_model(family: str, over: dict):
    arch, base = BASE[family]
    seeded(1)
    return perturb(build_model(arch, ModelConfig(**{**SIZE, **base, **over})), 0.1).eval()


def logits_pair(m, hf):
    """(zoo's, the HF model's) logits on a right-padded batch, at the real tokens."""
    cfg = m.cfg
    seeded(2)
    if arch_of(m) != "encoder_decoder":
        ids, kpm = right_padded([9, 6, 2], cfg.vocab_size, cfg.pad_id)
        with torch.no_grad():
            return m(ids, key_padding_mask=kpm)[~kpm], hf(ids, attention_mask=(~kpm).long()).logits[~kpm]
    src, skpm = right_padded([9, 6, 2], min(cfg.vocab_size, cfg.src_vocab_size or cfg.vocab_size), cfg.pad_id)
    tgt = torch.randint(3, cfg.vocab_size, (3, 7))
    with torch.no_grad():
        return m(src, tgt, src_key_padding_mask=skpm), hf(
            input_ids=src, attention_mask=(~skpm).long(), decoder_input_ids=tgt
        ).logits


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("field", [f.name for f in fields(ModelConfig)])
def test_every_setting_is_held_or_refused(tmp_path, field, family):
    cases = SETTINGS.get(field, {}).get(family)
    assert cases, f"model.{field} has no entry for Hugging Face {family} in SETTINGS: add what to_hf does with it"
    base = ModelConfig(**{**SIZE, **BASE[family][1]})
    for i, (kind, over, hf_config) in enumerate(cases):
        assert field in over and getattr(base, field) != over[field], f"case {over} does not change model.{field}"
        m = zoo_model(family, over)
        out = tmp_path / str(i)
        if kind == "refused":
            with pytest.raises(Unsupported, match=rf"model\.{field}\b"):
                zhf.to_hf(m, out, family=family)
            assert not (out / "config.json").exists()
            continue
        zhf.to_hf(m, out, family=family)
        hf = getattr(tf, AUTO.get(arch_of(m), "AutoModelForSeq2SeqLM")).from_pretrained(out).eval()
        assert hf.config.model_type == family
        assert_close(*logits_pair(m, hf))
        for key, value in hf_config.items():
            assert getattr(hf.config, key) == value, (key, getattr(hf.config, key), value)
