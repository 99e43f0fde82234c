"""Attention masks. Convention: boolean, True = the query MAY attend to the key (as SDPA's bool mask).

Masks are (T_q, T_k) or broadcastable to (B, 1, T_q, T_k). A query block that starts at absolute
position `offset` (cached decoding: T_k = offset + T_q) is aligned so that query i (absolute
offset + i) sees keys j <= offset + i: bottom-right alignment, like flash-attention's causal mask.

Note that model inputs take `key_padding_mask` with torch.nn.Transformer's convention (B, T_k) bool,
True = padding (ignore); `padding()` turns it into this module's convention.
"""

import torch


def _grid(T_q: int, T_k: int, offset: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(T_q, device=device).unsqueeze(1) + offset  # (T_q, 1) absolute query positions
    j = torch.arange(T_k, device=device).unsqueeze(0)  # (1, T_k) key positions
    return i, j


def causal(T_q: int, T_k: int | None = None, offset: int = 0, device=None) -> torch.Tensor:
    """(T_q, T_k) bool: query at absolute position offset+i sees keys 0..offset+i (Vaswani et al. 2017, 3.2.3)."""
    T_k = T_q + offset if T_k is None else T_k
    i, j = _grid(T_q, T_k, offset, device)
    return j <= i


def bidirectional(T_q: int, T_k: int, device=None) -> torch.Tensor:
    """(T_q, T_k) bool, all True: every query sees every key (encoder self-attention)."""
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device)


def sliding_window(T_q: int, T_k: int | None = None, window: int = 128, offset: int = 0, device=None) -> torch.Tensor:
    """(T_q, T_k) bool: causal, and only the last `window` keys: offset+i-window < j <= offset+i
    (Longformer / Mistral sliding-window attention)."""
    T_k = T_q + offset if T_k is None else T_k
    i, j = _grid(T_q, T_k, offset, device)
    return (j <= i) & (j > i - window)


def prefix_lm(
    T_q: int, T_k: int | None = None, prefix_len: int | torch.Tensor = 0, offset: int = 0, device=None
) -> torch.Tensor:
    """Prefix LM (Raffel et al. 2020, T5 fig. 3): bidirectional over the first `prefix_len` keys, causal after.

    prefix_len: int, or (B,) tensor for a per-row prefix. Returns (T_q, T_k) or (B, 1, T_q, T_k) bool.
    """
    T_k = T_q + offset if T_k is None else T_k
    i, j = _grid(T_q, T_k, offset, device)
    if isinstance(prefix_len, torch.Tensor):
        p = prefix_len.to(device).view(-1, 1, 1, 1)  # (B, 1, 1, 1)
        return (j <= i) | (j < p)
    return (j <= i) | (j < prefix_len)


def padding(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """key_padding_mask: (B, T_k) bool, True = padding (torch.nn.Transformer convention).
    Returns (B, 1, 1, T_k) bool, True = may attend."""
    if key_padding_mask.dtype != torch.bool:
        raise ValueError(f"key_padding_mask must be bool (True = padding), got {key_padding_mask.dtype}")
    return ~key_padding_mask[:, None, None, :]


def combine(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the given masks (None = no constraint), broadcasting shapes."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


def build(
    kind: str,
    T_q: int,
    T_k: int,
    offset: int = 0,
    key_padding_mask: torch.Tensor | None = None,
    prefix_len: int | torch.Tensor = 0,
    window: int = 128,
    need_explicit: bool = False,
    device=None,
) -> tuple[torch.Tensor | None, bool]:
    """The self-attention mask of one forward pass, built once and shared by every layer.

    kind: causal | bidirectional | prefix | sliding. key_padding_mask: (B, T_k), True = padding.
    need_explicit: return a tensor even for plain causal (e.g. ALiBi adds a bias, so no is_causal path).
    Returns (mask, is_causal): mask None and is_causal True means "use SDPA's is_causal path", which
    builds no T x T matrix; mask None and is_causal False means "attend everywhere".
    Raises ValueError for an unknown kind.
    """
    pad = padding(key_padding_mask) if key_padding_mask is not None else None
    if kind == "bidirectional":
        return (pad if pad is not None or not need_explicit else bidirectional(T_q, T_k, device)), False
    if kind == "causal":
        if pad is None and not need_explicit:
            if T_q == T_k and offset == 0:
                return None, True  # SDPA's fused causal path
            if T_q == 1:
                return None, False  # one new query at the end sees every cached key
        return combine(causal(T_q, T_k, offset, device), pad), False
    if kind == "prefix":
        return combine(prefix_lm(T_q, T_k, prefix_len, offset, device), pad), False
    if kind == "sliding":
        return combine(sliding_window(T_q, T_k, window, offset, device), pad), False
    raise ValueError(f"mask={kind!r} is unknown; allowed: causal, bidirectional, prefix, sliding")
