"""Language modeling on token windows as a LightningModule: every architecture predicts the next token
(decoder_only causal or prefix LM, encoder_only ENTP, encoder_decoder prefix -> continuation), scored on the
same continuation tokens; encoder_only's masked LM (BERT) stays as task.objective=masked_lm. How each
objective turns a window into inputs and targets: zoo.tasks.objectives."""

import math
import time

import torch
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import tokenizer_from_state
from zoo.errors import check_z_loss
from zoo.model import ModelConfig, build_model
from zoo.model.decoding.sampling import sample
from zoo.tasks.base import TaskBase
from zoo.tasks.objectives import MaskedLM
from zoo.training.distributed import is_fsdp, root_params


class LanguageModeling(TaskBase):
    """Language modeling on (x, y) windows of T tokens, y = x shifted left by one. The objective is
    task.objective (null: the architecture's default, zoo.tasks.objectives.objective_class), recorded as
    `objective` (results.json, W&B config); an objective the arch cannot train is refused (ValueError).
    The objectives (zoo.tasks.objectives): decoder_only causal_lm, prefix_lm (model.mask=prefix) and
    causal_continuation (the continuation alone); encoder_only entp (default) and masked_lm; encoder_decoder
    prefix_continuation. Every one but masked_lm
    also logs val/cont_loss, the loss on the T - T/2 + 1 continuation tokens y[:, T/2-1:], so the numbers of
    the three architectures compare; causal_lm and entp print a sample of text at each validation.

    arch: encoder_only | decoder_only | encoder_decoder. model: ModelConfig
    fields as a dict: the run's final config (zoo.run.plan.RunPlan). tokenizer: the data's tokenizer state, kept in the
    checkpoint so `python -m zoo.generate` can decode. optimizer: {lr, betas, weight_decay};
    scheduler: {warmup_steps, decay_steps, min_lr} (optimizer steps). sample: {prompt, max_new_tokens,
    temperature, top_k} for the text printed at each validation. context_len: the training window
    (data.block_size, tokens), the longest context sampling feeds the model (kept in the checkpoint for
    `python -m zoo.generate`; None = model.max_len). monitor / monitor_mode: the validation
    metric that selects checkpoints and is returned to sweepers. objective: see above (None = the arch's
    default). entp_targets: K of entp's training (next-token predictions per window and step). z_loss: PaLM's
    z-loss weight (Chowdhery et al. 2022, sec. 5; 0 = off): z_loss * log(Z)^2 per scored token added to the
    training loss (TaskBase.head_z_loss; validation losses stay plain).
    mask_id: masked_lm's <mask> id, the last of model.vocab_size rows (zoo.run.plan.RunPlan gives both). None: the
    model holds the data's vocabulary (a direct construction, or a checkpoint saved before mask_id was), so
    <mask> = model.vocab_size, which grows by one here; saved grown, a checkpoint rebuilds as it is.

    Logged: train/loss (nats/token), lr, tokens/s each step; val/loss, val/ppl = exp(val/loss),
    val/bpc = val/loss / ln 2 (bits per character for a character vocabulary) each validation; cost/flops,
    cost/tokens, cost/seconds (the training cost so far, TaskBase.cost). `examples` {task, split: "val", metric,
    ids, loss, tokens}: the per-window continuation losses of the validation that scored best by the monitor
    (paired tests; one process only), `ms_per_example` its wall time per window.
    Raises ValueError for an arch this task does not support.
    """

    ARCHS = ("decoder_only", "encoder_only", "encoder_decoder")
    BATCH = "lm"  # the batches it reads: any datamodule whose batches keep BATCH_CONTRACT
    BATCH_CONTRACT = ((torch.long, 2), (torch.long, 2))  # (x, y): (B, T) token ids, y = x shifted left by one

    def __init__(
        self,
        arch: str,
        model: dict,
        tokenizer: dict,
        optimizer: dict,
        scheduler: dict,
        sample: dict | None = None,
        context_len: int | None = None,
        monitor: str = "val/loss",
        monitor_mode: str = "min",
        objective: str | None = None,
        entp_targets: int = 4,
        z_loss: float = 0.0,
        mask_id: int | None = None,
    ):
        super().__init__()
        check_z_loss(z_loss, "task.z_loss")
        rule = self.objective_for(arch, objective, model, monitor)
        if entp_targets < 1:
            raise ValueError(f"task.entp_targets={entp_targets} must be >= 1 (next-token predictions per window)")
        objective = self.objective = rule.NAME  # saved resolved: a checkpoint rebuilds the objective it trained
        if rule is MaskedLM and mask_id is None:  # a model of the data's vocabulary: <mask> one id past it
            mask_id, model = model["vocab_size"], MaskedLM.model_fields(model)
        self.save_hyperparameters()  # model.vocab_size saved = the embedding's rows, <mask> included
        self.mask_id = mask_id
        self.model = build_model(arch, ModelConfig(**model))
        self.objective_impl = rule(self)
        self.tokenizer = tokenizer_from_state(tokenizer)  # char or BPE, as the data's
        self.val_loss, self.cont_loss, self.mlm_acc = MeanMetric(), MeanMetric(), MeanMetric()
        self.samples = []

    def losses(self, batch, generator=None) -> dict:
        """The objective's losses of a (x, y) batch: {"loss", and where defined "cont", "cont_windows" (B,),
        "acc"} (zoo.tasks.objectives.base.LMObjective.losses). Records the continuation's tokens per window,
        T - T/2 + 1 (examples.json)."""
        self._cont_tokens = batch[0].shape[1] - batch[0].shape[1] // 2 + 1
        return self.objective_impl.losses(batch, generator)

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the training forward pass of `batch` (the objective's batch_flops)."""
        return self.objective_impl.batch_flops(batch)

    def training_loss(self, batch) -> torch.Tensor:
        """The training objective (nats per token): the objective's training_loss (entp: its sampled estimate)."""
        return self.objective_impl.training_loss(batch)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    def training_step(self, batch, batch_idx):
        loss = self.training_loss(batch)
        self.log_train_step(loss, batch[0].numel(), self.batch_flops(batch))
        return loss

    def on_validation_epoch_start(self):
        self._windows, self._t_val = [], time.perf_counter()

    def validation_step(self, batch, batch_idx):
        out = self.losses(batch, self.objective_impl.validation_generator(batch_idx, batch[0].device))
        self.val_loss.update(out["loss"], weight=batch[1].numel())
        if "cont" in out:
            self.cont_loss.update(out["cont"])
            self._windows += out["cont_windows"].tolist()
        if "acc" in out:
            self.mlm_acc.update(out["acc"])

    def on_validation_epoch_end(self):
        loss = self.val_loss.compute()
        metrics = {"val/loss": loss, "val/ppl": loss.exp(), "val/bpc": loss / math.log(2)}
        if "val/cont_loss" in self.objective_impl.METRICS:
            metrics["val/cont_loss"] = self.cont_loss.compute()
        if "val/mlm_acc" in self.objective_impl.METRICS:
            metrics["val/mlm_acc"] = self.mlm_acc.compute()
        for m in (self.val_loss, self.cont_loss, self.mlm_acc):
            m.reset()
        before = self.best.get(self.hparams.monitor)
        self.log_validation(metrics)
        # the best moved: strictly better, as the best checkpoint (ModelCheckpoint keeps the first of equal scores)
        improved = self.hparams.monitor in metrics and self.best.get(self.hparams.monitor) != before
        if improved and self._windows and not self.trainer.sanity_checking:
            self.keep_examples()
        if self.trainer.sanity_checking or not self.objective_impl.SAMPLES or not self.hparams.sample:
            return
        wrapped = getattr(self.trainer.strategy, "model", None)
        if is_fsdp(wrapped):  # every rank decodes the same sample (the layer units gather collectively)
            with root_params(wrapped):
                text = self.sample_text()
            if self.trainer.is_global_zero:
                self.print_sample(text)
        elif self.trainer.is_global_zero:
            self.print_sample(self.sample_text())

    def keep_examples(self) -> None:
        """The validation the best checkpoint scored: its per-window continuation losses (paired tests)."""
        self.examples = {
            "task": "lm",
            "split": "val",
            "metric": "val/cont_loss",
            "ids": list(range(len(self._windows))),
            "loss": self._windows,
            "tokens": [self._cont_tokens] * len(self._windows),
        }
        self.ms_per_example = 1000 * (time.perf_counter() - self._t_val) / len(self._windows)

    def sample_text(self) -> str:
        """task.sample's text: its prompt continued by max_new_tokens tokens (seed 0)."""
        s = self.hparams.sample
        return self.generate_text(s["prompt"], s["max_new_tokens"], s["temperature"], s.get("top_k"), seed=0)

    def print_sample(self, text: str):
        """Print the validation sample and log it (W&B: the table of every sample so far)."""
        self.print(f"\n--- sample at step {self.global_step} ---\n{text}\n---")
        self.samples.append([self.global_step, text])
        for logger in self.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_text(key="samples", columns=["step", "text"], data=self.samples)

    @torch.no_grad()
    def generate_text(
        self,
        prompt: str,
        max_new_tokens: int,
        temperature: float = 0.8,
        top_k=None,
        top_p=None,
        seed: int | None = None,
    ) -> str:
        """Continue `prompt` (characters) by max_new_tokens tokens; returns prompt + continuation."""
        was_training = self.model.training
        self.model.eval()
        text = sample(
            self.model,
            self.tokenizer,
            prompt,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            seed,
            self.hparams.context_len,
        )
        self.model.train(was_training)
        return text
