"""Normalisation layers: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019)."""

import torch
import torch.nn.functional as F
from torch import nn

from zoo.model.config import NORMS


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019, eq. 4). x: (..., d_model)."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def make_norm(kind: str, d_model: int, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """layernorm -> nn.LayerNorm(d_model, eps, bias=bias); rmsnorm -> RMSNorm (no bias).
    Raises ValueError for an unknown kind."""
    if kind == "layernorm":
        return nn.LayerNorm(d_model, eps=eps, bias=bias)
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm={kind!r} is unknown; allowed: {', '.join(NORMS)}")
