"""cmlm_mask_predict: encoder_only translation as a conditional masked LM with mask-predict decoding
(Ghazvininejad et al. 2019, "Mask-Predict"; the rows and the decoding loop: zoo.tasks.objectives.nat).
Non-autoregressive: the length head picks the target length, every slot is predicted at once and the least
sure ones are re-predicted for task.nat_iterations rounds."""

import torch
import torch.nn.functional as F

from zoo.data.bpe import BOS_ID, CLS_ID, EOS_ID, MASK_ID, PAD_ID
from zoo.model.config import ModelConfig
from zoo.model.cost import batch_flops
from zoo.tasks.objectives.base import TranslationObjective
from zoo.tasks.objectives.nat import cmlm_mask, mask_predict, nat_inputs

NAT_BANNED = (PAD_ID, BOS_ID, EOS_ID, MASK_ID, CLS_ID)  # never predicted in a target slot


class CMLM(TranslationObjective):
    """The module docstring. Logs val/length_acc, the length head's accuracy, besides the token loss."""

    NAME = "cmlm_mask_predict"
    OPTIONS = ("nat_iterations", "length_loss_factor")
    ARCH = "encoder_only"
    MASKS = (None, "bidirectional")  # a predicted token is <mask> in its row
    METRICS = ("val/loss", "val/bleu", "val/chrf", "val/length_acc")
    SOURCE = "joined"
    ONE_VOCABULARY = True  # zoo trains one tokenizer a side: data.joint_vocab=true
    FIXED_SPECIAL_IDS = True  # [<cls>] source | <mask> slots (nat_inputs)

    @classmethod
    def check_options(cls, nat_iterations: int = 4, **options) -> None:
        """task.nat_iterations >= 1 (1 = one-pass NAT)."""
        if nat_iterations < 1:
            raise ValueError(f"task.nat_iterations={nat_iterations} must be >= 1 (1 = one-pass NAT)")

    @classmethod
    def model_fields(cls, model: dict) -> dict:
        """A length head over lengths 0 .. length_classes - 1 (default model.max_len)."""
        return {**model, "length_classes": model.get("length_classes") or model.get("max_len", ModelConfig.max_len)}

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        """{"token": label-smoothed cross-entropy (nats) averaged over the masked target tokens, "length":
        cross-entropy (nats) of the length head against the true target length L (EOS excluded),
        "length_acc": its top-1 accuracy, "n_masked": masked tokens (the token loss's weight)}. Raises
        ValueError when a target is longer than model.length_classes - 1."""
        lengths = (~batch["tgt_key_padding_mask"]).sum(1) - 1  # (B,) target tokens without EOS
        classes = self.model.cfg.length_classes
        if int(lengths.max()) >= classes:
            raise ValueError(
                f"a target has {int(lengths.max())} tokens, but the length head predicts at most "
                f"{classes - 1}: raise model.length_classes or lower data.max_len"
            )
        pad_id = self.model.cfg.pad_id
        seq, key_padding_mask, slots, source_len = nat_inputs(
            batch["src"], batch["src_key_padding_mask"], lengths, pad_id, CLS_ID, MASK_ID, tgt=batch["tgt_out"]
        )
        chosen = cmlm_mask(slots, generator)  # (B, N)
        feats, length_logits = self.model.cmlm_features(
            seq.masked_fill(chosen, MASK_ID), key_padding_mask, source_len, at=chosen
        )  # (n, d_model): the LM head runs inside zoo.model.loss.chunked_ce
        token = self.head_loss(feats, seq[chosen], label_smoothing=self.hparams.label_smoothing)
        length = F.cross_entropy(length_logits.float(), lengths)
        acc = (length_logits.argmax(-1) == lengths).float().mean()
        return {"token": token, "length": length, "length_acc": acc, "n_masked": chosen.sum()}

    def loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        """The token loss over the masked target tokens + task.length_loss_factor x the length loss."""
        out = self.losses(batch, generator)
        return out["token"] + self.hparams.length_loss_factor * out["length"]

    def eval_loss(self, batch, batch_idx: int) -> dict:
        """The masked-token loss (masks seeded by batch_idx: the same at every validation) and the length
        accuracy."""
        g = torch.Generator(device=batch["src"].device).manual_seed(batch_idx)
        out = self.losses(batch, g)
        return {"loss": out["token"], "weight": out["n_masked"], "length_acc": (out["length_acc"], len(batch["src"]))}

    def batch_flops(self, batch) -> float:
        """One [<cls>] source target row (B, 1 + S + T), its LM head on about half the target slots (the
        expected share a CMLM mask chooses) (zoo.model.cost.batch_flops)."""
        (B, S), T = batch["src"].shape, batch["tgt_out"].shape[1]
        return batch_flops(self.model, B, 1 + S + T, scored=B * T // 2)

    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1, iterations: int | None = None) -> list:
        """Mask-predict decoding with beam_size length candidates (Ghazvininejad et al. 2019, sec. 3): the
        length head on a source-only pass ([<cls>] source; the source side never sees the slots, so this equals
        its value in any later pass) gives the `beam_size` most likely lengths 1 <= L <= source tokens +
        task.max_len_b that fit in model.max_len (the autoregressive decoders' limit); each candidate starts
        with L <mask> slots and runs `iterations` (default task.nat_iterations) rounds of
        zoo.tasks.objectives.nat.mask_predict; per source the candidate with the highest mean log-probability of
        its tokens wins. Returns B token-id lists."""
        src, src_key_padding_mask = batch["src"], batch["src_key_padding_mask"]
        B, iterations, pad_id = src.shape[0], iterations or self.hparams.nat_iterations, self.model.cfg.pad_id
        seq, key_padding_mask, _, source_len = nat_inputs(
            src, src_key_padding_mask, torch.zeros_like(src[:, 0]), pad_id, CLS_ID, MASK_ID
        )
        _, length_logits = self.model.cmlm(seq, key_padding_mask, source_len)  # (B, C)
        # (B,) at most: the slots that still fit, and source tokens + max_len_b (the autoregressive decoders' rule;
        # an untrained length head would otherwise ask for every slot up to model.max_len)
        room = torch.minimum(
            self.model.cfg.max_len - source_len, (~src_key_padding_mask).sum(1) + self.hparams.max_len_b
        )
        cand = torch.arange(length_logits.shape[1], device=src.device).unsqueeze(0)
        length_logits = length_logits.masked_fill((cand < 1) | (cand > room.unsqueeze(1)), float("-inf"))
        k = max(1, min(beam_size, length_logits.shape[1] - 1))
        top, lengths = length_logits.topk(k, dim=1)  # (B, k)
        lengths = torch.where(top.isfinite(), lengths, lengths[:, :1]).clamp(max=room.clamp(min=0).unsqueeze(1))
        lengths = lengths.flatten()  # (B k,) row b's candidates at b k .. b k + k - 1
        seq, key_padding_mask, slots, source_len = nat_inputs(
            src.repeat_interleave(k, 0), src_key_padding_mask.repeat_interleave(k, 0), lengths, pad_id, CLS_ID, MASK_ID
        )
        tokens, log_probs = mask_predict(
            lambda s, at: self.model.cmlm(s, key_padding_mask, source_len, at)[0],
            seq,
            slots,
            iterations,
            MASK_ID,
            NAT_BANNED,
        )
        score = (log_probs * slots).sum(1) / lengths.clamp(min=1)  # mean log p over the slots
        best = score.view(B, k).argmax(1) + torch.arange(B, device=src.device) * k  # (B,) row indices
        return [tokens[r][slots[r]].tolist() for r in best.tolist()]
