"""Load torch.nn.Transformer weights into zoo modules (public API).

Works on the state dict of nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.TransformerEncoder,
nn.TransformerDecoder and nn.Transformer, giving the keys of zoo's EncoderLayer, DecoderLayer, Encoder,
Decoder, and (Encoder, Decoder) under "encoder." / "decoder." as in EncoderDecoder.
"""

import re

import torch

_RENAME = {
    "self_attn.in_proj_weight": "self_attn.qkv_proj.weight",
    "self_attn.in_proj_bias": "self_attn.qkv_proj.bias",
    "multihead_attn.out_proj.": "cross_attn.out_proj.",
    "linear1.": "ffn.linear1.",
    "linear2.": "ffn.linear2.",
}
_ENCODER_NORMS = {"norm1.": "self_attn_sub.norm.", "norm2.": "ffn_sub.norm."}
_DECODER_NORMS = {"norm1.": "self_attn_sub.norm.", "norm2.": "cross_attn_sub.norm.", "norm3.": "ffn_sub.norm."}
_LAYER_KEY = re.compile(r"^(.*?)(self_attn\.|multihead_attn\.|linear[12]\.|norm[123]\.|dropout)")


def from_torch_transformer(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map a torch.nn.Transformer-family state dict to zoo's names.

    nn.MultiheadAttention's in_proj_weight [W_q; W_k; W_v] is zoo's fused qkv_proj for self-attention;
    for cross-attention it splits into q_proj (first d_model rows) and kv_proj (the rest). A layer is a
    decoder layer when it has `multihead_attn` weights (its norm2 then follows cross-attention).
    Stack-level keys (`norm.*`, `encoder.norm.*`, `decoder.norm.*`) keep their names.
    Raises ValueError for a key it does not know.
    """
    decoder_prefixes = {m.group(1) for k in state_dict if (m := _LAYER_KEY.match(k)) and "multihead_attn." in k}
    out = {}
    for key, value in state_dict.items():
        m = _LAYER_KEY.match(key)
        if m is None:
            if re.match(r"^((encoder|decoder)\.)?norm\.(weight|bias)$", key):
                out[key] = value
                continue
            raise ValueError(f"unexpected key {key!r} in a torch.nn.Transformer state dict")
        prefix, rest = m.group(1), key[len(m.group(1)) :]
        if rest.startswith("multihead_attn.in_proj_"):
            kind = rest.rsplit("_", 1)[1]  # weight | bias
            d = value.shape[0] // 3
            out[f"{prefix}cross_attn.q_proj.{kind}"] = value[:d]
            out[f"{prefix}cross_attn.kv_proj.{kind}"] = value[d:]
            continue
        norms = _DECODER_NORMS if prefix in decoder_prefixes else _ENCODER_NORMS
        for old, new in {**_RENAME, **norms}.items():
            if rest.startswith(old):
                rest = new + rest[len(old) :]
                break
        out[prefix + rest] = value
    return out
