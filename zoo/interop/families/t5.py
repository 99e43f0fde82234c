"""T5 <-> zoo's EncoderDecoder: the config and weight maps."""

from zoo.interop.blockers import Blockers, Unsupported
from zoo.interop.families.config import Family, get, ids_from_hf
from zoo.interop.families.weights import Entry, attention
from zoo.model.config import ModelConfig

# T5's feed_forward_proj <-> zoo's activation
FF_FROM_HF = {
    "relu": "relu",
    "gated-gelu": "geglu_tanh",
    "gelu_new": "gelu_tanh",
    "gelu": "gelu",
    "gated-silu": "swiglu",
    "silu": "silu",
}
FF_TO_HF = {v: k for k, v in FF_FROM_HF.items()}


class T5(Family):
    """T5 (Raffel et al. 2020; transformers' modeling_t5.py): no positions but a bucketed relative bias in each
    stack's first layer shared by all layers, RMSNorm without mean or bias (T5LayerNorm), pre-LN with a final
    norm per stack, no biases, no 1/sqrt(d) in attention, ReLU or gated-GELU (v1.1) FFN, one shared table, and
    the decoder output times d_model^-0.5 where the config ties embeddings (scale_decoder_outputs)."""

    name, hf_class, arch = "t5", "T5ForConditionalGeneration", "encoder_decoder"
    ignore = (r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight",)
    requires = dict(
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
        activation=tuple(FF_TO_HF),
    )
    final_norm = (True, "final_layer_norm")

    @staticmethod
    def tied(sd: dict, ptr: dict) -> dict:
        """{"lm_head": the head shares `shared`, "tokens": the stacks share one table}."""
        sd.setdefault("lm_head.weight", sd["shared.weight"])
        return dict(
            lm_head=sd["lm_head.weight"].data_ptr() == ptr["shared.weight"],
            tokens=ptr["encoder.embed_tokens.weight"] == ptr["decoder.embed_tokens.weight"],
        )

    @classmethod
    def more_blockers(cls, b: Blockers) -> None:
        """Two vocabularies, a separate attention dropout, unshared tables."""
        cfg = b.cfg
        if cfg.src_vocab_size not in (None, cfg.vocab_size):
            why = "one vocabulary, one shared table"
            b.add(f"model.src_vocab_size={cfg.src_vocab_size}", why, "data.joint_vocab=true")
        if cfg.attention_dropout != cfg.dropout:
            why = f"its one dropout_rate (model.dropout={cfg.dropout}) also drops attention weights"
            b.add(f"model.attn_dropout={cfg.attn_dropout}", why, "model.attn_dropout=null")
        if not (cfg.share_embeddings or cfg.share_tokens):
            b.add("model.share_embeddings=False", "one shared table", "model.share_embeddings=true")

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        d, h = get(c, "d_model"), get(c, "num_heads")
        if get(c, "d_kv") * h != d:
            raise Unsupported(
                f"T5 with d_kv={get(c, 'd_kv')} * num_heads={h} != d_model={d} has no zoo equivalent "
                f"(zoo's head width is d_model / n_heads)"
            )
        ff = get(c, "feed_forward_proj")
        if ff not in FF_FROM_HF:
            raise Unsupported(f"T5 feed_forward_proj={ff!r} has no zoo equivalent; zoo maps {sorted(FF_FROM_HF)}")
        if not tied["tokens"]:
            raise Unsupported("T5 whose encoder and decoder token tables differ has no zoo equivalent")
        enc, dec = get(c, "num_layers"), get(c, "num_decoder_layers")
        return "encoder_decoder", dict(
            vocab_size=get(c, "vocab_size"),
            d_model=d,
            n_heads=h,
            d_ff=get(c, "d_ff"),
            n_layers=enc,
            n_decoder_layers=None if dec in (None, enc) else dec,
            dropout=get(c, "dropout_rate"),
            activation=FF_FROM_HF[ff],
            norm="rmsnorm",
            norm_eps=get(c, "layer_norm_epsilon"),
            bias=False,
            norm_first=True,
            final_norm=True,
            position="t5_relative",
            rel_buckets=get(c, "relative_attention_num_buckets"),
            rel_max_distance=get(c, "relative_attention_max_distance"),
            attn_scale=1.0,
            max_len=get(c, "n_positions") or 512,
            scale_embeddings=False,
            share_embeddings=True,
            tie_embeddings=tied["lm_head"],
            lm_head_scale=bool(get(c, "scale_decoder_outputs", True)),
            init="gpt2",
            decoder_start_id=get(c, "decoder_start_token_id"),
            **ids_from_hf(c, get(c, "vocab_size")),
        )

    @staticmethod
    def hf_fields(cfg: ModelConfig) -> dict:
        return dict(
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
            feed_forward_proj=FF_TO_HF[cfg.activation],
            n_positions=cfg.max_len,
            is_encoder_decoder=True,
            # transformers 5 reads tie_word_embeddings=false as "do not rescale" (scale_decoder_outputs);
            # the head is tied when the file stores no separate lm_head.weight
            tie_word_embeddings=cfg.lm_head_scale,
            decoder_start_token_id=cfg.bos_id if cfg.decoder_start_id is None else cfg.decoder_start_id,
        )

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        out = [
            Entry("tgt_embed.tok.weight", ("shared.weight",)),
            Entry("src_embed.tok.weight", ("encoder.embed_tokens.weight",)),
            Entry("tgt_embed.tok.weight", ("decoder.embed_tokens.weight",)),
        ]
        for stack, n in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
            for i in range(n):
                out += T5.layer_entries(cfg, stack, i)
            out.append(Entry(f"{stack}.norm.weight", (f"{stack}.final_layer_norm.weight",)))
        out.append(Entry("lm_head.weight", ("lm_head.weight",)))
        return out

    @staticmethod
    def layer_entries(cfg: ModelConfig, stack: str, i: int) -> list[Entry]:
        """Layer i of a stack: T5Block's layer.0 (self-attention), the decoder's layer.1 (cross-attention), and
        the last one (the feed-forward network: wi, or gated wi_0 and wi_1, then wo)."""
        z, h = f"{stack}.layers.{i}.", f"{stack}.block.{i}.layer."
        out = []
        if i == 0:
            out.append(Entry(f"{stack}.rel_bias.weight", (h + "0.SelfAttention.relative_attention_bias.weight",)))
        out += attention(z + "self_attn.", h + "0.SelfAttention.", "q", "k", "v", "o", False)
        out.append(Entry(z + "self_attn_sub.norm.weight", (h + "0.layer_norm.weight",)))
        ff = h + "1." if stack == "encoder" else h + "2."
        if stack == "decoder":
            out += attention(z + "cross_attn.", h + "1.EncDecAttention.", "q", "k", "v", "o", False, cross=True)
            out.append(Entry(z + "cross_attn_sub.norm.weight", (h + "1.layer_norm.weight",)))
        out.append(Entry(z + "ffn_sub.norm.weight", (ff + "layer_norm.weight",)))
        if cfg.activation in ("geglu_tanh", "swiglu"):
            wi = (ff + "DenseReluDense.wi_0.weight", ff + "DenseReluDense.wi_1.weight")
            out.append(Entry(z + "ffn.linear1.weight", wi, "cat"))
        else:
            out.append(Entry(z + "ffn.linear1.weight", (ff + "DenseReluDense.wi.weight",)))
        out.append(Entry(z + "ffn.linear2.weight", (ff + "DenseReluDense.wo.weight",)))
        return out
