"""Target-length prediction for non-autoregressive translation (Mask-Predict, Ghazvininejad et al. 2019, sec. 3)."""

import torch
from torch import nn


class LengthHead(nn.Module):
    """A linear classifier over target lengths 0 .. length_classes - 1 on one pooled state.

    Mask-Predict adds a special LENGTH token to the encoder input and predicts the target length from its
    final state with a softmax over lengths (sec. 3, "Target sequence length"); fairseq's cmlm / NAT models do
    the same on the mean encoder state. Here the pooled state is whatever the caller passes (EncoderOnly: the
    first position, a <cls> token used as the LENGTH token).

    forward(h (B, d_model)) -> length logits (B, length_classes). Raises ValueError for length_classes < 1.
    """

    def __init__(self, d_model: int, length_classes: int):
        super().__init__()
        if length_classes < 1:
            raise ValueError(f"length_classes={length_classes} must be >= 1")
        self.proj = nn.Linear(d_model, length_classes)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.proj(h)
