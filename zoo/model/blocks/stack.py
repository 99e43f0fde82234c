"""The stack every architecture runs: N TransformerLayers and an optional final norm, in one loop over layers.
Encoder and Decoder, at the foot, are its two configurations."""

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from zoo.model.blocks.attention import NO_INPUTS, AttentionInputs, record_weights
from zoo.model.blocks.kv_cache import KVCache
from zoo.model.blocks.layer import DecoderLayer, EncoderLayer, TransformerLayer
from zoo.model.blocks.norm import make_norm
from zoo.model.blocks.positions import RelativePositionBias
from zoo.model.config import ModelConfig


class LayerStack(nn.Module):
    """nn.TransformerEncoder / nn.TransformerDecoder: n_layers layers from make_layer(), then a final norm if
    cfg.use_final_norm. Encoder and Decoder are its two configurations.

    cfg.activation_checkpointing: in training (grad enabled, no caches, no weights recorded) each layer saves
    only its inputs and recomputes its activations in backward (torch.utils.checkpoint, use_reentrant=False;
    the RNG state is replayed, so dropout masks, loss and gradients equal the plain path's).
    cfg.position=t5_relative: the stack's own RelativePositionBias (`rel_bias`, bidirectional buckets when
    `bidirectional`, else causal ones), computed once per forward, queries at the cache's offset, added to
    every layer's self-attention scores (T5 computes it in the first layer and shares it; cross-attention gets
    none).
    """

    def __init__(
        self, cfg: ModelConfig, n_layers: int, make_layer: Callable[[], TransformerLayer], bidirectional: bool
    ):
        super().__init__()
        self.layers = nn.ModuleList(make_layer() for _ in range(n_layers))
        self.norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias) if cfg.use_final_norm else None
        self.activation_checkpointing = cfg.activation_checkpointing
        self.rel_bias = (
            RelativePositionBias(cfg.n_heads, cfg.rel_buckets, cfg.rel_max_distance, bidirectional=bidirectional)
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
    ) -> torch.Tensor:
        """x: (B, T, d_model); attn: every layer's self-attention inputs (None = no mask, positions or bias);
        memory: (B, S, d_model) or None; memory_mask: (B, 1, 1, S) bool, True = may attend (both for layers
        with cross-attention); caches, cross_caches: one KVCache per layer each, or None.
        Returns x (B, T, d_model). Attention weights: `run`."""
        attn = attn or NO_INPUTS
        if self.rel_bias is not None:
            offset = caches[0].pos if caches else 0
            attn = attn.add_bias(self.rel_bias(x.shape[1], offset + x.shape[1], offset))  # (1, h, T, offset + T)
        recompute = (
            self.activation_checkpointing
            and self.training
            and torch.is_grad_enabled()
            and not caches
            and not cross_caches
            and not any(layer.self_attn.record_weights for layer in self.layers)  # recompute would not record
        )
        n = len(self.layers)
        for layer, cache, cross_cache in zip(self.layers, caches or [None] * n, cross_caches or [None] * n):
            if recompute:
                x = checkpoint(layer, x, attn=attn, memory=memory, memory_mask=memory_mask, use_reentrant=False)
            else:
                x = layer(x, attn=attn, memory=memory, memory_mask=memory_mask, cache=cache, cross_cache=cross_cache)
        return x if self.norm is None else self.norm(x)

    def attention_weights(self) -> list:
        """Per layer, TransformerLayer.attention_weights: (self weights, cross weights or None)."""
        return [layer.attention_weights() for layer in self.layers]

    def run(self, x: torch.Tensor, return_attention: bool = False, **kwargs) -> tuple[torch.Tensor, list | None]:
        """forward(x, **kwargs), and with return_attention the per-layer attention weights (attention_weights,
        recorded by zoo.model.blocks.attention.record_weights: explicit attention, N x N scores per head kept).
        Returns (x (B, T, d_model), the weights or None)."""
        with record_weights(self, return_attention):
            x = self(x, **kwargs)
            return x, (self.attention_weights() if return_attention else None)


class Encoder(LayerStack):
    """nn.TransformerEncoder: the LayerStack of n_layers EncoderLayers (bidirectional T5 buckets with
    cfg.position=t5_relative). forward(x, attn, caches) -> x (B, T, d_model)."""

    def __init__(self, cfg: ModelConfig, n_layers: int):
        super().__init__(cfg, n_layers, lambda: EncoderLayer(cfg), bidirectional=True)

    def attention_weights(self) -> list:
        """Per layer, the self-attention weights (B, h, T, T_k) of the last forward inside record_weights."""
        return [self_w for self_w, _ in super().attention_weights()]


class Decoder(LayerStack):
    """nn.TransformerDecoder: the LayerStack of n_layers DecoderLayers.

    cross_attention: build each layer with cross-attention over an encoder memory.
    cfg.position=t5_relative: causal T5 buckets unless cfg.mask is bidirectional or prefix.
    forward(x, attn, memory, memory_mask, caches, cross_caches) -> x (B, T, d_model).
    """

    def __init__(self, cfg: ModelConfig, n_layers: int, cross_attention: bool = True):
        bidirectional = cfg.mask in ("bidirectional", "prefix")
        super().__init__(cfg, n_layers, lambda: DecoderLayer(cfg, cross_attention), bidirectional)
