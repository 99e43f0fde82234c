"""liger-kernel's fused Triton linear + cross-entropy (Hsu et al. 2024), which linear_cross_entropy hands a CUDA
call to when it is installed and the call is one it computes as the pure path does."""

from importlib import metadata

import torch

from zoo.model.loss.precision import LOW_DTYPES

LIGER_MIN_VERSION = (0, 5)  # earlier releases drop label_smoothing / reduction silently


def liger_loss(h, weight, target, bias, ignore_index, label_smoothing, reduction):
    """liger-kernel's fused Triton linear + cross-entropy (CUDA), or None when no recent enough release is
    installed (then the pure path runs)."""
    try:
        version = tuple(int(x) for x in metadata.version("liger-kernel").split(".")[:2])
        from liger_kernel.transformers.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyLoss
    except Exception:  # not installed, an unparsable version, or a build that does not import
        return None
    if version < LIGER_MIN_VERSION:
        return None
    loss_fn = LigerFusedLinearCrossEntropyLoss(
        ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
    )
    return loss_fn(weight, h, target, bias).float()  # liger's order: (weight, input, target, bias)


def external_kernel_ok(
    h: torch.Tensor,
    chunk_size: int | None,
    reduction: str,
    return_rows: bool,
    z_loss: float = 0.0,
    dtype: torch.dtype = torch.float32,
) -> bool:
    """Whether linear_cross_entropy may hand the call to an installed GPU kernel: CUDA tensors, the automatic
    chunk size (an explicit one asks for the pure path), reduction mean / sum, no per-row output, no z-loss
    (the pure path computes that one) and an fp32 (or wider) compute dtype: liger-kernel rounds bf16 / fp16
    logits to that dtype before its fp32 softmax, which the pure path does not (precision.fp32_logits)."""
    return (
        h.is_cuda
        and chunk_size is None
        and reduction in ("mean", "sum")
        and not return_rows
        and not z_loss
        and dtype not in LOW_DTYPES
    )
