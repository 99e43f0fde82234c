"""Beam search for translation: EncoderDecoder (beam_search), DecoderOnly with the source as the prompt
(beam_search_decoder_only) and EncoderOnly re-reading source + target prefix at every step
(beam_search_encoder_only, ENTP-style, no cache). All run one core, `beam_core`, parameterised by a step
function, as generate.decode_loop is for greedy decoding and sampling.

Scoring (GNMT, Wu et al. 2016, eq. 14, without the coverage penalty):

    score(Y) = log P(Y | X) / lp(Y),    lp(Y) = ((5 + |Y|) / 6) ** alpha

where log P(Y | X) is the sum of the per-token log-softmax of the generated tokens and |Y| is the number of
generated tokens, the final EOS included (BOS and the prompt are not counted). alpha = length_penalty
(0.6 by default; 0 = raw log-probability).

Each step (fairseq's SequenceGenerator / HF's BeamSearchScorer): the beam_size alive hypotheses of a row
propose beam_size * V continuations scored by their summed log-probability; the best 2 * beam_size are
ranked (ties: lower beam index, then lower token id, so that beam_size 1 is greedy argmax token for token);
an EOS candidate ranked within the first beam_size is *finished* (moved to the row's finished list with
its length-penalised score, never extended); the first beam_size non-EOS candidates stay alive (there are
at least that many: each beam proposes one EOS at most). At the row's maximum length every alive
hypothesis is finished with its current score (no EOS appended).

Stopping rule of a row, `early_stopping`: True | False | "never" (default, exact), as Hugging Face's
argument of that name (zoo.model.decoding.beam_hypotheses). A row is done at its maximum length too; the loop ends
when every row is done.

Cost: one decoder step over B * beam_size rows per token (rows already done stay in the batch, frozen,
until every row is done); ranking takes the top 2 * beam_size of beam_size * V scores per row (topk, ties
ordered as a stable sort, see beam_step.stable_top). Ties are broken on the float32 log-softmax scores: two logits that
differ by less than its rounding could rank differently from greedy's argmax on the raw logits (never seen
in the tests).
"""

from collections.abc import Callable, Sequence

import torch

# check_early_stopping, length_penalty_factor and penalised are part of this module's API too
from zoo.model.decoding.beam_hypotheses import (
    NEG_INF,
    FinishedHypotheses,
    check_early_stopping,
    length_penalty_factor,  # noqa: F401  (re-exported)
    penalised,  # noqa: F401  (re-exported)
)
from zoo.model.decoding.beam_step import advance, expand, finish, rank


@torch.no_grad()
def _check_beam_args(B: int, beam_size: int, max_new: int | Sequence[int], early_stopping: bool | str) -> list[int]:
    """beam_core's arguments checked: returns max_new as one int per row (B). Raises ValueError for
    beam_size < 1, an unknown early_stopping, or a max_new that is not B non-negative ints (or one int)."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    check_early_stopping(early_stopping)
    max_new = [int(max_new)] * B if isinstance(max_new, int) else [int(m) for m in max_new]
    if len(max_new) != B or min(max_new) < 0:
        raise ValueError(f"max_new must be one non-negative int per row ({B}), got {max_new}")
    return max_new


def beam_core(
    step: Callable,
    reorder: Callable | None,
    prefix: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    beam_size: int,
    max_new: int | Sequence[int],
    length_penalty: float = 0.6,
    eos_id: int | None = None,
    pad_id: int = 0,
    early_stopping: bool | str = "never",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Beam search continuing prefix (B, T0) (BOS for an encoder-decoder, the left-padded prompt for a
    decoder-only model); see the module docstring for the scoring and the stopping rule.

    step(tokens (B*beam_size, t), key_padding_mask (B*beam_size, t) | None, n_new) -> logits
        (B*beam_size, n, V) whose last row scores the next token; n_new is the number of tokens its cache
        has not seen (t at first, then 1). Row b*beam_size + k is beam k of input row b.
    reorder(index (B*beam_size,) long): make the step's caches follow the re-selected beams (row i of the
        cache becomes old row index[i]); None when the step keeps no state. Always within one input row.
    key_padding_mask: (B, T0) True = padding, or None; new tokens are never padding.
    max_new: maximum new tokens, int or one per row (B,).
    eos_id: None = no EOS (every hypothesis runs to its maximum length).
    early_stopping: True | False | "never" (zoo.model.decoding.beam_hypotheses).
    Returns (tokens (B, T0 + L) long: the prefix, then the best hypothesis of each row, pad_id after its end;
    L = the longest best hypothesis; scores (B,) float: their length-penalised log-probabilities).
    Raises ValueError for beam_size < 1, a bad max_new or an unknown early_stopping.
    """
    B, T0 = prefix.shape
    K = beam_size
    max_new = _check_beam_args(B, K, max_new, early_stopping)
    eos = -1 if eos_id is None else eos_id
    hyps = FinishedHypotheses(max_new, K, length_penalty, early_stopping)
    tokens, key_padding_mask = expand(prefix, key_padding_mask, K)
    running = torch.full((B, K), NEG_INF, device=prefix.device)  # summed log-probs of the alive hypotheses
    running[:, 0] = 0.0  # all beams start equal: only beam 0 proposes at the first step
    n_new = T0
    for t in range(1, max(max_new) + 1):
        if hyps.all_done():
            break
        cand = rank(running, step(tokens, key_padding_mask, n_new)[:, -1].float(), eos)
        finish(hyps, cand, tokens[:, T0:], t, eos)
        hyps.update_done(cand.running, t)
        if hyps.all_done():
            break
        tokens, key_padding_mask = advance(tokens, key_padding_mask, reorder, cand, hyps.done, pad_id)
        running = cand.running
        n_new = 1
    return hyps.best(prefix, pad_id)


