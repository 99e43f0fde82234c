"""BERT <-> zoo's EncoderOnly: the config and weight maps."""

from zoo.interop.blockers import Blockers, Unsupported
from zoo.interop.families.config import ACT_TO_HF, Family, activation_from_hf, get, ids_from_hf
from zoo.interop.families.weights import Entry, attention, weight_bias
from zoo.model.config import ModelConfig


class BERT(Family):
    """BERT (Devlin et al. 2019; transformers' modeling_bert.py): word + token-type + learned positions, then
    LayerNorm; post-LN layers; GELU; the MLM head dense -> act -> LayerNorm -> tied decoder + bias. The pooler
    (BertModel's add_pooling_layer) has no zoo block and is dropped."""

    name, hf_class, arch, prefix = "bert", "BertForMaskedLM", "encoder_only", "bert."
    ignore = (
        r"bert\.pooler\..*",
        r"cls\.predictions\.decoder\.bias",
        r"bert\.embeddings\.position_ids",
        r"bert\.embeddings\.token_type_ids",
    )
    requires = dict(
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
        activation=tuple(ACT_TO_HF),
    )
    final_norm = (False, "post-LN, no final norm")

    @staticmethod
    def tied(sd: dict, ptr: dict) -> dict:
        """{"has_mlm_head", "lm_head": the MLM decoder shares the token table}; without an MLM head (BertModel)
        the head is the table."""
        emb = "bert.embeddings.word_embeddings.weight"
        mlm = "cls.predictions.transform.dense.weight" in sd
        if not mlm:
            sd["cls.predictions.decoder.weight"] = sd[emb]
        return {"has_mlm_head": mlm, "lm_head": mlm and ptr["cls.predictions.decoder.weight"] == ptr[emb]}

    @classmethod
    def more_blockers(cls, b: Blockers) -> None:
        if b.cfg.type_vocab_size < 1:
            b.add("model.type_vocab_size=0", "it always adds a token-type embedding", "model.type_vocab_size=2")

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        if get(c, "is_decoder") or get(c, "add_cross_attention"):
            raise Unsupported("BERT with is_decoder / add_cross_attention has no zoo encoder_only equivalent")
        if get(c, "position_embedding_type", "absolute") != "absolute":
            raise Unsupported(
                f"BERT position_embedding_type={get(c, 'position_embedding_type')!r}: zoo maps 'absolute' only"
            )
        activation = activation_from_hf(c, "hidden_act", "BERT")
        mlm = tied["has_mlm_head"]
        return "encoder_only", dict(
            vocab_size=get(c, "vocab_size"),
            d_model=get(c, "hidden_size"),
            n_heads=get(c, "num_attention_heads"),
            d_ff=get(c, "intermediate_size"),
            n_layers=get(c, "num_hidden_layers"),
            dropout=get(c, "hidden_dropout_prob"),
            attn_dropout=get(c, "attention_probs_dropout_prob"),
            activation=activation,
            norm="layernorm",
            norm_eps=get(c, "layer_norm_eps"),
            bias=True,
            norm_first=False,
            final_norm=False,
            position="learned",
            max_len=get(c, "max_position_embeddings"),
            scale_embeddings=False,
            embed_norm=True,
            type_vocab_size=get(c, "type_vocab_size"),
            tie_embeddings=tied["lm_head"] if mlm else True,
            lm_head_transform=mlm,
            lm_head_bias=mlm,
            init="gpt2",
            pooling="cls",
            **ids_from_hf(c, get(c, "vocab_size")),
        )

    @staticmethod
    def hf_fields(cfg: ModelConfig) -> dict:
        return dict(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            num_hidden_layers=cfg.encoder_layers,
            num_attention_heads=cfg.n_heads,
            intermediate_size=cfg.d_ff,
            hidden_act=ACT_TO_HF[cfg.activation],
            hidden_dropout_prob=cfg.dropout,
            attention_probs_dropout_prob=cfg.attention_dropout,
            max_position_embeddings=cfg.max_len,
            type_vocab_size=cfg.type_vocab_size,
            layer_norm_eps=cfg.norm_eps,
            tie_word_embeddings=cfg.tie_embeddings,
        )

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        e = "bert.embeddings."
        out = [
            Entry("embed.tok.weight", (e + "word_embeddings.weight",)),
            Entry("embed.pos.weight", (e + "position_embeddings.weight",)),
            Entry("embed.types.weight", (e + "token_type_embeddings.weight",)),
        ]
        out += weight_bias("embed.norm", e + "LayerNorm")
        for i in range(cfg.encoder_layers):
            z, h = f"encoder.layers.{i}.", f"bert.encoder.layer.{i}."
            out += attention(
                z + "self_attn.", h + "attention.", "self.query", "self.key", "self.value", "output.dense", bias=True
            )
            out += weight_bias(z + "self_attn_sub.norm", h + "attention.output.LayerNorm")
            out += weight_bias(z + "ffn.linear1", h + "intermediate.dense")
            out += weight_bias(z + "ffn.linear2", h + "output.dense")
            out += weight_bias(z + "ffn_sub.norm", h + "output.LayerNorm")
        return out + BERT.head_entries(cfg)

    @staticmethod
    def head_entries(cfg: ModelConfig) -> list[Entry]:
        """The MLM head: transform (dense, LayerNorm), the decoder (the head's weight) and its bias."""
        p, out = "cls.predictions.", []
        if cfg.lm_head_transform:
            out += weight_bias("lm_head.dense", p + "transform.dense") + weight_bias(
                "lm_head.norm", p + "transform.LayerNorm"
            )
        out.append(Entry("lm_head.weight", (p + "decoder.weight",)))
        if cfg.lm_head_bias:
            # transformers 5 ties decoder.bias to cls.predictions.bias only with tie_word_embeddings; the forward
            # reads decoder.bias, so untied that one is the bias, and the other an unused copy
            if cfg.tie_embeddings:
                out.append(Entry("lm_head.bias", (p + "bias",)))
            else:
                out += [Entry("lm_head.bias", (p + "decoder.bias",)), Entry("lm_head.bias", (p + "bias",), "clone")]
        return out
