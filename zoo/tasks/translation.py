"""Translation as a LightningModule: encoder_decoder (standard), decoder_only (source, separator,
target as one sequence; mask=causal or mask=prefix: the "LM vs prefix LM" comparison of T5) and encoder_only
(non-autoregressive: a conditional masked LM with a length head, mask-predict decoding; zoo.tasks.nat)."""
from typing import Optional

import sacrebleu
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import BOS_ID, CLS_ID, EOS_ID, MASK_ID, PAD_ID, SubwordTokenizer
from zoo.data.resolver import DataError
from zoo.model import ModelConfig, build_model
from zoo.model.beam_search import beam_search, beam_search_decoder_only, check_early_stopping
from zoo.model.generate import left_pad
from zoo.tasks.base import TaskBase
from zoo.tasks.nat import cmlm_mask, mask_predict, nat_inputs

IGNORE = -100  # target positions the loss skips, chosen by position (padding, source), never by token id
NAT_BANNED = (PAD_ID, BOS_ID, EOS_ID, MASK_ID, CLS_ID)  # never predicted in a target slot

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
    Batches: zoo.data.multi30k.collate_translation dicts.

    encoder_only, non-autoregressive (Mask-Predict, Ghazvininejad et al. 2019; fairseq's cmlm): one row
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
    log-probability wins. Special tokens are never predicted. Needs one vocabulary (data.joint_vocab=true).
    """

    ARCHS = ("encoder_decoder", "decoder_only", "encoder_only")
    BATCH = "translation"  # the batches it reads: any datamodule whose batches keep BATCH_CONTRACT
    BATCH_CONTRACT = {"src": (torch.long, 2), "src_key_padding_mask": (torch.bool, 2), "tgt_in": (torch.long, 2),
                      "tgt_out": (torch.long, 2), "tgt_key_padding_mask": (torch.bool, 2), "index": (torch.long, 1)}
    VAL_METRICS = {  # per arch, what task.monitor may name: the validation metrics it logs
        "encoder_decoder": ("val/loss", "val/bleu", "val/chrf"),
        "decoder_only": ("val/loss", "val/bleu", "val/chrf"),
        "encoder_only": ("val/loss", "val/bleu", "val/chrf", "val/length_acc")}  # the length head's accuracy
    MASKS = {"encoder_decoder": (None, "causal", "sliding"),  # the decoder must not see the next target token
             "decoder_only": (None, "causal", "prefix", "sliding"),  # prefix: bidirectional over the source only
             "encoder_only": (None, "bidirectional")}  # predicted target tokens are <mask> in the input
    JOINS_SOURCE_AND_TARGET = True  # decoder_only and encoder_only read source + target as one sequence

    def __init__(self, arch: str, model: dict, tokenizer: dict, optimizer: dict, scheduler: dict,
                 label_smoothing: float = 0.1, beam_size: int = 4, length_penalty: float = 0.6, max_len_b: int = 50,
                 bleu_every: int = 1, table_rows: int = 20, monitor: str = "val/bleu", monitor_mode: str = "max",
                 nat_iterations: int = 4, length_loss_factor: float = 0.1, early_stopping="never"):
        super().__init__()
        check_early_stopping(early_stopping)
        if arch not in self.ARCHS:
            raise ValueError(f"task=translation trains arch in {self.ARCHS}; got arch={arch!r}")
        if arch == "encoder_only":
            if tokenizer["src"] != tokenizer["tgt"]:
                raise DataError("encoder_only translation reads source and target as one sequence, so it needs "
                                "one vocabulary: set data.joint_vocab=true")
            if nat_iterations < 1:
                raise ValueError(f"task.nat_iterations={nat_iterations} must be >= 1 (1 = one-pass NAT)")
            model = {**model, "length_classes": model.get("length_classes") or
                     model.get("max_len", ModelConfig.max_len)}  # saved below, so checkpoints rebuild the head
        self.save_hyperparameters()
        self.objective = "cmlm_mask_predict" if arch == "encoder_only" else "translation"  # results.json
        self.model = build_model(arch, ModelConfig(**model))
        self.tgt_tokenizer = SubwordTokenizer.from_state_dict(tokenizer["tgt"])
        self.pad_id = self.model.cfg.pad_id
        self.losses = torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        self.length_acc = (torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})  # the NAT length head's
                           if arch == "encoder_only" else None)
        self.hyps = {"val": {}, "test": {}, "test_beam": {}}
        self._validations = 0

    # ---- training ------------------------------------------------------------------------------------
    def loss(self, batch, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """Mean label-smoothed cross-entropy (nats) over the target's real tokens; encoder_only: over the
        masked target tokens, plus length_loss_factor x the length loss (`nat_losses`, masks drawn with
        `generator`)."""
        if self.hparams.arch == "encoder_only":
            out = self.nat_losses(batch, generator)
            return out["token"] + self.hparams.length_loss_factor * out["length"]
        if self.hparams.arch == "encoder_decoder":
            logits = self.model(batch["src"], batch["tgt_in"], batch["src_key_padding_mask"],
                                batch["tgt_key_padding_mask"])  # (B, T, V)
            target = batch["tgt_out"].masked_fill(batch["tgt_key_padding_mask"], IGNORE)
        else:
            seq, kpm, src_len, seq_len = join_source_target(batch["src"], batch["src_key_padding_mask"],
                                                            batch["tgt_out"], batch["tgt_key_padding_mask"], self.pad_id)
            logits = self.model(seq[:, :-1], key_padding_mask=kpm[:, :-1], prefix_len=src_len)  # (B, L-1, V)
            pos = torch.arange(1, seq.shape[1], device=seq.device).unsqueeze(0)  # position of each target token
            on_target = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
            target = seq[:, 1:].masked_fill(~on_target, IGNORE)
        return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=IGNORE,
                               label_smoothing=self.hparams.label_smoothing)

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
        self.log_train_step(loss, tokens)
        return loss

    # ---- decoding ------------------------------------------------------------------------------------
    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1) -> list:
        """Hypotheses (token-id lists, specials removed) for a batch; greedy with beam_size 1 (KV cache).
        encoder_only: mask-predict with beam_size length candidates (`translate_nat`)."""
        src, src_kpm = batch["src"], batch["src_key_padding_mask"]
        cfg, b = self.model.cfg, self.hparams.max_len_b
        if self.hparams.arch == "encoder_only":
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
        """Accumulate the split's loss: the token loss over real target tokens, or for encoder_only the
        masked-token loss (masks seeded by batch_idx: the same at every validation) and the length accuracy."""
        if self.hparams.arch != "encoder_only":
            self.losses[split].update(self.loss(batch), weight=(~batch["tgt_key_padding_mask"]).sum())
            return
        g = torch.Generator(device=batch["src"].device).manual_seed(batch_idx)
        out = self.nat_losses(batch, g)
        self.losses[split].update(out["token"], weight=out["n_masked"])
        self.length_acc[split].update(out["length_acc"], weight=batch["src"].shape[0])

    def _loss_metrics(self, split: str) -> dict:
        metrics = {f"{split}/loss": self.losses[split].compute()}
        self.losses[split].reset()
        if self.hparams.arch == "encoder_only":
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

    def on_test_epoch_end(self):
        dm = self.trainer.datamodule
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
