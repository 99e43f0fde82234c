"""The two encoder_only objectives of zoo.tasks.translation.Translation, as a mixin: "encoder_ar", ENTP
(Ewer et al. 2024, "Encoder-only Next Token Prediction"), and "cmlm_mask_predict", a conditional masked LM
with mask-predict decoding (Ghazvininejad et al. 2019, "Mask-Predict"; rows and decoding: zoo.tasks.nat).
Also the joined source + target sequence that decoder_only and encoder_ar read."""

import torch
import torch.nn.functional as F

from zoo.data.bpe import BOS_ID, CLS_ID, EOS_ID, MASK_ID, PAD_ID
from zoo.model.beam_search import beam_search_encoder_only
from zoo.model.chunked_ce import lm_head_cross_entropy
from zoo.model.encoder_only import prefix_next_features
from zoo.model.generate import left_pad
from zoo.tasks.nat import cmlm_mask, mask_predict, nat_inputs, rank_in_row, uniform

NAT_BANNED = (PAD_ID, BOS_ID, EOS_ID, MASK_ID, CLS_ID)  # never predicted in a target slot
AR_EVAL_TOKENS = 2**16  # padded tokens per forward of encoder_ar's exact loss (bounds its memory)


def join_source_target(src, src_key_padding_mask, tgt_out, tgt_key_padding_mask, pad_id: int):
    """One decoder-only sequence per pair: the source's real tokens (ending with EOS, the separator), then
    the target's real tokens (ending with EOS). src (B, S), tgt_out (B, T) right-padded, masks True = padding.
    Returns (seq (B, L) right-padded, key_padding_mask (B, L), src_len (B,) long, seq_len (B,) long)."""
    src_len = (~src_key_padding_mask).sum(1)  # (B,)
    tgt_len = (~tgt_key_padding_mask).sum(1)
    seq_len = src_len + tgt_len
    L = int(seq_len.max())
    seq = torch.full((src.shape[0], L), pad_id, dtype=torch.long, device=src.device)
    pos = torch.arange(L, device=src.device).unsqueeze(0)  # (1, L)
    is_src = pos < src_len.unsqueeze(1)
    is_tgt = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
    seq[is_src] = src[~src_key_padding_mask]
    seq[is_tgt] = tgt_out[~tgt_key_padding_mask]
    return seq, ~(is_src | is_tgt), src_len, seq_len


