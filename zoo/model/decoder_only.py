"""Decoder-only Transformer (GPT; Radford et al. 2018): causal language model."""

import torch
from torch import nn

from zoo.model.base import TransformerBase
from zoo.model.blocks.heads import make_lm_head, pool
from zoo.model.blocks.kv_cache import DecodingCache
from zoo.model.blocks.stack import Decoder
from zoo.model.config import ModelConfig
from zoo.model.decoding.generate import decode_loop
from zoo.model.init import init_weights


class DecoderOnly(TransformerBase):
    """Embedding -> Decoder without cross-attention -> LM head. Mask: cfg.mask (default causal;
    prefix = prefix LM, sliding = local attention, bidirectional allowed).

    forward(idx (B, T), key_padding_mask (B, offset+T) True = padding, positions (B, T), cache,
    prefix_len int | (B,), return_attention) -> logits (B, T, vocab_size), or (logits, per-layer
    (self weights (B, h, T, T_k), None)) with return_attention=True.
    """

    CLASSIFY_TEXT_IS_PREFIX = True  # classify: with mask=prefix, bidirectional over each row's whole text

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.mask_kind = cfg.mask or "causal"
        self.embed = self.make_embedding(cfg.vocab_size)
        self.decoder = Decoder(cfg, cfg.decoder_layers, cross_attention=False)
        self.lm_head = make_lm_head(cfg, cfg.vocab_size)
        self.classifier = nn.Linear(cfg.d_model, cfg.num_classes) if cfg.num_classes > 0 else None
        init_weights(self, cfg.init, cfg.decoder_layers)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.tok.weight

    def features(
        self,
        idx: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        cache: DecodingCache | None = None,
        prefix_len: int | torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """Final hidden states (B, T, d_model) and the per-layer attention weights (or None)."""
        offset = cache.offset if cache is not None else 0
        x, inputs = self.prepare(idx, self.embed, self.mask_kind, key_padding_mask, positions, offset, prefix_len)
        return self.decoder.run(x, return_attention, attn=inputs, caches=cache.self_attn if cache is not None else None)

    def forward(
        self,
        idx: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        cache: DecodingCache | None = None,
        prefix_len: int | torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        x, attn = self.features(idx, key_padding_mask, positions, cache, prefix_len, return_attention)
        logits = self.lm_head(x)  # (B, T, vocab_size)
        return (logits, attn) if return_attention else logits

    def classify(self, idx: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Class logits (B, num_classes) from the state at each row's last real token (right padding: padding
        after the text does not change it); causal, or with mask=prefix bidirectional over the whole text (the
        text is the prefix, T5's prefix LM). Raises ValueError without a classification head."""
        if self.classifier is None:
            raise ValueError("this model has no classification head: build it with model.num_classes > 0")
        prefix_len = None
        if self.mask_kind == "prefix":
            prefix_len = idx.shape[1] if key_padding_mask is None else (~key_padding_mask).sum(1)  # (B,)
        h, _ = self.features(idx, key_padding_mask, prefix_len=prefix_len)  # (B, T, d_model)
        return self.classifier(pool(h, key_padding_mask, "last"))

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> DecodingCache:
        """Preallocated caches for max_len tokens (prompt + new)."""
        return DecodingCache(self.new_caches(len(self.decoder.layers), batch_size, max_len, device, dtype))

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        key_padding_mask: torch.Tensor | None = None,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos_id: int | None = None,
        use_cache: bool = True,
        prefix_len: int | torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Continue prompts idx (B, T), LEFT-padded (see generate.left_pad), key_padding_mask (B, T) True = padding.

        temperature 0 = greedy; top_k / top_p restrict sampling. Each row stops at its own eos_id.
        use_cache: the preallocated KV cache (one new token per step) instead of re-running the prefix.
        Returns (B, T + new) long. Raises ValueError when T + max_new_tokens > model.max_len.
        """
        B, T = idx.shape
        if T + max_new_tokens > self.cfg.max_len:
            raise ValueError(f"prompt {T} + max_new_tokens {max_new_tokens} > model.max_len={self.cfg.max_len}")
        cache = self.new_cache(B, T + max_new_tokens, idx.device) if use_cache else None

        def step(tokens, key_padding_mask, n_new):
            if cache is None:
                return self(tokens, key_padding_mask=key_padding_mask, prefix_len=prefix_len)
            return self(tokens[:, -n_new:], key_padding_mask=key_padding_mask, cache=cache, prefix_len=prefix_len)

        return decode_loop(
            step, idx, key_padding_mask, max_new_tokens, temperature, top_k, top_p, eos_id, self.cfg.pad_id, generator
        )
