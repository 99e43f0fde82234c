"""causal_lm: decoder_only's next-token cross-entropy at every position (GPT; Radford et al. 2018)."""

import torch

from zoo.model.cost import batch_flops
from zoo.tasks.objectives.base import LMObjective


class CausalLM(LMObjective):
    """Next-token cross-entropy at every position of the causal decoder. It also reports the loss on the
    second half of each window only (the tokens encoder_decoder predicts), so the numbers compare."""

    NAME = "causal_lm"
    ARCH = "decoder_only"
    MASKS = (None, "causal", "sliding")  # any other mask would show the model the token it predicts
    SAMPLES = True

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        x, y = batch  # (B, T), (B, T)
        h = x.shape[1] // 2
        hidden, _ = self.model.features(x)  # (B, T, d_model)
        loss, nll = self.head_loss(hidden, y, return_rows=True)  # nll (B, T)
        return {"loss": loss, "cont": nll[:, h - 1 :].mean(), "cont_windows": nll[:, h - 1 :].mean(1)}

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the (B, T) batch (zoo.model.cost.batch_flops)."""
        B, T = batch[0].shape
        return batch_flops(self.model, B, T)
