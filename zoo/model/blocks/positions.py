"""Positional encodings: sinusoidal, learned absolute, rotary (RoPE), ALiBi and T5's relative bias.

Absolute ones (sinusoidal, learned) are added to the token embeddings; RoPE rotates q and k inside
attention; ALiBi and T5's bucketed relative bias add a per-head bias to the attention scores.
"""

import math

import torch
from einops import rearrange
from torch import nn


def check_positions(positions: torch.Tensor, max_len: int) -> None:
    """Raise ValueError when a position is beyond the model's max_len (skipped under torch.compile)."""
    if not torch.compiler.is_compiling() and positions.numel() and int(positions.max()) >= max_len:
        raise ValueError(
            f"sequence position {int(positions.max())} is beyond model.max_len={max_len}; "
            f"use shorter sequences (data.block_size) or a larger model.max_len"
        )


def sinusoidal_table(max_len: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """(max_len, d_model) float32 table, Vaswani et al. 2017 sec. 3.5:
    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
    layout=split puts the ceil(d/2) sines first and the cosines after them (Marian's layout,
    transformers' MarianSinusoidalPositionalEmbedding). Works for odd d_model (one more sine)."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (max_len, ceil(d/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    if layout == "split":
        n_sin = angle.shape[1]
        pe[:, :n_sin] = torch.sin(angle)
        pe[:, n_sin:] = torch.cos(angle[:, : d_model // 2])
        return pe.float()
    if layout != "interleaved":
        raise ValueError(f"sinusoidal layout={layout!r} is unknown; allowed: interleaved, split")
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal table (a buffer, not a parameter) in `layout` (see sinusoidal_table).
    forward(positions (B, T)) -> (B, T, d_model)."""

    def __init__(self, d_model: int, max_len: int, layout: str = "interleaved"):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model, layout), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        check_positions(positions, self.max_len)
        return self.table[positions]


class LearnedPositions(nn.Module):
    """Learned absolute position embeddings (GPT-2, BERT): a (max_len + offset, d_model) table read at row
    position + offset (BART's offset of 2, transformers' BartLearnedPositionalEmbedding).
    forward(positions (B, T)) -> (B, T, d_model)."""

    def __init__(self, d_model: int, max_len: int, offset: int = 0):
        super().__init__()
        self.max_len, self.offset = max_len, offset
        self.weight = nn.Parameter(torch.zeros(max_len + offset, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        check_positions(positions, self.max_len)
        return self.weight[positions + self.offset if self.offset else positions]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate consecutive pairs (x_{2i}, x_{2i+1}) by angle m*theta_i (Su et al. 2021, RoFormer eq. 34).

    x: (B, h, T, d_head); cos, sin: (B|1, 1, T, d_head/2). Returns x's shape and dtype.
    """
    pairs = rearrange(x.float(), "... (d two) -> ... d two", two=2)
    x1, x2 = pairs[..., 0], pairs[..., 1]  # (B, h, T, d_head/2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rearrange(out, "... d two -> ... (d two)").to(x.dtype)


class RotaryPositions(nn.Module):
    """RoPE tables: theta_i = base^(-2i/d_head), i = 0..d_head/2-1 (Su et al. 2021, eq. 15).

    forward(positions (B, T)) -> (cos, sin), each (B, 1, T, d_head/2), for any absolute positions, so
    cached decoding at offset k rotates the new token by its own position k.
    """

    def __init__(self, head_dim: int, max_len: int, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
        self.max_len = max_len
        theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (d_head/2,)
        angle = torch.arange(max_len, dtype=torch.float64).unsqueeze(1) * theta  # (max_len, d_head/2)
        self.register_buffer("cos", angle.cos().float(), persistent=False)
        self.register_buffer("sin", angle.sin().float(), persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_positions(positions, self.max_len)
        return self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)


def alibi_slopes(n_heads: int) -> list[float]:
    """Head slopes of ALiBi (Press et al. 2022, sec. 3): the geometric sequence 2^(-8/n), 2^(-16/n), ...
    for n a power of two; otherwise the authors' rule (slopes of the nearest lower power of two, then
    every other slope of the next one)."""

    def power_of_two(n):
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]


class ALiBi(nn.Module):
    """Attention biases -slope_h * distance (Press et al. 2022). forward(T_q, T_k, offset, causal) ->
    (1, n_heads, T_q, T_k) float: distance = (offset + i) - j for causal attention (keys in the future
    are masked anyway), |offset + i - j| for bidirectional attention."""

    def __init__(self, n_heads: int, max_len: int):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("slopes", torch.tensor(alibi_slopes(n_heads)).view(1, n_heads, 1, 1), persistent=False)

    def forward(self, T_q: int, T_k: int, offset: int = 0, causal: bool = True) -> torch.Tensor:
        if not torch.compiler.is_compiling() and offset + T_q > self.max_len:
            raise ValueError(f"sequence of {offset + T_q} tokens is beyond model.max_len={self.max_len}")
        i = torch.arange(T_q, device=self.slopes.device).unsqueeze(1) + offset
        j = torch.arange(T_k, device=self.slopes.device).unsqueeze(0)
        dist = (i - j).float()  # (T_q, T_k)
        if not causal:
            dist = dist.abs()
        return -self.slopes * dist  # (1, h, T_q, T_k)


def t5_buckets(
    relative: torch.Tensor, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """T5's bucket of each relative position key - query (Raffel et al. 2020, sec. 2.1; Mesh TensorFlow's
    _relative_position_bucket, as transformers' T5Attention computes it). relative: (T_q, T_k) long.

    Bidirectional: half of the buckets for keys after the query. Causal: later keys share bucket 0. Of the
    remaining n buckets, distances < n/2 get one bucket each, and larger ones log-spaced buckets up to
    max_distance, beyond which all share the last. Returns (T_q, T_k) long in [0, num_buckets)."""
    n, out = num_buckets, torch.zeros_like(relative)
    if bidirectional:
        n //= 2
        out = (relative > 0).long() * n
        dist = relative.abs()
    else:
        dist = (-relative).clamp(min=0)
    exact = n // 2
    log_ratio = torch.log(dist.float() / exact) / math.log(max_distance / exact)
    large = (exact + (log_ratio * (n - exact)).long()).clamp(max=n - 1)
    return out + torch.where(dist < exact, dist, large)


class RelativePositionBias(nn.Module):
    """T5's relative attention bias (Raffel et al. 2020, sec. 2.1): a learned scalar per head and bucket of the
    distance key - query, added to the attention scores. weight: (num_buckets, n_heads).
    forward(T_q, T_k, offset) -> (1, n_heads, T_q, T_k) float, for queries at offset .. offset + T_q - 1."""

    def __init__(self, n_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True):
        super().__init__()
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.weight = nn.Parameter(torch.zeros(num_buckets, n_heads))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, T_q: int, T_k: int, offset: int = 0) -> torch.Tensor:
        i = torch.arange(T_q, device=self.weight.device).unsqueeze(1) + offset
        j = torch.arange(T_k, device=self.weight.device).unsqueeze(0)
        buckets = t5_buckets(j - i, self.bidirectional, self.num_buckets, self.max_distance)  # (T_q, T_k)
        return rearrange(self.weight[buckets], "q k h -> 1 h q k")
