"""prefix_continuation: encoder_decoder on a language-modeling window: the encoder reads the first half, the
decoder predicts the continuation (T5's encoder-decoder on the prefix LM objective, Raffel et al. 2020,
sec. 3.2.1)."""

import torch

from zoo.model.cost import batch_flops
from zoo.tasks.objectives.base import LMObjective


class PrefixContinuation(LMObjective):
    """The encoder reads x[:, :T/2]; the decoder reads x[:, T/2-1:] (its first token is the prefix's last) and
    predicts y[:, T/2-1:], the T - T/2 + 1 continuation tokens (val/loss = val/cont_loss)."""

    NAME = "prefix_continuation"
    ARCH = "encoder_decoder"
    MASKS = (None, "causal", "sliding")  # the decoder's self-attention: never the next token
    SOURCE = "apart"

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        x, y = batch  # (B, T), (B, T)
        h = x.shape[1] // 2
        hidden, _ = self.model.decode_features(x[:, h - 1 :], self.model.encode(x[:, :h]))  # (B, T - h + 1, d)
        loss, nll = self.head_loss(hidden, y[:, h - 1 :], return_rows=True)
        return {"loss": loss, "cont": loss, "cont_windows": nll.mean(1)}

    def batch_flops(self, batch) -> float:
        """Forward FLOPs: encoder (B, T/2), decoder (B, T - T/2 + 1) (zoo.model.cost.batch_flops)."""
        B, T = batch[0].shape
        h = T // 2
        return batch_flops(self.model, B, T - h + 1, h)
