"""Non-autoregressive translation with an encoder-only model: the conditional masked LM (CMLM) and
mask-predict decoding of Ghazvininejad et al. 2019 ("Mask-Predict: Parallel Decoding of Conditional Masked
Language Models"), as in fairseq's cmlm_transformer / iterative refinement generator.

Layout of one row (right-padded to the batch's longest, key_padding_mask True = padding):

    [<cls>] source tokens ... </s> | y_1 ... y_L | <pad> ...
     \\____ source side: source_len = 1 + S ____/  \\ L target slots (no EOS)

<cls> is the LENGTH token (its final state feeds the length head), </s> ending the source is the separator.
The source side attends only to itself (EncoderOnly's source_len mask), the target slots to everything.
Positions count the non-padding tokens of each row, so the slots follow each row's own source whatever the
other rows' lengths.

Everything here is tensor code without a model, except `mask_predict`, which calls a `step` function.
"""

from collections.abc import Callable

import torch


def nat_inputs(
    src: torch.Tensor,
    src_key_padding_mask: torch.Tensor,
    lengths: torch.Tensor,
    pad_id: int,
    cls_id: int,
    fill_id: int,
    tgt: torch.Tensor | None = None,
):
    """Build the rows [<cls>] source, L target slots (see the module docstring).

    src: (B, S) right-padded, each row ending with its separator (</s>); src_key_padding_mask: (B, S) True = padding.
    lengths: (B,) long, target slots per row (>= 0). tgt: (B, T_t) target tokens, right-padded, whose first
    lengths[b] entries fill the slots of row b; None fills every slot with fill_id (e.g. <mask>).
    Returns (seq (B, N) long, key_padding_mask (B, N) bool, slots (B, N) bool = target slot positions,
    source_len (B,) long = 1 + source tokens), N = max over rows of source_len + lengths.
    """
    B, device = src.shape[0], src.device
    lengths = lengths.to(device)
    source_len = 1 + (~src_key_padding_mask).sum(1)  # (B,)
    total = source_len + lengths
    N = int(total.max())
    pos = torch.arange(N, device=device).unsqueeze(0)  # (1, N)
    seq = torch.full((B, N), pad_id, dtype=torch.long, device=device)
    seq[:, 0] = cls_id
    seq[(pos >= 1) & (pos < source_len.unsqueeze(1))] = src[~src_key_padding_mask]
    slots = (pos >= source_len.unsqueeze(1)) & (pos < total.unsqueeze(1))
    if tgt is None:
        seq[slots] = fill_id
    else:
        if tgt.shape[1] < int(lengths.max()):
            raise ValueError(f"tgt has {tgt.shape[1]} columns, fewer than the longest length {int(lengths.max())}")
        seq[slots] = tgt[torch.arange(tgt.shape[1], device=device).unsqueeze(0) < lengths.unsqueeze(1)]
    return seq, pos >= total.unsqueeze(1), slots, source_len


def rank_in_row(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(B, N) long: each kept entry's rank by ascending score among the kept entries of its row (0 = lowest;
    ties by position); entries not kept rank after all kept ones. scores: (B, N) float; keep: (B, N) bool."""
    s = scores.float().masked_fill(~keep, float("inf"))
    return s.argsort(dim=1, stable=True).argsort(dim=1, stable=True)


def uniform(like: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """U[0, 1) floats of like's shape and device, drawn from `generator`, else from the default generator by
    torch.rand_like (the same draws as torch.rand in eager mode; torch.compile traces it at symbolic shapes,
    where torch.rand(shape, generator=None) fails)."""
    if generator is not None:
        return torch.rand(like.shape, generator=generator, device=like.device)
    return torch.rand_like(like, dtype=torch.float)


def cmlm_mask(slots: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """The CMLM training mask (Ghazvininejad et al. 2019, sec. 2): per row, n ~ Uniform{1, ..., L} with L the
    row's slot count, then n slots chosen uniformly at random. slots: (B, N) bool. Returns (B, N) bool, a
    subset of slots (empty for a row with L = 0)."""
    L = slots.sum(1)  # (B,)
    u = uniform(slots, generator)  # (B, N)
    n = (uniform(L, generator) * L).long() + 1  # (B,) 1..L
    n = torch.minimum(n, L)
    return (rank_in_row(u, slots) < n.unsqueeze(1)) & slots


def num_to_mask(lengths: torch.Tensor, t: int, iterations: int) -> torch.Tensor:
    """Tokens re-masked before iteration t = 1 .. iterations - 1 of mask-predict:
    n = floor(L (iterations - t) / iterations) (Ghazvininejad et al. 2019, sec. 3.1, a linear decay; fairseq's
    cmlm floors it). lengths: (B,) long. Returns (B,) long."""
    return lengths * (iterations - t) // iterations


def lowest(probs: torch.Tensor, slots: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """(B, N) bool: the n[b] slots of row b with the lowest probs (ties: the earlier position).
    probs: (B, N) float; slots: (B, N) bool; n: (B,) long <= slots per row."""
    return (rank_in_row(probs, slots) < n.unsqueeze(1)) & slots


@torch.no_grad()
def mask_predict(
    step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    seq: torch.Tensor,
    slots: torch.Tensor,
    iterations: int,
    mask_id: int,
    banned: tuple = (),
):
    """Mask-predict decoding (Ghazvininejad et al. 2019, sec. 3.1) of rows whose target slots hold <mask>.

    Iteration 0 predicts every slot: y_i = argmax p(y_i | X, masked Y), p_i its probability. Iterations
    t = 1 .. iterations - 1 re-mask the `num_to_mask` slots of lowest p_i and re-predict only those, updating
    their y_i and p_i; the others keep their tokens and probabilities. iterations = 1 is one-pass NAT.

    step: (seq (B, N), at (B, N) bool) -> token logits (n, V) at the n positions of `at` in row-major order (the
    masked slots of the round: no logits for the source or the kept slots). seq: (B, N) long; slots: (B, N) bool.
    banned: token ids never
    predicted (specials such as <pad>, <mask>). Returns (tokens (B, N): seq with the slots filled,
    log_probs (B, N) float: log p_i at the slots, 0 elsewhere). Raises ValueError for iterations < 1.
    """
    if iterations < 1:
        raise ValueError(f"nat_iterations={iterations} must be >= 1 (1 = one pass, no refinement)")
    lengths = slots.sum(1)
    tokens, log_probs = seq.clone(), torch.zeros(seq.shape, device=seq.device)
    masked = slots
    for t in range(iterations):
        if t > 0:
            masked = lowest(log_probs, slots, num_to_mask(lengths, t, iterations))
            if not masked.any():
                break
            tokens = tokens.masked_fill(masked, mask_id)
        logp = step(tokens, masked).float().log_softmax(-1)  # (n masked, V)
        if banned:
            logp[:, list(banned)] = float("-inf")
        best, arg = logp.max(-1)  # (n,)
        tokens = tokens.masked_scatter(masked, arg)
        log_probs = log_probs.masked_scatter(masked, best)
    return tokens, log_probs
