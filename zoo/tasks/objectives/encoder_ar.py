"""encoder_ar: encoder_only translation by next-token prediction (ENTP, Ewer et al. 2024, on the joined
sequence): each target token y_j is predicted from its own row source </s> y_1 .. y_{j-1}, read
bidirectionally; decoding re-encodes prompt + hypothesis at every step (no KV cache)."""

import torch

from zoo.model.cost import batch_flops
from zoo.model.decoding.beam_search import beam_search_encoder_only
from zoo.model.decoding.generate import left_pad
from zoo.model.encoder_only import prefix_next_features
from zoo.tasks.objectives.base import TranslationObjective
from zoo.tasks.objectives.joined import joined
from zoo.tasks.objectives.nat import rank_in_row, uniform

AR_EVAL_TOKENS = 2**16  # padded tokens per forward of the exact loss (bounds its memory)


class EncoderAR(TranslationObjective):
    """The module docstring; task.encoder_ar_targets = K target positions per pair in training."""

    NAME = "encoder_ar"
    OPTIONS = ("encoder_ar_targets",)
    ARCH = "encoder_only"
    MASKS = (None, "bidirectional")  # a predicted token is never in its row
    SOURCE = "joined"
    ONE_VOCABULARY = True  # zoo trains one tokenizer a side: data.joint_vocab=true

    def targets_loss(self, batch, targets: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Label-smoothed next-token loss (nats) over the batch's real target tokens (EOS included).
        targets None: every target token, exact (rows in forwards of at most AR_EVAL_TOKENS padded tokens).
        targets K: per pair k = min(K, n) of its n target positions drawn uniformly without replacement
        (`generator`), in one forward whose rows have the longest joined length - 1 tokens; each loss weighted
        n / k, the sum divided by the batch's target tokens (unbiased; exact when every k = n)."""
        pad_id = self.model.cfg.pad_id
        seq, _, src_len, seq_len = joined(batch, pad_id)
        n = seq_len - src_len  # (B,) target tokens
        real = ~batch["tgt_key_padding_mask"]  # (B, T): the first n[b] entries of row b
        if targets is None:
            chosen, weight = real, torch.ones_like(n, dtype=torch.float)
        else:
            k = n.clamp(max=targets)
            chosen = (rank_in_row(uniform(real, generator), real) < k.unsqueeze(1)) & real
            weight = n / k.clamp(min=1)
        b, j = chosen.nonzero(as_tuple=True)  # (R,) pair and target offset of each row
        p = src_len[b] + j  # position of the target token in the joined sequence = its prefix length
        if targets is None:
            feats = prefix_next_features(self.model, seq, b, p, max_tokens=AR_EVAL_TOKENS, pad_id=pad_id)
        else:
            feats = prefix_next_features(self.model, seq, b, p, width=seq.shape[1] - 1, pad_id=pad_id)
        nll = self.head_loss(feats, seq[b, p], reduction="none", label_smoothing=self.hparams.label_smoothing)
        return (nll * weight[b]).sum() / n.sum()  # nll (R,)

    def loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        """The sampled training estimate: targets_loss with task.encoder_ar_targets positions per pair."""
        return self.targets_loss(batch, self.hparams.encoder_ar_targets, generator)

    def eval_loss(self, batch, batch_idx: int) -> dict:
        """The exact loss over every target token."""
        return {"loss": self.targets_loss(batch), "weight": (~batch["tgt_key_padding_mask"]).sum()}

    def batch_flops(self, batch) -> float:
        """One row per sampled target position (sum over pairs of min(K, target tokens)) of the longest joined
        sequence - 1 tokens, its LM head on one position per row (zoo.model.cost.batch_flops)."""
        n_src, n_tgt = (~batch["src_key_padding_mask"]).sum(1), (~batch["tgt_key_padding_mask"]).sum(1)
        rows = int(n_tgt.clamp(max=self.hparams.encoder_ar_targets).sum())
        return batch_flops(self.model, rows, int((n_src + n_tgt).max()) - 1, scored=rows)

    def inference_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """No cache: a token costs a whole forward over source + target prefix (src_len + seq_len tokens) with
        the LM head on one position."""
        return batch_flops(self.model, 1, seq_len + (src_len or 0), scored=1)

    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1) -> list:
        """The prompt is each source (ending with </s>), left-padded; every step re-encodes prompt + hypothesis
        bidirectionally and scores the next token at the last position. beam_size 1: greedy
        (EncoderOnly.generate, argmax); else beam_search_encoder_only (GNMT length penalty,
        task.early_stopping). Row b makes at most its source tokens + task.max_len_b new tokens (EOS
        included), within model.max_len."""
        src, src_key_padding_mask, cfg = batch["src"], batch["src_key_padding_mask"], self.model.cfg
        idx, key_padding_mask = left_pad(
            [r[~m].tolist() for r, m in zip(src, src_key_padding_mask)], cfg.pad_id, device=src.device
        )
        S = idx.shape[1]
        max_new = [
            max(0, min(n + self.hparams.max_len_b, cfg.max_len - S)) for n in (~src_key_padding_mask).sum(1).tolist()
        ]
        if beam_size > 1:
            out = beam_search_encoder_only(
                self.model,
                idx,
                key_padding_mask,
                beam_size,
                max_new,
                self.hparams.length_penalty,
                cfg.eos_id,
                early_stopping=self.hparams.early_stopping,
            )
        else:
            out = self.model.generate(
                idx, max(max_new), key_padding_mask=key_padding_mask, temperature=0.0, eos_id=cfg.eos_id
            )
        rows = out[:, S:]
        return [self.trim(rows[i : i + 1, :m])[0] for i, m in enumerate(max_new)]  # each row stops at its own limit
