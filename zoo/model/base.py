"""What the three architectures share: position schemes, the per-forward attention inputs, caches."""

import torch
from torch import nn

import zoo.model.blocks.masks as masks
from zoo.model.blocks.attention import AttentionInputs
from zoo.model.blocks.embedding import Embedding
from zoo.model.blocks.kv_cache import DecodingCache, KVCache
from zoo.model.blocks.norm import make_norm
from zoo.model.blocks.positions import ALiBi, LearnedPositions, RotaryPositions, SinusoidalPositions
from zoo.model.config import ModelConfig


class TransformerBase(nn.Module):
    """Base of EncoderOnly, DecoderOnly and EncoderDecoder. Holds cfg, the RoPE / ALiBi modules, and
    builds each forward's positions, mask and biases once for all layers. Runs ModelConfig.validate, the one
    place model settings are checked, again: a config changed after construction is refused here."""

    # True: classify makes each row's whole text the prefix under mask=prefix, so it never reads cfg.prefix_len
    CLASSIFY_TEXT_IS_PREFIX = False

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.rope = RotaryPositions(cfg.head_dim, cfg.max_len, cfg.rope_base) if cfg.position == "rope" else None
        self.alibi = ALiBi(cfg.n_heads, cfg.max_len) if cfg.position == "alibi" else None

    def make_embedding(self, vocab_size: int) -> Embedding:
        """Token embedding + the configured absolute positions (sinusoidal / learned) + dropout, with the
        token-type row and embedding norm when cfg.type_vocab_size / cfg.embed_norm ask for them."""
        cfg = self.cfg
        pos = {
            "sinusoidal": lambda: SinusoidalPositions(cfg.d_model, cfg.max_len, cfg.sinusoidal_layout),
            "learned": lambda: LearnedPositions(cfg.d_model, cfg.max_len, cfg.position_offset),
        }.get(cfg.position, lambda: None)()
        norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias) if cfg.embed_norm else None
        return Embedding(vocab_size, cfg.d_model, pos, cfg.scale_embeddings, cfg.dropout, norm, cfg.type_vocab_size)

    def prepare(
        self,
        idx: torch.Tensor,
        embed: Embedding,
        mask_kind: str,
        key_padding_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        offset: int = 0,
        prefix_len: int | torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, AttentionInputs]:
        """Embed idx (B, T) and build the self-attention inputs of every layer.

        key_padding_mask: (B, offset + T) bool, True = padding, over all keys (cached ones included).
        positions: (B, T) long; default: per row, the count of non-padding tokens before each token, so
        left-padded prompts start at position 0; without padding offset .. offset+T-1, shaped (1, T) and
        broadcast over the batch (a (B, T) index would make the learned-position backward B times the work).
        prefix_len: int | (B,) for mask_kind=prefix (None = cfg.prefix_len).
        Returns (x (B, T, d_model), the AttentionInputs every layer's self-attention reads).
        Raises ValueError when the sequence is longer than model.max_len.
        """
        B, T = idx.shape
        T_k = offset + T
        self._check_lengths(B, T_k, key_padding_mask)
        if positions is None:
            positions = default_positions(key_padding_mask, offset, T, idx.device)
        x = embed(idx, positions)  # (B, T, d_model)
        prefix = self.cfg.prefix_len if prefix_len is None else prefix_len
        mask, is_causal = masks.build(
            mask_kind,
            T,
            T_k,
            offset,
            key_padding_mask,
            prefix,
            self.cfg.window,
            need_explicit=self.alibi is not None,
            device=idx.device,
        )
        rope = self.rope(positions) if self.rope is not None else None
        # prefix LM sees later prefix keys: their distance must be |i - j| too (a penalty), so only purely
        # causal masks use the signed distance
        bias = self.alibi(T, T_k, offset, causal=mask_kind in ("causal", "sliding")) if self.alibi is not None else None
        return x, AttentionInputs(mask=mask, is_causal=is_causal, rope=rope, bias=bias)

    def _check_lengths(self, B: int, T_k: int, key_padding_mask: torch.Tensor | None) -> None:
        """Raise ValueError when T_k (cached + new tokens) exceeds model.max_len (not checked while compiling)
        or key_padding_mask is not (B, T_k)."""
        if not torch.compiler.is_compiling() and T_k > self.cfg.max_len:
            raise ValueError(
                f"sequence of {T_k} tokens is longer than model.max_len={self.cfg.max_len}; "
                f"shorten it (data.block_size) or raise model.max_len"
            )
        if key_padding_mask is not None and key_padding_mask.shape != (B, T_k):
            raise ValueError(
                f"key_padding_mask must be (B, offset + T) = ({B}, {T_k}), got {tuple(key_padding_mask.shape)}"
            )

    def new_caches(
        self,
        n_layers: int,
        batch_size: int,
        max_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> list[KVCache]:
        """n_layers preallocated KVCaches of max_len tokens each."""
        cfg = self.cfg
        dtype = dtype or next(self.parameters()).dtype
        return [KVCache(batch_size, cfg.kv_heads, max_len, cfg.head_dim, device, dtype) for _ in range(n_layers)]

    def num_params(self) -> int:
        """Parameter count, tied weights counted once (= sum(p.numel() for p in model.parameters()))."""
        return sum(p.numel() for p in self.parameters())


def default_positions(
    key_padding_mask: torch.Tensor | None, offset: int, T: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Positions of T new tokens after `offset` cached ones. key_padding_mask (B, offset + T), True = padding:
    per row, the count of non-padding tokens before each token (left-padded prompts start at position 0), (B, T)
    long. Without it offset .. offset + T - 1, shaped (1, T): one row broadcast over the batch (a (B, T) index
    would make the learned-position backward B times the work)."""
    if key_padding_mask is None:
        return torch.arange(offset, offset + T, device=device).unsqueeze(0)  # (1, T)
    return ((~key_padding_mask).long().cumsum(1) - 1).clamp(min=0)[:, offset:]  # (B, T)


__all__ = ["TransformerBase", "DecodingCache"]
