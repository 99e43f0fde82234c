"""Weight initialisation schemes."""

import math

from torch import nn

from zoo.model.config import INITS


def init_weights(model: nn.Module, scheme: str, n_layers: int = 1) -> None:
    """xavier: Xavier-uniform for every parameter with dim > 1, as nn.Transformer._reset_parameters
    (biases and norms keep PyTorch's defaults).
    gpt2: every Linear / Embedding weight ~ N(0, 0.02), biases 0, and residual output projections
    (attention out_proj, feed-forward linear2) ~ N(0, 0.02 / sqrt(2 n_layers)) (Radford et al. 2019, sec. 2.3;
    nanoGPT model.py). Norm weights stay 1. Raises ValueError for an unknown scheme."""
    if scheme == "xavier":
        for p in model.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        return
    if scheme != "gpt2":
        raise ValueError(f"init={scheme!r} is unknown; allowed: {', '.join(INITS)}")
    for name, p in model.named_parameters():
        if p.dim() > 1:
            residual_out = name.endswith("out_proj.weight") or name.endswith("linear2.weight")
            nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layers) if residual_out else 0.02)
        elif name.endswith(".bias") and "norm" not in name:
            nn.init.zeros_(p)
