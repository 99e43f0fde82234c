"""The encoder stack: N encoder layers and an optional final norm."""

from zoo.model.config import ModelConfig
from zoo.model.encoder_layer import EncoderLayer
from zoo.model.stack import LayerStack


class Encoder(LayerStack):
    """nn.TransformerEncoder: the LayerStack of n_layers EncoderLayers (bidirectional T5 buckets with
    cfg.position=t5_relative). forward(x, attn, caches) -> x (B, T, d_model)."""

    def __init__(self, cfg: ModelConfig, n_layers: int):
        super().__init__(cfg, n_layers, lambda: EncoderLayer(cfg), bidirectional=True)

    def attention_weights(self) -> list:
        """Per layer, the self-attention weights (B, h, T, T_k) of the last forward inside record_weights."""
        return [self_w for self_w, _ in super().attention_weights()]
