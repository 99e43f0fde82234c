"""Translation as a LightningModule: encoder_decoder (standard), decoder_only (source, separator,
target as one sequence; mask=causal or mask=prefix: the "LM vs prefix LM" comparison of T5) and encoder_only
(zoo.tasks.translation_encoder_only)."""

import time

import sacrebleu
import torch
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import SubwordTokenizer
from zoo.data.resolver import DataError
from zoo.model import ModelConfig, build_model
from zoo.model.beam_search import beam_search, beam_search_decoder_only, check_early_stopping
from zoo.model.chunked_ce import check_z_loss, lm_head_cross_entropy
from zoo.model.cost import batch_flops
from zoo.model.generate import left_pad
from zoo.model_config_from_data import for_objective
from zoo.tasks.base import TaskBase, check_fraction
from zoo.tasks.translation_encoder_only import EncoderOnlyTranslation, join_source_target

IGNORE = -100  # target positions the loss skips, chosen by position (padding, source), never by token id


class Translation(EncoderOnlyTranslation, TaskBase):
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
    ref, src, hyp_beam} (detokenized test hypotheses, references and sources, for paired tests and zoo.report's
    attention maps; one process only) and `ms_per_example` (test wall time per sentence, greedy and beam
    decoding included).

    encoder_only: "encoder_ar" (default), ENTP (Ewer et al. 2024), or task.objective=cmlm_mask_predict,
    non-autoregressive Mask-Predict (Ghazvininejad et al. 2019): zoo.tasks.translation_encoder_only. Both need
    one vocabulary (data.joint_vocab=true); an objective the arch cannot train is refused (ValueError).
    """

    ARCHS = ("encoder_decoder", "decoder_only", "encoder_only")
    BATCH = "translation"  # the batches it reads: any datamodule whose batches keep BATCH_CONTRACT
    BATCH_CONTRACT = {
        "src": (torch.long, 2),
        "src_key_padding_mask": (torch.bool, 2),
        "tgt_in": (torch.long, 2),
        "tgt_out": (torch.long, 2),
        "tgt_key_padding_mask": (torch.bool, 2),
        "index": (torch.long, 1),
    }
    VAL_METRICS = {  # per arch, what task.monitor may name: the validation metrics it logs
        "encoder_decoder": ("val/loss", "val/bleu", "val/chrf"),
        "decoder_only": ("val/loss", "val/bleu", "val/chrf"),
        "encoder_only": ("val/loss", "val/bleu", "val/chrf", "val/length_acc"),
    }  # length_acc: cmlm_mask_predict's
    # per arch, the objectives it trains, its default first
    OBJECTIVES = {
        "encoder_decoder": ("translation",),
        "decoder_only": ("translation",),
        "encoder_only": ("encoder_ar", "cmlm_mask_predict"),
    }
    MASKS = {
        "encoder_decoder": (None, "causal", "sliding"),  # the decoder must not see the next target token
        "decoder_only": (None, "causal", "prefix", "sliding"),  # prefix: bidirectional over the source only
        "encoder_only": (None, "bidirectional"),
    }  # a predicted token is never in its row (ar) or is <mask> (cmlm)
    JOINS_SOURCE_AND_TARGET = True  # decoder_only and encoder_only read source + target as one sequence

    def __init__(
        self,
        arch: str,
        model: dict,
        tokenizer: dict,
        optimizer: dict,
        scheduler: dict,
        label_smoothing: float = 0.1,
        beam_size: int = 4,
        length_penalty: float = 0.6,
        max_len_b: int = 50,
        bleu_every: int = 1,
        table_rows: int = 20,
        monitor: str = "val/bleu",
        monitor_mode: str = "max",
        nat_iterations: int = 4,
        length_loss_factor: float = 0.1,
        early_stopping="never",
        objective: str | None = None,
        encoder_ar_targets: int = 4,
        z_loss: float = 0.0,
    ):
        super().__init__()
        check_early_stopping(early_stopping)
        check_z_loss(z_loss, "task.z_loss")  # PaLM's z-loss on the LM head in training (TaskBase.head_z_loss)
        check_fraction("task.label_smoothing", label_smoothing, "0.1 is the paper's, 0 = plain cross-entropy")
        if arch not in self.ARCHS:
            raise ValueError(f"task=translation trains arch in {self.ARCHS}; got arch={arch!r}")
        if objective is None:
            objective = self.OBJECTIVES[arch][0]
        if objective not in self.OBJECTIVES[arch]:
            owner = [a for a, objs in self.OBJECTIVES.items() if objective in objs]
            why = f"it is +arch={owner[0]}'s" if owner else "it is unknown"
            raise ValueError(
                f"task.objective={objective} cannot train +arch={arch} in task=translation ({why}); "
                f"+arch={arch} trains {', '.join(self.OBJECTIVES[arch])} "
                f"(task.objective=null: its default)"
            )
        if monitor == "val/length_acc" and objective != "cmlm_mask_predict":
            raise ValueError(
                f"task.monitor=val/length_acc is logged by task.objective=cmlm_mask_predict only, not "
                f"{objective}; monitor val/loss, val/bleu or val/chrf"
            )
        if encoder_ar_targets < 1:
            raise ValueError(f"task.encoder_ar_targets={encoder_ar_targets} must be >= 1 (target positions per pair)")
        self.objective = objective  # results.json; saved resolved, so a checkpoint rebuilds what it trained
        if arch == "encoder_only" and tokenizer["src"] != tokenizer["tgt"]:
            raise DataError(
                "encoder_only translation reads source and target as one sequence, so it needs "
                "one vocabulary: set data.joint_vocab=true"
            )
        if objective == "cmlm_mask_predict" and nat_iterations < 1:
            raise ValueError(f"task.nat_iterations={nat_iterations} must be >= 1 (1 = one-pass NAT)")
        model = for_objective(objective, model)  # saved below, so checkpoints rebuild the length head
        self.save_hyperparameters()
        self.model = build_model(arch, ModelConfig(**model))
        self.tgt_tokenizer = SubwordTokenizer.from_state_dict(tokenizer["tgt"])
        self.pad_id = self.model.cfg.pad_id
        self.mean_loss = torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        self.length_acc = (
            torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})  # the NAT length head's
            if objective == "cmlm_mask_predict"
            else None
        )
        self.hyps = {"val": {}, "test": {}, "test_beam": {}}
        self._validations = 0

    # ---- training ------------------------------------------------------------------------------------
    def loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
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
            hidden, _ = self.model.decode_features(
                batch["tgt_in"], memory, batch["tgt_key_padding_mask"], batch["src_key_padding_mask"]
            )  # (B, T, d_model)
            target = batch["tgt_out"].masked_fill(batch["tgt_key_padding_mask"], IGNORE)
        else:
            seq, key_padding_mask, src_len, seq_len = join_source_target(
                batch["src"],
                batch["src_key_padding_mask"],
                batch["tgt_out"],
                batch["tgt_key_padding_mask"],
                self.pad_id,
            )
            hidden, _ = self.model.features(
                seq[:, :-1], key_padding_mask=key_padding_mask[:, :-1], prefix_len=src_len
            )  # (B, L-1, d)
            pos = torch.arange(1, seq.shape[1], device=seq.device).unsqueeze(0)  # position of each target token
            on_target = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
            target = seq[:, 1:].masked_fill(~on_target, IGNORE)
        # the LM head and the loss chunk by chunk: the (B T, V) logits are never built (zoo.model.chunked_ce)
        return lm_head_cross_entropy(
            self.model.lm_head,
            hidden,
            target,
            ignore_index=IGNORE,
            label_smoothing=self.hparams.label_smoothing,
            chunk_size=self.model.cfg.loss_chunk_size,
            z_loss=self.head_z_loss(),
        )

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

    def inference_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """Forward FLOPs per generated token; encoder_ar has no cache, so a token costs a whole forward over
        source + target prefix (src_len + seq_len tokens) with the LM head on one position."""
        if self.objective == "encoder_ar":
            return batch_flops(self.model, 1, seq_len + (src_len or 0), scored=1)
        return super().inference_flops_per_token(seq_len, src_len)

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
        src, src_key_padding_mask = batch["src"], batch["src_key_padding_mask"]
        cfg, b = self.model.cfg, self.hparams.max_len_b
        if self.objective == "encoder_ar":
            return self.translate_ar(src, src_key_padding_mask, beam_size)
        if self.objective == "cmlm_mask_predict":
            return self.translate_nat(src, src_key_padding_mask, beam_size)
        if self.hparams.arch == "encoder_decoder":
            max_new = min(int((~src_key_padding_mask).sum(1).max()) + b, cfg.max_len - 1)
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
            out = out[:, 1:]
        else:
            rows = [r[~m].tolist() for r, m in zip(src, src_key_padding_mask)]
            idx, key_padding_mask = left_pad(rows, self.pad_id, device=src.device)
            max_new = min(idx.shape[1] + b, cfg.max_len - idx.shape[1])
            prefix = torch.full((idx.shape[0],), idx.shape[1], device=src.device)  # the whole (padded) prompt
            if beam_size > 1:
                out = beam_search_decoder_only(
                    self.model,
                    idx,
                    key_padding_mask,
                    beam_size,
                    max_new,
                    self.hparams.length_penalty,
                    cfg.eos_id,
                    prefix_len=prefix,
                    early_stopping=self.hparams.early_stopping,
                )
            else:
                out = self.model.generate(
                    idx,
                    max_new,
                    key_padding_mask=key_padding_mask,
                    temperature=0.0,
                    eos_id=cfg.eos_id,
                    prefix_len=prefix,
                )
            out = out[:, idx.shape[1] :]
        hyps = []
        for row in out.tolist():
            row = row[: row.index(cfg.eos_id)] if cfg.eos_id in row else row
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

    def _update_loss(self, split: str, batch, batch_idx: int) -> None:
        """Accumulate the split's loss: the token loss over real target tokens (encoder_ar: exact, every target
        token), or for cmlm_mask_predict the masked-token loss (masks seeded by batch_idx: the same at every
        validation) and the length accuracy."""
        if self.objective != "cmlm_mask_predict":
            loss = self.encoder_ar_loss(batch) if self.objective == "encoder_ar" else self.loss(batch)
            self.mean_loss[split].update(loss, weight=(~batch["tgt_key_padding_mask"]).sum())
            return
        g = torch.Generator(device=batch["src"].device).manual_seed(batch_idx)
        out = self.nat_losses(batch, g)
        self.mean_loss[split].update(out["token"], weight=out["n_masked"])
        self.length_acc[split].update(out["length_acc"], weight=batch["src"].shape[0])

    def _loss_metrics(self, split: str) -> dict:
        metrics = {f"{split}/loss": self.mean_loss[split].compute()}
        self.mean_loss[split].reset()
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
        self.examples = {
            "task": "translation",
            "split": "test",
            "ids": ids,
            "hyp": [self.hyps["test"][i] for i in ids],
            "ref": [dm.test_refs[i] for i in ids],
            "src": [dm.test_srcs[i] for i in ids],
        }
        if self.hparams.beam_size > 1:
            self.examples["hyp_beam"] = [self.hyps["test_beam"][i] for i in ids]
        metrics = self._loss_metrics("test")
        metrics.update({f"test/{k}": v for k, v in self._scores("test", dm.test_refs).items()})
        if self.hparams.beam_size > 1:
            metrics.update({f"test/{k}_beam": v for k, v in self._scores("test_beam", dm.test_refs).items()})
        self.log_dict(metrics)
        self.log_table("test", dm.test_srcs, dm.test_refs)

    def log_table(self, split: str, srcs, refs, key: str | None = None) -> None:
        """A W&B table of source / reference / hypothesis for the first table_rows examples."""
        hyps = self.hyps[key or split]
        rows = [[srcs[i], refs[i], hyps[i]] for i in sorted(hyps)[: self.hparams.table_rows]]
        for logger in self.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_text(key=f"{split}/translations", columns=["source", "reference", "hypothesis"], data=rows)