def _max_new_per_row(
    src: torch.Tensor, src_key_padding_mask: torch.Tensor | None, max_len: int | None, model_max_len: int
) -> list[int]:
    """beam_search's new-token limit of each row of src (B, S): max_len for every row, or with max_len None
    the row's non-padding source length + 50 (fairseq's max_len_a=1, max_len_b=50) capped at model_max_len - 1.
    Raises ValueError when 1 + max_len > model_max_len."""
    B, S = src.shape
    if max_len is None:
        lengths = (S - src_key_padding_mask.long().sum(dim=1)).tolist() if src_key_padding_mask is not None else [S] * B
        return [min(n + 50, model_max_len - 1) for n in lengths]
    if 1 + max_len > model_max_len:
        raise ValueError(f"1 + max_len {max_len} > model.max_len={model_max_len}")
    return [max_len] * B


def _search(model, step, reorder, prefix, key_padding_mask, beam_size, max_new, length_penalty, eos_id, early_stopping):
    """beam_core with the model's special ids (eos_id None = model.cfg.eos_id; pad_id: model.cfg.pad_id).
    Returns (tokens, scores) as beam_core."""
    eos = model.cfg.eos_id if eos_id is None else eos_id
    return beam_core(
        step,
        reorder,
        prefix,
        key_padding_mask,
        beam_size,
        max_new,
        length_penalty,
        eos,
        model.cfg.pad_id,
        early_stopping,
    )


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    src_key_padding_mask: torch.Tensor | None = None,
    beam_size: int = 4,
    max_len: int | None = None,
    length_penalty: float = 0.6,
    return_scores: bool = False,
    early_stopping: bool | str = "never",
):
    """Translate src (B, S) with an EncoderDecoder by beam search (scoring and stopping: module docstring).

    src_key_padding_mask: (B, S) True = padding, or None.
    max_len: maximum new tokens (EOS included), int for every row; None = per row, its non-padding source
        length + 50 (fairseq's max_len_a=1, max_len_b=50), capped at model.cfg.max_len - 1.
    Special tokens: model.cfg.bos_id / eos_id / pad_id. Call model.eval() first (dropout).
    Returns tokens (B, 1 + L) long: BOS, the best hypothesis (EOS included when it ended with one), then
    pad_id; with return_scores, (tokens, scores (B,) float: length-penalised log-probabilities).

    The memory is encoded once and expanded to B*beam_size rows; the first decode step fills the
    cross-attention caches (memory K/V, one kv_proj call per layer) and later steps reuse them. Beam
    re-selection reorders only the self-attention caches: it never leaves an input row, and every beam of
    a row holds the same memory K/V, so the cross-attention caches need no reordering.
    Raises ValueError when 1 + max_len > model.cfg.max_len.
    """
    cfg = model.cfg
    B, S = src.shape
    K = beam_size
    max_new = _max_new_per_row(src, src_key_padding_mask, max_len, cfg.max_len)
    memory = model.encode(src, src_key_padding_mask).repeat_interleave(K, dim=0)  # (B*K, S, d_model)
    memory_padding = src_key_padding_mask.repeat_interleave(K, dim=0) if src_key_padding_mask is not None else None
    cache = model.new_cache(B * K, max(max_new) + 1, S, src.device)

    def step(tokens, _key_padding_mask, n_new):
        return model.decode(tokens[:, -n_new:], memory, memory_key_padding_mask=memory_padding, cache=cache)

    def reorder(index):
        for c in cache.self_attn:  # cross-attention caches: identical within a row (see above)
            c.reorder(index)

    bos = torch.full((B, 1), model.start_id, dtype=torch.long, device=src.device)  # BART / Marian / T5: their own
    out, scores = _search(model, step, reorder, bos, None, K, max_new, length_penalty, None, early_stopping)
    return (out, scores) if return_scores else out


