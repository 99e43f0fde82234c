"""Language modeling on character windows as a LightningModule, with each architecture's own objective:
decoder_only next-token prediction, encoder_only masked LM (BERT), encoder_decoder prefix -> continuation."""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import tokenizer_from_state
from zoo.distributed import is_fsdp, root_params
from zoo.generate import sample
from zoo.model import ModelConfig, build_model
from zoo.tasks.base import TaskBase


class LanguageModeling(TaskBase):
    """Language modeling on (x, y) windows of T characters, y = x shifted left by one. The objective
    depends on the architecture and is recorded as `objective` (results.json, W&B config):

    decoder_only, "causal_lm": next-token cross-entropy at every position. It also logs val/cont_loss, the
        loss on the second half of each window only (the tokens encoder_decoder predicts), so the two
        numbers compare.
    encoder_only, "masked_lm" (Devlin et al. 2019, sec. 3.1): 15% of positions are chosen; 80% of them become
        a <mask> token (id vocab_size, added to the vocabulary), 10% a random character, 10% stay; the loss
        is on the chosen positions only. val/loss is the masked-token loss and val/mlm_acc its accuracy:
        a different objective, not comparable with the causal numbers. Validation masks are fixed (seeded).
    encoder_decoder, "prefix_continuation": the encoder reads the first half x[:, :T/2]; the decoder reads
        x[:, T/2-1:] (the last source character first, as a start token) and predicts the second half
        y[:, T/2-1:]. val/loss = val/cont_loss = loss on those T/2 + 1 tokens.

    arch: encoder_only | decoder_only | encoder_decoder. model: ModelConfig
    fields as a dict (vocab_size from the data). tokenizer: the data's tokenizer state, kept in the
    checkpoint so `python -m zoo.generate` can decode. optimizer: {lr, betas, weight_decay};
    scheduler: {warmup_steps, decay_steps, min_lr} (optimizer steps). sample: {prompt, max_new_tokens,
    temperature, top_k} for the text printed at each validation. context_len: the training window
    (data.block_size, tokens), the longest context sampling feeds the model (kept in the checkpoint for
    `python -m zoo.generate`; None = model.max_len). monitor / monitor_mode: the validation
    metric that selects checkpoints and is returned to sweepers.

    Logged: train/loss (nats/token), lr, tokens/s each step; val/loss, val/ppl = exp(val/loss),
    val/bpc = val/loss / ln 2 (bits per character for a character vocabulary) each validation.
    Raises ValueError for an arch this task does not support.
    """

    ARCHS = ("decoder_only", "encoder_only", "encoder_decoder")
    BATCH = "lm"  # the batches it reads: any datamodule whose batches keep BATCH_CONTRACT
    BATCH_CONTRACT = ((torch.long, 2), (torch.long, 2))  # (x, y): (B, T) token ids, y = x shifted left by one
    VAL_METRICS = {  # per arch, what task.monitor may name: the validation metrics it logs
        "decoder_only": ("val/loss", "val/ppl", "val/bpc", "val/cont_loss"),
        "encoder_decoder": ("val/loss", "val/ppl", "val/bpc", "val/cont_loss"),
        "encoder_only": ("val/loss", "val/ppl", "val/bpc", "val/mlm_acc")}
    MASKS = {"decoder_only": (None, "causal", "sliding"),  # others would see the next token
             "encoder_decoder": (None, "causal", "sliding")}
    OBJECTIVES = {"decoder_only": "causal_lm", "encoder_only": "masked_lm", "encoder_decoder": "prefix_continuation"}

    def __init__(self, arch: str, model: dict, tokenizer: dict, optimizer: dict, scheduler: dict,
                 sample: Optional[dict] = None, context_len: Optional[int] = None, monitor: str = "val/loss",
                 monitor_mode: str = "min"):
        super().__init__()
        if arch not in self.ARCHS:
            raise ValueError(f"task=lm trains arch in {self.ARCHS}; got arch={arch!r}")
        self.save_hyperparameters()
        self.objective = self.OBJECTIVES[arch]
        if arch == "encoder_only":
            self.mask_id = model["vocab_size"]  # <mask>: one id past the data's vocabulary
            model = {**model, "vocab_size": model["vocab_size"] + 1}
        self.model = build_model(arch, ModelConfig(**model))
        self.tokenizer = tokenizer_from_state(tokenizer)  # char or BPE, as the data's
        self.val_loss, self.cont_loss, self.mlm_acc = MeanMetric(), MeanMetric(), MeanMetric()
        self.samples = []

    def mask_tokens(self, x: torch.Tensor, generator=None):
        """BERT masking of x (B, T): returns (inputs (B, T), chosen (B, T) bool). 15% chosen; of those 80%
        <mask>, 10% a random character, 10% unchanged."""
        u = torch.rand(x.shape, generator=generator, device=x.device)
        v = torch.rand(x.shape, generator=generator, device=x.device)
        chosen = u < 0.15
        random_ids = torch.randint(0, self.mask_id, x.shape, generator=generator, device=x.device)
        inputs = torch.where(chosen & (v < 0.8), torch.full_like(x, self.mask_id), x)
        inputs = torch.where(chosen & (v >= 0.8) & (v < 0.9), random_ids, inputs)
        return inputs, chosen

    def losses(self, batch, generator=None) -> dict:
        """{"loss": the training objective (nats/token), and where defined "cont": loss on the second half's
        continuation tokens, "acc": masked-token accuracy}."""
        x, y = batch  # (B, T), (B, T)
        h = x.shape[1] // 2
        if self.hparams.arch == "decoder_only":
            nll = F.cross_entropy(self.model(x).flatten(0, 1).float(), y.flatten(), reduction="none").view_as(y)
            return {"loss": nll.mean(), "cont": nll[:, h - 1:].mean()}
        if self.hparams.arch == "encoder_decoder":
            logits = self.model(x[:, :h], x[:, h - 1:])  # (B, T - h + 1, V)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), y[:, h - 1:].flatten())
            return {"loss": loss, "cont": loss}
        inputs, chosen = self.mask_tokens(x, generator)
        logits = self.model(inputs)[chosen].float()  # (n_chosen, V + 1)
        target = x[chosen]
        return {"loss": F.cross_entropy(logits, target), "acc": (logits.argmax(-1) == target).float().mean()}

    def training_loss(self, batch) -> torch.Tensor:
        """The "loss" of `losses` (nats per token)."""
        return self.losses(batch)["loss"]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    def training_step(self, batch, batch_idx):
        loss = self.training_loss(batch)
        self.log_train_step(loss, batch[0].numel())
        return loss

    def validation_step(self, batch, batch_idx):
        g = None
        if self.hparams.arch == "encoder_only":  # the same masks at every validation
            g = torch.Generator(device=batch[0].device).manual_seed(batch_idx)
        out = self.losses(batch, g)
        self.val_loss.update(out["loss"], weight=batch[1].numel())
        if "cont" in out:
            self.cont_loss.update(out["cont"])
        if "acc" in out:
            self.mlm_acc.update(out["acc"])

    def on_validation_epoch_end(self):
        loss = self.val_loss.compute()
        metrics = {"val/loss": loss, "val/ppl": loss.exp(), "val/bpc": loss / math.log(2)}
        if self.hparams.arch != "encoder_only":
            metrics["val/cont_loss"] = self.cont_loss.compute()
        else:
            metrics["val/mlm_acc"] = self.mlm_acc.compute()
        for m in (self.val_loss, self.cont_loss, self.mlm_acc):
            m.reset()
        self.log_validation(metrics)
        if self.trainer.sanity_checking:
            return
        if self.hparams.arch != "decoder_only" or not self.hparams.sample:
            return
        wrapped = getattr(self.trainer.strategy, "model", None)
        if is_fsdp(wrapped):  # every rank decodes the same sample (the layer units gather collectively)
            with root_params(wrapped):
                text = self.sample_text()
            if self.trainer.is_global_zero:
                self.print_sample(text)
        elif self.trainer.is_global_zero:
            self.print_sample(self.sample_text())

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
    def generate_text(self, prompt: str, max_new_tokens: int, temperature: float = 0.8, top_k=None,
                      top_p=None, seed: Optional[int] = None) -> str:
        """Continue `prompt` (characters) by max_new_tokens tokens; returns prompt + continuation."""
        was_training = self.model.training
        self.model.eval()
        text = sample(self.model, self.tokenizer, prompt, max_new_tokens, temperature, top_k, top_p, seed,
                      self.hparams.context_len)
        self.model.train(was_training)
        return text
