"""The encoder stack: N encoder layers and an optional final norm."""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from zoo.model.config import ModelConfig
from zoo.model.encoder_layer import EncoderLayer
from zoo.model.norm import make_norm
from zoo.model.positions import RelativePositionBias


class Encoder(nn.Module):
    """nn.TransformerEncoder: n_layers EncoderLayers, then a final norm if cfg.use_final_norm.

    forward(x (B, T, d_model), mask, is_causal, rope, bias, caches (one KVCache per layer) | None,
    need_weights) -> (x (B, T, d_model), [per-layer weights (B, h, T, T_k)] or None).

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
        self.rel_bias = (RelativePositionBias(cfg.n_heads, cfg.rel_buckets, cfg.rel_max_distance, bidirectional=True)
                         if cfg.position == "t5_relative" else None)

    def forward(self, x, mask=None, is_causal=False, rope=None, bias=None, caches=None, need_weights=False):
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled() and not caches
        if self.rel_bias is not None:
            offset = caches[0].pos if caches else 0
            rel = self.rel_bias(x.shape[1], offset + x.shape[1], offset)  # (1, h, T, offset + T)
            bias = rel if bias is None else bias + rel
        weights = []
        for i, layer in enumerate(self.layers):
            if recompute:
                x, w = checkpoint(layer, x, mask, is_causal, rope, bias, None, need_weights, use_reentrant=False)
            else:
                x, w = layer(x, mask, is_causal, rope, bias, caches[i] if caches else None, need_weights)
            weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return x, (weights if need_weights else None)
