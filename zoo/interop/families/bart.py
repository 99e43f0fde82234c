"""BART and Marian <-> zoo's EncoderDecoder: the config and weight maps. Marian's modeling file is a copy of
BART's, so both share the layers, the head and most of the config here (Seq2Seq)."""

import torch

from zoo.interop.blockers import Blockers, Unsupported, hydra_value
from zoo.interop.families.config import ACT_TO_HF, Family, activation_from_hf, get, ids_from_hf
from zoo.interop.families.weights import Entry, attention, weight_bias
from zoo.model.blocks.positions import sinusoidal_table
from zoo.model.config import ModelConfig


class Seq2Seq(Family):
    """What BART (modeling_bart.py) and Marian (modeling_marian.py) share: post-LN layers with separate q / k / v /
    out_proj, fc1 / fc2, self_attn_layer_norm, encoder_attn(_layer_norm), final_layer_norm; final_logits_bias."""

    arch, prefix = "encoder_decoder", "model."
    requires = dict(
        norm="layernorm",
        norm_first=False,
        bias=True,
        mask=(None, "causal"),
        attn_scale=None,
        type_vocab_size=0,
        lm_head_transform=False,
        lm_head_scale=False,
        activation=tuple(ACT_TO_HF),
        norm_eps=1e-5,  # modeling_bart.py / modeling_marian.py build every nn.LayerNorm with the default eps
    )
    final_norm = (False, "post-LN, no final norm")

    @staticmethod
    def tied(sd: dict, ptr: dict) -> dict:
        """{"lm_head", "tokens": shared storage with the decoder's table; "logits_bias": a nonzero
        final_logits_bias}; a base model's head is the decoder's table, its bias 0."""
        dec = "model.decoder.embed_tokens.weight"
        sd.setdefault("lm_head.weight", sd[dec])
        sd.setdefault("final_logits_bias", torch.zeros(1, sd["lm_head.weight"].shape[0]))
        return dict(
            lm_head=sd["lm_head.weight"].data_ptr() == ptr[dec],
            tokens=ptr["model.encoder.embed_tokens.weight"] == ptr[dec],
            logits_bias=bool(sd["final_logits_bias"].ne(0).any()),
        )

    @classmethod
    def shared_from_hf(cls, c, tied) -> dict:
        """The ModelConfig fields BART and Marian read alike. Raises Unsupported for stacks of different widths."""
        for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
            if get(c, a) != get(c, b):
                raise Unsupported(
                    f"{cls.name} with {a}={get(c, a)} != {b}={get(c, b)} has no zoo equivalent (one "
                    f"n_heads / d_ff for both stacks)"
                )
        activation = activation_from_hf(c, "activation_function", cls.name)
        enc, dec = get(c, "encoder_layers"), get(c, "decoder_layers")
        return dict(
            d_model=get(c, "d_model"),
            n_heads=get(c, "encoder_attention_heads"),
            d_ff=get(c, "encoder_ffn_dim"),
            n_layers=enc,
            n_decoder_layers=None if dec == enc else dec,
            dropout=get(c, "dropout"),
            attn_dropout=get(c, "attention_dropout"),
            activation=activation,
            norm="layernorm",
            norm_eps=1e-5,
            bias=True,
            norm_first=False,
            final_norm=False,
            max_len=get(c, "max_position_embeddings"),
            scale_embeddings=bool(get(c, "scale_embedding")),
            tie_embeddings=tied["lm_head"],
            lm_head_bias=tied["logits_bias"],
            init="gpt2",
            decoder_start_id=get(c, "decoder_start_token_id"),
        )

    @staticmethod
    def hf_fields(cfg: ModelConfig) -> dict:
        return dict(
            d_model=cfg.d_model,
            encoder_layers=cfg.encoder_layers,
            decoder_layers=cfg.decoder_layers,
            encoder_attention_heads=cfg.n_heads,
            decoder_attention_heads=cfg.n_heads,
            encoder_ffn_dim=cfg.d_ff,
            decoder_ffn_dim=cfg.d_ff,
            activation_function=ACT_TO_HF[cfg.activation],
            dropout=cfg.dropout,
            attention_dropout=cfg.attention_dropout,
            activation_dropout=0.0,
            max_position_embeddings=cfg.max_len,
            scale_embedding=cfg.scale_embeddings,
            decoder_start_token_id=cfg.bos_id if cfg.decoder_start_id is None else cfg.decoder_start_id,
            forced_eos_token_id=None,
            is_encoder_decoder=True,
        )

    @staticmethod
    def layers(cfg: ModelConfig) -> list[Entry]:
        """Both stacks' layers (BartEncoderLayer / BartDecoderLayer and Marian's copies)."""
        out = []
        for stack, n in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
            for i in range(n):
                z, h = f"{stack}.layers.{i}.", f"model.{stack}.layers.{i}."
                out += attention(z + "self_attn.", h + "self_attn.", "q_proj", "k_proj", "v_proj", "out_proj", True)
                out += weight_bias(z + "self_attn_sub.norm", h + "self_attn_layer_norm")
                if stack == "decoder":
                    out += attention(
                        z + "cross_attn.",
                        h + "encoder_attn.",
                        "q_proj",
                        "k_proj",
                        "v_proj",
                        "out_proj",
                        True,
                        cross=True,
                    )
                    out += weight_bias(z + "cross_attn_sub.norm", h + "encoder_attn_layer_norm")
                out += weight_bias(z + "ffn.linear1", h + "fc1") + weight_bias(z + "ffn.linear2", h + "fc2")
                out += weight_bias(z + "ffn_sub.norm", h + "final_layer_norm")
        return out

    @staticmethod
    def head(cfg: ModelConfig) -> list[Entry]:
        return [
            Entry("lm_head.weight", ("lm_head.weight",)),
            Entry("lm_head.bias" if cfg.lm_head_bias else "", ("final_logits_bias",), "row"),
        ]


