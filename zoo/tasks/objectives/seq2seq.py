"""translation on encoder_decoder: the original Transformer's teacher forcing (Vaswani et al. 2017). The
encoder reads the source, the decoder reads tgt_in (the target shifted right, BOS first) and predicts
tgt_out; label-smoothed cross-entropy, padding ignored by position."""

import torch

from zoo.model.cost import batch_flops
from zoo.model.decoding.beam_search import beam_search
from zoo.tasks.objectives.base import IGNORE, TranslationObjective


class Seq2Seq(TranslationObjective):
    """Teacher-forced encoder_decoder translation; greedy decoding with the KV cache, or beam search."""

    NAME = "translation"
    ARCH = "encoder_decoder"
    MASKS = (None, "causal", "sliding")  # the decoder must not see the next target token
    SOURCE = "apart"

    def loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        memory = self.model.encode(batch["src"], batch["src_key_padding_mask"])  # (B, S, d_model)
        hidden, _ = self.model.decode_features(
            batch["tgt_in"], memory, batch["tgt_key_padding_mask"], batch["src_key_padding_mask"]
        )  # (B, T, d_model)
        target = batch["tgt_out"].masked_fill(batch["tgt_key_padding_mask"], IGNORE)
        return self.head_loss(hidden, target, ignore_index=IGNORE, label_smoothing=self.hparams.label_smoothing)

    def batch_flops(self, batch) -> float:
        """Source (B, S) and target (B, T) at their padded shapes (zoo.model.cost.batch_flops)."""
        (B, S), T = batch["src"].shape, batch["tgt_out"].shape[1]
        return batch_flops(self.model, B, T, S)

    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1) -> list:
        """Greedy (beam_size 1) within source tokens + task.max_len_b new tokens and model.max_len, or beam
        search (GNMT length penalty, task.early_stopping; zoo.model.decoding.beam_search)."""
        src, src_key_padding_mask = batch["src"], batch["src_key_padding_mask"]
        max_new = min(int((~src_key_padding_mask).sum(1).max()) + self.hparams.max_len_b, self.model.cfg.max_len - 1)
        if beam_size > 1:
            out = beam_search(
                self.model,
                src,
                src_key_padding_mask,
                beam_size,
                None,
                self.hparams.length_penalty,
                early_stopping=self.hparams.early_stopping,
            )
        else:
            out = self.model.generate(src, max_new, src_key_padding_mask=src_key_padding_mask, temperature=0.0)
        return self.trim(out[:, 1:])
