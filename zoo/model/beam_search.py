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

Stopping rule of a row, `early_stopping` (Hugging Face's meaning of the same argument):
    "never" (default; exact): the row is done when it has beam_size finished hypotheses and no alive
        hypothesis can still beat the worst of the best beam_size of them: an alive hypothesis with
        log-probability s <= 0 after t tokens ends with log-probability <= s at a length L in t+1 .. max_new,
        so its score is at most s / max(lp(t + 1), lp(max_new)) (lp is monotone in the length). The best
        hypothesis the beams can reach is never lost.
    True (fairseq; HF early_stopping=True): the row is done as soon as it has beam_size finished hypotheses.
        With a length penalty alpha > 0 a live beam may still have scored higher.
    False (HF's heuristic): done when the best alive hypothesis scored at its current length, s / lp(t),
        cannot beat the worst of the best beam_size finished ones; with alpha > 0 also inexact.
beam_size 1 always stops at its first finished hypothesis, so that it is greedy decoding whatever the rule.
Either way a row is done at its maximum length; the loop ends when every row is done.

Cost: one decoder step over B * beam_size rows per token (rows already done stay in the batch, frozen,
until every row is done); ranking takes the top 2 * beam_size of beam_size * V scores per row (topk, ties
ordered as a stable sort, see _top). Ties are broken on the float32 log-softmax scores: two logits that
differ by less than its rounding could rank differently from greedy's argmax on the raw logits (never seen
in the tests).
"""
from typing import Callable, List, Optional, Sequence, Union

import torch

NEG_INF = float("-inf")
EARLY_STOPPING = (True, False, "never")


def check_early_stopping(early_stopping) -> None:
    """Raise ValueError unless early_stopping is True, False or "never" (see the module docstring)."""
    if not any(early_stopping is v if isinstance(v, bool) else early_stopping == v for v in EARLY_STOPPING):
        raise ValueError(f"early_stopping={early_stopping!r} is unknown; allowed: true, false, never")


def length_penalty_factor(length: int, alpha: float) -> float:
    """GNMT length normaliser lp = ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def penalised(logprob: float, length: int, alpha: float) -> float:
    """logprob / lp(length): the beam-search objective of a hypothesis of `length` generated tokens."""
    return logprob / length_penalty_factor(length, alpha)


def _top(scores: torch.Tensor, n: int):
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


@torch.no_grad()
def beam_core(step: Callable, reorder: Optional[Callable], prefix: torch.Tensor,
              key_padding_mask: Optional[torch.Tensor], beam_size: int, max_new: Union[int, Sequence[int]],
              length_penalty: float = 0.6, eos_id: Optional[int] = None, pad_id: int = 0,
              early_stopping: Union[bool, str] = "never"):
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
    early_stopping: True | False | "never" (module docstring).
    Returns (tokens (B, T0 + L) long: the prefix, then the best hypothesis of each row, pad_id after its end;
    L = the longest best hypothesis; scores (B,) float: their length-penalised log-probabilities).
    Raises ValueError for beam_size < 1, a bad max_new or an unknown early_stopping.
    """
    B, T0 = prefix.shape
    K = beam_size
    if K < 1:
        raise ValueError(f"beam_size must be >= 1, got {K}")
    check_early_stopping(early_stopping)
    if K == 1:
        early_stopping = True  # greedy
    device = prefix.device
    max_new = [int(max_new)] * B if isinstance(max_new, int) else [int(m) for m in max_new]
    if len(max_new) != B or min(max_new) < 0:
        raise ValueError(f"max_new must be one non-negative int per row ({B}), got {max_new}")
    eos = -1 if eos_id is None else eos_id
    finished: List[list] = [[] for _ in range(B)]  # per row: (score, logprob, generated token list)
    done = [m == 0 for m in max_new]
    for b in range(B):
        if done[b]:
            finished[b].append((0.0, 0.0, []))

    tokens = prefix.repeat_interleave(K, dim=0)  # (B*K, T0)
    kpm = key_padding_mask
    if kpm is not None and not kpm.any():
        kpm = None  # no padding: keep the mask-free fast paths (as decode_loop)
    if kpm is not None:
        kpm = kpm.repeat_interleave(K, dim=0)
    running = torch.full((B, K), NEG_INF, device=device)  # summed log-probs of the alive hypotheses
    running[:, 0] = 0.0  # all beams start equal: only beam 0 proposes at the first step
    base = torch.arange(B, device=device)[:, None] * K  # (B, 1)
    identity = torch.arange(B * K, device=device)
    n_new = T0
    for t in range(1, max(max_new) + 1):
        if all(done):
            break
        logits = step(tokens, kpm, n_new)[:, -1].float()  # (B*K, V)
        V = logits.shape[-1]
        if V < 2:
            raise ValueError(f"beam search needs a vocabulary of at least 2 tokens, got {V}")
        cand = (running[:, :, None] + logits.log_softmax(dim=-1).view(B, K, V)).view(B, K * V)
        scores, flat = _top(cand, min(2 * K, K * V))  # (B, n_cand) best first
        src_beam, tok = flat // V, flat % V  # (B, n_cand)
        is_eos = tok == eos
        # the first K non-EOS candidates: there are K of them at least, as each beam proposes one EOS at most
        alive = ~is_eos & ((~is_eos).long().cumsum(dim=-1) <= K)
        sel = alive.nonzero()[:, 1].view(B, K)  # row-major: K positions per row, best first
        new_running, new_beam, new_tok = scores.gather(1, sel), src_beam.gather(1, sel), tok.gather(1, sel)

        fin = is_eos[:, :K] & torch.isfinite(scores[:, :K])  # EOS candidates ranked within the first K
        at_max = [not done[b] and t == max_new[b] for b in range(B)]
        if bool(fin.any()) or any(at_max):
            hyps = tokens[:, T0:].tolist()
            scores_l, beam_l = scores.tolist(), src_beam.tolist()
            for b, j in fin.nonzero().tolist():
                if not done[b]:
                    s = scores_l[b][j]
                    finished[b].append((penalised(s, t, length_penalty), s, hyps[b * K + beam_l[b][j]] + [eos]))
            run_l, nbeam_l, ntok_l = new_running.tolist(), new_beam.tolist(), new_tok.tolist()
            for b in range(B):
                if at_max[b]:  # maximum length: the alive hypotheses are finished as they are
                    for k in range(K):
                        s = run_l[b][k]
                        if s != NEG_INF:
                            finished[b].append((penalised(s, t, length_penalty), s,
                                                hyps[b * K + nbeam_l[b][k]] + [ntok_l[b][k]]))
                    done[b] = True
        for b in range(B):
            if done[b] or len(finished[b]) < K:
                continue
            if early_stopping is True:
                done[b] = True
                continue
            worst = sorted((f[0] for f in finished[b]), reverse=True)[K - 1]
            if early_stopping == "never":  # the largest normaliser an alive hypothesis can still reach
                lp = max(length_penalty_factor(t + 1, length_penalty),
                         length_penalty_factor(max_new[b], length_penalty))
            else:
                lp = length_penalty_factor(t, length_penalty)
            if float(new_running[b].max()) / lp <= worst:
                done[b] = True
        if all(done):
            break
        done_t = torch.tensor(done, device=device)[:, None]
        new_beam = torch.where(done_t, torch.arange(K, device=device), new_beam)  # finished rows: frozen
        new_tok = new_tok.masked_fill(done_t, pad_id)
        index = (base + new_beam).view(-1)  # (B*K,)
        if not torch.equal(index, identity):
            tokens = tokens.index_select(0, index)
            if kpm is not None:
                kpm = kpm.index_select(0, index)
            if reorder is not None:
                reorder(index)
        tokens = torch.cat([tokens, new_tok.view(-1, 1)], dim=1)
        if kpm is not None:
            kpm = torch.cat([kpm, kpm.new_zeros(B * K, 1)], dim=1)
        running = new_running
        n_new = 1

    best = [max(f, key=lambda h: h[0]) for f in finished]  # max keeps the first of equal scores
    L = max(len(h[2]) for h in best)
    out = torch.full((B, T0 + L), pad_id, dtype=torch.long, device=device)
    out[:, :T0] = prefix
    for b, h in enumerate(best):
        if h[2]:
            out[b, T0:T0 + len(h[2])] = torch.tensor(h[2], dtype=torch.long, device=device)
    return out, torch.tensor([h[0] for h in best], device=device)


@torch.no_grad()
def beam_search(model, src: torch.Tensor, src_key_padding_mask: Optional[torch.Tensor] = None,
                beam_size: int = 4, max_len: Optional[int] = None, length_penalty: float = 0.6,
                return_scores: bool = False, early_stopping: Union[bool, str] = "never"):
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
    if max_len is None:
        lengths = (S - src_key_padding_mask.long().sum(dim=1)).tolist() if src_key_padding_mask is not None \
            else [S] * B
        max_new = [min(n + 50, cfg.max_len - 1) for n in lengths]
    else:
        if 1 + max_len > cfg.max_len:
            raise ValueError(f"1 + max_len {max_len} > model.max_len={cfg.max_len}")
        max_new = [max_len] * B
    memory = model.encode(src, src_key_padding_mask).repeat_interleave(K, dim=0)  # (B*K, S, d_model)
    memory_kpm = src_key_padding_mask.repeat_interleave(K, dim=0) if src_key_padding_mask is not None else None
    cache = model.new_cache(B * K, max(max_new) + 1, S, src.device)

    def step(tokens, _kpm, n_new):
        return model.decode(tokens[:, -n_new:], memory, memory_key_padding_mask=memory_kpm, cache=cache)

    def reorder(index):
        for c in cache.self_attn:  # cross-attention caches: identical within a row (see above)
            c.reorder(index)

    bos = torch.full((B, 1), model.start_id, dtype=torch.long, device=src.device)  # BART / Marian / T5: their own
    out, scores = beam_core(step, reorder, bos, None, K, max_new, length_penalty, cfg.eos_id, cfg.pad_id,
                            early_stopping)
    return (out, scores) if return_scores else out


@torch.no_grad()
def beam_search_decoder_only(model, idx: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
                             beam_size: int = 4, max_new_tokens: int = 50, length_penalty: float = 0.6,
                             eos_id: Optional[int] = None, prefix_len=None, return_scores: bool = False,
                             early_stopping: Union[bool, str] = "never"):
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

    def step(tokens, kpm, n_new):
        return model(tokens[:, -n_new:], key_padding_mask=kpm, cache=cache, prefix_len=prefix_len)

    out, scores = beam_core(step, cache.reorder, idx, key_padding_mask, K, max_new_tokens, length_penalty,
                            cfg.eos_id if eos_id is None else eos_id, cfg.pad_id, early_stopping)
    return (out, scores) if return_scores else out


@torch.no_grad()
def beam_search_encoder_only(model, idx: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
                             beam_size: int = 4, max_new_tokens: Union[int, Sequence[int]] = 50,
                             length_penalty: float = 0.6, eos_id: Optional[int] = None, return_scores: bool = False,
                             early_stopping: Union[bool, str] = "never"):
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

    def step(tokens, kpm, _n_new):
        return model.next_token_logits(tokens, kpm).unsqueeze(1)  # (B*K, 1, V)

    out, scores = beam_core(step, None, idx, key_padding_mask, beam_size, max_new_tokens, length_penalty,
                            cfg.eos_id if eos_id is None else eos_id, cfg.pad_id, early_stopping)
    return (out, scores) if return_scores else out
