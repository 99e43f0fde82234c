"""The decoder stack: N decoder layers (with cross-attention when built for a memory) and an optional final norm."""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from zoo.model.config import ModelConfig
from zoo.model.decoder_layer import DecoderLayer
from zoo.model.norm import make_norm
from zoo.model.positions import RelativePositionBias


class Decoder(nn.Module):
    """nn.TransformerDecoder: n_layers DecoderLayers, then a final norm if cfg.use_final_norm.

    cross_attention: build each layer with cross-attention over an encoder memory.
    forward(x (B, T, d_model), memory (B, S, d_model) | None, mask, is_causal, memory_mask, rope, bias,
    caches, cross_caches (one KVCache per layer each) | None, need_weights) -> (x (B, T, d_model),
    [per-layer (self weights, cross weights)] or None).

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
        self.rel_bias = (RelativePositionBias(cfg.n_heads, cfg.rel_buckets, cfg.rel_max_distance,
                                              bidirectional=cfg.mask in ("bidirectional", "prefix"))
                         if cfg.position == "t5_relative" else None)

    def forward(self, x, memory=None, mask=None, is_causal=False, memory_mask=None, rope=None, bias=None,
                caches=None, cross_caches=None, need_weights=False):
        recompute = (self.activation_checkpointing and self.training and torch.is_grad_enabled()
                     and not caches and not cross_caches)
        if self.rel_bias is not None:
            offset = caches[0].pos if caches else 0
            rel = self.rel_bias(x.shape[1], offset + x.shape[1], offset)  # (1, h, T, offset + T)
            bias = rel if bias is None else bias + rel
        weights = []
        for i, layer in enumerate(self.layers):
            if recompute:
                x, w = checkpoint(layer, x, memory, mask, is_causal, memory_mask, rope, bias, None, None,
                                  need_weights, use_reentrant=False)
            else:
                x, w = layer(x, memory, mask, is_causal, memory_mask, rope, bias, caches[i] if caches else None,
                             cross_caches[i] if cross_caches else None, need_weights)
            weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return x, (weights if need_weights else None)
