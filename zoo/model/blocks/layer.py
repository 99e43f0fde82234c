"""The Transformer layer every stack is built of: self-attention, cross-attention over an encoder memory (when
built with it), feed-forward, each in a residual sublayer connection (Vaswani et al. 2017, sec. 3.1).
EncoderLayer and DecoderLayer, at the foot, are its two configurations."""

import torch
from torch import nn

from zoo.model.blocks.attention import AttentionInputs, MultiHeadAttention
from zoo.model.blocks.feedforward import FeedForward
from zoo.model.blocks.kv_cache import KVCache
from zoo.model.blocks.norm import make_norm
from zoo.model.blocks.residual import Residual
from zoo.model.config import ModelConfig


class TransformerLayer(nn.Module):
    """Self-attention, then cross-attention (Q from x, K and V from the encoder output `memory`) when
    `cross_attention`, then the feed-forward network, each inside a Residual (post-LN or pre-LN by
    cfg.norm_first): nn.TransformerDecoderLayer with cross-attention, nn.TransformerEncoderLayer without.

    Parts: self_attn / self_attn_sub, cross_attn / cross_attn_sub (None without cross-attention), ffn / ffn_sub
    (the *_sub Residual holds the part's norm). PARTS: the order they register in, which is the order of
    parameters() and state_dict(); a checkpoint's optimizer state indexes the parameters in it, so a subclass
    keeps its own.
    """

    PARTS = ("self_attn", "self_attn_sub", "cross_attn", "cross_attn_sub", "ffn", "ffn_sub")

    def __init__(self, cfg: ModelConfig, cross_attention: bool):
        super().__init__()

        def attention(cross: bool) -> MultiHeadAttention:
            return MultiHeadAttention(
                cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.bias, cfg.attention_dropout, cross, cfg.attn_scale
            )

        # built in this order (self-attention, cross-attention, feed-forward): each Linear draws its initial
        # weights from the global RNG when it is built, so the order fixes a seeded model's weights
        parts = {"self_attn": attention(cross=False)}
        if cross_attention:
            parts["cross_attn"] = attention(cross=True)
        parts["ffn"] = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.dropout, cfg.bias)
        for name in list(parts):
            norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)
            parts[name + "_sub"] = Residual(norm, cfg.dropout, cfg.norm_first)
        self.cross_attn = self.cross_attn_sub = None
        for name in self.PARTS:
            if name in parts:
                setattr(self, name, parts[name])

    def forward(
        self,
        x: torch.Tensor,
        attn: AttentionInputs | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
    ) -> torch.Tensor:
        """x: (B, T, d_model); attn: the self-attention's mask / is_causal / rope / bias (None = none of them);
        memory: (B, S, d_model), the encoder output (not needed once cross_cache holds its K/V; unused without
        cross-attention); memory_mask: (B, 1, 1, S) bool, True = may attend; cache / cross_cache: this layer's
        KV caches or None. Returns x (B, T, d_model); attention weights: zoo.model.blocks.attention.record_weights.
        Raises ValueError when a cross-attention layer gets no memory.
        """
        # each sublayer f below sits in its Residual `sub`, by cfg.norm_first:
        #   pre-LN  (norm_first):  x = x + dropout(f(norm(x)))    sub.sublayer_input(x) = norm(x)
        #   post-LN (otherwise):   x = norm(x + dropout(f(x)))    sub.sublayer_input(x) = x
        # sub.merge(x, y) adds the sublayer's output y to x (and norms the sum with post-LN)
        sub = self.self_attn_sub
        x = sub.merge(x, self.self_attn(sub.sublayer_input(x), attn=attn, cache=cache))
        if self.cross_attn is not None:
            if memory is None and (cross_cache is None or cross_cache.pos == 0):
                raise ValueError("this decoder layer has cross-attention: pass memory (B, S, d_model)")
            sub, over_memory = self.cross_attn_sub, AttentionInputs(mask=memory_mask)
            x = sub.merge(x, self.cross_attn(sub.sublayer_input(x), memory, attn=over_memory, cache=cross_cache))
        sub = self.ffn_sub
        return sub.merge(x, self.ffn(sub.sublayer_input(x)))

    def attention_weights(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The weights of the last forward inside record_weights: (self-attention (B, h, T, T_k),
        cross-attention (B, h, T, S) or None without cross-attention); None where nothing was recorded."""
        return self.self_attn.attn_weights, (self.cross_attn.attn_weights if self.cross_attn is not None else None)


class EncoderLayer(TransformerLayer):
    """nn.TransformerEncoderLayer: the TransformerLayer without cross-attention (self-attention, then the
    feed-forward network, each inside a Residual; post-LN or pre-LN by cfg.norm_first; Vaswani et al. 2017,
    sec. 3.1). Its parameters come in its own order: self-attention, feed-forward, then the two norms."""

    PARTS = ("self_attn", "ffn", "self_attn_sub", "ffn_sub")

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, cross_attention=False)


class DecoderLayer(TransformerLayer):
    """nn.TransformerDecoderLayer (Vaswani et al. 2017, sec. 3.1): the TransformerLayer with cross-attention
    over the encoder output `memory` when `cross_attention`. Without it (decoder-only) it is an encoder layer
    under the stack's mask (causal by default); only its parameter order (norms beside their sublayers) differs
    from EncoderLayer's."""

    def __init__(self, cfg: ModelConfig, cross_attention: bool = True):
        super().__init__(cfg, cross_attention)
