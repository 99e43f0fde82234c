"""Multi-head attention (Vaswani et al. 2017, sec. 3.2.2) on scaled_dot_product_attention.

Self-attention uses one fused QKV projection whose weight is laid out [W_q; W_k; W_v] exactly like
nn.MultiheadAttention.in_proj_weight; cross-attention projects Q from the decoder and K, V from the
memory. n_kv_heads < n_heads gives grouped-query / multi-query attention (Ainslie et al. 2023).
Attention weights are not returned by the modules: `record_weights` makes them keep their last ones, and
`record_trace` keeps every intermediate of the last forward (zoo.report.trace) without changing the output.
"""

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from zoo.model.blocks.kv_cache import KVCache
from zoo.model.blocks.positions import apply_rotary


@dataclass(frozen=True)
class AttentionInputs:
    """The self-attention inputs of one forward, shared by every layer of a stack; built once by
    TransformerBase.prepare. T new queries attend over T_k = offset + T keys (offset = tokens already in
    the KV cache). The fields are `attend`'s arguments of the same names."""

    mask: torch.Tensor | None = None  # bool (T, T_k) or (B | 1, 1, T, T_k), True = may attend; None = no mask
    is_causal: bool = False  # query i (absolute position offset + i) sees keys 0 .. offset + i
    rope: tuple[torch.Tensor, torch.Tensor] | None = None  # (cos, sin) of the new positions, each (B | 1, 1, T, d_head)
    bias: torch.Tensor | None = None  # float (1, h, T, T_k) added to the scores (ALiBi, T5 relative positions)

    def add_bias(self, bias: torch.Tensor) -> "AttentionInputs":
        """A copy with `bias` (broadcastable to (B, h, T, T_k)) added to the scores."""
        return replace(self, bias=bias if self.bias is None else self.bias + bias)


