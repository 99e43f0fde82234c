"""Multi-head attention (Vaswani et al. 2017, sec. 3.2.2) on scaled_dot_product_attention.

Self-attention uses one fused QKV projection whose weight is laid out [W_q; W_k; W_v] exactly like
nn.MultiheadAttention.in_proj_weight; cross-attention projects Q from the decoder and K, V from the
memory. n_kv_heads < n_heads gives grouped-query / multi-query attention (Ainslie et al. 2023). The attention
itself is `attend` (scaled_dot_product.py).
Attention weights are not returned by the modules: `record_weights` makes them keep their last ones, and
`record_trace` keeps every intermediate of the last forward (zoo.trace) without changing the output.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
from einops import rearrange
from torch import nn

from zoo.model.blocks.kv_cache import KVCache
from zoo.model.blocks.positions import apply_rotary
from zoo.model.blocks.scaled_dot_product import attend


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
        q, k, v = self._project(x, memory, cache)
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

    def _project(
        self, x: torch.Tensor, memory: torch.Tensor | None, cache: KVCache | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The heads: q (B, h, T_q, d_head) from x; k, v (B, h_kv, T, d_head) from x (self-attention: T = T_q,
        before RoPE and the cache) or from memory (cross-attention: T = T_k, computed on the cache's first step
        and read from it after)."""
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
        return rearrange(q, "b t (h d) -> b h t d", d=self.head_dim), k, v  # q: (B, h, T_q, d_head)


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
