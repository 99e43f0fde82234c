"""Per-family maps between Hugging Face `transformers` checkpoints and zoo's blocks: config fields and weights.

Each family gives (1) `config_from_hf(hf_config, tied) -> (arch, ModelConfig fields)`, (2) `config_to_hf(cfg)
-> config.json dict`, refusing at once every zoo option the family cannot express (zoo.interop.blockers), and
(3) `entries(cfg)`: the weight map, a list of Entry(zoo key, HF keys, kind). The math each map relies on is the
installed transformers' modeling file of the family (modeling_gpt2.py, modeling_bert.py, modeling_marian.py,
modeling_bart.py, modeling_t5.py).

Entry kinds: copy (same tensor), T (transposed: GPT-2's Conv1D stores (in, out)), cat (zoo's fused tensor is
the HF tensors stacked along dim 0: [W_q; W_k; W_v], [W_k; W_v], T5's [wi_0; wi_1]), row ((1, V) <-> (V,):
final_logits_bias), clone (an HF copy of an already written tensor, stored separately, e.g. BART's unused
`shared` table when nothing is tied).
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from zoo.interop.blockers import Blockers, Unsupported, hydra_value
from zoo.interop.stored_keys import is_recomputed
from zoo.model.blocks.positions import sinusoidal_table
from zoo.model.config import ModelConfig

SUPPORTED = ("gpt2", "bert", "marian", "bart", "t5")
HF_CLASSES = {
    "gpt2": "GPT2LMHeadModel",
    "bert": "BertForMaskedLM",
    "marian": "MarianMTModel",
    "bart": "BartForConditionalGeneration",
    "t5": "T5ForConditionalGeneration",
}
ARCH_OF = {
    "gpt2": "decoder_only",
    "bert": "encoder_only",
    "marian": "encoder_decoder",
    "bart": "encoder_decoder",
    "t5": "encoder_decoder",
}

# HF activation names (transformers.activations.ACT2FN) <-> zoo's
_ACT_FROM_HF = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
_ACT_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "swish"}


@dataclass
class Entry:
    zoo: str
    hf: tuple[str, ...]
    kind: str = "copy"


def _get(c, name, default=None):
    return getattr(c, name, default) if not isinstance(c, dict) else c.get(name, default)


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


def _common_to_hf(cfg: ModelConfig, family: str) -> Blockers:
    """The Blockers of cfg for `family` (zoo.interop.blockers), with what every family refuses: a classifier or
    length head, grouped-query attention. config_to_hf adds its own, then refuses them all at once."""
    b = Blockers(cfg, family, HF_CLASSES[family])
    if cfg.num_classes:
        b.add(f"model.num_classes={cfg.num_classes}", "a classification head; it needs none", "task=lm")
    if cfg.length_classes:
        why = "a target-length head; it needs none"
        b.add(f"model.length_classes={cfg.length_classes}", why, "task.objective=encoder_ar")
    if cfg.n_kv_heads not in (None, cfg.n_heads):
        b.add(f"model.n_kv_heads={cfg.n_kv_heads}", "grouped-query; it needs n_heads", "model.n_kv_heads=null")
    return b


def _final_norm(b: Blockers, needed: bool, why: str) -> None:
    """Add model.final_norm (its value, or the one null gives: model.norm_first's) unless it is `needed`."""
    cfg = b.cfg
    if cfg.use_final_norm != needed:
        why = (f"null follows model.norm_first={cfg.norm_first}; " if cfg.final_norm is None else "") + why
        b.add(f"model.final_norm={cfg.final_norm!r}", why, f"model.final_norm={hydra_value(needed)}")


def _ids_to_hf(cfg: ModelConfig) -> dict:
    return {"pad_token_id": cfg.pad_id, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id}


def _attn_entries(z: str, h: str, q: str, k: str, v: str, o: str, bias: bool, cross: bool = False) -> list[Entry]:
    """Separate HF q / k / v / o projections -> zoo's fused qkv_proj (self) or q_proj + kv_proj (cross)."""
    kinds = ("weight", "bias") if bias else ("weight",)
    out = []
    for w in kinds:
        if cross:
            out += [
                Entry(f"{z}q_proj.{w}", (f"{h}{q}.{w}",)),
                Entry(f"{z}kv_proj.{w}", (f"{h}{k}.{w}", f"{h}{v}.{w}"), "cat"),
            ]
        else:
            out.append(Entry(f"{z}qkv_proj.{w}", (f"{h}{q}.{w}", f"{h}{k}.{w}", f"{h}{v}.{w}"), "cat"))
        out.append(Entry(f"{z}out_proj.{w}", (f"{h}{o}.{w}",)))
    return out


def _wb(z: str, h: str, bias: bool = True) -> list[Entry]:
    return [Entry(f"{z}.weight", (f"{h}.weight",))] + ([Entry(f"{z}.bias", (f"{h}.bias",))] if bias else [])


# ---------------------------------------------------------------- GPT-2 -> DecoderOnly
class GPT2:
    """GPT-2 (Radford et al. 2019; transformers' modeling_gpt2.py): learned positions, pre-LN with ln_f, GELU
    (tanh approximation, gelu_new), fused c_attn in Conv1D layout (weight (in, out)), tied head."""

    name = "gpt2"
    ignore = ()
    # old checkpoints store each layer's causal mask (a buffer transformers ignores); zoo computes its own
    recomputed = {r"(transformer\.)?h\.\d+\.attn\.bias": lambda t: torch.ones_like(t).tril()}

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        if _get(c, "add_cross_attention"):
            raise Unsupported("GPT-2 with add_cross_attention=true has no zoo equivalent (decoder_only has no memory)")
        if _get(c, "scale_attn_by_inverse_layer_idx"):
            raise Unsupported("GPT-2 with scale_attn_by_inverse_layer_idx=true has no zoo equivalent")
        act = _get(c, "activation_function")
        if act not in _ACT_FROM_HF:
            raise Unsupported(
                f"GPT-2 activation_function={act!r} has no zoo equivalent; zoo has {sorted(_ACT_FROM_HF)}"
            )
        d = _get(c, "n_embd")
        return "decoder_only", dict(
            vocab_size=_get(c, "vocab_size"),
            d_model=d,
            n_heads=_get(c, "n_head"),
            d_ff=_get(c, "n_inner") or 4 * d,
            n_layers=_get(c, "n_layer"),
            dropout=_get(c, "resid_pdrop"),
            attn_dropout=_get(c, "attn_pdrop"),
            activation=_ACT_FROM_HF[act],
            norm="layernorm",
            norm_eps=_get(c, "layer_norm_epsilon"),
            bias=True,
            norm_first=True,
            final_norm=True,
            position="learned",
            max_len=_get(c, "n_positions"),
            scale_embeddings=False,
            attn_scale=None if _get(c, "scale_attn_weights", True) else 1.0,
            tie_embeddings=tied["lm_head"],
            init="gpt2",
            **zoo_ids(_get(c, "pad_token_id"), _get(c, "bos_token_id"), _get(c, "eos_token_id"), _get(c, "vocab_size")),
        )

    @staticmethod
    def config_to_hf(cfg: ModelConfig) -> dict:
        f = "gpt2"
        b = _common_to_hf(cfg, f)
        b.require(
            norm="layernorm",
            norm_first=True,
            bias=True,
            position="learned",
            position_offset=0,
            scale_embeddings=False,
            mask=(None, "causal"),
            attn_scale=(None, 1.0),
            embed_norm=False,
            type_vocab_size=0,
            lm_head_transform=False,
            lm_head_bias=False,
            lm_head_scale=False,
            activation=("gelu_tanh", *(a for a in _ACT_TO_HF if a != "gelu_tanh")),
        )
        _final_norm(b, True, "it always has ln_f")
        b.refuse()
        return dict(
            model_type="gpt2",
            architectures=[HF_CLASSES[f]],
            vocab_size=cfg.vocab_size,
            n_positions=cfg.max_len,
            n_embd=cfg.d_model,
            n_layer=cfg.decoder_layers,
            n_head=cfg.n_heads,
            n_inner=cfg.d_ff,
            activation_function=_ACT_TO_HF[cfg.activation],
            resid_pdrop=cfg.dropout,
            embd_pdrop=cfg.dropout,
            attn_pdrop=cfg.attention_dropout,
            layer_norm_epsilon=cfg.norm_eps,
            scale_attn_weights=cfg.attn_scale is None,
            tie_word_embeddings=cfg.tie_embeddings,
            **_ids_to_hf(cfg),
        )

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        out = [
            Entry("embed.tok.weight", ("transformer.wte.weight",)),
            Entry("embed.pos.weight", ("transformer.wpe.weight",)),
        ]
        for i in range(cfg.decoder_layers):
            z, h = f"decoder.layers.{i}.", f"transformer.h.{i}."
            out += _wb(z + "self_attn_sub.norm", h + "ln_1")
            out += [
                Entry(z + "self_attn.qkv_proj.weight", (h + "attn.c_attn.weight",), "T"),
                Entry(z + "self_attn.qkv_proj.bias", (h + "attn.c_attn.bias",)),
                Entry(z + "self_attn.out_proj.weight", (h + "attn.c_proj.weight",), "T"),
                Entry(z + "self_attn.out_proj.bias", (h + "attn.c_proj.bias",)),
            ]
            out += _wb(z + "ffn_sub.norm", h + "ln_2")
            out += [
                Entry(z + "ffn.linear1.weight", (h + "mlp.c_fc.weight",), "T"),
                Entry(z + "ffn.linear1.bias", (h + "mlp.c_fc.bias",)),
                Entry(z + "ffn.linear2.weight", (h + "mlp.c_proj.weight",), "T"),
                Entry(z + "ffn.linear2.bias", (h + "mlp.c_proj.bias",)),
            ]
        out += _wb("decoder.norm", "transformer.ln_f")
        out.append(Entry("lm_head.weight", ("lm_head.weight",)))
        return out


# ---------------------------------------------------------------- BERT -> EncoderOnly
class BERT:
    """BERT (Devlin et al. 2019; transformers' modeling_bert.py): word + token-type + learned positions, then
    LayerNorm; post-LN layers; GELU; the MLM head dense -> act -> LayerNorm -> tied decoder + bias. The pooler
    (BertModel's add_pooling_layer) has no zoo block and is dropped."""

    name = "bert"
    ignore = (
        r"bert\.pooler\..*",
        r"cls\.predictions\.decoder\.bias",
        r"bert\.embeddings\.position_ids",
        r"bert\.embeddings\.token_type_ids",
    )

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        if _get(c, "is_decoder") or _get(c, "add_cross_attention"):
            raise Unsupported("BERT with is_decoder / add_cross_attention has no zoo encoder_only equivalent")
        if _get(c, "position_embedding_type", "absolute") != "absolute":
            raise Unsupported(
                f"BERT position_embedding_type={_get(c, 'position_embedding_type')!r}: zoo maps 'absolute' only"
            )
        act = _get(c, "hidden_act")
        if act not in _ACT_FROM_HF:
            raise Unsupported(f"BERT hidden_act={act!r} has no zoo equivalent; zoo has {sorted(_ACT_FROM_HF)}")
        mlm = tied["has_mlm_head"]
        return "encoder_only", dict(
            vocab_size=_get(c, "vocab_size"),
            d_model=_get(c, "hidden_size"),
            n_heads=_get(c, "num_attention_heads"),
            d_ff=_get(c, "intermediate_size"),
            n_layers=_get(c, "num_hidden_layers"),
            dropout=_get(c, "hidden_dropout_prob"),
            attn_dropout=_get(c, "attention_probs_dropout_prob"),
            activation=_ACT_FROM_HF[act],
            norm="layernorm",
            norm_eps=_get(c, "layer_norm_eps"),
            bias=True,
            norm_first=False,
            final_norm=False,
            position="learned",
            max_len=_get(c, "max_position_embeddings"),
            scale_embeddings=False,
            embed_norm=True,
            type_vocab_size=_get(c, "type_vocab_size"),
            tie_embeddings=tied["lm_head"] if mlm else True,
            lm_head_transform=mlm,
            lm_head_bias=mlm,
            init="gpt2",
            pooling="cls",
            **zoo_ids(_get(c, "pad_token_id"), _get(c, "bos_token_id"), _get(c, "eos_token_id"), _get(c, "vocab_size")),
        )

    @staticmethod
    def config_to_hf(cfg: ModelConfig) -> dict:
        f = "bert"
        b = _common_to_hf(cfg, f)
        b.require(
            norm="layernorm",
            norm_first=False,
            bias=True,
            position="learned",
            position_offset=0,
            scale_embeddings=False,
            mask=(None, "bidirectional"),
            attn_scale=None,
            embed_norm=True,
            lm_head_transform=True,
            lm_head_bias=True,
            lm_head_scale=False,
            activation=tuple(_ACT_TO_HF),
        )
        _final_norm(b, False, "post-LN, no final norm")
        if cfg.type_vocab_size < 1:
            b.add("model.type_vocab_size=0", "it always adds a token-type embedding", "model.type_vocab_size=2")
        b.refuse()
        return dict(
            model_type="bert",
            architectures=[HF_CLASSES[f]],
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            num_hidden_layers=cfg.encoder_layers,
            num_attention_heads=cfg.n_heads,
            intermediate_size=cfg.d_ff,
            hidden_act=_ACT_TO_HF[cfg.activation],
            hidden_dropout_prob=cfg.dropout,
            attention_probs_dropout_prob=cfg.attention_dropout,
            max_position_embeddings=cfg.max_len,
            type_vocab_size=cfg.type_vocab_size,
            layer_norm_eps=cfg.norm_eps,
            tie_word_embeddings=cfg.tie_embeddings,
            **_ids_to_hf(cfg),
        )

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        e = "bert.embeddings."
        out = [
            Entry("embed.tok.weight", (e + "word_embeddings.weight",)),
            Entry("embed.pos.weight", (e + "position_embeddings.weight",)),
            Entry("embed.types.weight", (e + "token_type_embeddings.weight",)),
        ]
        out += _wb("embed.norm", e + "LayerNorm")
        for i in range(cfg.encoder_layers):
            z, h = f"encoder.layers.{i}.", f"bert.encoder.layer.{i}."
            out += _attn_entries(
                z + "self_attn.", h + "attention.", "self.query", "self.key", "self.value", "output.dense", bias=True
            )
            out += _wb(z + "self_attn_sub.norm", h + "attention.output.LayerNorm")
            out += _wb(z + "ffn.linear1", h + "intermediate.dense") + _wb(z + "ffn.linear2", h + "output.dense")
            out += _wb(z + "ffn_sub.norm", h + "output.LayerNorm")
        p = "cls.predictions."
        if cfg.lm_head_transform:
            out += _wb("lm_head.dense", p + "transform.dense") + _wb("lm_head.norm", p + "transform.LayerNorm")
        out.append(Entry("lm_head.weight", (p + "decoder.weight",)))
        if cfg.lm_head_bias:
            # transformers 5 ties decoder.bias to cls.predictions.bias only with tie_word_embeddings; the forward
            # reads decoder.bias, so untied that one is the bias, and the other an unused copy
            if cfg.tie_embeddings:
                out.append(Entry("lm_head.bias", (p + "bias",)))
            else:
                out += [Entry("lm_head.bias", (p + "decoder.bias",)), Entry("lm_head.bias", (p + "bias",), "clone")]
        return out


# ---------------------------------------------------------------- Marian / BART -> EncoderDecoder
def _seq2seq_layers(cfg: ModelConfig) -> list[Entry]:
    """BART-style layers (modeling_bart.py's BartEncoderLayer / BartDecoderLayer, Marian's copies): post-LN,
    q/k/v/out_proj, fc1 / fc2, self_attn_layer_norm, encoder_attn(_layer_norm), final_layer_norm."""
    out = []
    for stack, n in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
        for i in range(n):
            z, h = f"{stack}.layers.{i}.", f"model.{stack}.layers.{i}."
            out += _attn_entries(z + "self_attn.", h + "self_attn.", "q_proj", "k_proj", "v_proj", "out_proj", True)
            out += _wb(z + "self_attn_sub.norm", h + "self_attn_layer_norm")
            if stack == "decoder":
                out += _attn_entries(
                    z + "cross_attn.", h + "encoder_attn.", "q_proj", "k_proj", "v_proj", "out_proj", True, cross=True
                )
                out += _wb(z + "cross_attn_sub.norm", h + "encoder_attn_layer_norm")
            out += _wb(z + "ffn.linear1", h + "fc1") + _wb(z + "ffn.linear2", h + "fc2")
            out += _wb(z + "ffn_sub.norm", h + "final_layer_norm")
    return out


def _seq2seq_from_hf(c, tied, family: str) -> dict:
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if _get(c, a) != _get(c, b):
            raise Unsupported(
                f"{family} with {a}={_get(c, a)} != {b}={_get(c, b)} has no zoo equivalent (one "
                f"n_heads / d_ff for both stacks)"
            )
    act = _get(c, "activation_function")
    if act not in _ACT_FROM_HF:
        raise Unsupported(f"{family} activation_function={act!r} has no zoo equivalent; zoo has {sorted(_ACT_FROM_HF)}")
    enc, dec = _get(c, "encoder_layers"), _get(c, "decoder_layers")
    return dict(
        d_model=_get(c, "d_model"),
        n_heads=_get(c, "encoder_attention_heads"),
        d_ff=_get(c, "encoder_ffn_dim"),
        n_layers=enc,
        n_decoder_layers=None if dec == enc else dec,
        dropout=_get(c, "dropout"),
        attn_dropout=_get(c, "attention_dropout"),
        activation=_ACT_FROM_HF[act],
        norm="layernorm",
        norm_eps=1e-5,
        bias=True,
        norm_first=False,
        final_norm=False,
        max_len=_get(c, "max_position_embeddings"),
        scale_embeddings=bool(_get(c, "scale_embedding")),
        tie_embeddings=tied["lm_head"],
        lm_head_bias=tied["logits_bias"],
        init="gpt2",
    )


def _seq2seq_to_hf(cfg: ModelConfig, family: str, b: Blockers) -> dict:
    """The config.json keys BART and Marian share, after adding their shared blockers to b and refusing all."""
    b.require(
        norm="layernorm",
        norm_first=False,
        bias=True,
        mask=(None, "causal"),
        attn_scale=None,
        type_vocab_size=0,
        lm_head_transform=False,
        lm_head_scale=False,
        activation=tuple(_ACT_TO_HF),
        norm_eps=1e-5,  # modeling_bart.py / modeling_marian.py build every nn.LayerNorm with the default eps
    )
    _final_norm(b, False, "post-LN, no final norm")
    b.refuse()
    return dict(
        model_type=family,
        architectures=[HF_CLASSES[family]],
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function=_ACT_TO_HF[cfg.activation],
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=0.0,
        max_position_embeddings=cfg.max_len,
        scale_embedding=cfg.scale_embeddings,
        decoder_start_token_id=cfg.bos_id if cfg.decoder_start_id is None else cfg.decoder_start_id,
        forced_eos_token_id=None,
        is_encoder_decoder=True,
        **_ids_to_hf(cfg),
    )


def _head_entries(cfg: ModelConfig) -> list[Entry]:
    return [
        Entry("lm_head.weight", ("lm_head.weight",)),
        Entry("lm_head.bias" if cfg.lm_head_bias else "", ("final_logits_bias",), "row"),
    ]


class Marian:
    """Marian (Junczys-Dowmunt et al. 2018; transformers' modeling_marian.py): sinusoidal positions with all
    sines before all cosines (not stored), sqrt(d_model) embedding scale where scale_embedding, post-LN,
    final_logits_bias, shared or separate source / target tables (decoder_vocab_size)."""

    name = "marian"
    ignore = (r"model\.(encoder|decoder)\.embed_positions\.weight", r"model\.shared\.weight")
    # zoo computes the position table (sinusoidal_table, split layout): a stored one is read only to compare
    recomputed = {r"model\.(encoder|decoder)\.embed_positions\.weight": lambda t: sinusoidal_table(*t.shape, "split")}

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        src_v, tgt_v = _get(c, "vocab_size"), _get(c, "decoder_vocab_size") or _get(c, "vocab_size")
        d = _seq2seq_from_hf(c, tied, "marian")
        d.update(
            vocab_size=tgt_v,
            src_vocab_size=None if src_v == tgt_v else src_v,
            position="sinusoidal",
            sinusoidal_layout="split",
            share_embeddings=tied["tokens"],
            decoder_start_id=_get(c, "decoder_start_token_id"),
            **zoo_ids(_get(c, "pad_token_id"), _get(c, "bos_token_id"), _get(c, "eos_token_id"), tgt_v),
        )
        return "encoder_decoder", d

    @staticmethod
    def config_to_hf(cfg: ModelConfig) -> dict:
        b = _common_to_hf(cfg, "marian")
        b.require(position="sinusoidal", sinusoidal_layout="split", embed_norm=False)
        shared = cfg.share_embeddings or cfg.share_tokens
        if shared and not cfg.tie_embeddings:
            why = "with shared tables: its shared table is the head"
            b.add("model.tie_embeddings=False", why, "model.tie_embeddings=true")
        if cfg.pad_id >= min(cfg.vocab_size, cfg.src_vocab_size or cfg.vocab_size):
            b.add(
                f"model.pad_id={cfg.pad_id}",
                f"outside the source vocabulary ({cfg.src_vocab_size}); it pads both stacks with it",
                "a tokenizer whose pad is in both vocabularies",
            )
        out = _seq2seq_to_hf(cfg, "marian", b)
        out.update(
            vocab_size=cfg.src_vocab_size or cfg.vocab_size,
            decoder_vocab_size=cfg.vocab_size,
            share_encoder_decoder_embeddings=shared,
            tie_word_embeddings=cfg.tie_embeddings,
        )
        return out

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        out = []
        if cfg.share_embeddings or cfg.share_tokens:
            out.append(Entry("tgt_embed.tok.weight", ("model.shared.weight",)))
        out += [
            Entry("src_embed.tok.weight", ("model.encoder.embed_tokens.weight",)),
            Entry("tgt_embed.tok.weight", ("model.decoder.embed_tokens.weight",)),
        ]
        return out + _seq2seq_layers(cfg) + _head_entries(cfg)


class BART:
    """BART (Lewis et al. 2020; transformers' modeling_bart.py): learned positions read at position + 2,
    layernorm_embedding per stack, post-LN, GELU, sqrt(d_model) scale where scale_embedding, final_logits_bias;
    with tie_word_embeddings one `shared` table for encoder, decoder and head, else three separate ones."""

    name = "bart"
    ignore = (r"model\.shared\.weight",)

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        d = _seq2seq_from_hf(c, tied, "bart")
        d.update(
            vocab_size=_get(c, "vocab_size"),
            position="learned",
            position_offset=2,
            embed_norm=True,
            share_tokens=tied["tokens"],
            decoder_start_id=_get(c, "decoder_start_token_id"),
            **zoo_ids(_get(c, "pad_token_id"), _get(c, "bos_token_id"), _get(c, "eos_token_id"), _get(c, "vocab_size")),
        )
        return "encoder_decoder", d

    @staticmethod
    def config_to_hf(cfg: ModelConfig) -> dict:
        b = _common_to_hf(cfg, "bart")
        b.require(position="learned", position_offset=2, embed_norm=True, share_embeddings=False)
        if cfg.share_tokens != cfg.tie_embeddings:
            b.add(
                f"model.share_tokens={cfg.share_tokens}",
                f"with model.tie_embeddings={cfg.tie_embeddings}: tie_word_embeddings ties both or neither",
                f"model.share_tokens={hydra_value(cfg.tie_embeddings)}",
            )
        if cfg.src_vocab_size not in (None, cfg.vocab_size):
            b.add(f"model.src_vocab_size={cfg.src_vocab_size}", "one vocabulary", "data.joint_vocab=true")
        out = _seq2seq_to_hf(cfg, "bart", b)
        out.update(vocab_size=cfg.vocab_size, tie_word_embeddings=cfg.tie_embeddings)
        return out

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        out = [Entry("tgt_embed.tok.weight", ("model.shared.weight",))] if cfg.share_tokens else []
        for zoo, hf in (("src_embed", "model.encoder."), ("tgt_embed", "model.decoder.")):
            out += [
                Entry(f"{zoo}.tok.weight", (hf + "embed_tokens.weight",)),
                Entry(f"{zoo}.pos.weight", (hf + "embed_positions.weight",)),
            ]
            out += _wb(f"{zoo}.norm", hf + "layernorm_embedding")
        out += _seq2seq_layers(cfg) + _head_entries(cfg)
        if not cfg.share_tokens:  # BartModel always has `shared`; untied, forward never reads it
            out.append(Entry("tgt_embed.tok.weight", ("model.shared.weight",), "clone"))
        return out


# ---------------------------------------------------------------- T5 -> EncoderDecoder
_T5_FF = {
    "relu": "relu",
    "gated-gelu": "geglu_tanh",
    "gelu_new": "gelu_tanh",
    "gelu": "gelu",
    "gated-silu": "swiglu",
    "silu": "silu",
}
_T5_FF_TO_HF = {v: k for k, v in _T5_FF.items()}


def _t5_check_to_hf(cfg: ModelConfig) -> None:
    """Raise Unsupported naming every option of cfg Hugging Face t5 cannot hold (_common_to_hf, the required
    values, then a missing final norm, two vocabularies, a separate attention dropout, unshared tables)."""
    b = _common_to_hf(cfg, "t5")
    b.require(
        norm="rmsnorm",
        norm_first=True,
        bias=False,
        position="t5_relative",
        attn_scale=1.0,
        scale_embeddings=False,
        mask=(None, "causal"),
        embed_norm=False,
        type_vocab_size=0,
        lm_head_transform=False,
        lm_head_bias=False,
        activation=tuple(_T5_FF_TO_HF),
    )
    _final_norm(b, True, "final_layer_norm")
    if cfg.src_vocab_size not in (None, cfg.vocab_size):
        b.add(f"model.src_vocab_size={cfg.src_vocab_size}", "one vocabulary, one shared table", "data.joint_vocab=true")
    if cfg.attention_dropout != cfg.dropout:
        why = f"its one dropout_rate (model.dropout={cfg.dropout}) also drops attention weights"
        b.add(f"model.attn_dropout={cfg.attn_dropout}", why, "model.attn_dropout=null")
    if not (cfg.share_embeddings or cfg.share_tokens):
        b.add("model.share_embeddings=False", "one shared table", "model.share_embeddings=true")
    b.refuse()


class T5:
    """T5 (Raffel et al. 2020; transformers' modeling_t5.py): no positions but a bucketed relative bias in each
    stack's first layer shared by all layers, RMSNorm without mean or bias (T5LayerNorm), pre-LN with a final
    norm per stack, no biases, no 1/sqrt(d) in attention, ReLU or gated-GELU (v1.1) FFN, one shared table, and
    the decoder output times d_model^-0.5 where the config ties embeddings (scale_decoder_outputs)."""

    name = "t5"
    ignore = (r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight",)

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        d, h = _get(c, "d_model"), _get(c, "num_heads")
        if _get(c, "d_kv") * h != d:
            raise Unsupported(
                f"T5 with d_kv={_get(c, 'd_kv')} * num_heads={h} != d_model={d} has no zoo equivalent "
                f"(zoo's head width is d_model / n_heads)"
            )
        ff = _get(c, "feed_forward_proj")
        if ff not in _T5_FF:
            raise Unsupported(f"T5 feed_forward_proj={ff!r} has no zoo equivalent; zoo maps {sorted(_T5_FF)}")
        if not tied["tokens"]:
            raise Unsupported("T5 whose encoder and decoder token tables differ has no zoo equivalent")
        enc, dec = _get(c, "num_layers"), _get(c, "num_decoder_layers")
        return "encoder_decoder", dict(
            vocab_size=_get(c, "vocab_size"),
            d_model=d,
            n_heads=h,
            d_ff=_get(c, "d_ff"),
            n_layers=enc,
            n_decoder_layers=None if dec in (None, enc) else dec,
            dropout=_get(c, "dropout_rate"),
            activation=_T5_FF[ff],
            norm="rmsnorm",
            norm_eps=_get(c, "layer_norm_epsilon"),
            bias=False,
            norm_first=True,
            final_norm=True,
            position="t5_relative",
            rel_buckets=_get(c, "relative_attention_num_buckets"),
            rel_max_distance=_get(c, "relative_attention_max_distance"),
            attn_scale=1.0,
            max_len=_get(c, "n_positions") or 512,
            scale_embeddings=False,
            share_embeddings=True,
            tie_embeddings=tied["lm_head"],
            lm_head_scale=bool(_get(c, "scale_decoder_outputs", True)),
            init="gpt2",
            decoder_start_id=_get(c, "decoder_start_token_id"),
            **zoo_ids(_get(c, "pad_token_id"), _get(c, "bos_token_id"), _get(c, "eos_token_id"), _get(c, "vocab_size")),
        )

    @staticmethod
    def config_to_hf(cfg: ModelConfig) -> dict:
        f = "t5"
        _t5_check_to_hf(cfg)
        return dict(
            model_type="t5",
            architectures=[HF_CLASSES[f]],
            vocab_size=cfg.vocab_size,
            d_model=cfg.d_model,
            d_kv=cfg.head_dim,
            d_ff=cfg.d_ff,
            num_layers=cfg.encoder_layers,
            num_decoder_layers=cfg.decoder_layers,
            num_heads=cfg.n_heads,
            relative_attention_num_buckets=cfg.rel_buckets,
            relative_attention_max_distance=cfg.rel_max_distance,
            dropout_rate=cfg.dropout,
            layer_norm_epsilon=cfg.norm_eps,
            feed_forward_proj=_T5_FF_TO_HF[cfg.activation],
            n_positions=cfg.max_len,
            is_encoder_decoder=True,
            # transformers 5 reads tie_word_embeddings=false as "do not rescale" (scale_decoder_outputs);
            # the head is tied when the file stores no separate lm_head.weight
            tie_word_embeddings=cfg.lm_head_scale,
            decoder_start_token_id=cfg.bos_id if cfg.decoder_start_id is None else cfg.decoder_start_id,
            **_ids_to_hf(cfg),
        )

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        out = [
            Entry("tgt_embed.tok.weight", ("shared.weight",)),
            Entry("src_embed.tok.weight", ("encoder.embed_tokens.weight",)),
            Entry("tgt_embed.tok.weight", ("decoder.embed_tokens.weight",)),
        ]
        gated = cfg.activation in ("geglu_tanh", "swiglu")
        for stack, n in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
            for i in range(n):
                z, h = f"{stack}.layers.{i}.", f"{stack}.block.{i}.layer."
                if i == 0:
                    out.append(
                        Entry(f"{stack}.rel_bias.weight", (h + "0.SelfAttention.relative_attention_bias.weight",))
                    )
                out += _attn_entries(z + "self_attn.", h + "0.SelfAttention.", "q", "k", "v", "o", False)
                out.append(Entry(z + "self_attn_sub.norm.weight", (h + "0.layer_norm.weight",)))
                ff = h + "1." if stack == "encoder" else h + "2."
                if stack == "decoder":
                    out += _attn_entries(
                        z + "cross_attn.", h + "1.EncDecAttention.", "q", "k", "v", "o", False, cross=True
                    )
                    out.append(Entry(z + "cross_attn_sub.norm.weight", (h + "1.layer_norm.weight",)))
                out.append(Entry(z + "ffn_sub.norm.weight", (ff + "layer_norm.weight",)))
                if gated:
                    out.append(
                        Entry(
                            z + "ffn.linear1.weight",
                            (ff + "DenseReluDense.wi_0.weight", ff + "DenseReluDense.wi_1.weight"),
                            "cat",
                        )
                    )
                else:
                    out.append(Entry(z + "ffn.linear1.weight", (ff + "DenseReluDense.wi.weight",)))
                out.append(Entry(z + "ffn.linear2.weight", (ff + "DenseReluDense.wo.weight",)))
            out.append(Entry(f"{stack}.norm.weight", (f"{stack}.final_layer_norm.weight",)))
        out.append(Entry("lm_head.weight", ("lm_head.weight",)))
        return out


FAMILIES = {"gpt2": GPT2, "bert": BERT, "marian": Marian, "bart": BART, "t5": T5}


def family_of(model_type: str | None):
    """The family class of an HF model_type. Raises Unsupported naming the supported ones."""
    if model_type not in FAMILIES:
        raise Unsupported(
            f"Hugging Face model_type={model_type!r} is not supported; supported families: {', '.join(SUPPORTED)}"
        )
    return FAMILIES[model_type]


def family_for(arch: str, cfg: ModelConfig) -> str:
    """The HF family a zoo model exports to: decoder_only -> gpt2, encoder_only -> bert, encoder_decoder ->
    t5 (position=t5_relative), bart (learned), marian (sinusoidal). Raises Unsupported naming the option."""
    if arch == "decoder_only":
        return "gpt2"
    if arch == "encoder_only":
        return "bert"
    by_position = {"t5_relative": "t5", "learned": "bart", "sinusoidal": "marian"}
    if cfg.position not in by_position:
        raise Unsupported(
            f"model.position={cfg.position!r} in an encoder_decoder has no Hugging Face equivalent; "
            f"supported: {', '.join(f'{p} ({f})' for p, f in by_position.items())}"
        )
    return by_position[cfg.position]


# ---------------------------------------------------------------- applying a map
def hf_to_zoo(entries: Sequence[Entry], hf: dict[str, torch.Tensor], ignore: Sequence[str]) -> dict[str, torch.Tensor]:
    """zoo state dict from an HF one by `entries`. Raises KeyError naming a missing HF key, ValueError naming
    an HF key the map does not read (unless it matches an `ignore` pattern)."""
    out, used = {}, set()
    for e in entries:
        if e.kind == "clone":
            used.update(e.hf)
            continue
        missing = [k for k in e.hf if k not in hf]
        if missing:
            raise KeyError(f"the Hugging Face checkpoint has no {missing[0]!r} (needed for zoo's {e.zoo or 'head'})")
        used.update(e.hf)
        ts = [hf[k] for k in e.hf]
        if e.kind == "row":
            if e.zoo:
                out[e.zoo] = ts[0].reshape(-1)
            continue
        value = {"copy": lambda: ts[0], "T": lambda: ts[0].t(), "cat": lambda: torch.cat(ts, 0)}[e.kind]()
        out.setdefault(e.zoo, value.contiguous())
    extra = [k for k in hf if k not in used and not any(re.fullmatch(p, k) for p in ignore)]
    if extra:
        raise ValueError(
            f"the Hugging Face checkpoint has weights zoo's map does not read: {extra[:5]}"
            f"{' ...' if len(extra) > 5 else ''}"
        )
    return out


def unused_keys(entries: Sequence[Entry], hf: dict[str, torch.Tensor], recomputed: dict | None = None) -> list[str]:
    """The keys of an HF state dict whose values a conversion by `entries` loses: a key no entry reads (a
    clone entry reads nothing: it is written back from zoo's tensor), unless it holds the same tensor as a key
    that is read or an equal copy of one (a tied table), a table zoo computes itself and equal to it
    (`recomputed`: {key pattern: f(tensor) -> zoo's own table}, e.g. Marian's sinusoidal positions), or an
    integer buffer (position ids). For a warning that names them: BERT's pooler, a BART `shared` table no
    forward reads that differs from the decoder's, a position table other than zoo's sinusoid."""
    read = {k for e in entries if e.kind != "clone" for k in e.hf if k in hf}
    ptrs = {hf[k].data_ptr() for k in read}
    out = []
    for k, v in hf.items():
        if k in read or v.data_ptr() in ptrs or not v.is_floating_point():
            continue
        if any(hf[r].shape == v.shape and torch.equal(hf[r], v) for r in read):
            continue
        if is_recomputed(k, v, recomputed):
            continue
        out.append(k)
    return out


def zoo_to_hf(entries: Sequence[Entry], zoo: dict[str, torch.Tensor], vocab_size: int) -> dict[str, torch.Tensor]:
    """HF state dict from a zoo one by `entries`. Tensors tied in zoo (one storage) are written once, under the
    first HF key that maps them (the one transformers ties the others to). Raises ValueError naming a zoo
    key the map does not write."""
    out, seen, used = {}, set(), set()
    for e in entries:
        if e.kind == "row":
            bias = zoo[e.zoo] if e.zoo else torch.zeros(vocab_size)
            out[e.hf[0]] = bias.detach().reshape(1, -1).clone()
            used.add(e.zoo)
            continue
        t = zoo[e.zoo].detach()
        used.add(e.zoo)
        if e.kind == "clone":
            if e.hf[0] not in out:
                out[e.hf[0]] = t.clone()
            continue
        ptr = t.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        if e.kind == "copy":
            out[e.hf[0]] = t.clone()
        elif e.kind == "T":
            out[e.hf[0]] = t.t().contiguous()
        elif e.kind == "cat":
            for k, part in zip(e.hf, t.chunk(len(e.hf), 0)):
                out[k] = part.contiguous().clone()
    ptrs_used = {zoo[k].data_ptr() for k in used if k}
    left = [k for k, v in zoo.items() if k not in used and v.data_ptr() not in ptrs_used]
    if left:
        raise ValueError(f"zoo weights with no Hugging Face equivalent in this family: {left[:5]}")
    return out
