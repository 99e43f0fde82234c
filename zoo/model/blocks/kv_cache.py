"""A preallocated key/value cache for incremental decoding, one per attention layer."""

import torch


class KVCache:
    """Keys and values of the tokens seen so far, written in place into preallocated tensors.

    k, v: (B, n_kv_heads, max_len, head_dim); `pos` is the number of positions written (tokens).
    For cross-attention the cache holds the memory's K/V, computed once on the first step.
    """

    def __init__(self, batch_size: int, n_kv_heads: int, max_len: int, head_dim: int, device=None, dtype=torch.float32):
        self.k = torch.zeros(batch_size, n_kv_heads, max_len, head_dim, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.pos = 0

    @property
    def max_len(self) -> int:
        return self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor):
        """Append k, v: (B, n_kv_heads, T, head_dim); return all cached (B, n_kv_heads, pos+T, head_dim).

        Raises ValueError when the cache would overflow max_len.
        """
        T = k.shape[2]
        if self.pos + T > self.max_len:
            raise ValueError(
                f"KV cache overflow: {self.pos} + {T} tokens > max_len={self.max_len}; "
                f"allocate a longer cache (model.max_len)"
            )
        self.k[:, :, self.pos : self.pos + T] = k.to(self.k.dtype)
        self.v[:, :, self.pos : self.pos + T] = v.to(self.v.dtype)
        self.pos += T
        return self.get()

    def get(self):
        """The cached keys and values: two (B, n_kv_heads, pos, head_dim) views."""
        return self.k[:, :, : self.pos], self.v[:, :, : self.pos]

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` (beam search): index (B',) long."""
        self.k = self.k.index_select(0, index)
        self.v = self.v.index_select(0, index)


class DecodingCache:
    """All caches of one model for one generation: self_attn[i] per decoder layer, cross_attn[i] per
    decoder layer with cross-attention (encoder-decoder) or None. `offset` = tokens already cached."""

    def __init__(self, self_attn, cross_attn=None):
        self.self_attn, self.cross_attn = self_attn, cross_attn

    @property
    def offset(self) -> int:
        return self.self_attn[0].pos if self.self_attn else 0

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` (B',) of every cache (beam search)."""
        for c in self.self_attn + (self.cross_attn or []):
            c.reorder(index)
