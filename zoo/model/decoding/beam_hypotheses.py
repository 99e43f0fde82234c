"""The finished hypotheses of a beam search and its stopping rule (zoo.model.decoding.beam_search.beam_core).

A hypothesis of |Y| generated tokens (the final EOS included) with summed log-probability s scores
s / lp(|Y|), lp(L) = ((5 + L) / 6) ** alpha (GNMT, Wu et al. 2016, eq. 14; alpha = length_penalty).

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
Either way a row is done at its maximum length.
"""

import torch

NEG_INF = float("-inf")
EARLY_STOPPING = (True, False, "never")


def check_early_stopping(early_stopping: bool | str) -> None:
    """Raise ValueError unless early_stopping is True, False or "never" (see the module docstring)."""
    if not any(early_stopping is v if isinstance(v, bool) else early_stopping == v for v in EARLY_STOPPING):
        raise ValueError(f"early_stopping={early_stopping!r} is unknown; allowed: true, false, never")


def length_penalty_factor(length: int, alpha: float) -> float:
    """GNMT length normaliser lp = ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def penalised(logprob: float, length: int, alpha: float) -> float:
    """logprob / lp(length): the beam-search objective of a hypothesis of `length` generated tokens."""
    return logprob / length_penalty_factor(length, alpha)


class FinishedHypotheses:
    """Per input row: its finished hypotheses, each (score, log-probability, generated token list), and
    whether the row is done.

    max_new: maximum new tokens of each row (B,); beam_size, length_penalty (alpha), early_stopping: as
    beam_core. A row with max_new 0 starts done, with the empty hypothesis.
    """

    def __init__(self, max_new: list[int], beam_size: int, length_penalty: float, early_stopping: bool | str):
        self.max_new, self.K, self.alpha = max_new, beam_size, length_penalty
        self.early_stopping = True if beam_size == 1 else early_stopping  # beam 1 = greedy
        self.done = [m == 0 for m in max_new]
        self.rows: list[list] = [[(0.0, 0.0, [])] if d else [] for d in self.done]

    def all_done(self) -> bool:
        return all(self.done)

    def add(self, row: int, logprob: float, length: int, tokens: list[int]) -> None:
        """Finish a hypothesis of `length` generated tokens in `row`."""
        self.rows[row].append((penalised(logprob, length, self.alpha), logprob, tokens))

    def update_done(self, running: torch.Tensor, t: int) -> None:
        """Apply the stopping rule (module docstring) to every row not yet done, after t generated tokens;
        running: (B, beam_size) summed log-probabilities of the alive hypotheses."""
        K = self.K
        for b, finished in enumerate(self.rows):
            if self.done[b] or len(finished) < K:
                continue
            if self.early_stopping is True:
                self.done[b] = True
                continue
            worst = sorted((f[0] for f in finished), reverse=True)[K - 1]
            if self.early_stopping == "never":  # the largest normaliser an alive hypothesis can still reach
                lp = max(length_penalty_factor(t + 1, self.alpha), length_penalty_factor(self.max_new[b], self.alpha))
            else:
                lp = length_penalty_factor(t, self.alpha)
            if float(running[b].max()) / lp <= worst:
                self.done[b] = True

    def best(self, prefix: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (B, T0 + L) long: prefix (B, T0), then each row's best hypothesis, pad_id after its end;
        L = the longest best hypothesis; scores (B,) float)."""
        B, T0 = prefix.shape
        device = prefix.device
        best = [max(f, key=lambda h: h[0]) for f in self.rows]  # max keeps the first of equal scores
        L = max(len(h[2]) for h in best)
        out = torch.full((B, T0 + L), pad_id, dtype=torch.long, device=device)
        out[:, :T0] = prefix
        for b, h in enumerate(best):
            if h[2]:
                out[b, T0 : T0 + len(h[2])] = torch.tensor(h[2], dtype=torch.long, device=device)
        return out, torch.tensor([h[0] for h in best], device=device)
