"""Causal language modeling as a LightningModule (decoder-only, next-token prediction)."""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.char_tokenizer import CharTokenizer
from zoo.generate import sample
from zoo.model import ModelConfig, build_model
from zoo.tasks.base import TaskBase


class LanguageModeling(TaskBase):
    """Next-token cross-entropy on (x, y) windows, y = x shifted left by one.

    arch: decoder_only (other architectures' LM objectives are separate tasks). model: ModelConfig
    fields as a dict (vocab_size from the data). tokenizer: the data's tokenizer state, kept in the
    checkpoint so `python -m zoo.generate` can decode. optimizer: {lr, betas, weight_decay};
    scheduler: {warmup_steps, decay_steps, min_lr} (optimizer steps). sample: {prompt, max_new_tokens,
    temperature, top_k} for the text printed at each validation. monitor / monitor_mode: the validation
    metric that selects checkpoints and is returned to sweepers.

    Logged: train/loss (nats/token), lr, tokens/s each step; val/loss, val/ppl = exp(val/loss),
    val/bpc = val/loss / ln 2 (bits per character for a character vocabulary) each validation.
    Raises ValueError for an arch this task does not support.
    """

    ARCHS = ("decoder_only",)

    def __init__(self, arch: str, model: dict, tokenizer: dict, optimizer: dict, scheduler: dict,
                 sample: Optional[dict] = None, monitor: str = "val/loss", monitor_mode: str = "min"):
        super().__init__()
        if arch != "decoder_only":
            raise ValueError(f"task=lm trains arch=decoder_only; got arch={arch!r}")
        self.save_hyperparameters()
        self.model = build_model(arch, ModelConfig(**model))
        self.tokenizer = CharTokenizer.from_state_dict(tokenizer)
        self.val_loss = MeanMetric()
        self.samples = []

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch  # (B, T), (B, T)
        logits = self.model(x)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log_train_step(loss, batch[0].numel())
        return loss

    def validation_step(self, batch, batch_idx):
        self.val_loss.update(self.loss(batch), weight=batch[1].numel())

    def on_validation_epoch_end(self):
        loss = self.val_loss.compute()
        self.val_loss.reset()
        self.log_validation({"val/loss": loss, "val/ppl": loss.exp(), "val/bpc": loss / math.log(2)})
        if self.trainer.sanity_checking:
            return
        if self.hparams.sample and self.trainer.is_global_zero:
            self.print_sample()

    def print_sample(self):
        s = self.hparams.sample
        text = self.generate_text(s["prompt"], s["max_new_tokens"], s["temperature"], s.get("top_k"), seed=0)
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
        text = sample(self.model, self.tokenizer, prompt, max_new_tokens, temperature, top_k, top_p, seed)
        self.model.train(was_training)
        return text
