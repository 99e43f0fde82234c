"""The precision of the chunked cross-entropy: the projections' compute dtype (autocast's, or the operands'),
autocast switched off inside the paths that cast by hand, and the fp32 logits of a bf16 / fp16 projection."""

import contextlib

import torch
import torch.nn.functional as F

LOW_DTYPES = (torch.float16, torch.bfloat16)  # compute dtypes whose logits are kept in fp32 (fp32_logits)


def compute_dtype(h: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    """The dtype of the projections: the autocast dtype when autocast is on for h's device (as F.linear under
    autocast), else the promoted dtype of h and weight."""
    device = h.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return torch.promote_types(h.dtype, weight.dtype)


def no_autocast(device: torch.device):
    """Autocast off inside the Functions: they cast explicitly (mm would otherwise be re-cast)."""
    try:
        return torch.autocast(device_type=device.type, enabled=False)
    except RuntimeError:  # a device type autocast does not know
        return contextlib.nullcontext()


def fp32_logits(h, weight, bias, dtype):
    """F.linear(h, weight, bias) of the operands rounded to `dtype` (bf16 / fp16, what autocast feeds the GEMM),
    in fp32: the products are exact in fp32, so these are the sums the low-precision GEMM accumulates, before it
    rounds its output (which at logits near 100 is a step of 0.5 in bf16). Differentiable; autocast off."""
    with no_autocast(h.device):
        b = None if bias is None else bias.to(dtype).float()
        return F.linear(h.to(dtype).float(), weight.to(dtype).float(), b)