NO_INPUTS = AttentionInputs()  # no mask, not causal, no rotary positions, no bias


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
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=sdpa_causal,
        enable_gqa=k.shape[1] != h,
        scale=scale,
    )
    if row_ok is not None:
        out = out.masked_fill(~row_ok, 0.0)
    return out, None


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention with n_heads query heads and n_kv_heads key/value heads.

    d_model: width; n_heads must divide it; n_kv_heads (None = n_heads) must divide n_heads.
    cross: build Q from x and K, V from `memory` (decoder cross-attention).
    bias: biases in the projections. dropout: on the attention weights (training only).
    scale: of q k^T (None = 1/sqrt(d_head); see `attend`).
    Raises ValueError for indivisible head counts.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        cross: bool = False,
        scale: float | None = None,
    ):
        super().__init__()
        n_kv_heads = n_kv_heads or n_heads
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.cross, self.dropout, self.scale = cross, dropout, scale
        kv_dim = n_kv_heads * self.head_dim
        if cross:
            self.q_proj = nn.Linear(d_model, d_model, bias=bias)
            self.kv_proj = nn.Linear(d_model, 2 * kv_dim, bias=bias)
        else:
            self.qkv_proj = nn.Linear(d_model, d_model + 2 * kv_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.record_weights = False  # set by record_weights(): keep each forward's weights in attn_weights
        self.attn_weights: torch.Tensor | None = None
        self.trace_record: dict | None = None  # set by record_trace(): filled with each forward's intermediates

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        attn: AttentionInputs | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """x: (B, T_q, d_model); memory: (B, T_k, d_model) for cross-attention.

        attn: mask / is_causal / bias as `attend`, over all keys (cached ones included): with a cache holding
            `pos` tokens, mask and bias are (.., T_q, pos + T_q), and is_causal lets the query at absolute
            position pos + i see keys 0..pos + i; rope: (cos, sin) of the new positions, each
            (B|1, 1, T_q, d_head), applied to q and k. None = none of them.
        cache: self-attention appends the new K/V; cross-attention computes the memory's K/V once.
        Returns y (B, T_q, d_model). Inside record_weights(...) the weights are computed explicitly and kept in
        self.attn_weights (B, n_heads, T_q, T_k).
        Raises ValueError for is_causal in cross-attention (the memory has no order relative to x), and as
        `attend`.
        """
        attn = attn or NO_INPUTS
        mask, is_causal, rope, bias = attn.mask, attn.is_causal, attn.rope, attn.bias
        if self.cross and is_causal:
            raise ValueError(
                "is_causal=True in cross-attention: the memory's positions are not the queries'; "
                "pass a mask over the memory (memory_key_padding_mask) instead"
            )
        d_q = self.n_heads * self.head_dim
        if self.cross:
            q = self.q_proj(x)  # (B, T_q, d_model)
            if cache is not None and cache.pos > 0:
                k, v = cache.get()  # memory K/V computed on the first step
            else:
                k, v = rearrange(self.kv_proj(memory), "b t (two g d) -> two b g t d", two=2, d=self.head_dim)
                if cache is not None:
                    k, v = cache.update(k, v)
        else:
            qkv = self.qkv_proj(x)  # (B, T_q, d_model + 2 kv_dim)
            q, kv = qkv.split([d_q, qkv.shape[-1] - d_q], dim=-1)
            k, v = rearrange(kv, "b t (two g d) -> two b g t d", two=2, d=self.head_dim)  # (B, h_kv, T_q, d_head)
        q = rearrange(q, "b t (h d) -> b h t d", d=self.head_dim)  # (B, h, T_q, d_head)
        if rope is not None:
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        if cache is not None and not self.cross:
            k, v = cache.update(k, v)  # (B, h_kv, pos + T_q, d_head)
        p = self.dropout if self.training else 0.0
        out, weights = attend(q, k, v, mask, bias, is_causal, p, self.record_weights, self.scale)
        if self.record_weights:
            self.attn_weights = weights
        if self.trace_record is not None:
            keep = {"q": q, "k": k, "v": v, "bias": bias, "heads": out}
            _, keep["weights"] = attend(q, k, v, mask, bias, is_causal, 0.0, True, self.scale, keep)  # on the side
            self.trace_record = keep
        return self.out_proj(rearrange(out, "b h t d -> b t (h d)"))  # (B, T_q, d_model)


@contextmanager
def record_weights(module: nn.Module, enabled: bool = True) -> Iterator[list[MultiHeadAttention]]:
    """Within the block every MultiHeadAttention in `module` (itself included) computes its attention with
    explicit matmuls (attend's need_weights path: the same output, N x N scores per head kept) and holds its
    last forward's weights (B, n_heads, T_q, T_k) in `.attn_weights`; read them inside the block. On exit each
    module returns to its state before (outside every block: the fused path, attn_weights None).
    enabled=False: a block that changes nothing. Yields the modules, in module order."""
    mods = [m for m in module.modules() if isinstance(m, MultiHeadAttention)] if enabled else []
    before = [(m.record_weights, m.attn_weights) for m in mods]
    for m in mods:
        m.record_weights, m.attn_weights = True, None
    try:
        yield mods
    finally:
        for m, (rec, w) in zip(mods, before):
            m.record_weights, m.attn_weights = rec, w


@contextmanager
def record_trace(module: nn.Module) -> Iterator[list[MultiHeadAttention]]:
    """Within the block every MultiHeadAttention in `module` keeps the intermediates of its last forward in
    `.trace_record`, a dict: "q" (B, h, T_q, d_head) and "k", "v" (B, h_kv, T_k, d_head), as attention read
    them (after RoPE, cached keys included); "heads" (B, h, T_q, d_head), the per-head output it returned;
    "scores" (B, h, T_q, T_k), q k^T times the scale; "bias" (ALiBi, T5) or None; "mask", the bool mask it
    applied (True = may attend, is_causal folded in; None = every key); "weights" (B, h, T_q, T_k).
    The output stays the fused path's, bit for bit: scores, mask and weights come from a second call of
    `attend` (need_weights) on the same q, k, v, after the real one. On exit every module returns to its
    state before. Yields the modules, in module order."""
    mods = [m for m in module.modules() if isinstance(m, MultiHeadAttention)]
    before = [m.trace_record for m in mods]
    for m in mods:
        m.trace_record = {}
    try:
        yield mods
    finally:
        for m, rec in zip(mods, before):
            m.trace_record = rec
