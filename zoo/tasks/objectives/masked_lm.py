"""masked_lm: encoder_only's masked language model (BERT; Devlin et al. 2019, sec. 3.1). 15% of positions
are chosen; 80% of them become a <mask> token (one id past the data's vocabulary, added by model_fields),
10% a random token, 10% stay; the loss is on the chosen positions only. val/loss is the masked-token loss
and val/mlm_acc its accuracy: a different objective, not comparable with the next-token numbers.
Validation masks are fixed (seeded by the batch index)."""

import torch
import torch.nn.functional as F

from zoo.model.cost import batch_flops
from zoo.tasks.objectives.base import LMObjective

MASK_RATE = 0.15  # Devlin et al. 2019, sec. 3.1


class MaskedLM(LMObjective):
    """BERT's masked LM (the module docstring). The task's mask_id is the <mask> row: the last of the
    embedding's model.vocab_size rows."""

    NAME = "masked_lm"
    ARCH = "encoder_only"
    METRICS = ("val/loss", "val/ppl", "val/bpc", "val/mlm_acc")

    @classmethod
    def model_fields(cls, model: dict) -> dict:
        """One row more than the data's vocabulary: <mask> (id = the data's vocab_size)."""
        return {**model, "vocab_size": model["vocab_size"] + 1}

    @classmethod
    def task_fields(cls, model: dict) -> dict:
        """mask_id: the <mask> row model_fields adds, the data's vocab_size."""
        return {"mask_id": model["vocab_size"]}

    def mask_tokens(self, x: torch.Tensor, generator=None):
        """BERT masking of x (B, T): returns (inputs (B, T), chosen (B, T) bool). 15% chosen; of those 80%
        <mask>, 10% a random token, 10% unchanged."""
        mask_id = self.task.mask_id
        u = torch.rand(x.shape, generator=generator, device=x.device)
        v = torch.rand(x.shape, generator=generator, device=x.device)
        chosen = u < MASK_RATE
        random_ids = torch.randint(0, mask_id, x.shape, generator=generator, device=x.device)
        inputs = torch.where(chosen & (v < 0.8), torch.full_like(x, mask_id), x)
        inputs = torch.where(chosen & (v >= 0.8) & (v < 0.9), random_ids, inputs)
        return inputs, chosen

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        x, _ = batch  # (B, T)
        inputs, chosen = self.mask_tokens(x, generator)
        logits = self.model.lm_head(self.model.encode(inputs)[chosen]).float()  # (n_chosen, V + 1): for the accuracy
        target = x[chosen]
        loss = F.cross_entropy(logits, target)
        if self.task.head_z_loss():  # PaLM's z-loss over the same masked positions
            loss = loss + self.task.head_z_loss() * logits.logsumexp(-1).square().mean()
        return {"loss": loss, "acc": (logits.argmax(-1) == target).float().mean()}

    def validation_generator(self, batch_idx: int, device) -> torch.Generator:
        """Seeded by the batch index: the same masks at every validation."""
        return torch.Generator(device=device).manual_seed(batch_idx)

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the (B, T) batch with the LM head on the expected 15% of masked positions."""
        B, T = batch[0].shape
        return batch_flops(self.model, B, T, scored=round(MASK_RATE * B * T))
