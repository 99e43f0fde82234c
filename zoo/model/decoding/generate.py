"""Token-by-token generation shared by DecoderOnly and EncoderDecoder: greedy and sampling."""

from collections.abc import Callable

import torch


def filter_logits(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """logits (B, V) / temperature (float32), -inf outside the top_k tokens (those tied with the k-th stay) and
    outside the smallest set, most probable first, whose probability reaches top_p (nucleus sampling, Holtzman
    et al. 2020; the token that crosses top_p stays), top_k applied first (Hugging Face's TopKLogitsWarper then
    TopPLogitsWarper). temperature > 0; top_k >= V or top_p = 1 keep every token."""
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        before = torch.cat([probs.new_zeros(probs.shape[0], 1), probs.cumsum(dim=-1)[:, :-1]], dim=-1)  # (B, V)
        drop = before >= top_p  # the tokens before this one already reach top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pick the next token from logits (B, V): greedy (argmax) when temperature == 0, otherwise sample
    from softmax(filter_logits(logits, temperature, top_k, top_p)). Returns (B,) long.
    Raises ValueError for temperature < 0, top_k < 1 or top_p outside (0, 1]."""
    if temperature < 0 or (top_k is not None and top_k < 1) or (top_p is not None and not 0 < top_p <= 1):
        raise ValueError(f"need temperature >= 0, top_k >= 1, 0 < top_p <= 1; got {temperature}, {top_k}, {top_p}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = filter_logits(logits, temperature, top_k, top_p).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def left_pad(prompts, pad_id: int, device=None):
    """A list of token-id lists -> (idx (B, T) long left-padded with pad_id, key_padding_mask (B, T) bool,
    True = padding). Left padding puts every prompt's last token in the last column."""
    T = max(len(p) for p in prompts)
    idx = torch.full((len(prompts), T), pad_id, dtype=torch.long, device=device)
    pad = torch.ones(len(prompts), T, dtype=torch.bool, device=device)
    for i, p in enumerate(prompts):
        if len(p):
            idx[i, T - len(p) :] = torch.as_tensor(p, device=device)
            pad[i, T - len(p) :] = False
    return idx, pad


@torch.no_grad()
def decode_loop(
    step: Callable,
    idx: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_id: int | None = None,
    pad_id: int = 0,
    generator: torch.Generator | None = None,
):
    """Append max_new_tokens tokens to idx (B, T), one at a time.

    step(tokens (B, t), key_padding_mask (B, t) | None, n_new) -> logits (B, n, V) whose last row scores
    the next token; n_new is the number of tokens not yet seen by the step's cache (all of them at first).
    Each row stops at its own eos_id: its later tokens are pad_id. The loop ends when all rows have.
    Returns (B, T + generated) long.
    """
    B = idx.shape[0]
    finished = torch.zeros(B, dtype=torch.bool, device=idx.device)
    if key_padding_mask is not None and not key_padding_mask.any():
        key_padding_mask = None  # no padding: keep the mask-free fast paths
    n_new = idx.shape[1]
    for _ in range(max_new_tokens):
        logits = step(idx, key_padding_mask, n_new)
        nxt = sample_next(logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
        if eos_id is not None:
            nxt = nxt.masked_fill(finished, pad_id)
            finished = finished | (nxt == eos_id)
        idx = torch.cat([idx, nxt[:, None]], dim=1)
        if key_padding_mask is not None:
            key_padding_mask = torch.cat([key_padding_mask, key_padding_mask.new_zeros(B, 1)], dim=1)
        n_new = 1
        if eos_id is not None and bool(finished.all()):
            break
    return idx
