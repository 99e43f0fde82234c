"""Encoder-decoder Transformer (Vaswani et al. 2017): the original sequence-to-sequence model."""

import torch
from torch import nn

import zoo.model.blocks.masks as masks
from zoo.model.base import TransformerBase
from zoo.model.blocks.heads import make_lm_head
from zoo.model.blocks.kv_cache import DecodingCache
from zoo.model.blocks.stack import Decoder, Encoder
from zoo.model.config import ModelConfig
from zoo.model.decoding.generate import decode_loop
from zoo.model.init import init_weights


class EncoderDecoder(TransformerBase):
    """src -> Embedding -> Encoder (bidirectional) = memory; tgt (shifted right, BOS first) -> Embedding ->
    Decoder (cfg.mask, default causal; cross-attention over memory) -> LM head.

    share_embeddings: one embedding for src and tgt; share_tokens: one token table, positions and embed_norm
    per stack (BART); tie_embeddings: LM head = target embedding. The decoder starts from cfg.decoder_start_id
    (None = bos_id).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.mask_kind = cfg.mask or "causal"
        self.tgt_embed = self.make_embedding(cfg.vocab_size)
        self.src_embed = (
            self.tgt_embed if cfg.share_embeddings else self.make_embedding(cfg.src_vocab_size or cfg.vocab_size)
        )
        self.encoder = Encoder(cfg, cfg.encoder_layers)
        self.decoder = Decoder(cfg, cfg.decoder_layers, cross_attention=True)
        self.lm_head = make_lm_head(cfg, cfg.vocab_size)
        self.classifier = nn.Linear(cfg.d_model, cfg.num_classes) if cfg.num_classes > 0 else None
        init_weights(self, cfg.init, cfg.encoder_layers + cfg.decoder_layers)
        if cfg.share_tokens and not cfg.share_embeddings:
            self.src_embed.tok.weight = self.tgt_embed.tok.weight
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tgt_embed.tok.weight

    @property
    def start_id(self) -> int:
        """The decoder's first input token: cfg.decoder_start_id, or bos_id when that is None."""
        return self.cfg.bos_id if self.cfg.decoder_start_id is None else self.cfg.decoder_start_id

    def encode(
        self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None, return_attention: bool = False
    ):
        """src (B, S), src_key_padding_mask (B, S) True = padding -> memory (B, S, d_model)."""
        x, inputs = self.prepare(src, self.src_embed, "bidirectional", src_key_padding_mask)
        x, attn = self.encoder.run(x, return_attention, attn=inputs)
        return (x, attn) if return_attention else x

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        cache: DecodingCache | None = None,
        return_attention: bool = False,
    ):
        """tgt (B, T) -> logits (B, T, vocab_size) (and per-layer (self, cross) weights with return_attention).
        tgt_key_padding_mask: (B, offset + T); memory_key_padding_mask: (B, S); True = padding."""
        x, attn = self.decode_features(
            tgt, memory, tgt_key_padding_mask, memory_key_padding_mask, positions, cache, return_attention
        )
        logits = self.lm_head(x)  # (B, T, vocab_size)
        return (logits, attn) if return_attention else logits

    def decode_features(
        self,
        tgt,
        memory,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        positions=None,
        cache=None,
        return_attention=False,
    ):
        """The decoder's final hidden states (B, T, d_model) and per-layer (self, cross) weights (or None)."""
        offset = cache.offset if cache is not None else 0
        x, inputs = self.prepare(tgt, self.tgt_embed, self.mask_kind, tgt_key_padding_mask, positions, offset)
        memory_mask = masks.padding(memory_key_padding_mask) if memory_key_padding_mask is not None else None
        return self.decoder.run(
            x,
            return_attention,
            attn=inputs,
            memory=memory,
            memory_mask=memory_mask,
            caches=cache.self_attn if cache is not None else None,
            cross_caches=cache.cross_attn if cache is not None else None,
        )

    def classify(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Class logits (B, num_classes): the encoder reads src (B, S); the decoder reads BOS alone and its
        state feeds the head. Raises ValueError without a classification head."""
        if self.classifier is None:
            raise ValueError("this model has no classification head: build it with model.num_classes > 0")
        memory = self.encode(src, src_key_padding_mask)
        bos = torch.full((src.shape[0], 1), self.start_id, dtype=torch.long, device=src.device)
        h, _ = self.decode_features(bos, memory, memory_key_padding_mask=src_key_padding_mask)  # (B, 1, d_model)
        return self.classifier(h[:, 0])

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """Teacher forcing: src (B, S), tgt (B, T) shifted right -> logits (B, T, vocab_size), or
        (logits, {"encoder": [...], "decoder": [...]}) with return_attention."""
        if return_attention:
            memory, enc_attn = self.encode(src, src_key_padding_mask, return_attention=True)
            logits, dec_attn = self.decode(
                tgt, memory, tgt_key_padding_mask, src_key_padding_mask, return_attention=True
            )
            return logits, {"encoder": enc_attn, "decoder": dec_attn}
        memory = self.encode(src, src_key_padding_mask)
        return self.decode(tgt, memory, tgt_key_padding_mask, src_key_padding_mask)

    def new_cache(self, batch_size: int, max_len: int, src_len: int, device=None, dtype=None) -> DecodingCache:
        """Self-attention caches for max_len target tokens and cross-attention caches for src_len memory tokens."""
        n = len(self.decoder.layers)
        return DecodingCache(
            self.new_caches(n, batch_size, max_len, device, dtype),
            self.new_caches(n, batch_size, src_len, device, dtype),
        )

    @torch.no_grad()
    def generate(
        self,
        src: torch.Tensor,
        max_new_tokens: int,
        src_key_padding_mask: torch.Tensor | None = None,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Translate src (B, S): start from BOS, stop each row at its EOS. Greedy by default (temperature 0).
        Returns (B, 1 + new) long, BOS first. The memory's K/V are computed once (cross-attention cache)."""
        B = src.shape[0]
        if 1 + max_new_tokens > self.cfg.max_len:
            raise ValueError(f"1 + max_new_tokens {max_new_tokens} > model.max_len={self.cfg.max_len}")
        memory = self.encode(src, src_key_padding_mask)
        cache = self.new_cache(B, 1 + max_new_tokens, src.shape[1], src.device) if use_cache else None
        bos = torch.full((B, 1), self.start_id, dtype=torch.long, device=src.device)

        def step(tokens, key_padding_mask, n_new):
            if cache is None:
                return self.decode(tokens, memory, memory_key_padding_mask=src_key_padding_mask)
            return self.decode(tokens[:, -n_new:], memory, memory_key_padding_mask=src_key_padding_mask, cache=cache)

        return decode_loop(
            step, bos, None, max_new_tokens, temperature, top_k, top_p, self.cfg.eos_id, self.cfg.pad_id, generator
        )
