"""The chunked path's passes over chunk_pass in the compute dtype: the losses alone (no gradient), and the two
autograd Functions, FusedLinearCrossEntropy (reductions mean / sum: the gradients computed in forward, chunk by
chunk) and LinearCrossEntropyRows (reduction none: backward recomputes each chunk's logits)."""

import torch

from zoo.model.loss.chunk_pass import chunk_pass
from zoo.model.loss.precision import no_autocast


def cast_chunk_pass(h, weight, bias, target, valid, label_smoothing, chunk, scale, needs, dtype, z_loss=0.0):
    """chunk_pass on h, weight and bias cast to the compute dtype, autocast off, accumulating in fp32 (or
    wider when dtype is)."""
    acc = torch.promote_types(dtype, torch.float32)
    with no_autocast(h.device):
        b = None if bias is None else bias.to(dtype)
        return chunk_pass(
            h.to(dtype), weight.to(dtype), b, target, valid, label_smoothing, chunk, scale, needs, acc, z_loss
        )


def losses_only(h, weight, target, bias, ignore_index, label_smoothing, reduction, chunk, dtype, z_loss=0.0):
    """One chunked pass without gradients: (loss (reduced as `reduction`), row losses (N,))."""
    valid = target != ignore_index
    with torch.no_grad():
        rows = cast_chunk_pass(
            h, weight, bias, target, valid, label_smoothing, chunk, None, (False, False, False), dtype, z_loss
        )[0]
    loss = rows if reduction == "none" else rows.sum()
    if reduction == "mean":
        loss = loss / valid.sum()
    return loss, rows


class FusedLinearCrossEntropy(torch.autograd.Function):
    """Reductions mean / sum: the loss and, in forward, the gradients (chunk by chunk, stored for backward).
    apply(h (N, d), weight (V, d), bias (V,) | None, target (N,), ignore_index, label_smoothing, reduction,
    chunk rows, compute dtype, needs (grad h, grad weight, grad bias), z_loss) -> (loss (), row losses (N,),
    not differentiable)."""

    @staticmethod
    def forward(ctx, h, weight, bias, target, ignore_index, label_smoothing, reduction, chunk, dtype, needs, z_loss):
        acc = torch.promote_types(dtype, torch.float32)
        valid = target != ignore_index
        n = valid.sum()
        scale = valid.to(acc)
        if reduction == "mean":
            scale = scale / n.clamp(min=1)
        rows, gh, gw, gb = cast_chunk_pass(
            h, weight, bias, target, valid, label_smoothing, chunk, scale, needs, dtype, z_loss
        )
        loss = rows.sum()
        if reduction == "mean":
            loss = loss / n
        ctx.save_for_backward(
            gh, None if gw is None else gw.to(weight.dtype), None if gb is None else gb.to(bias.dtype)
        )
        ctx.h_dtype = h.dtype
        ctx.mark_non_differentiable(rows)
        return loss, rows

    @staticmethod
    def backward(ctx, grad_loss, _grad_rows):
        gh, gw, gb = ctx.saved_tensors
        # the usual loss.backward(): the stored gradients as they are (no data-dependent branch when compiled)
        one = not torch.compiler.is_compiling() and bool(grad_loss == 1)

        def scaled(g):
            return g if g is None or one else g * grad_loss.to(g.dtype)

        gh = None if gh is None else scaled(gh).to(ctx.h_dtype)
        return gh, scaled(gw), scaled(gb), None, None, None, None, None, None, None, None


class LinearCrossEntropyRows(torch.autograd.Function):
    """reduction="none" with gradients: forward keeps only its inputs; backward recomputes each chunk's logits
    (Cut Cross-Entropy's way) with the per-row incoming gradient as the scale. Same apply arguments as
    FusedLinearCrossEntropy without reduction; returns row losses (N,)."""

    @staticmethod
    def forward(ctx, h, weight, bias, target, ignore_index, label_smoothing, chunk, dtype, needs, z_loss):
        acc = torch.promote_types(dtype, torch.float32)
        valid = target != ignore_index
        rows = cast_chunk_pass(h, weight, bias, target, valid, label_smoothing, chunk, None, needs, dtype, z_loss)[0]
        ctx.save_for_backward(h, weight, bias, target)
        ctx.args = (ignore_index, label_smoothing, chunk, dtype, needs, acc, z_loss)
        return rows

    @staticmethod
    def backward(ctx, grad_rows):
        h, weight, bias, target = ctx.saved_tensors
        ignore_index, label_smoothing, chunk, dtype, needs, acc, z_loss = ctx.args
        valid = target != ignore_index
        scale = grad_rows.to(acc).masked_fill(~valid, 0.0)
        _, gh, gw, gb = cast_chunk_pass(
            h, weight, bias, target, valid, label_smoothing, chunk, scale, needs, dtype, z_loss
        )
        return (
            None if gh is None else gh.to(h.dtype),
            None if gw is None else gw.to(weight.dtype),
            None if gb is None else gb.to(bias.dtype),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        )
