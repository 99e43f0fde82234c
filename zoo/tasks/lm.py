"""Causal language modeling as a LightningModule (decoder-only, next-token prediction)."""
import math
import time
from typing import Optional

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.char_tokenizer import CharTokenizer
from zoo.generate import sample
from zoo.model import ModelConfig, build_model
from zoo.optim import WarmupCosine, adamw


class LanguageModeling(pl.LightningModule):
    """Next-token cross-entropy on (x, y) windows, y = x shifted left by one.

    arch: decoder_only (other architectures' LM objectives are separate tasks). model: ModelConfig
    fields as a dict (vocab_size from the data). tokenizer: the data's tokenizer state, kept in the
    checkpoint so `python -m zoo.generate` can decode. optimizer: {lr, betas, weight_decay};
    scheduler: {warmup_steps, decay_steps, min_lr} (optimizer steps). sample: {prompt, max_new_tokens,
    temperature, top_k} for the text printed at each validation.

    Logged: train/loss (nats/token), lr, tokens/s each step; val/loss, val/ppl = exp(val/loss),
    val/bpc = val/loss / ln 2 (bits per character for a character vocabulary) each validation.
    Raises ValueError for an arch this task does not support.
    """

    def __init__(self, arch: str, model: dict, tokenizer: dict, optimizer: dict, scheduler: dict,
                 sample: Optional[dict] = None):
        super().__init__()
        if arch != "decoder_only":
            raise ValueError(f"task=lm trains arch=decoder_only; got arch={arch!r}")
        self.save_hyperparameters()
        self.model = build_model(arch, ModelConfig(**model))
        self.tokenizer = CharTokenizer.from_state_dict(tokenizer)
        self.val_loss = MeanMetric()
        self.best = {}
        self.samples = []
        self._t_last = None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch  # (B, T), (B, T)
        logits = self.model(x)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        now = time.perf_counter()
        if self._t_last is not None:
            self.log("tokens/s", batch[0].numel() / (now - self._t_last), on_step=True, on_epoch=False)
        self._t_last = now
        self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        self.log("lr", self.trainer.optimizers[0].param_groups[0]["lr"], on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch, batch_idx):
        self.val_loss.update(self.loss(batch), weight=batch[1].numel())

    def on_validation_epoch_end(self):
        loss = self.val_loss.compute()
        self.val_loss.reset()
        metrics = {"val/loss": loss, "val/ppl": loss.exp(), "val/bpc": loss / math.log(2)}
        self.log_dict(metrics, prog_bar=True)
        if self.trainer.sanity_checking:
            return
        for k, v in metrics.items():
            self.best[k] = min(self.best.get(k, float("inf")), float(v))
        self._t_last = None  # validation time is not training throughput
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

    def configure_optimizers(self):
        o, s = self.hparams.optimizer, self.hparams.scheduler
        opt = adamw(self.model, o["lr"], o.get("betas", (0.9, 0.999)), o.get("weight_decay", 0.1))
        decay = s.get("decay_steps") or self.trainer.max_steps
        sched = torch.optim.lr_scheduler.LambdaLR(opt, WarmupCosine(s["warmup_steps"], decay, o["lr"], s["min_lr"]))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
