"""One decoder layer: masked self-attention, cross-attention over the memory, feed-forward."""

from zoo.model.config import ModelConfig
from zoo.model.layer import TransformerLayer


class DecoderLayer(TransformerLayer):
    """nn.TransformerDecoderLayer (Vaswani et al. 2017, sec. 3.1): the TransformerLayer with cross-attention
    over the encoder output `memory` when `cross_attention`. Without it (decoder-only) it is an encoder layer
    under the stack's mask (causal by default); only its parameter order (norms beside their sublayers) differs
    from EncoderLayer's."""

    def __init__(self, cfg: ModelConfig, cross_attention: bool = True):
        super().__init__(cfg, cross_attention)
