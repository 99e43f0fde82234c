"""Encoder-only Transformer (BERT; Devlin et al. 2019): per-token logits and a pooled classifier."""
from typing import Optional

import torch
from torch import nn

from zoo.model.base import TransformerBase
from zoo.model.config import ModelConfig
from zoo.model.encoder import Encoder
from zoo.model.init import init_weights


class EncoderOnly(TransformerBase):
    """Embedding -> Encoder -> LM head (per-token logits, e.g. masked LM) and a classification head.

    Mask: cfg.mask (default bidirectional). Pooling for classify: cls (first token), mean (over
    non-padding tokens), last (last non-padding token).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.mask_kind = cfg.mask or "bidirectional"
        self.embed = self.make_embedding(cfg.vocab_size)
        self.encoder = Encoder(cfg, cfg.encoder_layers)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.classifier = nn.Linear(cfg.d_model, cfg.num_classes) if cfg.num_classes > 0 else None
        init_weights(self, cfg.init, cfg.encoder_layers)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.tok.weight

    def encode(self, idx: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
               positions: Optional[torch.Tensor] = None, return_attention: bool = False):
        """idx (B, T), key_padding_mask (B, T) True = padding -> hidden states (B, T, d_model)
        (and per-layer weights (B, h, T, T) with return_attention)."""
        x, mask, is_causal, rope, bias = self.prepare(idx, self.embed, self.mask_kind, key_padding_mask, positions)
        x, attn = self.encoder(x, mask=mask, is_causal=is_causal, rope=rope, bias=bias, need_weights=return_attention)
        return (x, attn) if return_attention else x

    def forward(self, idx: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
                positions: Optional[torch.Tensor] = None, return_attention: bool = False):
        """Per-token logits (B, T, vocab_size) (and attention weights with return_attention)."""
        out = self.encode(idx, key_padding_mask, positions, return_attention)
        h, attn = out if return_attention else (out, None)
        logits = self.lm_head(h)
        return (logits, attn) if return_attention else logits

    def classify(self, idx: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Class logits (B, num_classes) from the pooled hidden states (padding on the right).
        Raises ValueError when the model was built with num_classes=0."""
        if self.classifier is None:
            raise ValueError("this model has no classification head: build it with model.num_classes > 0")
        h = self.encode(idx, key_padding_mask)  # (B, T, d_model)
        return self.classifier(pool(h, key_padding_mask, self.cfg.pooling))


def pool(h: torch.Tensor, key_padding_mask: Optional[torch.Tensor], pooling: str) -> torch.Tensor:
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
