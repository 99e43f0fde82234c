"""One encoder layer: self-attention and feed-forward, each in a residual sublayer connection."""
import torch
from torch import nn

from zoo.model.attention import MultiHeadAttention
from zoo.model.config import ModelConfig
from zoo.model.feedforward import FeedForward
from zoo.model.norm import make_norm
from zoo.model.residual import Residual


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer: x = sub(x, self_attn); x = sub(x, ffn) (Vaswani et al. 2017, sec. 3.1).

    forward(x (B, T, d_model), mask, is_causal, rope, bias, cache, need_weights) -> (x (B, T, d_model),
    attention weights (B, n_heads, T, T_k) or None). mask / is_causal / rope / bias: see attention.attend.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.bias, cfg.attention_dropout,
                                            scale=cfg.attn_scale)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.dropout, cfg.bias)
        self.self_attn_sub = Residual(make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias), cfg.dropout, cfg.norm_first)
        self.ffn_sub = Residual(make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias), cfg.dropout, cfg.norm_first)

    def forward(self, x: torch.Tensor, mask=None, is_causal=False, rope=None, bias=None, cache=None,
                need_weights=False):
        x, weights = self.self_attn_sub(x, lambda h: self.self_attn(h, mask=mask, is_causal=is_causal, rope=rope,
                                                                    bias=bias, cache=cache, need_weights=need_weights))
        x, _ = self.ffn_sub(x, self.ffn)
        return x, weights