class Marian(Seq2Seq):
    """Marian (Junczys-Dowmunt et al. 2018; transformers' modeling_marian.py): sinusoidal positions with all
    sines before all cosines (not stored), sqrt(d_model) embedding scale where scale_embedding, post-LN,
    final_logits_bias, shared or separate source / target tables (decoder_vocab_size)."""

    name, hf_class = "marian", "MarianMTModel"
    ignore = (r"model\.(encoder|decoder)\.embed_positions\.weight", r"model\.shared\.weight")
    # zoo computes the position table (sinusoidal_table, split layout): a stored one is read only to compare
    recomputed = {r"model\.(encoder|decoder)\.embed_positions\.weight": lambda t: sinusoidal_table(*t.shape, "split")}
    requires = dict(position="sinusoidal", sinusoidal_layout="split", embed_norm=False, **Seq2Seq.requires)

    @classmethod
    def config_from_hf(cls, c, tied) -> tuple[str, dict]:
        src_v, tgt_v = get(c, "vocab_size"), get(c, "decoder_vocab_size") or get(c, "vocab_size")
        d = cls.shared_from_hf(c, tied)
        d.update(
            vocab_size=tgt_v,
            src_vocab_size=None if src_v == tgt_v else src_v,
            position="sinusoidal",
            sinusoidal_layout="split",
            share_embeddings=tied["tokens"],
            **ids_from_hf(c, tgt_v),
        )
        return "encoder_decoder", d

    @classmethod
    def more_blockers(cls, b: Blockers) -> None:
        cfg = b.cfg
        if (cfg.share_embeddings or cfg.share_tokens) and not cfg.tie_embeddings:
            why = "with shared tables: its shared table is the head"
            b.add("model.tie_embeddings=False", why, "model.tie_embeddings=true")
        if cfg.pad_id >= min(cfg.vocab_size, cfg.src_vocab_size or cfg.vocab_size):
            b.add(
                f"model.pad_id={cfg.pad_id}",
                f"outside the source vocabulary ({cfg.src_vocab_size}); it pads both stacks with it",
                "a tokenizer whose pad is in both vocabularies",
            )

    @staticmethod
    def hf_fields(cfg: ModelConfig) -> dict:
        return dict(
            Seq2Seq.hf_fields(cfg),
            vocab_size=cfg.src_vocab_size or cfg.vocab_size,
            decoder_vocab_size=cfg.vocab_size,
            share_encoder_decoder_embeddings=cfg.share_embeddings or cfg.share_tokens,
            tie_word_embeddings=cfg.tie_embeddings,
        )

    @classmethod
    def entries(cls, cfg: ModelConfig) -> list[Entry]:
        out = []
        if cfg.share_embeddings or cfg.share_tokens:
            out.append(Entry("tgt_embed.tok.weight", ("model.shared.weight",)))
        out += [
            Entry("src_embed.tok.weight", ("model.encoder.embed_tokens.weight",)),
            Entry("tgt_embed.tok.weight", ("model.decoder.embed_tokens.weight",)),
        ]
        return out + cls.layers(cfg) + cls.head(cfg)


