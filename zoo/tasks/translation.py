"""Translation as a LightningModule: encoder_decoder (standard), decoder_only (source, separator,
target as one sequence; mask=causal or mask=prefix: the "LM vs prefix LM" comparison of T5) and encoder_only
(encoder_ar, cmlm_mask_predict). Each objective's losses and decoding: zoo.tasks.objectives."""

import time

import sacrebleu
import torch
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import SubwordTokenizer
from zoo.errors import DataError, check_fraction, check_z_loss
from zoo.model import ModelConfig, build_model
from zoo.model.decoding.beam_search import check_early_stopping
from zoo.tasks.base import TaskBase


class Translation(TaskBase):
    """Label-smoothed cross-entropy with teacher forcing (target shifted right, BOS first), padding ignored
    exactly by position (F.cross_entropy(ignore_index=IGNORE, label_smoothing)); sacreBLEU and chrF on detokenized text.

    encoder_decoder: the encoder reads the source, the decoder reads tgt_in and predicts tgt_out.
    decoder_only: the sequence source + EOS + target + EOS, loss on the target tokens only; model.mask
    causal or prefix (bidirectional over source + separator: prefix_len = source length per row).
    Validation: val/loss each epoch, and val/bleu, val/chrf from greedy decoding (KV cache) every
    `bleu_every` validations. Test (the best checkpoint): test/bleu (greedy), test/chrf, and with
    beam_size > 1 test/bleu_beam, test/chrf_beam (beam search, GNMT length penalty, max length = source
    length + max_len_b, stopping rule early_stopping: never | true | false, zoo.model.decoding.beam_search).
    Batches: zoo.data.translation_set.collate_translation dicts. After test: `examples` {task, split, ids, hyp,
    ref, src, hyp_beam} (detokenized test hypotheses, references and sources, for paired tests and zoo.report's
    attention maps; one process only) and `ms_per_example` (test wall time per sentence, greedy and beam
    decoding included).

    encoder_only: "encoder_ar" (default), ENTP (Ewer et al. 2024), or task.objective=cmlm_mask_predict,
    non-autoregressive Mask-Predict (Ghazvininejad et al. 2019): zoo.tasks.objectives. Both need
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
        rule = self.checked_objective(arch, objective, model, tokenizer, monitor, encoder_ar_targets, nat_iterations)
        objective = self.objective = rule.NAME  # results.json; saved resolved: a checkpoint rebuilds what it trained
        model = rule.model_fields(model)  # the run's final config as it is; a direct construction's completed
        self.save_hyperparameters()
        self.model = build_model(arch, ModelConfig(**model))
        self.objective_impl = rule(self)
        self.tgt_tokenizer = SubwordTokenizer.from_state_dict(tokenizer["tgt"])
        self.pad_id = self.model.cfg.pad_id
        self.mean_loss = torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        self.length_acc = (
            torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})  # the NAT length head's
            if "val/length_acc" in rule.METRICS
            else None
        )
        self.hyps = {"val": {}, "test": {}, "test_beam": {}}
        self.cost["target_tokens"] = 0  # target tokens trained (each with its EOS): a scaling study's D
        self._validations = 0

    @classmethod
    def checked_objective(
        cls, arch: str, objective, model: dict, tokenizer: dict, monitor: str, encoder_ar_targets: int, nat_iterations
    ):
        """The objective class that trains `arch` (zoo.tasks.objectives.objective_class), after checking the
        options that depend on it. Raises ValueError (DataError for two vocabularies where it needs one)."""
        rule = cls.objective_for(arch, objective, model, monitor)
        if encoder_ar_targets < 1:
            raise ValueError(f"task.encoder_ar_targets={encoder_ar_targets} must be >= 1 (target positions per pair)")
        if rule.ONE_VOCABULARY and tokenizer["src"] != tokenizer["tgt"]:
            raise DataError(
                "encoder_only translation reads source and target as one sequence, so it needs "
                "one vocabulary: set data.joint_vocab=true"
            )
        rule.check_options(nat_iterations=nat_iterations)
        return rule

    # ---- training ------------------------------------------------------------------------------------
    def loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        """The objective's training loss (nats per target token; encoder_ar and cmlm_mask_predict draw their
        positions / masks with `generator`)."""
        return self.objective_impl.loss(batch, generator)

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the training forward pass of `batch` at its padded shapes (the objective's)."""
        return self.objective_impl.batch_flops(batch)

    def training_loss(self, batch) -> torch.Tensor:
        """`loss` of a training batch (random draws from the global RNG)."""
        return self.loss(batch)

    def training_step(self, batch, batch_idx):
        loss = self.training_loss(batch)
        target = (~batch["tgt_key_padding_mask"]).sum()  # the positions the loss predicts: target tokens + EOS
        world = self.trainer.world_size if self._trainer is not None else 1
        self.cost["target_tokens"] = self.cost.get("target_tokens", 0) + int(target) * world
        self.log_train_step(loss, (~batch["src_key_padding_mask"]).sum() + target, self.batch_flops(batch))
        return loss

    # ---- decoding ------------------------------------------------------------------------------------
    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1) -> list:
        """Hypotheses (token-id lists, specials removed) for a batch; greedy with beam_size 1 (the objective's
        decoding; cmlm_mask_predict: beam_size length candidates)."""
        return self.objective_impl.translate(batch, beam_size)

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
        """Whether this validation decodes (greedy BLEU / chrF): every bleu_every-th one; bleu_every 0, never."""
        every = self.hparams.bleu_every
        return bool(every) and not self.trainer.sanity_checking and self._validations % every == 0

    def _update_loss(self, split: str, batch, batch_idx: int) -> None:
        """Accumulate the split's loss (the objective's eval_loss: encoder_ar exact over every target token;
        cmlm_mask_predict the masked-token loss, masks seeded by batch_idx, and the length accuracy)."""
        out = self.objective_impl.eval_loss(batch, batch_idx)
        self.mean_loss[split].update(out["loss"], weight=out["weight"])
        if "length_acc" in out:
            self.length_acc[split].update(*out["length_acc"])

    def _loss_metrics(self, split: str) -> dict:
        metrics = {f"{split}/loss": self.mean_loss[split].compute()}
        self.mean_loss[split].reset()
        if self.length_acc is not None:
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
