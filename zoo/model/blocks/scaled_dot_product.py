"""Scaled dot-product attention (Vaswani et al. 2017, sec. 3.2.1, eq. 1), `attend`: softmax(q k^T / sqrt(d_head)
+ bias + mask) v, with a bool mask (True = may attend), a bottom-right aligned is_causal over cached keys, grouped
K/V heads, and zeros (never NaN) on a query row with no key. It runs torch's fused scaled_dot_product_attention,
or explicit matmuls that keep the weights (need_weights: record_weights, record_trace); both agree.
"""

import math

import torch
import torch.nn.functional as F
from einops import repeat


def _check_shape(name: str, t: torch.Tensor, full: tuple[int, ...]) -> None:
    try:
        ok = torch.broadcast_shapes(t.shape, full) == full
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"attention {name} of shape {tuple(t.shape)} does not broadcast to (B, h, T_q, T_k) = "
            f"{full}; over cached keys it must cover all of them (T_k = cached + new)"
        )


def _check_inputs(mask: torch.Tensor | None, bias: torch.Tensor | None, full: tuple[int, ...]) -> None:
    """Raise ValueError for a non-bool mask, or a mask or bias that does not broadcast to full = (B, h, T_q, T_k)."""
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(
                f"attention mask must be bool (True = may attend), got {mask.dtype}; pass an "
                f"additive float mask as bias="
            )
        _check_shape("mask", mask, full)
    if bias is not None:
        _check_shape("bias", bias, full)


def _fold_causal(
    mask: torch.Tensor | None, T_q: int, T_k: int, fused: bool, device: torch.device
) -> tuple[torch.Tensor | None, bool]:
    """is_causal as attend reads it: query i (absolute position T_k - T_q + i) sees keys 0 .. T_k - T_q + i.
    fused: SDPA's own is_causal may do it (no mask, no bias, no weights wanted); it aligns top-left, which is
    bottom-right only when T_q == T_k. Otherwise the causal mask is built and and-ed into `mask` (one query
    at the end sees every key: nothing to mask).
    Returns (mask, whether to pass is_causal=True to SDPA). Raises ValueError when T_q > T_k."""
    if T_q > T_k:
        raise ValueError(
            f"is_causal=True with {T_q} queries but {T_k} keys: causal queries are the last T_q "
            f"keys; pass is_causal=False with an explicit mask"
        )
    if fused and mask is None and T_q == T_k:
        return None, True
    if T_q > 1:
        causal = torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(T_k - T_q)  # (T_q, T_k)
        mask = causal if mask is None else mask & causal
    return mask, False


def _scores_mask(
    mask: torch.Tensor | None, bias: torch.Tensor | None, dtype: torch.dtype
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The one attn_mask of SDPA from a bool mask (True = may attend) and a float bias: the bias (in dtype, the
    queries') with -inf where the mask forbids, or the mask alone, or None. A query row whose mask allows no key
    attends everywhere here instead (a softmax over all -inf is NaN), and is zeroed afterwards.
    Returns (attn_mask, row_ok (.., T_q, 1) bool, False = an empty row; None without a mask)."""
    row_ok = None
    if mask is not None:
        row_ok = mask.any(-1, keepdim=True)  # (B|1, 1|h, T_q, 1)
        mask = mask | ~row_ok  # an empty row attends everywhere, then is zeroed
    if bias is None:
        return mask, row_ok
    bias = bias.to(dtype)
    return (bias if mask is None else bias.masked_fill(~mask, float("-inf"))), row_ok


def _explicit_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None,
    row_ok: torch.Tensor | None,
    dropout_p: float,
    scale: float | None,
    keep: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T scale + attn_mask) v with plain matmuls, keeping the weights (attend's need_weights path).
    q: (B, h, T_q, d_head); k, v: (B, h_kv, T_k, d_head), repeated to h heads; attn_mask: bool (True = may
    attend) or float (added), broadcastable to (B, h, T_q, T_k), or None; row_ok: (.., T_q, 1) bool, False =
    a query row with no key to attend, whose weights are zeroed (None = every row has keys).
    keep: a dict that gets "scores", q k^T times the scale (B, h, T_q, T_k), before bias and mask (None = not kept).
    Returns (out (B, h, T_q, d_head), weights (B, h, T_q, T_k))."""
    h = q.shape[1]
    if k.shape[1] != h:
        k = repeat(k, "b g t d -> b (g r) t d", r=h // k.shape[1])
        v = repeat(v, "b g t d -> b (g r) t d", r=h // v.shape[1])
    scores = q @ k.transpose(-2, -1)  # (B, h, T_q, T_k)
    scores = scores / math.sqrt(q.shape[-1]) if scale is None else scores * scale
    if keep is not None:
        keep["scores"] = scores
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = scores.softmax(dim=-1)
    if row_ok is not None:
        weights = weights.masked_fill(~row_ok, 0.0)
    return F.dropout(weights, dropout_p) @ v, weights


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    scale: float | None = None,
    keep: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q k^T / sqrt(d_head) + bias + mask) v, safe with every mask (Vaswani et al. 2017, eq. 1).

    q: (B, h, T_q, d_head); k, v: (B, h_kv, T_k, d_head) with h % h_kv == 0.
    mask: bool broadcastable to (B, h, T_q, T_k), True = may attend. bias: float, same broadcast (ALiBi).
    is_causal: the queries are the last T_q positions of the keys, and a query at absolute position
        p = T_k - T_q + i sees keys 0..p (bottom-right aligned, so a cached decoding step is causal too).
        With a mask, a query attends where both allow. Every input combination gives the same result on
        the fused SDPA path and the need_weights path.
    A query row whose keys are all masked outputs zeros (never NaN, in forward and backward).
    need_weights: compute with explicit matmuls and return the weights (MultiHeadAttention asks for them
        inside record_weights).
    scale: multiplies q k^T instead of 1/sqrt(d_head) (None = 1/sqrt(d_head); T5: 1.0, Raffel et al. 2020).
    keep: with need_weights, a dict that gets "scores" (q k^T times the scale, (B, h, T_q, T_k), before bias and
        mask) and "mask" (the bool mask applied, is_causal folded in; None = every key seen); record_trace's.
    Returns (out (B, h, T_q, d_head), weights (B, h, T_q, T_k) if need_weights else None).
    Raises ValueError for a non-bool mask, a mask or bias that does not broadcast to (B, h, T_q, T_k), or
    is_causal with more queries than keys.
    """
    B, h, T_q, T_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    _check_inputs(mask, bias, (B, h, T_q, T_k))
    sdpa_causal = False
    if is_causal:
        mask, sdpa_causal = _fold_causal(mask, T_q, T_k, bias is None and not need_weights, q.device)
    attn_mask, row_ok = _scores_mask(mask, bias, q.dtype)
    if need_weights:
        if keep is not None:
            keep["mask"] = mask
        return _explicit_attention(q, k, v, attn_mask, row_ok, dropout_p, scale, keep)
    gqa = k.shape[1] != h  # fewer K/V heads than query heads
    out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, sdpa_causal, scale=scale, enable_gqa=gqa)
    return (out if row_ok is None else out.masked_fill(~row_ok, 0.0)), None
