"""prefix_lm: decoder_only with the prefix mask (T5's prefix LM, Raffel et al. 2020, sec. 3.2.1)."""

import torch

from zoo.model.cost import batch_flops
from zoo.tasks.objectives.base import LMObjective


class PrefixLM(LMObjective):
    """The decoder reads a prefix x[:, :P] bidirectionally and the rest causally, and is trained on every token
    after it, y[:, P-1:]. P is model.prefix_len, or with 0 (the default) half the window, T/2: then only the
    T - T/2 + 1 continuation tokens are scored, the same as encoder_decoder's (val/loss = val/cont_loss). A
    prefix_len P in 1 .. T/2 is obeyed: val/loss covers the T - P + 1 tokens after it, val/cont_loss still the
    continuation y[:, T/2-1:], which the model reads causally (a longer prefix would show it those tokens)."""

    NAME = "prefix_lm"
    ARCH = "decoder_only"
    MASKS = ("prefix",)

    @classmethod
    def check_model(cls, model: dict, window: int | None = None, arch: str | None = None) -> None:
        """model.prefix_len in 0 .. window / 2 (ValueError otherwise, naming the bound)."""
        super().check_model(model, window, arch)
        p = model.get("prefix_len") or 0
        if window and p > window // 2:
            raise ValueError(
                f"model.prefix_len={p} is longer than half the window (data.block_size={window}): the scored "
                f"continuation, the second half, would be read bidirectionally; give model.prefix_len <= "
                f"{window // 2}, or 0 for half the window"
            )

    def prefix(self, T: int) -> int:
        """The prefix length P of a window of T tokens (model.prefix_len, 0: T // 2). Raises ValueError when it
        is longer than T // 2."""
        p = self.model.cfg.prefix_len or T // 2
        self.check_model({"prefix_len": p, "mask": "prefix"}, T)
        return p

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        x, y = batch  # (B, T), (B, T)
        h, p = x.shape[1] // 2, self.prefix(x.shape[1])
        hidden, _ = self.model.features(x, prefix_len=p)  # (B, T, d_model): bidirectional over x[:, :p]
        loss, nll = self.head_loss(hidden[:, p - 1 :], y[:, p - 1 :], return_rows=True)  # nll (B, T - p + 1)
        cont = nll[:, h - p :]  # (B, T - h + 1): the continuation y[:, h-1:]
        return {"loss": loss, "cont": cont.mean(), "cont_windows": cont.mean(1)}

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the (B, T) batch (zoo.model.cost.batch_flops), the LM head over the T - P + 1
        positions losses projects."""
        B, T = batch[0].shape
        return batch_flops(self.model, B, T, scored=B * (T - self.prefix(T) + 1))