@torch.no_grad()
def beam_search_decoder_only(
    model,
    idx: torch.Tensor,
    key_padding_mask: torch.Tensor | None = None,
    beam_size: int = 4,
    max_new_tokens: int = 50,
    length_penalty: float = 0.6,
    eos_id: int | None = None,
    prefix_len: int | torch.Tensor | None = None,
    return_scores: bool = False,
    early_stopping: bool | str = "never",
):
    """Beam search continuation of prompts idx (B, T) with a DecoderOnly (e.g. translation with
    source + separator as the prompt); scoring and stopping: module docstring.

    idx: LEFT-padded (generate.left_pad); key_padding_mask (B, T) True = padding, or None.
    max_new_tokens: maximum new tokens per row (EOS included). eos_id: None = model.cfg.eos_id.
    prefix_len: int | (B,) for mask=prefix models, as DecoderOnly.forward.
    Returns tokens (B, T + L) long: the prompt, the best hypothesis, then pad_id (as DecoderOnly.generate);
    with return_scores, (tokens, scores (B,) float: length-penalised log-probabilities of the new tokens).
    Raises ValueError when T + max_new_tokens > model.cfg.max_len.
    """
    cfg = model.cfg
    B, T = idx.shape
    K = beam_size
    if T + max_new_tokens > cfg.max_len:
        raise ValueError(f"prompt {T} + max_new_tokens {max_new_tokens} > model.max_len={cfg.max_len}")
    if isinstance(prefix_len, torch.Tensor):
        prefix_len = prefix_len.repeat_interleave(K, dim=0)
    cache = model.new_cache(B * K, T + max_new_tokens, idx.device)

    def step(tokens, key_padding_mask, n_new):
        return model(tokens[:, -n_new:], key_padding_mask=key_padding_mask, cache=cache, prefix_len=prefix_len)

    out, scores = _search(
        model, step, cache.reorder, idx, key_padding_mask, K, max_new_tokens, length_penalty, eos_id, early_stopping
    )
    return (out, scores) if return_scores else out


@torch.no_grad()
def beam_search_encoder_only(
    model,
    idx: torch.Tensor,
    key_padding_mask: torch.Tensor | None = None,
    beam_size: int = 4,
    max_new_tokens: int | Sequence[int] = 50,
    length_penalty: float = 0.6,
    eos_id: int | None = None,
    return_scores: bool = False,
    early_stopping: bool | str = "never",
):
    """Beam search continuation of prompts idx (B, T) with an EncoderOnly read autoregressively (ENTP, Ewer et
    al. 2024; translation's encoder_ar): every step re-encodes each beam's whole sequence bidirectionally and
    scores the next token at its last position (EncoderOnly.next_token_logits). No cache, so no reorder: the
    cost of a step is a forward over the full prefix of B * beam_size rows. Scoring and stopping: module docstring.

    idx: LEFT-padded (generate.left_pad); key_padding_mask (B, T) True = padding, or None.
    max_new_tokens: maximum new tokens (EOS included), int or one per row. eos_id: None = model.cfg.eos_id.
    Returns tokens (B, T + L) long: the prompt, the best hypothesis, then pad_id; with return_scores, (tokens,
    scores (B,) float: length-penalised log-probabilities of the new tokens).
    Raises ValueError when T + max_new_tokens > model.cfg.max_len.
    """
    cfg = model.cfg
    T = idx.shape[1]
    longest = max_new_tokens if isinstance(max_new_tokens, int) else max(max_new_tokens, default=0)
    if T + longest > cfg.max_len:
        raise ValueError(f"prompt {T} + max_new_tokens {longest} > model.max_len={cfg.max_len}")

    def step(tokens, key_padding_mask, _n_new):
        return model.next_token_logits(tokens, key_padding_mask).unsqueeze(1)  # (B*K, 1, V)

    out, scores = _search(
        model, step, None, idx, key_padding_mask, beam_size, max_new_tokens, length_penalty, eos_id, early_stopping
    )
    return (out, scores) if return_scores else out
