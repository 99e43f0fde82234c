"""Half precision for converted models: which dtypes a family runs in as transformers runs it (check_dtype),
a float16 forward that raises Float16Overflow instead of returning inf / NaN (guard_float16), and a model's one
dtype (model_dtype)."""

from functools import partial

import torch
from torch import nn

from zoo.interop.blockers import Unsupported

# transformers' half-precision guards zoo's blocks lack, per (family, dtype): that precision is refused
HALF_REFUSED = {
    ("t5", torch.float16): (
        "Hugging Face t5 does not run in torch.float16 in zoo: transformers keeps T5's feed-forward output "
        "projection (wo, _keep_in_fp32_modules) in float32 and clamps every block's output to the float16 "
        "range (modeling_t5.py), guards zoo's blocks do not have, and T5's activations overflow float16 without "
        "them (inf, then NaN); use dtype=torch.bfloat16 (the precision T5 was trained in) or torch.float32"
    ),
}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_dtype(family: str, dtype: torch.dtype) -> None:
    """Raise Unsupported unless a converted `family` model runs in `dtype` as transformers runs it: float32 and
    bfloat16 always; float16 except T5 (HALF_REFUSED says why). In float16 / bfloat16 zoo's logits are then as
    far from the float32 ones as transformers' own model's in that dtype, within a factor of 2, and past
    float16's range a float16 forward raises Float16Overflow (guard_float16) where transformers returns inf /
    NaN (tests/test_interop_half.py)."""
    if dtype not in DTYPES:
        raise Unsupported(f"dtype={dtype}: zoo converts to {', '.join(map(str, DTYPES))}")
    if (family, dtype) in HALF_REFUSED:
        raise Unsupported(HALF_REFUSED[family, dtype])


class Float16Overflow(FloatingPointError):
    """A converted model's output is not finite in float16: raised instead of returning inf / NaN."""


# the outputs of a zoo model guard_float16 checks: every path that gives logits or scores ends in one of them
_OUTPUTS = ("lm_head", "classifier", "length_head")


def _check_float16(module, args, output, family: str = "", where: str = "") -> None:
    """Forward hook: raise Float16Overflow when a float16 output holds inf / NaN (one check, float16 only)."""
    if isinstance(output, torch.Tensor) and output.dtype == torch.float16 and not torch.isfinite(output).all():
        raise Float16Overflow(
            f"the converted {family} model's {where} output is not finite in torch.float16: an activation "
            f"passed float16's range (65504), where transformers' own float16 {family} overflows too or clamps "
            f"(zoo's blocks do not); run it in torch.bfloat16 (float32's range) or torch.float32"
        )


def guard_float16(model: nn.Module, family: str) -> nn.Module:
    """Make a converted model raise Float16Overflow instead of returning inf / NaN from a float16 forward
    (_OUTPUTS' forward hooks; other dtypes pass unchecked, at no cost): past float16's range transformers'
    GPT-2, BERT, BART and Marian give inf / NaN as well, and its T5 clamps (zoo refuses T5 in float16,
    HALF_REFUSED; a model cast with model.half() is guarded all the same). Returns model."""
    for where in _OUTPUTS:
        module = getattr(model, where, None)
        if isinstance(module, nn.Module):
            module.register_forward_hook(partial(_check_float16, family=family, where=where))
    return model


def model_dtype(model: nn.Module) -> torch.dtype:
    """The one floating dtype of a model's parameters and buffers in its state dict (float32, bfloat16, ...).
    Raises ValueError naming them when they differ (cast the model first, e.g. model.bfloat16())."""
    dtypes = {v.dtype for v in model.state_dict().values() if v.is_floating_point()}
    if len(dtypes) != 1:
        raise ValueError(
            f"the model's weights mix {sorted(map(str, dtypes))}: cast it to one dtype before exporting "
            f"(model.float() or model.bfloat16())"
        )
    return dtypes.pop()
