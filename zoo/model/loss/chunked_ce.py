"""Fused, chunked output projection + cross-entropy: the full (N, V) logits tensor never exists.

    loss = linear_cross_entropy(h, weight, target, bias, label_smoothing=0.1)
    # = F.cross_entropy(F.linear(h, weight, bias).float(), target, ignore_index=-100, label_smoothing=0.1)
    loss = linear_cross_entropy(h, weight, target, z_loss=1e-4)   # + PaLM's z-loss, 1e-4 * log(Z)^2 per row

The rows of h (N, d) go through the head in chunks of C rows. Each chunk computes its (C, V) logits, their
logsumexp, its rows' losses and, in the same pass, the gradient of the loss wrt those logits, which it turns at
once into its rows of grad h (C, d) and its share of grad W (V, d) and grad bias (V,); the chunk's logits are
then dropped (one (C, V) buffer is reused by every chunk). The gradients are stored for backward, which only
scales them by the incoming gradient: the idea of Liger Kernel's FusedLinearCrossEntropy (Hsu et al. 2024) and
of Cut Cross-Entropy (Wijmans et al. 2024, which recomputes the logits in backward instead; zoo does that for
reduction="none", whose per-row gradient is only known in backward). Peak memory is O(C V + N d + V d)
instead of a few (N, V) tensors (logits, log-probabilities, their gradient): at N = 8 x 1024 and V = 50,257
each (N, V) fp32 tensor is 1.6 GB.

Semantics are F.cross_entropy's, exactly as torch defines them: the row loss is
(1 - ls) * (-log p_target) + ls * mean_j(-log p_j) over all V classes; ignored rows (target == ignore_index)
lose 0 and get no gradient; reduction="mean" divides the sum by the number of non-ignored rows (all ignored:
nan, with zero gradients, as torch). z_loss > 0 adds z_loss * log(Z)^2 to every non-ignored row's loss, log Z
the logsumexp of its logits (PaLM's z-loss, Chowdhery et al. 2022, sec. 5: it keeps the softmax normaliser near
1), reduced with the cross-entropy over the same rows; z_loss = 0 runs the very operations of plain
cross-entropy. Under torch.autocast (or with bf16 / fp16 h and weight) the projections read their operands in
that dtype (as F.linear would), and the logits are the GEMM's fp32 sums, never rounded to bf16 / fp16 before
the fp32 softmax and loss (at logits near 100 a bf16 step is 0.5: two classes 0.25 apart would tie); the plain
path (chunk_size=0) computes the same fp32 logits. The gradient GEMMs run in the low dtype; grad W is
accumulated over the chunks in fp32.

On CUDA, with the automatic chunk size, `liger-kernel`'s fused Triton kernel is used when it is installed
(reductions mean / sum, no per-row output, no z-loss, fp32 compute: it rounds bf16 logits before its
softmax); the CPU always runs the pure-PyTorch path here.

Its parts, in zoo.model.loss: precision (the compute dtype, fp32 logits), fused (the autograd Functions over
chunk_pass's loop), plain (chunk_size=0) and liger (the CUDA kernel).
"""

import torch

from zoo.errors import check_z_loss
from zoo.model.loss.fused import FusedLinearCrossEntropy, LinearCrossEntropyRows, losses_only
from zoo.model.loss.liger import external_kernel_ok, liger_loss
from zoo.model.loss.plain import plain
from zoo.model.loss.precision import compute_dtype

IGNORE_INDEX = -100
LOGITS_CHUNK_BYTES = 64 * 2**20  # automatic chunk: about this many bytes of fp32 logits per chunk
MIN_CHUNK_ROWS = 512  # ... but at least this many rows: each chunk streams W (V x d) through 3 GEMMs
REDUCTIONS = ("mean", "sum", "none")


