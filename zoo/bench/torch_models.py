"""zoo's peers built from torch.nn alone: a GPT on nn.TransformerEncoder and a seq2seq on nn.Transformer."""

import math

import torch
from torch import nn

from zoo.model.init import init_weights


class TorchGPT(nn.Module):
    """The peer of zoo's DecoderOnly built from torch.nn: token + learned position embeddings ->
    nn.TransformerEncoder(pre-LN, GELU, no bias, dropout 0) -> final LayerNorm -> tied LM head.

    forward(idx (B, T)) -> logits (B, T, vocab). The float causal mask
    nn.Transformer.generate_square_subsequent_mask(T) is always passed (cached per length, or built in
    every forward with cache_mask=False, as typical user code does); is_causal=True (default) lets
    nn.MultiheadAttention use SDPA's fused causal path, is_causal=False makes attention use the explicit
    N x N mask. Weights are initialised as zoo's init="gpt2" (N(0, 0.02), scaled residual projections;
    the parameter names match), so both models train in the same numerical regime: with nn.Embedding's
    N(0, 1) default the tied head's logits are huge, the softmax saturates and the backward pass runs on
    denormal numbers, several times slower on CPU.
    """

    def __init__(
        self,
        vocab: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        max_len: int,
        is_causal: bool = True,
        cache_mask: bool = True,
    ):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout=0.0, activation="gelu", batch_first=True, norm_first=True, bias=False
        )
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model, bias=False)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.is_causal, self.cache_mask = is_causal, cache_mask
        self._masks: dict[tuple, torch.Tensor] = {}
        init_weights(self, "gpt2", n_layers)

    def causal_mask(self, T: int, device) -> torch.Tensor:
        """The (T, T) float mask (0 on and below the diagonal, -inf above)."""
        key = (T, str(device))
        if not self.cache_mask:
            return nn.Transformer.generate_square_subsequent_mask(T, device=device)
        if key not in self._masks:
            self._masks[key] = nn.Transformer.generate_square_subsequent_mask(T, device=device)
        return self._masks[key]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        x = self.encoder(x, mask=self.causal_mask(T, idx.device), is_causal=self.is_causal)
        return self.head(self.norm(x))


class TorchSeq2Seq(nn.Module):
    """The peer of zoo's EncoderDecoder: src / tgt token embeddings x sqrt(d_model) + sinusoidal positions ->
    nn.Transformer (post-LN, ReLU, dropout 0, batch_first) -> LM head tied to the target embedding.
    forward(src (B, S), tgt (B, T)) -> logits (B, T, vocab); tgt_mask = the float causal mask (cached)
    with tgt_is_causal=True. All weights are initialised Xavier-uniform, as zoo's init="xavier" (and
    nn.Transformer's own reset) — see TorchGPT on why the init matters for CPU timing."""

    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, max_len: int):
        super().__init__()
        self.src_tok = nn.Embedding(vocab, d_model)
        self.tgt_tok = nn.Embedding(vocab, d_model)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe, persistent=False)
        self.transformer = nn.Transformer(d_model, n_heads, n_layers, n_layers, d_ff, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tgt_tok.weight
        self.scale = math.sqrt(d_model)
        self._masks: dict[tuple, torch.Tensor] = {}
        init_weights(self, "xavier")

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        S, T = src.shape[1], tgt.shape[1]
        key = (T, str(tgt.device))
        if key not in self._masks:
            self._masks[key] = nn.Transformer.generate_square_subsequent_mask(T, device=tgt.device)
        x = self.src_tok(src) * self.scale + self.pe[:S]
        y = self.tgt_tok(tgt) * self.scale + self.pe[:T]
        out = self.transformer(x, y, tgt_mask=self._masks[key], tgt_is_causal=True)
        return self.head(out)
