"""The Hugging Face families zoo converts, by model_type, and the one a zoo model exports to."""

from zoo.interop.blockers import Unsupported
from zoo.interop.families.bart import BART, Marian
from zoo.interop.families.bert import BERT
from zoo.interop.families.config import Family
from zoo.interop.families.gpt2 import GPT2
from zoo.interop.families.t5 import T5
from zoo.model.config import ModelConfig

FAMILIES: dict[str, type[Family]] = {f.name: f for f in (GPT2, BERT, Marian, BART, T5)}
SUPPORTED = tuple(FAMILIES)
HF_CLASSES = {name: f.hf_class for name, f in FAMILIES.items()}
ARCH_OF = {name: f.arch for name, f in FAMILIES.items()}


def family_of(model_type: str | None) -> type[Family]:
    """The family class of an HF model_type. Raises Unsupported naming the supported ones."""
    if model_type not in FAMILIES:
        raise Unsupported(
            f"Hugging Face model_type={model_type!r} is not supported; supported families: {', '.join(SUPPORTED)}"
        )
    return FAMILIES[model_type]


def family_for(arch: str, cfg: ModelConfig) -> str:
    """The HF family a zoo model exports to: decoder_only -> gpt2, encoder_only -> bert, encoder_decoder ->
    t5 (position=t5_relative), bart (learned), marian (sinusoidal). Raises Unsupported naming the option."""
    if arch == "decoder_only":
        return "gpt2"
    if arch == "encoder_only":
        return "bert"
    by_position = {"t5_relative": "t5", "learned": "bart", "sinusoidal": "marian"}
    if cfg.position not in by_position:
        raise Unsupported(
            f"model.position={cfg.position!r} in an encoder_decoder has no Hugging Face equivalent; "
            f"supported: {', '.join(f'{p} ({f})' for p, f in by_position.items())}"
        )
    return by_position[cfg.position]
