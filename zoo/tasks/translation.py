"""Translation as a LightningModule: encoder_decoder (standard), decoder_only (source, separator,
target as one sequence; mask=causal or mask=prefix: the "LM vs prefix LM" comparison of T5) and encoder_only
(autoregressive by default, "encoder_ar": source, separator, target prefix re-read bidirectionally at every
step, as ENTP; or task.objective=cmlm_mask_predict, non-autoregressive: a conditional masked LM with a length
head, mask-predict decoding; zoo.tasks.nat)."""
import time
from typing import Optional

import sacrebleu
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import BOS_ID, CLS_ID, EOS_ID, MASK_ID, PAD_ID, SubwordTokenizer
from zoo.data.resolver import DataError
from zoo.model import ModelConfig, build_model
from zoo.model.beam_search import (beam_search, beam_search_decoder_only, beam_search_encoder_only,
                                   check_early_stopping)
from zoo.model.chunked_ce import lm_head_cross_entropy
from zoo.model.cost import batch_flops
from zoo.model.encoder_only import prefix_next_logits
from zoo.model.generate import left_pad
from zoo.model_config_from_data import for_objective
from zoo.tasks.base import TaskBase
from zoo.tasks.nat import cmlm_mask, mask_predict, nat_inputs, rank_in_row, uniform

IGNORE = -100  # target positions the loss skips, chosen by position (padding, source), never by token id
NAT_BANNED = (PAD_ID, BOS_ID, EOS_ID, MASK_ID, CLS_ID)  # never predicted in a target slot
AR_EVAL_TOKENS = 2 ** 16  # padded tokens per forward of encoder_ar's exact loss (bounds its memory)

def join_source_target(src, src_kpm, tgt_out, tgt_kpm, pad_id: int):
    """One decoder-only sequence per pair: the source's real tokens (ending with EOS, the separator), then
    the target's real tokens (ending with EOS). src (B, S), tgt_out (B, T) right-padded, masks True = padding.
    Returns (seq (B, L) right-padded, key_padding_mask (B, L), src_len (B,) long, seq_len (B,) long)."""
    src_len = (~src_kpm).sum(1)  # (B,)
    tgt_len = (~tgt_kpm).sum(1)
    seq_len = src_len + tgt_len
    L = int(seq_len.max())
    seq = torch.full((src.shape[0], L), pad_id, dtype=torch.long, device=src.device)
    pos = torch.arange(L, device=src.device).unsqueeze(0)  # (1, L)
    is_src = pos < src_len.unsqueeze(1)
    is_tgt = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
    seq[is_src] = src[~src_kpm]
    seq[is_tgt] = tgt_out[~tgt_kpm]
    return seq, ~(is_src | is_tgt), src_len, seq_len


