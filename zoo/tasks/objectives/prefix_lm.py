"""prefix_lm: decoder_only with the prefix mask (T5's prefix LM, Raffel et al. 2020, sec. 3.2.1)."""

import torch

from zoo.model.cost import batch_flops
from zoo.tasks.objectives.base import LMObjective


class PrefixLM(LMObjective):
    """The decoder reads the first half x[:, :T/2] bidirectionally and the rest causally; only the T - T/2 + 1
    continuation tokens are scored, the same as encoder_decoder's (val/loss = val/cont_loss)."""

    NAME = "prefix_lm"
    ARCH = "decoder_only"
    MASKS = ("prefix",)

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        x, y = batch  # (B, T), (B, T)
        h = x.shape[1] // 2
        hidden, _ = self.model.features(x, prefix_len=h)  # (B, T, d_model): bidirectional over x[:, :h]
        loss, nll = self.head_loss(hidden[:, h - 1 :], y[:, h - 1 :], return_rows=True)  # nll (B, T - h + 1)
        return {"loss": loss, "cont": loss, "cont_windows": nll.mean(1)}

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the (B, T) batch (zoo.model.cost.batch_flops)."""
        B, T = batch[0].shape
        return batch_flops(self.model, B, T)