class BART(Seq2Seq):
    """BART (Lewis et al. 2020; transformers' modeling_bart.py): learned positions read at position + 2,
    layernorm_embedding per stack, post-LN, GELU, sqrt(d_model) scale where scale_embedding, final_logits_bias;
    with tie_word_embeddings one `shared` table for encoder, decoder and head, else three separate ones."""

    name, hf_class = "bart", "BartForConditionalGeneration"
    ignore = (r"model\.shared\.weight",)
    requires = dict(position="learned", position_offset=2, embed_norm=True, share_embeddings=False, **Seq2Seq.requires)

    @classmethod
    def config_from_hf(cls, c, tied) -> tuple[str, dict]:
        d = cls.shared_from_hf(c, tied)
        d.update(
            vocab_size=get(c, "vocab_size"),
            position="learned",
            position_offset=2,
            embed_norm=True,
            share_tokens=tied["tokens"],
            **ids_from_hf(c, get(c, "vocab_size")),
        )
        return "encoder_decoder", d

    @classmethod
    def more_blockers(cls, b: Blockers) -> None:
        cfg = b.cfg
        if cfg.share_tokens != cfg.tie_embeddings:
            b.add(
                f"model.share_tokens={cfg.share_tokens}",
                f"with model.tie_embeddings={cfg.tie_embeddings}: tie_word_embeddings ties both or neither",
                f"model.share_tokens={hydra_value(cfg.tie_embeddings)}",
            )
        if cfg.src_vocab_size not in (None, cfg.vocab_size):
            b.add(f"model.src_vocab_size={cfg.src_vocab_size}", "one vocabulary", "data.joint_vocab=true")

    @staticmethod
    def hf_fields(cfg: ModelConfig) -> dict:
        return dict(Seq2Seq.hf_fields(cfg), vocab_size=cfg.vocab_size, tie_word_embeddings=cfg.tie_embeddings)

    @classmethod
    def entries(cls, cfg: ModelConfig) -> list[Entry]:
        out = [Entry("tgt_embed.tok.weight", ("model.shared.weight",))] if cfg.share_tokens else []
        for zoo, hf in (("src_embed", "model.encoder."), ("tgt_embed", "model.decoder.")):
            out += [
                Entry(f"{zoo}.tok.weight", (hf + "embed_tokens.weight",)),
                Entry(f"{zoo}.pos.weight", (hf + "embed_positions.weight",)),
            ]
            out += weight_bias(f"{zoo}.norm", hf + "layernorm_embedding")
        out += cls.layers(cfg) + cls.head(cfg)
        if not cfg.share_tokens:  # BartModel always has `shared`; untied, forward never reads it
            out.append(Entry("tgt_embed.tok.weight", ("model.shared.weight",), "clone"))
        return out
