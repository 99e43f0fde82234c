"""One encoder layer: self-attention and feed-forward, each in a residual sublayer connection."""

from zoo.model.config import ModelConfig
from zoo.model.layer import TransformerLayer


class EncoderLayer(TransformerLayer):
    """nn.TransformerEncoderLayer: the TransformerLayer without cross-attention (self-attention, then the
    feed-forward network, each inside a Residual; post-LN or pre-LN by cfg.norm_first; Vaswani et al. 2017,
    sec. 3.1). Its parameters come in its own order: self-attention, feed-forward, then the two norms."""

    PARTS = ("self_attn", "ffn", "self_attn_sub", "ffn_sub")

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, cross_attention=False)
