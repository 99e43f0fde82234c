"""The sublayer connection around every attention and feed-forward block."""

from collections.abc import Callable

import torch
from torch import nn


class Residual(nn.Module):
    """post-LN: norm(x + dropout(f(x))) (Vaswani et al. 2017, sec. 5.4);
    pre-LN: x + dropout(f(norm(x))) (Xiong et al. 2020), as nn.TransformerEncoderLayer(norm_first).

    A layer writes its sublayer out in two calls, y = f(res.sublayer_input(x)); x = res.merge(x, y),
    x, y: (B, T, d_model). forward(x, f) does both for a callable `f` that returns (y, extra) or a tensor,
    and returns (output (B, T, d_model), extra or None).
    """

    def __init__(self, norm: nn.Module, dropout: float, norm_first: bool):
        super().__init__()
        self.norm, self.dropout, self.norm_first = norm, nn.Dropout(dropout), norm_first

    def sublayer_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the sublayer reads: norm(x) with pre-LN, x itself with post-LN."""
        return self.norm(x) if self.norm_first else x

    def merge(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The residual sum of the input x and the sublayer's output y: x + dropout(y) with pre-LN,
        norm(x + dropout(y)) with post-LN."""
        if self.norm_first:
            return x + self.dropout(y)
        return self.norm(x + self.dropout(y))

    def forward(self, x: torch.Tensor, f: Callable) -> tuple[torch.Tensor, object]:
        out = f(self.sublayer_input(x))
        y, extra = out if isinstance(out, tuple) else (out, None)
        return self.merge(x, y), extra
