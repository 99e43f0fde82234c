"""Translation as a LightningModule: encoder_decoder (standard) and decoder_only (source, separator,
target as one sequence; mask=causal or mask=prefix: the "LM vs prefix LM" comparison of T5)."""
from typing import Optional

import sacrebleu
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import SubwordTokenizer
from zoo.model import ModelConfig, build_model
from zoo.model.beam_search import beam_search, beam_search_decoder_only
from zoo.model.generate import left_pad
from zoo.tasks.base import TaskBase

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
    exactly (F.cross_entropy(ignore_index=pad, label_smoothing)); sacreBLEU and chrF on detokenized text.

    encoder_decoder: the encoder reads the source, the decoder reads tgt_in and predicts tgt_out.
    decoder_only: the sequence source + EOS + target + EOS, loss on the target tokens only; model.mask
    causal or prefix (bidirectional over source + separator: prefix_len = source length per row).
    Validation: val/loss each epoch, and val/bleu, val/chrf from greedy decoding (KV cache) every
    `bleu_every` validations. Test (the best checkpoint): test/bleu (greedy), test/chrf, and with
    beam_size > 1 test/bleu_beam, test/chrf_beam (beam search, GNMT length penalty, max length = source
    length + max_len_b).
    Batches: zoo.data.multi30k.collate_translation dicts.
    """

    ARCHS = ("encoder_decoder", "decoder_only")
    MASKS = {"encoder_decoder": (None, "causal", "sliding"),  # the decoder must not see the next target token
             "decoder_only": (None, "causal", "prefix", "sliding")}  # prefix: bidirectional over the source only
    JOINS_SOURCE_AND_TARGET = True  # decoder_only reads source + target as one sequence

    def __init__(self, arch: str, model: dict, tokenizer: dict, optimizer: dict, scheduler: dict,
                 label_smoothing: float = 0.1, beam_size: int = 4, length_penalty: float = 0.6, max_len_b: int = 50,
                 bleu_every: int = 1, table_rows: int = 20, monitor: str = "val/bleu", monitor_mode: str = "max"):
        super().__init__()
        if arch not in self.ARCHS:
            raise ValueError(f"task=translation trains arch in {self.ARCHS}; got arch={arch!r}")
        self.save_hyperparameters()
        self.model = build_model(arch, ModelConfig(**model))
        self.tgt_tokenizer = SubwordTokenizer.from_state_dict(tokenizer["tgt"])
        self.pad_id = self.model.cfg.pad_id
        self.losses = torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        self.hyps = {"val": {}, "test": {}, "test_beam": {}}
        self._validations = 0

    # ---- training ------------------------------------------------------------------------------------
    def loss(self, batch) -> torch.Tensor:
        """Mean label-smoothed cross-entropy (nats) over the target's real tokens."""
        if self.hparams.arch == "encoder_decoder":
            logits = self.model(batch["src"], batch["tgt_in"], batch["src_key_padding_mask"],
                                batch["tgt_key_padding_mask"])  # (B, T, V)
            target = batch["tgt_out"].masked_fill(batch["tgt_key_padding_mask"], self.pad_id)
        else:
            seq, kpm, src_len, seq_len = join_source_target(batch["src"], batch["src_key_padding_mask"],
                                                            batch["tgt_out"], batch["tgt_key_padding_mask"], self.pad_id)
            logits = self.model(seq[:, :-1], key_padding_mask=kpm[:, :-1], prefix_len=src_len)  # (B, L-1, V)
            pos = torch.arange(1, seq.shape[1], device=seq.device).unsqueeze(0)  # position of each target token
            on_target = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
            target = seq[:, 1:].masked_fill(~on_target, self.pad_id)
        return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=self.pad_id,
                               label_smoothing=self.hparams.label_smoothing)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        tokens = (~batch["src_key_padding_mask"]).sum() + (~batch["tgt_key_padding_mask"]).sum()
        self.log_train_step(loss, tokens)
        return loss

    # ---- decoding ------------------------------------------------------------------------------------
    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1) -> list:
        """Hypotheses (token-id lists, specials removed) for a batch; greedy with beam_size 1 (KV cache)."""
        src, src_kpm = batch["src"], batch["src_key_padding_mask"]
        cfg, b = self.model.cfg, self.hparams.max_len_b
        if self.hparams.arch == "encoder_decoder":
            max_new = min(int((~src_kpm).sum(1).max()) + b, cfg.max_len - 1)
            if beam_size > 1:
                out = beam_search(self.model, src, src_kpm, beam_size, None, self.hparams.length_penalty)
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
                                               cfg.eos_id, prefix_len=prefix)
            else:
                out = self.model.generate(idx, max_new, key_padding_mask=kpm, temperature=0.0, eos_id=cfg.eos_id,
                                          prefix_len=prefix)
            out = out[:, idx.shape[1]:]
        hyps = []
        for row in out.tolist():
            row = row[:row.index(cfg.eos_id)] if cfg.eos_id in row else row
            hyps.append([t for t in row if t != self.pad_id])
        return hyps

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

    def validation_step(self, batch, batch_idx):
        self.losses["val"].update(self.loss(batch), weight=(~batch["tgt_key_padding_mask"]).sum())
        if self._bleu_now():
            self._decode_into(batch, "val")

    def on_validation_epoch_end(self):
        metrics = {"val/loss": self.losses["val"].compute()}
        self.losses["val"].reset()
        if self._bleu_now() and self.hyps["val"]:
            dm = self.trainer.datamodule
            metrics.update({f"val/{k}": v for k, v in self._scores("val", dm.val_refs).items()})
            self.log_table("val", dm.val_srcs, dm.val_refs)
            self.hyps["val"] = {}
        self.log_validation(metrics)
        if not self.trainer.sanity_checking:
            self._validations += 1

    def test_step(self, batch, batch_idx):
        self.losses["test"].update(self.loss(batch), weight=(~batch["tgt_key_padding_mask"]).sum())
        self._decode_into(batch, "test")
        if self.hparams.beam_size > 1:
            self._decode_into(batch, "test_beam", self.hparams.beam_size)

    def on_test_epoch_end(self):
        dm = self.trainer.datamodule
        metrics = {"test/loss": self.losses["test"].compute()}
        self.losses["test"].reset()
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
