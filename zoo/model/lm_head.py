"""The output projection to the vocabulary, with the pretrained families' extras (BERT's MLM transform, an
output bias, T5's rescale) as options."""

import torch
from torch import nn

from zoo.model.config import GATED_ACTIVATIONS, ModelConfig
from zoo.model.norm import make_norm


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
            from zoo.model.feedforward import _ACT

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