def auto_chunk_size(
    n_rows: int, vocab_size: int, budget_bytes: int = LOGITS_CHUNK_BYTES, min_rows: int = MIN_CHUNK_ROWS
) -> int:
    """The automatic chunk (rows): budget_bytes of fp32 logits (C x V x 4), at least min_rows (GEMM efficiency:
    each chunk reads W, and reads and writes grad W, once per projection), a multiple of 64 rows when it is
    smaller than n_rows, and never more than n_rows (then it is one chunk). At V = 50,257: 512 rows (103 MB)."""
    rows = max(min_rows, budget_bytes // (4 * max(1, vocab_size)))
    rows = max(64, rows // 64 * 64)
    return max(1, min(n_rows, rows))


def resolve_chunk_size(chunk_size: int | None, n_rows: int, vocab_size: int) -> int:
    """chunk_size None = auto_chunk_size; a positive int as given (capped at n_rows); 0 = the plain path (returned
    as 0). Raises ValueError for a negative value."""
    if chunk_size is None:
        return auto_chunk_size(n_rows, vocab_size)
    if chunk_size < 0:
        raise ValueError(f"chunk_size={chunk_size} must be >= 0 (0 = plain path, None = automatic)")
    return min(chunk_size, max(1, n_rows)) if chunk_size else 0


def linear_cross_entropy(
    h: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    ignore_index: int = IGNORE_INDEX,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    chunk_size: int | None = None,
    return_rows: bool = False,
    z_loss: float = 0.0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """F.cross_entropy(F.linear(h, weight, bias).float(), target, ignore_index=ignore_index,
    label_smoothing=label_smoothing, reduction=reduction), without the full logits tensor, and in bf16 / fp16
    with the logits summed in fp32 and not rounded to that dtype (zoo.model.loss.precision.fp32_logits); with z_loss > 0
    each non-ignored row's loss also gets z_loss * logsumexp(its logits)^2 (PaLM's z-loss, Chowdhery et al.
    2022, sec. 5), reduced with it (mean: over the same rows).

    h (..., d): hidden states (any leading shape, flattened to N rows), fp32 or under autocast; weight (V, d):
    the head's weight (e.g. model.lm_head.weight, tied or not); bias (V,) or None; target (...) long, h's
    leading shape, ignore_index = no loss, no gradient.
    reduction: mean (over non-ignored rows; all ignored: nan) | sum | none (per-row losses, target's shape,
    0 where ignored; differentiable: backward recomputes the logits chunk by chunk).
    chunk_size: rows per chunk; None = automatic (auto_chunk_size; on CUDA an installed liger-kernel may take
    the call); 0 = the plain path (full logits and F.cross_entropy, for comparison and as an off switch).
    return_rows: also return the per-row losses (target's shape, detached, fp32, 0 where ignored): free here
    (every chunk computes them), for metrics such as per-window losses.
    Without a gradient to compute (torch.no_grad, or no input requiring grad) one chunked pass computes the
    losses only. The rows (reduction none, return_rows) include the z-loss term. Returns the loss (fp32; float64
    for float64 inputs), or (loss, rows) with return_rows.
    Raises ValueError for an unknown reduction, a negative chunk_size or z_loss, or mismatched shapes.
    """
    z_loss = check_z_loss(z_loss)
    _check_arguments(h, weight, target, bias, label_smoothing, reduction)
    h2, t = h.reshape(-1, h.shape[-1]), target.reshape(-1)
    chunk = resolve_chunk_size(chunk_size, h2.shape[0], weight.shape[0])
    if chunk == 0:
        return plain(h2, weight, t, bias, ignore_index, label_smoothing, reduction, return_rows, target.shape, z_loss)
    if external_kernel_ok(h2, chunk_size, reduction, return_rows, z_loss, compute_dtype(h2, weight)):
        loss = liger_loss(h2, weight, t, bias, ignore_index, label_smoothing, reduction)
        if loss is not None:
            return loss
    loss, rows = _chunked(h2, weight, t, bias, ignore_index, label_smoothing, reduction, chunk, z_loss)
    loss = loss.view(target.shape) if reduction == "none" else loss
    return (loss, rows.view(target.shape)) if return_rows else loss


def _check_arguments(
    h: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None,
    label_smoothing: float,
    reduction: str,
) -> None:
    """linear_cross_entropy's arguments checked: raises ValueError for an unknown reduction, label_smoothing
    outside [0, 1], weight not (V, d) for h (..., d), bias not (V,), or target not of h's leading shape."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is unknown; allowed: {', '.join(REDUCTIONS)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing={label_smoothing} must be in [0, 1]")
    d = h.shape[-1]
    if weight.dim() != 2 or weight.shape[1] != d:
        raise ValueError(f"weight must be (V, {d}) for h (..., {d}), got {tuple(weight.shape)}")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"bias must be ({weight.shape[0]},), got {tuple(bias.shape)}")
    if target.shape != h.shape[:-1]:
        raise ValueError(f"target must have h's leading shape {tuple(h.shape[:-1])}, got {tuple(target.shape)}")


def _chunked(h, weight, target, bias, ignore_index, label_smoothing, reduction, chunk, z_loss):
    """linear_cross_entropy's chunked path over h (N, d), target (N,): one pass for the losses alone when no
    gradient is needed, else the autograd Function of the reduction (per-row losses for none, the reduced loss
    otherwise). Returns (loss, row losses (N,), detached for the rows' own metrics)."""
    dtype = compute_dtype(h, weight)
    needs = (h.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad)
    if not (torch.is_grad_enabled() and any(needs)):
        return losses_only(h, weight, target, bias, ignore_index, label_smoothing, reduction, chunk, dtype, z_loss)
    if reduction == "none":
        rows = LinearCrossEntropyRows.apply(
            h, weight, bias, target, ignore_index, label_smoothing, chunk, dtype, needs, z_loss
        )
        return rows, rows.detach()
    return FusedLinearCrossEntropy.apply(
        h, weight, bias, target, ignore_index, label_smoothing, reduction, chunk, dtype, needs, z_loss
    )


def lm_head_cross_entropy(head: torch.nn.Module, hidden: torch.Tensor, target: torch.Tensor, **kwargs):
    """linear_cross_entropy through a model's output head, logits never built: the head is an nn.Linear
    (weight (V, d), bias or None; tied or not), or one with a `features(x)` method applied before its projection
    (zoo.model.blocks.heads.LMHead: BERT's transform, T5's rescale), which runs first, on the whole hidden (..., d).
    = F.cross_entropy(head(hidden).float() flattened, target flattened, ...); kwargs: linear_cross_entropy's."""
    features = getattr(head, "features", None)
    x = features(hidden) if callable(features) else hidden
    return linear_cross_entropy(x, head.weight, target, head.bias, **kwargs)


@torch.no_grad()
def chunked_cross_entropy_rows(
    h: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    ignore_index: int = IGNORE_INDEX,
    label_smoothing: float = 0.0,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Evaluation: per-row losses (target's shape, 0 where ignored), no gradient, chunk by chunk
    (= linear_cross_entropy(..., reduction="none") under torch.no_grad)."""
    return linear_cross_entropy(
        h,
        weight,
        target,
        bias,
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
        reduction="none",
        chunk_size=chunk_size,
    )


__all__ = [
    "FusedLinearCrossEntropy",
    "LinearCrossEntropyRows",
    "IGNORE_INDEX",
    "auto_chunk_size",
    "chunked_cross_entropy_rows",
    "linear_cross_entropy",
    "lm_head_cross_entropy",
    "resolve_chunk_size",
]