class Translation(TaskBase):
    """Label-smoothed cross-entropy with teacher forcing (target shifted right, BOS first), padding ignored
    exactly by position (F.cross_entropy(ignore_index=IGNORE, label_smoothing)); sacreBLEU and chrF on detokenized text.

    encoder_decoder: the encoder reads the source, the decoder reads tgt_in and predicts tgt_out.
    decoder_only: the sequence source + EOS + target + EOS, loss on the target tokens only; model.mask
    causal or prefix (bidirectional over source + separator: prefix_len = source length per row).
    Validation: val/loss each epoch, and val/bleu, val/chrf from greedy decoding (KV cache) every
    `bleu_every` validations. Test (the best checkpoint): test/bleu (greedy), test/chrf, and with
    beam_size > 1 test/bleu_beam, test/chrf_beam (beam search, GNMT length penalty, max length = source
    length + max_len_b, stopping rule early_stopping: never | true | false, zoo.model.beam_search).
    Batches: zoo.data.parallel_text.collate_translation dicts. After test: `examples` {task, split, ids, hyp,
    ref, hyp_beam} (detokenized test hypotheses, for paired tests; one process only) and `ms_per_example`
    (test wall time per sentence, greedy and beam decoding included).

    encoder_only, "encoder_ar" (default): autoregressive as ENTP (Ewer et al. 2024, "Encoder-only Next Token
    Prediction"): the row source </s> y_1 .. y_{j-1} (decoder_only's joined sequence cut after the prefix)
    is read whole and bidirectionally, again at every step (no causal mask, no KV cache), and the LM head on
    its last position predicts y_j (the first target token from source </s>; EOS ends it). val/loss (test/loss):
    the same label-smoothed next-token loss as the other archs, over every real target token, exact (one
    right-padded row per target token, zoo.model.encoder_only.prefix_next_logits). Training: per pair
    k = min(task.encoder_ar_targets, target tokens) distinct target positions drawn uniformly, one row each
    (width the batch's longest joined sequence - 1), each loss weighted by target tokens / k, over the batch's
    target tokens: an unbiased estimate of that loss (equal to it when k covers every target). Decoding:
    greedy (EncoderOnly.generate) and beam search (beam_search_encoder_only: the same beam_core, length penalty
    and early_stopping), re-encoding every hypothesis each step; at most source tokens + max_len_b new tokens
    per sentence. A step costs about k forwards of the pair (batch_flops), a token one forward over source +
    target prefix (inference_flops_per_token).

    encoder_only, "cmlm_mask_predict" (task.objective=cmlm_mask_predict), non-autoregressive (Mask-Predict,
    Ghazvininejad et al. 2019; fairseq's cmlm): one row
    [<cls>] source </s> y_1 .. y_L (zoo.tasks.nat), the target without EOS. Training (CMLM): L = the true
    length; n ~ Uniform{1..L} target tokens are replaced by <mask>, and the token loss (label smoothed) is on
    those n only; the other target tokens stay visible as observed context. A length head on the <cls>
    state predicts L (cross-entropy over lengths 0 .. model.length_classes - 1; length_classes defaults to
    model.max_len); the training loss is token loss + length_loss_factor x length loss (fairseq's NAT
    length-loss factor, 0.1). The mask is bidirectional and does not leak: every target token the loss is on
    is replaced by <mask> in the input, and the source side (with <cls>) attends only to itself
    (EncoderOnly's source_len mask), so the length head cannot count the slots. val/loss (test/loss) is the
    masked-token loss (fixed, seeded masks; a different quantity from the autoregressive archs' loss, not
    comparable), val/length_acc (test/length_acc) the length head's top-1 accuracy.
    Decoding: the length head on a source-only pass gives the top `beam_size` lengths (1 for val/bleu and
    test/bleu; Mask-Predict's length beam for test/bleu_beam), every slot starts as <mask>, then
    `nat_iterations` rounds of mask-predict (1 = one-pass NAT); the length candidate with the highest mean
    log-probability wins. Special tokens are never predicted. Both encoder_only objectives need one vocabulary
    (data.joint_vocab=true). objective: None = the arch's default (OBJECTIVES[arch][0]); one the arch cannot
    train is refused (ValueError).
    """

    ARCHS = ("encoder_decoder", "decoder_only", "encoder_only")
    BATCH = "translation"  # the batches it reads: any datamodule whose batches keep BATCH_CONTRACT
    BATCH_CONTRACT = {"src": (torch.long, 2), "src_key_padding_mask": (torch.bool, 2), "tgt_in": (torch.long, 2),
                      "tgt_out": (torch.long, 2), "tgt_key_padding_mask": (torch.bool, 2), "index": (torch.long, 1)}
    VAL_METRICS = {  # per arch, what task.monitor may name: the validation metrics it logs
        "encoder_decoder": ("val/loss", "val/bleu", "val/chrf"),
        "decoder_only": ("val/loss", "val/bleu", "val/chrf"),
        "encoder_only": ("val/loss", "val/bleu", "val/chrf", "val/length_acc")}  # length_acc: cmlm_mask_predict's
    # per arch, the objectives it trains, its default first
    OBJECTIVES = {"encoder_decoder": ("translation",), "decoder_only": ("translation",),
                  "encoder_only": ("encoder_ar", "cmlm_mask_predict")}
    MASKS = {"encoder_decoder": (None, "causal", "sliding"),  # the decoder must not see the next target token
             "decoder_only": (None, "causal", "prefix", "sliding"),  # prefix: bidirectional over the source only
             "encoder_only": (None, "bidirectional")}  # a predicted token is never in its row (ar) or is <mask> (cmlm)
    JOINS_SOURCE_AND_TARGET = True  # decoder_only and encoder_only read source + target as one sequence

    def __init__(self, arch: str, model: dict, tokenizer: dict, optimizer: dict, scheduler: dict,
                 label_smoothing: float = 0.1, beam_size: int = 4, length_penalty: float = 0.6, max_len_b: int = 50,
                 bleu_every: int = 1, table_rows: int = 20, monitor: str = "val/bleu", monitor_mode: str = "max",
                 nat_iterations: int = 4, length_loss_factor: float = 0.1, early_stopping="never",
                 objective: Optional[str] = None, encoder_ar_targets: int = 4):
        super().__init__()
        check_early_stopping(early_stopping)
        if arch not in self.ARCHS:
            raise ValueError(f"task=translation trains arch in {self.ARCHS}; got arch={arch!r}")
        if objective is None:
            objective = self.OBJECTIVES[arch][0]
        if objective not in self.OBJECTIVES[arch]:
            owner = [a for a, objs in self.OBJECTIVES.items() if objective in objs]
            why = f"it is +arch={owner[0]}'s" if owner else "it is unknown"
            raise ValueError(f"task.objective={objective} cannot train +arch={arch} in task=translation ({why}); "
                             f"+arch={arch} trains {', '.join(self.OBJECTIVES[arch])} "
                             f"(task.objective=null: its default)")
        if monitor == "val/length_acc" and objective != "cmlm_mask_predict":
            raise ValueError(f"task.monitor=val/length_acc is logged by task.objective=cmlm_mask_predict only, not "
                             f"{objective}; monitor val/loss, val/bleu or val/chrf")
        if encoder_ar_targets < 1:
            raise ValueError(f"task.encoder_ar_targets={encoder_ar_targets} must be >= 1 (target positions per pair)")
        self.objective = objective  # results.json; saved resolved, so a checkpoint rebuilds what it trained
        if arch == "encoder_only" and tokenizer["src"] != tokenizer["tgt"]:
            raise DataError("encoder_only translation reads source and target as one sequence, so it needs "
                            "one vocabulary: set data.joint_vocab=true")
        if objective == "cmlm_mask_predict":
            if nat_iterations < 1:
                raise ValueError(f"task.nat_iterations={nat_iterations} must be >= 1 (1 = one-pass NAT)")
        model = for_objective(objective, model)  # saved below, so checkpoints rebuild the length head
        self.save_hyperparameters()
        self.model = build_model(arch, ModelConfig(**model))
        self.tgt_tokenizer = SubwordTokenizer.from_state_dict(tokenizer["tgt"])
        self.pad_id = self.model.cfg.pad_id
        self.losses = torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        self.length_acc = (torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})  # the NAT length head's
                           if objective == "cmlm_mask_predict" else None)
        self.hyps = {"val": {}, "test": {}, "test_beam": {}}
        self._validations = 0

    # ---- training ------------------------------------------------------------------------------------
    def loss(self, batch, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """Mean label-smoothed cross-entropy (nats) over the target's real tokens; encoder_ar: its sampled
        estimate (`encoder_ar_loss`, positions drawn with `generator`); cmlm_mask_predict: over the masked target
        tokens, plus length_loss_factor x the length loss (`nat_losses`, masks drawn with `generator`)."""
        if self.objective == "encoder_ar":
            return self.encoder_ar_loss(batch, self.hparams.encoder_ar_targets, generator)
        if self.objective == "cmlm_mask_predict":
            out = self.nat_losses(batch, generator)
            return out["token"] + self.hparams.length_loss_factor * out["length"]
        if self.hparams.arch == "encoder_decoder":
            memory = self.model.encode(batch["src"], batch["src_key_padding_mask"])  # (B, S, d_model)
            hidden, _ = self.model.decode_features(batch["tgt_in"], memory, batch["tgt_key_padding_mask"],
                                                   batch["src_key_padding_mask"])  # (B, T, d_model)
            target = batch["tgt_out"].masked_fill(batch["tgt_key_padding_mask"], IGNORE)
        else:
            seq, kpm, src_len, seq_len = join_source_target(batch["src"], batch["src_key_padding_mask"],
                                                            batch["tgt_out"], batch["tgt_key_padding_mask"], self.pad_id)
            hidden, _ = self.model.features(seq[:, :-1], key_padding_mask=kpm[:, :-1], prefix_len=src_len)  # (B, L-1, d)
            pos = torch.arange(1, seq.shape[1], device=seq.device).unsqueeze(0)  # position of each target token
            on_target = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
            target = seq[:, 1:].masked_fill(~on_target, IGNORE)
        # the LM head and the loss chunk by chunk: the (B T, V) logits are never built (zoo.model.chunked_ce)
        return lm_head_cross_entropy(self.model.lm_head, hidden, target, ignore_index=IGNORE,
                                     label_smoothing=self.hparams.label_smoothing,
                                     chunk_size=self.model.cfg.loss_chunk_size)

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the training forward pass of `batch` at its padded shapes (zoo.model.cost.batch_flops):
        encoder_decoder source (B, S) and target (B, T); decoder_only the joined sequence (B, S + T - 1);
        encoder_ar one row per sampled target position (sum over pairs of min(K, target tokens)) of the longest
        joined sequence - 1 tokens, its LM head on one position per row; cmlm_mask_predict one [<cls>] source
        target row (B, 1 + S + T), its LM head on about half the target slots (the expected share a CMLM mask
        chooses)."""
        (B, S), T = batch["src"].shape, batch["tgt_out"].shape[1]
        if self.hparams.arch == "encoder_decoder":
            return batch_flops(self.model, B, T, S)
        if self.hparams.arch == "decoder_only":
            return batch_flops(self.model, B, S + T - 1)
        if self.objective == "encoder_ar":
            n_src, n_tgt = (~batch["src_key_padding_mask"]).sum(1), (~batch["tgt_key_padding_mask"]).sum(1)
            rows = int(n_tgt.clamp(max=self.hparams.encoder_ar_targets).sum())
            return batch_flops(self.model, rows, int((n_src + n_tgt).max()) - 1, scored=rows)
        return batch_flops(self.model, B, 1 + S + T, scored=B * T // 2)

    def inference_flops_per_token(self, seq_len: int, src_len: Optional[int] = None) -> float:
        """Forward FLOPs per generated token; encoder_ar has no cache, so a token costs a whole forward over
        source + target prefix (src_len + seq_len tokens) with the LM head on one position."""
        if self.objective == "encoder_ar":
            return batch_flops(self.model, 1, seq_len + (src_len or 0), scored=1)
        return super().inference_flops_per_token(seq_len, src_len)

    def encoder_ar_loss(self, batch, targets: Optional[int] = None,
                        generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """encoder_ar's label-smoothed next-token loss (nats) over the batch's real target tokens (EOS included),
        each target token y_j predicted from its own row source </s> y_1 .. y_{j-1}, read bidirectionally.
        targets None: every target token, exact (rows in forwards of at most AR_EVAL_TOKENS padded tokens).
        targets K: per pair k = min(K, n) of its n target positions drawn uniformly without replacement
        (`generator`), in one forward whose rows have the longest joined length - 1 tokens; each loss weighted
        n / k, the sum divided by the batch's target tokens (unbiased; exact when every k = n)."""
        seq, _, src_len, seq_len = join_source_target(batch["src"], batch["src_key_padding_mask"], batch["tgt_out"],
                                                      batch["tgt_key_padding_mask"], self.pad_id)
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
            logits = prefix_next_logits(self.model, seq, b, p, max_tokens=AR_EVAL_TOKENS, pad_id=self.pad_id)
        else:
            logits = prefix_next_logits(self.model, seq, b, p, width=seq.shape[1] - 1, pad_id=self.pad_id)
        nll = F.cross_entropy(logits.float(), seq[b, p], reduction="none",
                              label_smoothing=self.hparams.label_smoothing)  # (R,)
        return (nll * weight[b]).sum() / n.sum()

    def nat_losses(self, batch, generator: Optional[torch.Generator] = None) -> dict:
        """encoder_only's CMLM losses for a batch: {"token": label-smoothed cross-entropy (nats) averaged over
        the masked target tokens, "length": cross-entropy (nats) of the length head against the true target
        length L (EOS excluded), "length_acc": its top-1 accuracy, "n_masked": masked tokens (the token
        loss's weight)}. Raises ValueError when a target is longer than model.length_classes - 1."""
        kpm_t = batch["tgt_key_padding_mask"]
        lengths = (~kpm_t).sum(1) - 1  # (B,) target tokens without EOS
        classes = self.model.cfg.length_classes
        if int(lengths.max()) >= classes:
            raise ValueError(f"a target has {int(lengths.max())} tokens, but the length head predicts at most "
                             f"{classes - 1}: raise model.length_classes or lower data.max_len")
        seq, kpm, slots, source_len = nat_inputs(batch["src"], batch["src_key_padding_mask"], lengths, self.pad_id,
                                                 CLS_ID, MASK_ID, tgt=batch["tgt_out"])
        chosen = cmlm_mask(slots, generator)  # (B, N)
        logits, length_logits = self.model.cmlm(seq.masked_fill(chosen, MASK_ID), kpm, source_len, at=chosen)
        token = F.cross_entropy(logits.float(), seq[chosen], label_smoothing=self.hparams.label_smoothing)
        length = F.cross_entropy(length_logits.float(), lengths)
        acc = (length_logits.argmax(-1) == lengths).float().mean()
        return {"token": token, "length": length, "length_acc": acc, "n_masked": chosen.sum()}

    def training_loss(self, batch) -> torch.Tensor:
        """`loss` of a training batch (encoder_only: masks drawn from the global RNG)."""
        return self.loss(batch)

    def training_step(self, batch, batch_idx):
        loss = self.training_loss(batch)
        tokens = (~batch["src_key_padding_mask"]).sum() + (~batch["tgt_key_padding_mask"]).sum()
        self.log_train_step(loss, tokens, self.batch_flops(batch))
        return loss

    # ---- decoding ------------------------------------------------------------------------------------
    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1) -> list:
        """Hypotheses (token-id lists, specials removed) for a batch; greedy with beam_size 1 (KV cache).
        encoder_ar: `translate_ar`; cmlm_mask_predict: mask-predict with beam_size length candidates
        (`translate_nat`)."""
        src, src_kpm = batch["src"], batch["src_key_padding_mask"]
        cfg, b = self.model.cfg, self.hparams.max_len_b
        if self.objective == "encoder_ar":
            return self.translate_ar(src, src_kpm, beam_size)
        if self.objective == "cmlm_mask_predict":
            return self.translate_nat(src, src_kpm, beam_size)
        if self.hparams.arch == "encoder_decoder":
            max_new = min(int((~src_kpm).sum(1).max()) + b, cfg.max_len - 1)
            if beam_size > 1:
                out = beam_search(self.model, src, src_kpm, beam_size, None, self.hparams.length_penalty,
                                  early_stopping=self.hparams.early_stopping)
            else:
                out = self.model.generate(src, max_new, src_key_padding_mask=src_kpm, temperature=0.0)
            out = out[:, 1:]
        else:
            rows = [r[~m].tolist() for r, m in zip(src, src_kpm)]
            idx, kpm = left_pad(rows, self.pad_id, device=src.device)
            max_new = min(idx.shape[1] + b, cfg.max_len - idx.shape[1])
            prefix = torch.full((idx.shape[0],), idx.shape[1], device=src.device)  # the whole (padded) prompt
            if beam_size > 1:
                out = beam_search_decoder_only(self.model, idx, kpm, beam_size, max_new, self.hparams.length_penalty,
                                               cfg.eos_id, prefix_len=prefix,
                                               early_stopping=self.hparams.early_stopping)
            else:
                out = self.model.generate(idx, max_new, key_padding_mask=kpm, temperature=0.0, eos_id=cfg.eos_id,
                                          prefix_len=prefix)
            out = out[:, idx.shape[1]:]
        hyps = []
        for row in out.tolist():
            row = row[:row.index(cfg.eos_id)] if cfg.eos_id in row else row
            hyps.append([t for t in row if t != self.pad_id])
        return hyps

    @torch.no_grad()
    def translate_ar(self, src: torch.Tensor, src_kpm: torch.Tensor, beam_size: int = 1) -> list:
        """encoder_ar decoding: the prompt is each source (ending with </s>), left-padded; every step re-encodes
        prompt + hypothesis bidirectionally and scores the next token at the last position. beam_size 1:
        greedy (EncoderOnly.generate, argmax); else beam_search_encoder_only (GNMT length penalty,
        task.early_stopping). Row b makes at most its source tokens + task.max_len_b new tokens (EOS included),
        within model.max_len. src (B, S) right-padded, src_kpm (B, S) True = padding. Returns B token-id lists
        (cut at EOS, padding removed)."""
        cfg = self.model.cfg
        idx, kpm = left_pad([r[~m].tolist() for r, m in zip(src, src_kpm)], self.pad_id, device=src.device)
        S = idx.shape[1]
        max_new = [max(0, min(n + self.hparams.max_len_b, cfg.max_len - S)) for n in (~src_kpm).sum(1).tolist()]
        if beam_size > 1:
            out = beam_search_encoder_only(self.model, idx, kpm, beam_size, max_new, self.hparams.length_penalty,
                                           cfg.eos_id, early_stopping=self.hparams.early_stopping)
        else:
            out = self.model.generate(idx, max(max_new), key_padding_mask=kpm, temperature=0.0, eos_id=cfg.eos_id)
        hyps = []
        for row, m in zip(out[:, S:].tolist(), max_new):
            row = row[:m]  # greedy runs to the longest row's limit; each row stops at its own
            row = row[:row.index(cfg.eos_id)] if cfg.eos_id in row else row
            hyps.append([t for t in row if t != self.pad_id])
        return hyps

    @torch.no_grad()
    def translate_nat(self, src: torch.Tensor, src_kpm: torch.Tensor, length_beam: int = 1,
                      iterations: Optional[int] = None) -> list:
        """Non-autoregressive decoding (Ghazvininejad et al. 2019, sec. 3): the length head on a source-only
        pass ([<cls>] source; the source side never sees the slots, so this equals its value in any later
        pass) gives the `length_beam` most likely lengths 1 <= L <= source tokens + task.max_len_b that fit in
        model.max_len (the autoregressive decoders' limit); each candidate
        starts with L <mask> slots and runs `iterations` (default task.nat_iterations) rounds of
        zoo.tasks.nat.mask_predict; per source the candidate with the highest mean log-probability of its
        tokens wins. src (B, S) right-padded, src_kpm (B, S) True = padding. Returns B token-id lists."""
        B, T = src.shape[0], iterations or self.hparams.nat_iterations
        seq, kpm, _, source_len = nat_inputs(src, src_kpm, torch.zeros_like(src[:, 0]), self.pad_id, CLS_ID, MASK_ID)
        _, length_logits = self.model.cmlm(seq, kpm, source_len)  # (B, C)
        # (B,) at most: the slots that still fit, and source tokens + max_len_b (the autoregressive decoders' rule;
        # an untrained length head would otherwise ask for every slot up to model.max_len)
        room = torch.minimum(self.model.cfg.max_len - source_len, (~src_kpm).sum(1) + self.hparams.max_len_b)
        cand = torch.arange(length_logits.shape[1], device=src.device).unsqueeze(0)
        length_logits = length_logits.masked_fill((cand < 1) | (cand > room.unsqueeze(1)), float("-inf"))
        k = max(1, min(length_beam, length_logits.shape[1] - 1))
        top, lengths = length_logits.topk(k, dim=1)  # (B, k)
        lengths = torch.where(top.isfinite(), lengths, lengths[:, :1]).clamp(max=room.clamp(min=0).unsqueeze(1))
        lengths = lengths.flatten()  # (B k,) row b's candidates at b k .. b k + k - 1
        seq, kpm, slots, source_len = nat_inputs(src.repeat_interleave(k, 0), src_kpm.repeat_interleave(k, 0),
                                                 lengths, self.pad_id, CLS_ID, MASK_ID)
        tokens, log_probs = mask_predict(lambda s, at: self.model.cmlm(s, kpm, source_len, at)[0], seq, slots, T,
                                         MASK_ID, NAT_BANNED)
        score = (log_probs * slots).sum(1) / lengths.clamp(min=1)  # mean log p over the slots
        best = score.view(B, k).argmax(1) + torch.arange(B, device=src.device) * k  # (B,) row indices
        return [tokens[r][slots[r]].tolist() for r in best.tolist()]

    def _decode_into(self, batch, key, beam_size=1):
        for i, ids in zip(batch["index"].tolist(), self.translate(batch, beam_size)):
            self.hyps[key][i] = self.tgt_tokenizer.decode(ids)

    def _scores(self, key, refs) -> dict:
        order = sorted(self.hyps[key])
        hyps = [self.hyps[key][i] for i in order]
        gold = [refs[i] for i in order]
        return {"bleu": sacrebleu.corpus_bleu(hyps, [gold]).score, "chrf": sacrebleu.corpus_chrf(hyps, [gold]).score}

    # ---- validation and test --------------------------------------------------------------------------
    def _bleu_now(self) -> bool:
        return not self.trainer.sanity_checking and self._validations % self.hparams.bleu_every == 0

    def _update_loss(self, split: str, batch, batch_idx: int) -> None:
        """Accumulate the split's loss: the token loss over real target tokens (encoder_ar: exact, every target
        token), or for cmlm_mask_predict the masked-token loss (masks seeded by batch_idx: the same at every
        validation) and the length accuracy."""
        if self.objective != "cmlm_mask_predict":
            loss = self.encoder_ar_loss(batch) if self.objective == "encoder_ar" else self.loss(batch)
            self.losses[split].update(loss, weight=(~batch["tgt_key_padding_mask"]).sum())
            return
        g = torch.Generator(device=batch["src"].device).manual_seed(batch_idx)
        out = self.nat_losses(batch, g)
        self.losses[split].update(out["token"], weight=out["n_masked"])
        self.length_acc[split].update(out["length_acc"], weight=batch["src"].shape[0])

    def _loss_metrics(self, split: str) -> dict:
        metrics = {f"{split}/loss": self.losses[split].compute()}
        self.losses[split].reset()
        if self.objective == "cmlm_mask_predict":
            metrics[f"{split}/length_acc"] = self.length_acc[split].compute()
            self.length_acc[split].reset()
        return metrics

    def validation_step(self, batch, batch_idx):
        self._update_loss("val", batch, batch_idx)
        if self._bleu_now():
            self._decode_into(batch, "val")

    def on_validation_epoch_end(self):
        metrics = self._loss_metrics("val")
        if self._bleu_now() and self.hyps["val"]:
            dm = self.trainer.datamodule
            metrics.update({f"val/{k}": v for k, v in self._scores("val", dm.val_refs).items()})
            self.log_table("val", dm.val_srcs, dm.val_refs)
            self.hyps["val"] = {}
        self.log_validation(metrics)
        if not self.trainer.sanity_checking:
            self._validations += 1

    def test_step(self, batch, batch_idx):
        self._update_loss("test", batch, batch_idx)
        self._decode_into(batch, "test")
        if self.hparams.beam_size > 1:
            self._decode_into(batch, "test_beam", self.hparams.beam_size)

    def on_test_epoch_start(self):
        self._t_test = time.perf_counter()

    def on_test_epoch_end(self):
        dm = self.trainer.datamodule
        ids = sorted(self.hyps["test"])
        self.ms_per_example = 1000 * (time.perf_counter() - self._t_test) / max(1, len(ids))
        self.examples = {"task": "translation", "split": "test", "ids": ids, "hyp": [self.hyps["test"][i] for i in ids],
                         "ref": [dm.test_refs[i] for i in ids]}
        if self.hparams.beam_size > 1:
            self.examples["hyp_beam"] = [self.hyps["test_beam"][i] for i in ids]
        metrics = self._loss_metrics("test")
        metrics.update({f"test/{k}": v for k, v in self._scores("test", dm.test_refs).items()})
        if self.hparams.beam_size > 1:
            metrics.update({f"test/{k}_beam": v for k, v in self._scores("test_beam", dm.test_refs).items()})
        self.log_dict(metrics)
        self.log_table("test", dm.test_srcs, dm.test_refs)

    def log_table(self, split: str, srcs, refs, key: Optional[str] = None) -> None:
        """A W&B table of source / reference / hypothesis for the first table_rows examples."""
        hyps = self.hyps[key or split]
        rows = [[srcs[i], refs[i], hyps[i]] for i in sorted(hyps)[: self.hparams.table_rows]]
        for logger in self.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_text(key=f"{split}/translations", columns=["source", "reference", "hypothesis"], data=rows)
