"""The sublayer connection around every attention and feed-forward block."""
from typing import Callable

import torch
from torch import nn


class Residual(nn.Module):
    """post-LN: norm(x + dropout(f(x))) (Vaswani et al. 2017, sec. 5.4);
    pre-LN: x + dropout(f(norm(x))) (Xiong et al. 2020), as nn.TransformerEncoderLayer(norm_first).

    `f` returns (y, extra) or a tensor; forward returns (output (B, T, d_model), extra or None).
    """

    def __init__(self, norm: nn.Module, dropout: float, norm_first: bool):
        super().__init__()
        self.norm, self.dropout, self.norm_first = norm, nn.Dropout(dropout), norm_first

    def forward(self, x: torch.Tensor, f: Callable):
        out = f(self.norm(x) if self.norm_first else x)
        y, extra = out if isinstance(out, tuple) else (out, None)
        if self.norm_first:
            return x + self.dropout(y), extra
        return self.norm(x + self.dropout(y)), extra
