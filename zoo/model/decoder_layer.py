"""One decoder layer: masked self-attention, cross-attention over the memory, feed-forward."""

import torch
from torch import nn

from zoo.model.attention import AttentionInputs, MultiHeadAttention
from zoo.model.config import ModelConfig
from zoo.model.feedforward import FeedForward
from zoo.model.kv_cache import KVCache
from zoo.model.norm import make_norm
from zoo.model.residual import Residual


class DecoderLayer(nn.Module):
    """nn.TransformerDecoderLayer (Vaswani et al. 2017, sec. 3.1): self-attention, then cross-attention
    (Q from the decoder, K and V from the encoder output `memory`) when `cross_attention`, then FFN, each
    inside a Residual (post-LN or pre-LN by cfg.norm_first). Without cross-attention (decoder-only) it is a
    causal encoder layer."""

    def __init__(self, cfg: ModelConfig, cross_attention: bool = True):
        super().__init__()

        def norm():
            return make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)

        self.self_attn = MultiHeadAttention(
            cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.bias, cfg.attention_dropout, scale=cfg.attn_scale
        )
        self.self_attn_sub = Residual(norm(), cfg.dropout, cfg.norm_first)
        self.cross_attn = self.cross_attn_sub = None
        if cross_attention:
            self.cross_attn = MultiHeadAttention(
                cfg.d_model,
                cfg.n_heads,
                cfg.n_kv_heads,
                cfg.bias,
                cfg.attention_dropout,
                cross=True,
                scale=cfg.attn_scale,
            )
            self.cross_attn_sub = Residual(norm(), cfg.dropout, cfg.norm_first)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.dropout, cfg.bias)
        self.ffn_sub = Residual(norm(), cfg.dropout, cfg.norm_first)

    def forward(
        self,
        x: torch.Tensor,
        attn: AttentionInputs | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        need_weights: bool = False,
    ):
        """x: (B, T, d_model); attn: the self-attention's mask / is_causal / rope / bias (None = none of them);
        memory: (B, S, d_model), the encoder output (not needed once cross_cache holds its K/V);
        memory_mask: (B, 1, 1, S) bool, True = may attend; cache / cross_cache: this layer's KV caches or None.
        Returns (x (B, T, d_model), (self weights (B, h, T, T_k), cross weights (B, h, T, S) or None) with
        need_weights, else None). Raises ValueError when a cross-attention layer gets no memory.
        """
        y, self_w = self.self_attn(
            self.self_attn_sub.sublayer_input(x), attn=attn, cache=cache, need_weights=need_weights
        )
        x = self.self_attn_sub.merge(x, y)
        cross_w = None
        if self.cross_attn is not None:
            if memory is None and (cross_cache is None or cross_cache.pos == 0):
                raise ValueError("this decoder layer has cross-attention: pass memory (B, S, d_model)")
            y, cross_w = self.cross_attn(
                self.cross_attn_sub.sublayer_input(x),
                memory,
                attn=AttentionInputs(mask=memory_mask),
                cache=cross_cache,
                need_weights=need_weights,
            )
            x = self.cross_attn_sub.merge(x, y)
        x = self.ffn_sub.merge(x, self.ffn(self.ffn_sub.sublayer_input(x)))
        return x, ((self_w, cross_w) if need_weights else None)
