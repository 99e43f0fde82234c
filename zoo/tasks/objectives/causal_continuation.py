"""causal_continuation: decoder_only trained on the continuation only: causal_lm's forward, prefix_lm's targets.
The control between the two: what prefix_lm gains from training on the continuation alone, without reading its
prefix bidirectionally (issue 45's objective test, experiments/RESULTS.md)."""

import torch

from zoo.model.cost import batch_flops
from zoo.tasks.objectives.causal_lm import CausalLM


class CausalContinuation(CausalLM):
    """The causal decoder reads the whole window x (B, T) and is trained on the T - T/2 + 1 continuation targets
    y[:, T/2-1:] alone, the tokens prefix_lm and encoder_decoder are trained and scored on (val/loss =
    val/cont_loss). The first half's targets get no gradient."""

    NAME = "causal_continuation"

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        x, y = batch  # (B, T), (B, T)
        h = x.shape[1] // 2
        hidden, _ = self.model.features(x)  # (B, T, d_model)
        loss, nll = self.head_loss(hidden[:, h - 1 :], y[:, h - 1 :], return_rows=True)  # nll (B, T - h + 1)
        return {"loss": loss, "cont": loss, "cont_windows": nll.mean(1)}

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the (B, T) batch (zoo.model.cost.batch_flops), the LM head over the T - T/2 + 1
        positions losses projects."""
        B, T = batch[0].shape
        return batch_flops(self.model, B, T, scored=B * (T - T // 2 + 1))
