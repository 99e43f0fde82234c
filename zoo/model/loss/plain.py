"""linear_cross_entropy's plain path (chunk_size=0): the full logits and F.cross_entropy, for comparison and as
an off switch."""

import torch
import torch.nn.functional as F

from zoo.model.loss.precision import LOW_DTYPES, compute_dtype, fp32_logits


def plain(h, weight, target, bias, ignore_index, label_smoothing, reduction, return_rows, out_shape, z_loss=0.0):
    """linear_cross_entropy's plain path (chunk_size=0): the full logits and F.cross_entropy (plus the z-loss
    term when z_loss > 0, `_plain_z`). In a bf16 / fp16 compute dtype (autocast, or a half-precision model) the
    logits are F.linear of the operands rounded to it, summed in fp32 and not rounded again (fp32_logits)."""
    dtype = compute_dtype(h, weight)
    if dtype in LOW_DTYPES:
        logits = fp32_logits(h, weight, bias, dtype)
    else:
        logits = F.linear(h, weight, bias)
    if z_loss:
        return _plain_z(logits, target, ignore_index, label_smoothing, reduction, return_rows, out_shape, z_loss)
    loss = F.cross_entropy(
        logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
    )
    if reduction == "none":
        loss = loss.view(out_shape)
    if not return_rows:
        return loss
    rows = (
        loss.detach()
        if reduction == "none"
        else F.cross_entropy(
            logits.detach(), target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none"
        )
    )
    return loss, rows.view(out_shape)


def _plain_z(logits, target, ignore_index, label_smoothing, reduction, return_rows, out_shape, z_loss):
    """The plain path with z-loss: rows = F.cross_entropy(reduction="none") + z_loss * logsumexp(logits)^2 on
    the non-ignored rows (0 elsewhere), reduced as `reduction` (mean: over the non-ignored rows)."""
    valid = target != ignore_index
    ce = F.cross_entropy(logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none")
    rows = ce + torch.where(valid, z_loss * logits.logsumexp(-1).square(), 0.0)
    loss = rows.view(out_shape) if reduction == "none" else rows.sum()
    if reduction == "mean":
        loss = loss / valid.sum()
    return (loss, rows.detach().view(out_shape)) if return_rows else loss
