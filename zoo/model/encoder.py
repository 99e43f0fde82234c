"""The encoder stack: N encoder layers and an optional final norm."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from zoo.model.attention import AttentionInputs
from zoo.model.config import ModelConfig
from zoo.model.encoder_layer import EncoderLayer
from zoo.model.kv_cache import KVCache
from zoo.model.norm import make_norm
from zoo.model.positions import RelativePositionBias


class Encoder(nn.Module):
    """nn.TransformerEncoder: n_layers EncoderLayers, then a final norm if cfg.use_final_norm.

    cfg.activation_checkpointing: in training (grad enabled, no caches) each layer saves only its input and
    recomputes its activations in backward (torch.utils.checkpoint, use_reentrant=False; the RNG state is
    replayed, so dropout masks, loss and gradients equal the plain path's).
    cfg.position=t5_relative: the stack's own bidirectional RelativePositionBias (`rel_bias`), computed once
    per forward and added to every layer's scores (T5 computes it in the first layer and shares it).
    """

    def __init__(self, cfg: ModelConfig, n_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(n_layers))
        self.norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias) if cfg.use_final_norm else None
        self.activation_checkpointing = cfg.activation_checkpointing
        self.rel_bias = (
            RelativePositionBias(cfg.n_heads, cfg.rel_buckets, cfg.rel_max_distance, bidirectional=True)
            if cfg.position == "t5_relative"
            else None
        )

    def forward(
        self,
        x: torch.Tensor,
        attn: AttentionInputs | None = None,
        caches: list[KVCache] | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, list | None]:
        """x: (B, T, d_model); attn: every layer's self-attention inputs (None = no mask, positions or bias);
        caches: one KVCache per layer, or None.
        Returns (x (B, T, d_model), [per-layer weights (B, h, T, T_k)] with need_weights, else None)."""
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled() and not caches
        attn = attn or AttentionInputs()
        if self.rel_bias is not None:
            offset = caches[0].pos if caches else 0
            attn = attn.add_bias(self.rel_bias(x.shape[1], offset + x.shape[1], offset))  # (1, h, T, offset + T)
        weights = []
        for layer, cache in zip(self.layers, caches or [None] * len(self.layers)):
            if recompute:
                x, w = checkpoint(layer, x, attn=attn, need_weights=need_weights, use_reentrant=False)
            else:
                x, w = layer(x, attn=attn, cache=cache, need_weights=need_weights)
            weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return x, (weights if need_weights else None)
