"""Token embedding plus absolute positions, with the paper's sqrt(d_model) scaling and dropout."""

import math

import torch
from torch import nn


def check_ids(idx: torch.Tensor, vocab_size: int) -> None:
    """Raise ValueError naming a token id of idx outside [0, vocab_size) (one reduction, one host sync;
    skipped under torch.compile)."""
    if torch.compiler.is_compiling() or not idx.numel():
        return
    lo, hi = torch.aminmax(idx)
    if int(lo) < 0 or int(hi) >= vocab_size:
        bad = idx[(idx < 0) | (idx >= vocab_size)][0].item()
        raise ValueError(
            f"token id {bad} is outside the vocabulary [0, {vocab_size}); check the tokenizer and model.vocab_size"
        )


class Embedding(nn.Module):
    """x = dropout(norm?(tok(idx) * sqrt(d_model)? + types[0]? + pos(positions)?)) (Vaswani et al. 2017,
    sec. 3.4-3.5; BERT's token types and embedding LayerNorm, Devlin et al. 2019, sec. 3).

    vocab_size: tokens; positions: SinusoidalPositions / LearnedPositions or None (RoPE, ALiBi, none).
    norm: a norm module after the sum (None = none). type_vocab_size > 0: a token-type table whose row 0
    (every token's type) is added (BERT's token_type_ids = 0).
    idx: (B, T) long in [0, vocab_size); positions: (B|1, T) long. Returns (B, T, d_model).
    Raises ValueError for a token id outside the vocabulary.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        positions: nn.Module | None = None,
        scale: bool = True,
        dropout: float = 0.0,
        norm: nn.Module | None = None,
        type_vocab_size: int = 0,
    ):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = positions
        self.scale = math.sqrt(d_model) if scale else 1.0
        self.dropout = nn.Dropout(dropout)
        self.types = nn.Embedding(type_vocab_size, d_model) if type_vocab_size > 0 else None
        self.norm = norm

    def forward(self, idx: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        check_ids(idx, self.tok.num_embeddings)
        x = self.tok(idx) * self.scale  # (B, T, d_model)
        if self.types is not None:
            x = x + self.types.weight[0]
        if self.pos is not None:
            x = x + self.pos(positions)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)
