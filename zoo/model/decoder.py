"""The decoder stack: N decoder layers (with cross-attention when built for a memory) and an optional final norm."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from zoo.model.attention import AttentionInputs
from zoo.model.config import ModelConfig
from zoo.model.decoder_layer import DecoderLayer
from zoo.model.kv_cache import KVCache
from zoo.model.norm import make_norm
from zoo.model.positions import RelativePositionBias


class Decoder(nn.Module):
    """nn.TransformerDecoder: n_layers DecoderLayers, then a final norm if cfg.use_final_norm.

    cross_attention: build each layer with cross-attention over an encoder memory.
    cfg.activation_checkpointing: in training (grad enabled, no caches) each layer saves only its inputs and
    recomputes its activations in backward (torch.utils.checkpoint, use_reentrant=False; the RNG state is
    replayed, so dropout masks, loss and gradients equal the plain path's).
    cfg.position=t5_relative: the stack's own RelativePositionBias (`rel_bias`; causal buckets unless cfg.mask is
    bidirectional or prefix), computed once per forward, queries at the cache's offset, added to every layer's
    self-attention scores (T5 computes it in the first layer and shares it; cross-attention gets none).
    """

    def __init__(self, cfg: ModelConfig, n_layers: int, cross_attention: bool = True):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(cfg, cross_attention) for _ in range(n_layers))
        self.norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias) if cfg.use_final_norm else None
        self.activation_checkpointing = cfg.activation_checkpointing
        self.rel_bias = (
            RelativePositionBias(
                cfg.n_heads,
                cfg.rel_buckets,
                cfg.rel_max_distance,
                bidirectional=cfg.mask in ("bidirectional", "prefix"),
            )
            if cfg.position == "t5_relative"
            else None
        )

    def forward(
        self,
        x: torch.Tensor,
        attn: AttentionInputs | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        caches: list[KVCache] | None = None,
        cross_caches: list[KVCache] | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, list | None]:
        """x: (B, T, d_model); attn: every layer's self-attention inputs (None = no mask, positions or bias);
        memory: (B, S, d_model) or None; memory_mask: (B, 1, 1, S) bool, True = may attend;
        caches, cross_caches: one KVCache per layer each, or None.
        Returns (x (B, T, d_model), [per-layer (self weights (B, h, T, T_k), cross weights (B, h, T, S) or
        None)] with need_weights, else None)."""
        recompute = (
            self.activation_checkpointing
            and self.training
            and torch.is_grad_enabled()
            and not caches
            and not cross_caches
        )
        attn = attn or AttentionInputs()
        if self.rel_bias is not None:
            offset = caches[0].pos if caches else 0
            attn = attn.add_bias(self.rel_bias(x.shape[1], offset + x.shape[1], offset))  # (1, h, T, offset + T)
        n = len(self.layers)
        weights = []
        for layer, cache, cross_cache in zip(self.layers, caches or [None] * n, cross_caches or [None] * n):
            if recompute:
                x, w = checkpoint(
                    layer,
                    x,
                    attn=attn,
                    memory=memory,
                    memory_mask=memory_mask,
                    need_weights=need_weights,
                    use_reentrant=False,
                )
            else:
                x, w = layer(
                    x,
                    attn=attn,
                    memory=memory,
                    memory_mask=memory_mask,
                    cache=cache,
                    cross_cache=cross_cache,
                    need_weights=need_weights,
                )
            weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return x, (weights if need_weights else None)
