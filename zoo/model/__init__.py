"""zoo.model: the blocks and the three architectures (pure nn.Modules, no training code)."""

from zoo.model.config import ModelConfig
from zoo.model.decoder_only import DecoderOnly
from zoo.model.encoder_decoder import EncoderDecoder
from zoo.model.encoder_only import EncoderOnly

ARCHITECTURES = {"encoder_only": EncoderOnly, "decoder_only": DecoderOnly, "encoder_decoder": EncoderDecoder}


def build_model(arch: str, cfg: ModelConfig):
    """The architecture named `arch` (encoder_only | decoder_only | encoder_decoder) built from cfg.
    Raises ValueError for an unknown arch."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch={arch!r} is unknown; allowed: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[arch](cfg)


__all__ = ["ModelConfig", "EncoderOnly", "DecoderOnly", "EncoderDecoder", "build_model", "ARCHITECTURES"]
