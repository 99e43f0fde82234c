"""One step of beam search (zoo.model.decoding.beam_search.beam_core), in its parts: the beams repeated for
each input row (expand), the continuations ranked (rank, on stable_top: ties by lower beam, then lower token),
the finished hypotheses moved out (finish), and the alive beams re-selected and extended (advance)."""

from collections.abc import Callable
from typing import NamedTuple

import torch

from zoo.model.decoding.beam_hypotheses import NEG_INF, FinishedHypotheses


def stable_top(scores: torch.Tensor, n: int):
    """The n best of scores (B, N): (values, indices) (B, n), best first, equal scores by lower index (as
    argmax picks the first maximum): a stable descending sort. topk (much faster than sorting N = beam * V)
    gives no tie order, so its n are re-ranked stably, and the full sort is used only when a finite score
    ties across the n-th place (which of the tied entries make the cut would be arbitrary)."""
    if n < scores.shape[-1]:
        top = scores.topk(n + 1, dim=-1)
        edge = top.values[:, n - 1]
        if not bool(((top.values[:, n] == edge) & torch.isfinite(edge)).any()):
            idx = top.indices[:, :n].sort(dim=-1).values  # ascending index, then a stable sort by score
            vals, order = scores.gather(1, idx).sort(dim=-1, descending=True, stable=True)
            return vals, idx.gather(1, order)
    vals, idx = scores.sort(dim=-1, descending=True, stable=True)
    return vals[:, :n], idx[:, :n]


class Candidates(NamedTuple):
    """One step's ranked continuations of a batch of B rows with beam_size beams each (best first)."""

    scores: torch.Tensor  # (B, n) summed log-probabilities of the best n = min(2 beam_size, beam_size V)
    beam: torch.Tensor  # (B, n) long: the beam each extends
    token: torch.Tensor  # (B, n) long: its new token
    finished: torch.Tensor  # (B, beam_size) bool: an EOS candidate ranked within the first beam_size
    running: torch.Tensor  # (B, beam_size): scores of the first beam_size non-EOS candidates, the new beams
    running_beam: torch.Tensor  # (B, beam_size) long: the beam each new beam extends
    running_token: torch.Tensor  # (B, beam_size) long: its new token


def rank(running: torch.Tensor, logits: torch.Tensor, eos: int) -> Candidates:
    """Rank the continuations of every beam: running (B, K) summed log-probabilities of the alive beams,
    logits (B*K, V) of the next token. Raises ValueError for V < 2."""
    B, K = running.shape
    V = logits.shape[-1]
    if V < 2:
        raise ValueError(f"beam search needs a vocabulary of at least 2 tokens, got {V}")
    cand = (running[:, :, None] + logits.log_softmax(dim=-1).view(B, K, V)).view(B, K * V)
    scores, flat = stable_top(cand, min(2 * K, K * V))  # (B, n) best first
    beam, tok = flat // V, flat % V  # (B, n)
    is_eos = tok == eos
    # the first K non-EOS candidates: there are K of them at least, as each beam proposes one EOS at most
    alive = ~is_eos & ((~is_eos).long().cumsum(dim=-1) <= K)
    sel = alive.nonzero()[:, 1].view(B, K)  # row-major: K positions per row, best first
    finished = is_eos[:, :K] & torch.isfinite(scores[:, :K])
    return Candidates(scores, beam, tok, finished, scores.gather(1, sel), beam.gather(1, sel), tok.gather(1, sel))


def finish(hyps: FinishedHypotheses, cand: Candidates, generated: torch.Tensor, t: int, eos: int) -> None:
    """Move to `hyps` the EOS candidates ranked within the first K and, in rows at their maximum length t,
    every alive new beam as it is (no EOS appended). generated: (B*K, t - 1) tokens of the current beams."""
    K = cand.finished.shape[1]
    at_max = [not done and t == m for done, m in zip(hyps.done, hyps.max_new)]
    if not (bool(cand.finished.any()) or any(at_max)):
        return
    beams = generated.tolist()
    scores, beam = cand.scores.tolist(), cand.beam.tolist()
    for b, j in cand.finished.nonzero().tolist():
        if not hyps.done[b]:
            hyps.add(b, scores[b][j], t, beams[b * K + beam[b][j]] + [eos])
    running, running_beam, running_token = (
        cand.running.tolist(),
        cand.running_beam.tolist(),
        cand.running_token.tolist(),
    )
    for b in range(len(at_max)):
        if at_max[b]:
            for k in range(K):
                if running[b][k] != NEG_INF:
                    hyps.add(b, running[b][k], t, beams[b * K + running_beam[b][k]] + [running_token[b][k]])
            hyps.done[b] = True


def advance(
    tokens: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    reorder: Callable | None,
    cand: Candidates,
    done: list[bool],
    pad_id: int,
):
    """Re-select the beams and append their new tokens: tokens (B*K, t) -> (B*K, t + 1), key_padding_mask
    likewise (new tokens are not padding); rows already done stay frozen, extended by pad_id. Calls
    reorder(index (B*K,)) when the beams change order. Returns (tokens, key_padding_mask)."""
    B, K = cand.running_beam.shape
    device = tokens.device
    done_t = torch.tensor(done, device=device)[:, None]
    new_beam = torch.where(done_t, torch.arange(K, device=device), cand.running_beam)
    new_tok = cand.running_token.masked_fill(done_t, pad_id)
    index = (torch.arange(B, device=device)[:, None] * K + new_beam).view(-1)  # (B*K,)
    if not torch.equal(index, torch.arange(B * K, device=device)):
        tokens = tokens.index_select(0, index)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.index_select(0, index)
        if reorder is not None:
            reorder(index)
    tokens = torch.cat([tokens, new_tok.view(-1, 1)], dim=1)
    if key_padding_mask is not None:
        key_padding_mask = torch.cat([key_padding_mask, key_padding_mask.new_zeros(B * K, 1)], dim=1)
    return tokens, key_padding_mask


def expand(prefix: torch.Tensor, key_padding_mask: torch.Tensor | None, K: int):
    """Each row repeated for its K beams: (tokens (B*K, T0), key_padding_mask (B*K, T0) or None, None also
    when nothing is padding, so that the mask-free fast paths run, as in decode_loop)."""
    if key_padding_mask is not None and not key_padding_mask.any():
        key_padding_mask = None
    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask.repeat_interleave(K, dim=0)
    return prefix.repeat_interleave(K, dim=0), key_padding_mask