class EncoderOnlyTranslation:
    """Losses and decoding of Translation's encoder_only objectives (self: a Translation)."""

    def encoder_ar_loss(
        self, batch, targets: int | None = None, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """encoder_ar's label-smoothed next-token loss (nats) over the batch's real target tokens (EOS included),
        each target token y_j predicted from its own row source </s> y_1 .. y_{j-1}, read bidirectionally.
        targets None: every target token, exact (rows in forwards of at most AR_EVAL_TOKENS padded tokens).
        targets K: per pair k = min(K, n) of its n target positions drawn uniformly without replacement
        (`generator`), in one forward whose rows have the longest joined length - 1 tokens; each loss weighted
        n / k, the sum divided by the batch's target tokens (unbiased; exact when every k = n)."""
        seq, _, src_len, seq_len = join_source_target(
            batch["src"], batch["src_key_padding_mask"], batch["tgt_out"], batch["tgt_key_padding_mask"], self.pad_id
        )
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
            feats = prefix_next_features(self.model, seq, b, p, max_tokens=AR_EVAL_TOKENS, pad_id=self.pad_id)
        else:
            feats = prefix_next_features(self.model, seq, b, p, width=seq.shape[1] - 1, pad_id=self.pad_id)
        nll = lm_head_cross_entropy(  # zoo.model.chunked_ce: the (R, V) logits never built
            self.model.lm_head,
            feats,
            seq[b, p],
            reduction="none",
            label_smoothing=self.hparams.label_smoothing,
            chunk_size=self.model.cfg.loss_chunk_size,
            z_loss=self.head_z_loss(),
        )  # (R,)
        return (nll * weight[b]).sum() / n.sum()

    def nat_losses(self, batch, generator: torch.Generator | None = None) -> dict:
        """encoder_only's CMLM losses for a batch: {"token": label-smoothed cross-entropy (nats) averaged over
        the masked target tokens, "length": cross-entropy (nats) of the length head against the true target
        length L (EOS excluded), "length_acc": its top-1 accuracy, "n_masked": masked tokens (the token
        loss's weight)}. Raises ValueError when a target is longer than model.length_classes - 1."""
        lengths = (~batch["tgt_key_padding_mask"]).sum(1) - 1  # (B,) target tokens without EOS
        classes = self.model.cfg.length_classes
        if int(lengths.max()) >= classes:
            raise ValueError(
                f"a target has {int(lengths.max())} tokens, but the length head predicts at most "
                f"{classes - 1}: raise model.length_classes or lower data.max_len"
            )
        seq, key_padding_mask, slots, source_len = nat_inputs(
            batch["src"], batch["src_key_padding_mask"], lengths, self.pad_id, CLS_ID, MASK_ID, tgt=batch["tgt_out"]
        )
        chosen = cmlm_mask(slots, generator)  # (B, N)
        feats, length_logits = self.model.cmlm_features(
            seq.masked_fill(chosen, MASK_ID), key_padding_mask, source_len, at=chosen
        )  # (n, d_model): the LM head runs inside zoo.model.chunked_ce
        token = lm_head_cross_entropy(
            self.model.lm_head,
            feats,
            seq[chosen],
            label_smoothing=self.hparams.label_smoothing,
            chunk_size=self.model.cfg.loss_chunk_size,
            z_loss=self.head_z_loss(),
        )
        length = F.cross_entropy(length_logits.float(), lengths)
        acc = (length_logits.argmax(-1) == lengths).float().mean()
        return {"token": token, "length": length, "length_acc": acc, "n_masked": chosen.sum()}

    @torch.no_grad()
    def translate_ar(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor, beam_size: int = 1) -> list:
        """encoder_ar decoding: the prompt is each source (ending with </s>), left-padded; every step re-encodes
        prompt + hypothesis bidirectionally and scores the next token at the last position. beam_size 1:
        greedy (EncoderOnly.generate, argmax); else beam_search_encoder_only (GNMT length penalty,
        task.early_stopping). Row b makes at most its source tokens + task.max_len_b new tokens (EOS included),
        within model.max_len. src (B, S) right-padded, src_key_padding_mask (B, S) True = padding. Returns B
        token-id lists (cut at EOS, padding removed)."""
        cfg = self.model.cfg
        idx, key_padding_mask = left_pad(
            [r[~m].tolist() for r, m in zip(src, src_key_padding_mask)], self.pad_id, device=src.device
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
        hyps = []
        for row, m in zip(out[:, S:].tolist(), max_new):
            row = row[:m]  # greedy runs to the longest row's limit; each row stops at its own
            row = row[: row.index(cfg.eos_id)] if cfg.eos_id in row else row
            hyps.append([t for t in row if t != self.pad_id])
        return hyps

    @torch.no_grad()
    def translate_nat(
        self, src: torch.Tensor, src_key_padding_mask: torch.Tensor, length_beam: int = 1, iterations: int | None = None
    ) -> list:
        """Non-autoregressive decoding (Ghazvininejad et al. 2019, sec. 3): the length head on a source-only
        pass ([<cls>] source; the source side never sees the slots, so this equals its value in any later
        pass) gives the `length_beam` most likely lengths 1 <= L <= source tokens + task.max_len_b that fit in
        model.max_len (the autoregressive decoders' limit); each candidate
        starts with L <mask> slots and runs `iterations` (default task.nat_iterations) rounds of
        zoo.tasks.nat.mask_predict; per source the candidate with the highest mean log-probability of its
        tokens wins. src (B, S) right-padded, src_key_padding_mask (B, S) True = padding. Returns B token-id
        lists."""
        B, iterations = src.shape[0], iterations or self.hparams.nat_iterations
        seq, key_padding_mask, _, source_len = nat_inputs(
            src, src_key_padding_mask, torch.zeros_like(src[:, 0]), self.pad_id, CLS_ID, MASK_ID
        )
        _, length_logits = self.model.cmlm(seq, key_padding_mask, source_len)  # (B, C)
        # (B,) at most: the slots that still fit, and source tokens + max_len_b (the autoregressive decoders' rule;
        # an untrained length head would otherwise ask for every slot up to model.max_len)
        room = torch.minimum(
            self.model.cfg.max_len - source_len, (~src_key_padding_mask).sum(1) + self.hparams.max_len_b
        )
        cand = torch.arange(length_logits.shape[1], device=src.device).unsqueeze(0)
        length_logits = length_logits.masked_fill((cand < 1) | (cand > room.unsqueeze(1)), float("-inf"))
        k = max(1, min(length_beam, length_logits.shape[1] - 1))
        top, lengths = length_logits.topk(k, dim=1)  # (B, k)
        lengths = torch.where(top.isfinite(), lengths, lengths[:, :1]).clamp(max=room.clamp(min=0).unsqueeze(1))
        lengths = lengths.flatten()  # (B k,) row b's candidates at b k .. b k + k - 1
        seq, key_padding_mask, slots, source_len = nat_inputs(
            src.repeat_interleave(k, 0),
            src_key_padding_mask.repeat_interleave(k, 0),
            lengths,
            self.pad_id,
            CLS_ID,
            MASK_ID,
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
