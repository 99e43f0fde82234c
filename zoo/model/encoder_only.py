"""Encoder-only Transformer (BERT; Devlin et al. 2019): per-token logits, a pooled classifier, a target-length
head for non-autoregressive translation (Mask-Predict's conditional masked LM, Ghazvininejad et al. 2019), and
next-token prediction by re-reading the whole prefix bidirectionally at every position (ENTP, Ewer et al.
2024, "Encoder-only Next Token Prediction"): `next_token_logits`, `prefix_next_features`, `generate`."""

from dataclasses import replace

import torch
from torch import nn

import zoo.model.blocks.masks as masks
from zoo.model.base import TransformerBase
from zoo.model.blocks.heads import LengthHead, make_lm_head, pool
from zoo.model.blocks.stack import Encoder
from zoo.model.config import ModelConfig
from zoo.model.decoding.generate import decode_loop
from zoo.model.init import init_weights


class EncoderOnly(TransformerBase):
    """Embedding -> Encoder -> LM head (per-token logits, e.g. masked LM), a classification head
    (cfg.num_classes > 0) and a target-length head (cfg.length_classes > 0, see `cmlm`).

    Mask: cfg.mask (default bidirectional). Pooling for classify: cls (first token), mean (over
    non-padding tokens), last (last non-padding token).
    source_len (encode / forward / cmlm): (B,) long; when given, the first source_len[b] positions of row b
    (the source side) attend only to each other, while the later positions (target slots) attend to every
    non-padding position: the source states do not depend on the target side at all, as an encoder's
    states do not depend on the decoder (see `source_blind_mask`).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.mask_kind = cfg.mask or "bidirectional"
        self.embed = self.make_embedding(cfg.vocab_size)
        self.encoder = Encoder(cfg, cfg.encoder_layers)
        self.lm_head = make_lm_head(cfg, cfg.vocab_size)
        self.classifier = nn.Linear(cfg.d_model, cfg.num_classes) if cfg.num_classes > 0 else None
        self.length_head = LengthHead(cfg.d_model, cfg.length_classes) if cfg.length_classes > 0 else None
        init_weights(self, cfg.init, cfg.encoder_layers)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.tok.weight

    def encode(
        self,
        idx: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        return_attention: bool = False,
        source_len: torch.Tensor | None = None,
    ):
        """idx (B, T), key_padding_mask (B, T) True = padding -> hidden states (B, T, d_model)
        (and per-layer weights (B, h, T, T) with return_attention). source_len (B,): see the class."""
        x, inputs = self.prepare(idx, self.embed, self.mask_kind, key_padding_mask, positions)
        if source_len is not None:
            inputs = replace(
                inputs, mask=masks.combine(inputs.mask, source_blind_mask(idx.shape[1], source_len)), is_causal=False
            )
        x, attn = self.encoder.run(x, return_attention, attn=inputs)
        return (x, attn) if return_attention else x

    def forward(
        self,
        idx: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        return_attention: bool = False,
        source_len: torch.Tensor | None = None,
    ):
        """Per-token logits (B, T, vocab_size) (and attention weights with return_attention)."""
        out = self.encode(idx, key_padding_mask, positions, return_attention, source_len)
        h, attn = out if return_attention else (out, None)
        logits = self.lm_head(h)
        return (logits, attn) if return_attention else logits

    def classify(self, idx: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Class logits (B, num_classes) from the pooled hidden states (padding on the right).
        Raises ValueError when the model was built with num_classes=0."""
        if self.classifier is None:
            raise ValueError("this model has no classification head: build it with model.num_classes > 0")
        h = self.encode(idx, key_padding_mask)  # (B, T, d_model)
        return self.classifier(pool(h, key_padding_mask, self.cfg.pooling))

    def cmlm(
        self,
        idx: torch.Tensor,
        key_padding_mask: torch.Tensor | None,
        source_len: torch.Tensor,
        at: torch.Tensor | None = None,
    ):
        """Conditional masked LM (Ghazvininejad et al. 2019): one pass over [LENGTH] source, target slots.

        idx (B, T): per row a LENGTH token (any id, e.g. <cls>) at position 0, the source, then the target
        slots (tokens or <mask>), right-padded; key_padding_mask (B, T) True = padding; source_len (B,) long:
        the source side's length, LENGTH token included (>= 1). The source side attends only to itself, so
        the length logits, read from position 0, cannot count the target slots.
        at: (B, T) bool: token logits only at these positions, (n, vocab_size) in row-major order (training
        scores the masked slots only, so the output projection skips the rest).
        Returns (token logits (B, T, vocab_size) or (n, vocab_size), length logits (B, length_classes)).
        Raises ValueError when the model was built with length_classes=0.
        """
        h, length_logits = self.cmlm_features(idx, key_padding_mask, source_len, at)
        return self.lm_head(h), length_logits

    def cmlm_features(
        self,
        idx: torch.Tensor,
        key_padding_mask: torch.Tensor | None,
        source_len: torch.Tensor,
        at: torch.Tensor | None = None,
    ):
        """cmlm before the LM head: (final states (B, T, d_model), or (n, d_model) at `at`; length logits). The
        training loss runs the head inside zoo.model.loss.chunked_ce. Raises ValueError without a length head."""
        if self.length_head is None:
            raise ValueError("this model has no length head: build it with model.length_classes > 0")
        h = self.encode(idx, key_padding_mask, source_len=source_len)  # (B, T, d_model)
        return (h if at is None else h[at]), self.length_head(h[:, 0])

    def next_token_logits(
        self, idx: torch.Tensor, key_padding_mask: torch.Tensor | None = None, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """ENTP's next-token logits (Ewer et al. 2024): each row idx (B, T) is read whole, bidirectionally (no
        causal mask, no KV cache), and the LM head runs only on its last non-padding position, predicting the
        token after it. key_padding_mask (B, T) True = padding, left or right. Returns (B, vocab_size)."""
        return self.lm_head(self.next_token_features(idx, key_padding_mask, positions))

    def next_token_features(
        self, idx: torch.Tensor, key_padding_mask: torch.Tensor | None = None, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """next_token_logits before the LM head: the final state at each row's last non-padding position,
        (B, d_model)."""
        h = self.encode(idx, key_padding_mask, positions)  # (B, T, d_model)
        return pool(h, key_padding_mask, "last")

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
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """ENTP decoding: continue prompts idx (B, T), LEFT-padded (generate.left_pad), one token per step, each
        step re-encoding every token so far (next_token_logits; no cache: a step costs a forward over the whole
        prefix). temperature 0 = greedy; each row stops at its own eos_id. Returns (B, T + new) long.
        Raises ValueError when T + max_new_tokens > model.max_len."""
        T = idx.shape[1]
        if T + max_new_tokens > self.cfg.max_len:
            raise ValueError(f"prompt {T} + max_new_tokens {max_new_tokens} > model.max_len={self.cfg.max_len}")

        def step(tokens, key_padding_mask, _n_new):
            return self.next_token_logits(tokens, key_padding_mask).unsqueeze(1)  # (B, 1, V)

        return decode_loop(
            step, idx, key_padding_mask, max_new_tokens, temperature, top_k, top_p, eos_id, self.cfg.pad_id, generator
        )


def prefix_rows(seq: torch.Tensor, row: torch.Tensor, length: torch.Tensor, width: int | None = None, pad_id: int = 0):
    """Right-padded prefixes: idx[r, :length[r]] = seq[row[r], :length[r]], pad_id after.
    seq (B, L) long; row, length (R,) long, 1 <= length <= width <= L; width None = max(length).
    Returns (idx (R, width) long, key_padding_mask (R, width) bool, True = padding)."""
    W = int(length.max()) if width is None else width
    key_padding_mask = torch.arange(W, device=seq.device).unsqueeze(0) >= length.unsqueeze(1)  # (R, W)
    return seq[row, :W].masked_fill(key_padding_mask, pad_id), key_padding_mask


def prefix_next_features(
    model: EncoderOnly,
    seq: torch.Tensor,
    row: torch.Tensor,
    length: torch.Tensor,
    width: int | None = None,
    max_tokens: int | None = None,
    pad_id: int = 0,
) -> torch.Tensor:
    """The final state that predicts the token after each prefix seq[row[r], :length[r]], every prefix read
    alone, bidirectionally: row r is its own right-padded sequence (prefix_rows) with key_padding_mask, and the
    state is its last real position's (EncoderOnly.next_token_features). Tokens after a prefix never enter its
    row. seq (B, L); row, length (R,) long (1 <= length <= L).
    max_tokens None: one forward of (R, width) (width None = max(length)); else the rows sorted by length go
    in forwards of at most max_tokens padded tokens, each padded to its own longest row (same values, less
    padding and memory). Returns (R, d_model) in the order of `row`."""
    if max_tokens is None:
        idx, key_padding_mask = prefix_rows(seq, row, length, width, pad_id)
        pos = torch.arange(idx.shape[1], device=seq.device).unsqueeze(0)  # right padding: real tokens at 0 .. n-1
        return model.next_token_features(idx, key_padding_mask, pos)
    order = length.argsort()
    lens = length[order].tolist()
    parts, start = [], 0
    while start < len(lens):
        end = start + 1
        while end < len(lens) and (end + 1 - start) * lens[end] <= max_tokens:
            end += 1
        parts.append(prefix_next_features(model, seq, row[order[start:end]], length[order[start:end]], pad_id=pad_id))
        start = end
    out = torch.cat(parts)
    return torch.empty_like(out).index_copy_(0, order, out)


def source_blind_mask(T: int, source_len: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool, True = may attend: query i of row b sees key j iff i >= source_len[b] (a target
    slot sees everything) or j < source_len[b] (every query sees the source). So positions < source_len[b]
    attend only among themselves: Mask-Predict's encoder (source only) and its bidirectional decoder (target
    slots, attending to the source through cross-attention) in one self-attention. source_len: (B,) long."""
    s = source_len.view(-1, 1, 1, 1)  # (B, 1, 1, 1)
    pos = torch.arange(T, device=source_len.device)
    return (pos.view(1, 1, T, 1) >= s) | (pos.view(1, 1, 1, T) < s)
