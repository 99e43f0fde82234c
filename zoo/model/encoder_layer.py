"""One encoder layer: self-attention and feed-forward, each in a residual sublayer connection."""

import torch
from torch import nn

from zoo.model.attention import AttentionInputs, MultiHeadAttention
from zoo.model.config import ModelConfig
from zoo.model.feedforward import FeedForward
from zoo.model.kv_cache import KVCache
from zoo.model.norm import make_norm
from zoo.model.residual import Residual


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer: self-attention, then the feed-forward network, each inside a Residual
    (post-LN or pre-LN by cfg.norm_first; Vaswani et al. 2017, sec. 3.1)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(
            cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.bias, cfg.attention_dropout, scale=cfg.attn_scale
        )
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.dropout, cfg.bias)
        self.self_attn_sub = Residual(
            make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias), cfg.dropout, cfg.norm_first
        )
        self.ffn_sub = Residual(make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias), cfg.dropout, cfg.norm_first)

    def forward(
        self,
        x: torch.Tensor,
        attn: AttentionInputs | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (B, T, d_model); attn: the self-attention's mask / is_causal / rope / bias (None = none of them);
        cache: this layer's KV cache or None.
        Returns (x (B, T, d_model), attention weights (B, n_heads, T, T_k) with need_weights, else None)."""
        y, weights = self.self_attn(
            self.self_attn_sub.sublayer_input(x), attn=attn, cache=cache, need_weights=need_weights
        )
        x = self.self_attn_sub.merge(x, y)
        x = self.ffn_sub.merge(x, self.ffn(self.ffn_sub.sublayer_input(x)))
        return x, weights
