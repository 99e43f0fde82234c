"""Text classification as a LightningModule, for each of the three architectures."""

import time

import torch
import torch.nn.functional as F
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from zoo.errors import check_fraction
from zoo.model import ModelConfig, build_model
from zoo.tasks.base import TaskBase
from zoo.tasks.objectives import Classify


class Classification(TaskBase):
    """Cross-entropy on class labels; accuracy and macro-F1 (torchmetrics) on val (dev, for model
    selection) and test (the reported number).

    How each architecture classifies (zoo.model ...classify): encoder_only pools its bidirectional states
    (model.pooling: cls | mean | last) into a linear head; decoder_only feeds its causal state at the last
    real token; encoder_decoder encodes the text and feeds the decoder's state after BOS.
    Batches: {"ids": (B, T), "key_padding_mask": (B, T) True = padding, "labels": (B,)}.
    arch, model (ModelConfig fields; num_classes from the data), tokenizer (state kept in the checkpoint),
    optimizer {lr, betas, weight_decay}, scheduler {kind: cosine | noam, warmup_steps, decay_steps, min_lr},
    label_smoothing: of the training loss (Szegedy et al. 2016; 0 = plain cross-entropy; val / test loss stay
    plain), monitor / monitor_mode: the validation metric that selects checkpoints and is returned to sweepers.
    After test: `examples` {task, split, ids, pred, label} (per test example, for paired tests; one process
    only) and `ms_per_example` (test wall time per example).
    """

    ARCHS = ("encoder_only", "decoder_only", "encoder_decoder")
    BATCH = "classification"  # the batches it reads: any datamodule whose batches keep BATCH_CONTRACT
    BATCH_CONTRACT = {"ids": (torch.long, 2), "key_padding_mask": (torch.bool, 2), "labels": (torch.long, 1)}
    VAL_METRICS = {arch: ("val/loss", "val/acc", "val/f1") for arch in ARCHS}  # per arch, what task.monitor may name

    def __init__(
        self,
        arch: str,
        model: dict,
        tokenizer: dict,
        optimizer: dict,
        scheduler: dict,
        monitor: str = "val/acc",
        monitor_mode: str = "max",
        label_smoothing: float = 0.0,
    ):
        super().__init__()
        check_fraction("task.label_smoothing", label_smoothing, "0 = plain cross-entropy")
        if model.get("num_classes", 0) < 2:
            raise ValueError(f"task=classification needs model.num_classes >= 2, got {model.get('num_classes')}")
        self.save_hyperparameters()
        self.model = build_model(arch, ModelConfig(**model))
        self.objective_impl = Classify(self)
        n = model["num_classes"]
        self.metrics = torch.nn.ModuleDict(
            {
                f"{split}_{name}": metric(num_classes=n, average=avg)
                for split in ("val", "test")
                for name, metric, avg in (("acc", MulticlassAccuracy, "micro"), ("f1", MulticlassF1Score, "macro"))
            }
        )
        self.mean_loss = torch.nn.ModuleDict({split: MeanMetric() for split in ("val", "test")})

    def forward(self, batch) -> torch.Tensor:
        """Class logits (B, num_classes)."""
        return self.objective_impl.logits(batch)

    def training_loss(self, batch) -> torch.Tensor:
        """Mean cross-entropy (nats per example) of the class logits against batch["labels"] (B,), with
        task.label_smoothing (zoo.tasks.objectives.classify)."""
        return self.objective_impl.training_loss(batch)

    def training_step(self, batch, batch_idx):
        loss = self.training_loss(batch)
        self.log_train_step(loss, (~batch["key_padding_mask"]).sum(), self.objective_impl.batch_flops(batch))
        return loss

    def _eval_step(self, batch, split):
        logits = self(batch).float()
        if split == "test":  # per-example predictions for paired tests between runs (zoo.report)
            self._test_rows += zip(batch["index"].tolist(), logits.argmax(-1).tolist(), batch["labels"].tolist())
        self.mean_loss[split].update(F.cross_entropy(logits, batch["labels"]), weight=len(batch["labels"]))
        for name in ("acc", "f1"):
            self.metrics[f"{split}_{name}"].update(logits, batch["labels"])

    def _eval_end(self, split):
        metrics = {f"{split}/loss": self.mean_loss[split].compute()}
        metrics.update({f"{split}/{name}": self.metrics[f"{split}_{name}"].compute() for name in ("acc", "f1")})
        self.mean_loss[split].reset()
        for name in ("acc", "f1"):
            self.metrics[f"{split}_{name}"].reset()
        if split == "val":
            self.log_validation(metrics)
        else:
            self.log_dict(metrics)

    def validation_step(self, batch, batch_idx):
        self._eval_step(batch, "val")

    def on_validation_epoch_end(self):
        self._eval_end("val")

    def on_test_epoch_start(self):
        self._test_rows, self._t_test = [], time.perf_counter()

    def test_step(self, batch, batch_idx):
        self._eval_step(batch, "test")

    def on_test_epoch_end(self):
        self._eval_end("test")
        rows = sorted(self._test_rows)
        self.examples = {
            "task": "classification",
            "split": "test",
            "ids": [r[0] for r in rows],
            "pred": [r[1] for r in rows],
            "label": [r[2] for r in rows],
        }
        self.ms_per_example = 1000 * (time.perf_counter() - self._t_test) / max(1, len(rows))
