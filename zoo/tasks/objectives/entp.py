"""entp: encoder_only's next-token prediction (Ewer et al. 2024, "Encoder-only Next Token Prediction"). To
predict y[:, j] the bidirectional encoder reads the prefix x[:, :j+1] alone, again for every j (no causal
mask, no KV reuse), and the LM head on the prefix's last position predicts the next token.

Scored as encoder_decoder: val/loss = val/cont_loss = the loss on the T - T/2 + 1 continuation targets
y[:, T/2-1:], predicted from prefixes of lengths T/2 .. T, computed exactly (every prefix a row of padded
forwards, zoo.model.encoder_only.prefix_next_features). Training: per window task.entp_targets = K targets
drawn from all T (prefix lengths 1 .. T, the positions decoder_only trains on, so short contexts are learned
too), one uniformly from each of K equal strata of positions: each position is equally likely, so the
stratum-weighted mean is an unbiased estimate of the causal LM's all-position loss (with less variance than K
independent draws), and stratum i's rows are only as wide as its longest prefix: a step costs about
(K + 1) / 2 causal forwards of the window (batch_flops), a generated token one forward over its prefix
(inference_flops_per_token; the task's sample decodes so, EncoderOnly.generate)."""

import torch

from zoo.model.cost import batch_flops
from zoo.model.encoder_only import prefix_next_features
from zoo.tasks.objectives.base import LMObjective
from zoo.tasks.objectives.nat import uniform

ENTP_EVAL_TOKENS = 2**16  # padded tokens per forward of entp's exact evaluation (bounds its memory)


def strata(T: int, k: int) -> list:
    """Bounds of k contiguous strata of positions 0 .. T-1, as equal as possible (1 <= k <= T): stratum i is
    bounds[i] .. bounds[i+1] - 1."""
    return [i * T // k for i in range(k + 1)]


def stratified_positions(like: torch.Tensor, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, k) long: per row of like (B, T), one position drawn uniformly from each of the k strata (`strata`):
    every position is drawn with probability 1 / its stratum's size (k / T when k divides T); k = T: every
    position, in order."""
    bounds = strata(like.shape[1], k)
    lo = torch.tensor(bounds[:-1], device=like.device)
    size = torch.tensor(bounds[1:], device=like.device) - lo  # (k,) >= 1
    u = uniform(like[:, :k], generator)  # (B, k)
    return lo + torch.minimum((u * size).long(), size - 1)


class ENTP(LMObjective):
    """Ewer et al. 2024's encoder-only next-token prediction (the module docstring); task.entp_targets = K."""

    NAME = "entp"
    OPTIONS = ("entp_targets",)
    ARCH = "encoder_only"
    SAMPLES = True

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        """The exact continuation loss, which training estimates (`training_loss`)."""
        x, y = batch  # (B, T), (B, T)
        h = x.shape[1] // 2
        cuts = torch.arange(h - 1, x.shape[1], device=x.device).expand(x.shape[0], -1)  # (B, T - h + 1)
        nll = self.nll(x, y, cuts, max_tokens=ENTP_EVAL_TOKENS)
        loss = nll.mean()
        return {"loss": loss, "cont": loss, "cont_windows": nll.mean(1)}

    def nll(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        cuts: torch.Tensor,
        width: int | None = None,
        max_tokens: int | None = None,
    ) -> torch.Tensor:
        """Next-token losses (nats): (B, k), entry (b, i) = -log p(y[b, j] | x[b, :j+1]) with j = cuts[b, i],
        each prefix re-read alone by the bidirectional encoder (prefix_next_features; width, max_tokens there).
        x, y (B, T); cuts (B, k) long in 0 .. T-1."""
        B, k = cuts.shape
        row = torch.arange(B, device=x.device).repeat_interleave(k)
        feats = prefix_next_features(self.model, x, row, cuts.flatten() + 1, width, max_tokens)  # (B k, d_model)
        nll = self.head_loss(feats, y[row, cuts.flatten()], reduction="none")  # (B k,)
        return nll.view(B, k)

    def training_loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        """The training loss (nats): per window K = min(task.entp_targets, T) targets, one drawn uniformly
        from each of K strata of the T positions (stratified_positions), each predicted from its own prefix;
        stratum i is one right-padded (B, its last position + 1) forward. The mean over strata weighted by
        their sizes is an unbiased estimate of the mean next-token loss over all T positions (equal to it when
        K = T)."""
        x, y = batch
        T = x.shape[1]
        k = min(self.hparams.entp_targets, T)
        bounds, cuts = strata(T, k), stratified_positions(x, k, generator)  # (B, K)
        loss = 0.0
        for i in range(k):
            nll = self.nll(x, y, cuts[:, i : i + 1], width=bounds[i + 1])  # (B, 1)
            loss = loss + nll.mean() * ((bounds[i + 1] - bounds[i]) / T)
        return loss

    def batch_flops(self, batch) -> float:
        """One (B, w_i) forward per stratum i (w_i its last position + 1, K = task.entp_targets strata) with the
        LM head on one position per row (zoo.model.cost.batch_flops)."""
        B, T = batch[0].shape
        widths = strata(T, min(self.hparams.entp_targets, T))[1:]
        return sum(batch_flops(self.model, B, w, scored=B) for w in widths)

    def inference_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """No cache: a generated token costs a whole forward over its seq_len-token prefix with the LM head on
        one position (zoo.model.cost.batch_flops)."""
        return batch_flops(self.model, 1, seq_len, scored=1)
