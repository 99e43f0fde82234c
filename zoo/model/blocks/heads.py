"""The heads on a stack's output: the projection to the vocabulary (LMHead, with the pretrained families'
extras: BERT's MLM transform, an output bias, T5's rescale), the pooling of a classification head, and
Mask-Predict's target-length head (LengthHead)."""

import torch
from torch import nn

from zoo.model.blocks.norm import make_norm
from zoo.model.config import GATED_ACTIVATIONS, ModelConfig


class LMHead(nn.Linear):
    """logits = W features(x) + b, features(x) = norm(act(dense(x))) (cfg.lm_head_transform: BERT's
    BertPredictionHeadTransform, Devlin et al. 2019) times d_model^-0.5 (cfg.lm_head_scale: T5's rescale of
    the decoder output with tied embeddings, Raffel et al. 2020; transformers' T5ForConditionalGeneration).
    b: cfg.lm_head_bias. weight: (vocab_size, d_model), tied like a plain Linear's.
    x: (..., d_model) -> (..., vocab_size). Raises ValueError for a transform with a gated activation."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__(cfg.d_model, vocab_size, bias=cfg.lm_head_bias)
        self.dense = self.norm = None
        if cfg.lm_head_transform:
            if cfg.activation in GATED_ACTIVATIONS:
                raise ValueError(
                    f"model.lm_head_transform=true needs an ungated activation, got model.activation={cfg.activation}"
                )
            from zoo.model.blocks.feedforward import _ACT

            self.dense = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
            self.act = _ACT[cfg.activation]
            self.norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)
        self.rescale = cfg.d_model**-0.5 if cfg.lm_head_scale else None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """What the projection reads: (..., d_model) -> (..., d_model)."""
        if self.dense is not None:
            x = self.norm(self.act(self.dense(x)))
        if self.rescale is not None:
            x = x * self.rescale
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.features(x))


def make_lm_head(cfg: ModelConfig, vocab_size: int) -> nn.Linear:
    """nn.Linear(d_model, vocab_size, bias=False), the architectures' plain head, unless cfg asks for
    lm_head_transform / lm_head_bias / lm_head_scale: then an LMHead (an nn.Linear too)."""
    if cfg.lm_head_transform or cfg.lm_head_bias or cfg.lm_head_scale:
        return LMHead(cfg, vocab_size)
    return nn.Linear(cfg.d_model, vocab_size, bias=False)


def pool(h: torch.Tensor, key_padding_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """h (B, T, d_model), key_padding_mask (B, T) True = padding -> (B, d_model).
    cls: h[:, 0]; mean: mean over non-padding tokens; last: the last non-padding token."""
    if pooling == "cls":
        return h[:, 0]
    keep = torch.ones(h.shape[:2], dtype=torch.bool, device=h.device) if key_padding_mask is None else ~key_padding_mask
    if pooling == "mean":
        w = keep.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        return (h * w).sum(1) / w.sum(1).clamp(min=1)
    if pooling == "last":
        last = (keep.long() * torch.arange(h.shape[1], device=h.device)).argmax(1)  # (B,) index of last real token
        return h[torch.arange(h.shape[0], device=h.device), last]
    raise ValueError(f"pooling={pooling!r} is unknown; allowed: cls, mean, last")


class LengthHead(nn.Module):
    """Target-length prediction for non-autoregressive translation (Mask-Predict, Ghazvininejad et al. 2019,
    sec. 3): a linear classifier over target lengths 0 .. length_classes - 1 on one pooled state.

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
