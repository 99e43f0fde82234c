"""GPT-2 <-> zoo's DecoderOnly: the config and weight maps."""

import torch

from zoo.interop.blockers import Unsupported
from zoo.interop.families.config import ACT_TO_HF, Family, activation_from_hf, get, ids_from_hf
from zoo.interop.families.weights import Entry, weight_bias
from zoo.model.config import ModelConfig


class GPT2(Family):
    """GPT-2 (Radford et al. 2019; transformers' modeling_gpt2.py): learned positions, pre-LN with ln_f, GELU
    (tanh approximation, gelu_new), fused c_attn in Conv1D layout (weight (in, out)), tied head."""

    name, hf_class, arch, prefix = "gpt2", "GPT2LMHeadModel", "decoder_only", "transformer."
    # old checkpoints store each layer's causal mask (a buffer transformers ignores); zoo computes its own
    recomputed = {r"(transformer\.)?h\.\d+\.attn\.bias": lambda t: torch.ones_like(t).tril()}
    requires = dict(
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
        activation=("gelu_tanh", *(a for a in ACT_TO_HF if a != "gelu_tanh")),
    )
    final_norm = (True, "it always has ln_f")

    @staticmethod
    def tied(sd: dict, ptr: dict) -> dict:
        """{"lm_head": the head shares the token table}; a base model's head is the table."""
        sd.setdefault("lm_head.weight", sd["transformer.wte.weight"])
        return {"lm_head": sd["lm_head.weight"].data_ptr() == ptr["transformer.wte.weight"]}

    @staticmethod
    def config_from_hf(c, tied) -> tuple[str, dict]:
        if get(c, "add_cross_attention"):
            raise Unsupported("GPT-2 with add_cross_attention=true has no zoo equivalent (decoder_only has no memory)")
        if get(c, "scale_attn_by_inverse_layer_idx"):
            raise Unsupported("GPT-2 with scale_attn_by_inverse_layer_idx=true has no zoo equivalent")
        activation = activation_from_hf(c, "activation_function", "GPT-2")
        d = get(c, "n_embd")
        return "decoder_only", dict(
            vocab_size=get(c, "vocab_size"),
            d_model=d,
            n_heads=get(c, "n_head"),
            d_ff=get(c, "n_inner") or 4 * d,
            n_layers=get(c, "n_layer"),
            dropout=get(c, "resid_pdrop"),
            attn_dropout=get(c, "attn_pdrop"),
            activation=activation,
            norm="layernorm",
            norm_eps=get(c, "layer_norm_epsilon"),
            bias=True,
            norm_first=True,
            final_norm=True,
            position="learned",
            max_len=get(c, "n_positions"),
            scale_embeddings=False,
            attn_scale=None if get(c, "scale_attn_weights", True) else 1.0,
            tie_embeddings=tied["lm_head"],
            init="gpt2",
            **ids_from_hf(c, get(c, "vocab_size")),
        )

    @staticmethod
    def hf_fields(cfg: ModelConfig) -> dict:
        return dict(
            vocab_size=cfg.vocab_size,
            n_positions=cfg.max_len,
            n_embd=cfg.d_model,
            n_layer=cfg.decoder_layers,
            n_head=cfg.n_heads,
            n_inner=cfg.d_ff,
            activation_function=ACT_TO_HF[cfg.activation],
            resid_pdrop=cfg.dropout,
            embd_pdrop=cfg.dropout,
            attn_pdrop=cfg.attention_dropout,
            layer_norm_epsilon=cfg.norm_eps,
            scale_attn_weights=cfg.attn_scale is None,
            tie_word_embeddings=cfg.tie_embeddings,
        )

    @staticmethod
    def entries(cfg: ModelConfig) -> list[Entry]:
        out = [
            Entry("embed.tok.weight", ("transformer.wte.weight",)),
            Entry("embed.pos.weight", ("transformer.wpe.weight",)),
        ]
        for i in range(cfg.decoder_layers):
            z, h = f"decoder.layers.{i}.", f"transformer.h.{i}."
            out += weight_bias(z + "self_attn_sub.norm", h + "ln_1")
            out += conv1d(z + "self_attn.qkv_proj", h + "attn.c_attn")
            out += conv1d(z + "self_attn.out_proj", h + "attn.c_proj")
            out += weight_bias(z + "ffn_sub.norm", h + "ln_2")
            out += conv1d(z + "ffn.linear1", h + "mlp.c_fc") + conv1d(z + "ffn.linear2", h + "mlp.c_proj")
        out += weight_bias("decoder.norm", "transformer.ln_f")
        out.append(Entry("lm_head.weight", ("lm_head.weight",)))
        return out


def conv1d(z: str, h: str) -> list[Entry]:
    """A GPT-2 Conv1D (weight stored (in, out), transposed) and its bias -> zoo's nn.Linear z."""
    return [Entry(f"{z}.weight", (f"{h}.weight",), "T"), Entry(f"{z}.bias", (f"{h}.bias",))]
