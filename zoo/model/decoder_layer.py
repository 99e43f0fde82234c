"""One decoder layer: masked self-attention, cross-attention over the memory, feed-forward."""
import torch
from torch import nn

from zoo.model.attention import MultiHeadAttention
from zoo.model.config import ModelConfig
from zoo.model.feedforward import FeedForward
from zoo.model.norm import make_norm
from zoo.model.residual import Residual


class DecoderLayer(nn.Module):
    """nn.TransformerDecoderLayer (Vaswani et al. 2017, sec. 3.1): self-attention, then cross-attention
    (Q from the decoder, K and V from the encoder output `memory`) when `cross_attention`, then FFN.
    Without cross-attention (decoder-only) it is a causal encoder layer.

    forward(x (B, T, d_model), memory (B, S, d_model) | None, mask, is_causal, memory_mask (B, 1, 1, S) bool
    True = may attend, rope, bias, cache, cross_cache, need_weights) -> (x (B, T, d_model),
    (self weights (B, h, T, T_k), cross weights (B, h, T, S)) or None).
    """

    def __init__(self, cfg: ModelConfig, cross_attention: bool = True):
        super().__init__()
        def norm():
            return make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.bias, cfg.attention_dropout,
                                            scale=cfg.attn_scale)
        self.self_attn_sub = Residual(norm(), cfg.dropout, cfg.norm_first)
        self.cross_attn = self.cross_attn_sub = None
        if cross_attention:
            self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.bias,
                                                 cfg.attention_dropout, cross=True, scale=cfg.attn_scale)
            self.cross_attn_sub = Residual(norm(), cfg.dropout, cfg.norm_first)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.dropout, cfg.bias)
        self.ffn_sub = Residual(norm(), cfg.dropout, cfg.norm_first)

    def forward(self, x: torch.Tensor, memory=None, mask=None, is_causal=False, memory_mask=None, rope=None,
                bias=None, cache=None, cross_cache=None, need_weights=False):
        x, self_w = self.self_attn_sub(x, lambda h: self.self_attn(h, mask=mask, is_causal=is_causal, rope=rope,
                                                                   bias=bias, cache=cache, need_weights=need_weights))
        cross_w = None
        if self.cross_attn is not None:
            if memory is None and (cross_cache is None or cross_cache.pos == 0):
                raise ValueError("this decoder layer has cross-attention: pass memory (B, S, d_model)")
            x, cross_w = self.cross_attn_sub(x, lambda h: self.cross_attn(h, memory, mask=memory_mask,
                                                                          cache=cross_cache, need_weights=need_weights))
        x, _ = self.ffn_sub(x, self.ffn)
        return x, ((self_w, cross_w) if need_weights else None)
