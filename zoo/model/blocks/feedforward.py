"""Position-wise feed-forward network (Vaswani et al. 2017, eq. 2) and its gated variants (Shazeer 2020)."""

import torch
import torch.nn.functional as F
from torch import nn

from zoo.model.config import ACTIVATIONS, GATED_ACTIVATIONS


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016,
    sec. 2; GPT-2's and T5 v1.1's gelu_new)."""
    return F.gelu(x, approximate="tanh")


_ACT = {
    "relu": F.relu,
    "gelu": F.gelu,
    "swiglu": F.silu,
    "geglu": F.gelu,
    "gelu_tanh": gelu_tanh,
    "geglu_tanh": gelu_tanh,
    "silu": F.silu,
}


class FeedForward(nn.Module):
    """d_model -> d_ff -> d_model.

    relu / gelu: linear2(dropout(act(linear1(x)))), the layout and dropout of nn.TransformerEncoderLayer.
    swiglu / geglu: linear2(dropout(act(gate) * up)) with [gate; up] = linear1(x), linear1: d_model -> 2 d_ff
    (Shazeer 2020, "GLU Variants Improve Transformer", eq. 5-6). gelu_tanh / silu: ungated, GELU's tanh
    approximation / x sigmoid(x); geglu_tanh: gated with GELU's tanh approximation (T5 v1.1).
    x: (B, T, d_model) -> (B, T, d_model). Raises ValueError for an unknown activation.
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is unknown; allowed: {', '.join(ACTIVATIONS)}")
        self.gated = activation in GATED_ACTIVATIONS
        self.act = _ACT[activation]
        self.linear1 = nn.Linear(d_model, 2 * d_ff if self.gated else d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear1(x)  # (B, T, d_ff) or (B, T, 2 d_ff)
        if self.gated:
            gate, up = h.chunk(2, dim=-1)
            h = self.act(gate) * up
        else:
            h = self.act(h)
        return self.linear2(self.dropout(h))  # (B, T, d_model)
