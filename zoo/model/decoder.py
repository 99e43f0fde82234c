"""The decoder stack: N decoder layers (with cross-attention when built for a memory) and an optional final norm."""

from zoo.model.config import ModelConfig
from zoo.model.decoder_layer import DecoderLayer
from zoo.model.stack import LayerStack


class Decoder(LayerStack):
    """nn.TransformerDecoder: the LayerStack of n_layers DecoderLayers.

    cross_attention: build each layer with cross-attention over an encoder memory.
    cfg.position=t5_relative: causal T5 buckets unless cfg.mask is bidirectional or prefix.
    forward(x, attn, memory, memory_mask, caches, cross_caches) -> x (B, T, d_model).
    """

    def __init__(self, cfg: ModelConfig, n_layers: int, cross_attention: bool = True):
        bidirectional = cfg.mask in ("bidirectional", "prefix")
        super().__init__(cfg, n_layers, lambda: DecoderLayer(cfg, cross_attention), bidirectional)
