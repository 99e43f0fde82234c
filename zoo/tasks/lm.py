"""Language modeling on character windows as a LightningModule: every architecture predicts the next token
(decoder_only causal or prefix LM, encoder_only ENTP, encoder_decoder prefix -> continuation), scored on the
same continuation tokens; encoder_only's masked LM (BERT) stays as task.objective=masked_lm."""

import math
import time

import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torchmetrics import MeanMetric

from zoo.data.bpe import tokenizer_from_state
from zoo.distributed import is_fsdp, root_params
from zoo.generate import sample
from zoo.model import ModelConfig, build_model
from zoo.model.chunked_ce import check_z_loss, lm_head_cross_entropy
from zoo.model.cost import batch_flops
from zoo.model.encoder_only import prefix_next_features
from zoo.model_config_from_data import for_objective
from zoo.tasks.base import TaskBase
from zoo.tasks.nat import uniform

ENTP_EVAL_TOKENS = 2**16  # padded tokens per forward of entp's exact evaluation (bounds its memory)


def strata(T: int, k: int) -> list:
    """Bounds of k contiguous strata of positions 0 .. T-1, as equal as possible (1 <= k <= T): stratum i is
    bounds[i] .. bounds[i+1] - 1."""
    return [i * T // k for i in range(k + 1)]


def stratified_positions(like: torch.Tensor, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, k) long: per row of like (B, T), one position drawn uniformly from each of the k strata (`strata`):
    every position is drawn with probability 1 / its stratum's size (k / T when k divides T); k = T: every
    position, in order."""
    bounds = strata(like.shape[1], k)
    lo = torch.tensor(bounds[:-1], device=like.device)
    size = torch.tensor(bounds[1:], device=like.device) - lo  # (k,) >= 1
    u = uniform(like[:, :k], generator)  # (B, k)
    return lo + torch.minimum((u * size).long(), size - 1)


class LanguageModeling(TaskBase):
    """Language modeling on (x, y) windows of T characters, y = x shifted left by one. The objective is
    task.objective (null: the architecture's default, the first listed in OBJECTIVES), recorded as
    `objective` (results.json, W&B config); an objective the arch cannot train is refused (ValueError):

    decoder_only, "causal_lm": next-token cross-entropy at every position. It also logs val/cont_loss, the
        loss on the second half of each window only (the tokens encoder_decoder predicts), so the two
        numbers compare.
    encoder_only, "entp" (default; Ewer et al. 2024, "Encoder-only Next Token Prediction"): to predict
        y[:, j] the bidirectional encoder reads the prefix x[:, :j+1] alone, again for every j (no causal
        mask, no KV reuse), and the LM head on the prefix's last position predicts the next token. Scored as
        encoder_decoder: val/loss = val/cont_loss = the loss on the T - T/2 + 1 continuation targets
        y[:, T/2-1:], predicted from prefixes of lengths T/2 .. T, computed exactly (every prefix a row of
        padded forwards, zoo.model.encoder_only.prefix_next_features). Training: per window task.entp_targets
        = K targets drawn from all T (prefix lengths 1 .. T, the positions decoder_only trains on, so short
        contexts are learned too), one uniformly from each of K equal strata of positions: each position is
        equally likely, so the stratum-weighted mean is an unbiased estimate of the causal LM's all-position
        loss (with less variance than K independent draws), and stratum i's rows are only as wide as its
        longest prefix: a step costs about (K + 1) / 2 causal forwards of the window (batch_flops), a generated
        token one forward over its prefix (inference_flops_per_token; task.sample decodes so,
        EncoderOnly.generate).
    encoder_only, "masked_lm" (task.objective=masked_lm; Devlin et al. 2019, sec. 3.1): 15% of positions are
        chosen; 80% of them become a <mask> token (id vocab_size, added to the vocabulary), 10% a random
        character, 10% stay; the loss
        is on the chosen positions only. val/loss is the masked-token loss and val/mlm_acc its accuracy:
        a different objective, not comparable with the causal numbers. Validation masks are fixed (seeded).
    decoder_only with model.mask=prefix, "prefix_lm" (T5's prefix LM, Raffel et al. 2020, sec. 3.2.1):
        attention is bidirectional over the first half x[:, :T/2] and causal after; the loss is on the same
        T/2 + 1 continuation tokens as encoder_decoder's (val/loss = val/cont_loss).
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
    metric that selects checkpoints and is returned to sweepers. objective: see above (None = the arch's
    default). entp_targets: K of entp's training (next-token predictions per window and step). z_loss: PaLM's
    z-loss weight (Chowdhery et al. 2022, sec. 5; 0 = off): z_loss * log(Z)^2 per scored token added to the
    training loss (TaskBase.head_z_loss; validation losses stay plain).
    mask_id: masked_lm's <mask> id, None = one past the data's vocabulary, model.vocab_size, which then grows by
    one; saved with the grown model, so a checkpoint's model.vocab_size is its embedding's rows and rebuilds as it is.

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
    VAL_METRICS = {  # per arch, what task.monitor may name: the validation metrics it logs
        "decoder_only": ("val/loss", "val/ppl", "val/bpc", "val/cont_loss"),
        "encoder_decoder": ("val/loss", "val/ppl", "val/bpc", "val/cont_loss"),
        "encoder_only": ("val/loss", "val/ppl", "val/bpc", "val/cont_loss", "val/mlm_acc"),
    }  # by objective:
    OBJECTIVE_METRICS = {"masked_lm": ("val/loss", "val/ppl", "val/bpc", "val/mlm_acc")}  # others log val/cont_loss
    MASKS = {
        "decoder_only": (None, "causal", "sliding", "prefix"),  # others would see the next token
        "encoder_decoder": (None, "causal", "sliding"),
    }
    # per arch, the objectives it trains, its default first (decoder_only: prefix_lm with model.mask=prefix)
    OBJECTIVES = {
        "decoder_only": ("causal_lm", "prefix_lm"),
        "encoder_only": ("entp", "masked_lm"),
        "encoder_decoder": ("prefix_continuation",),
    }

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
        if arch not in self.ARCHS:
            raise ValueError(f"task=lm trains arch in {self.ARCHS}; got arch={arch!r}")
        self.objective = self.choose_objective(arch, objective, model.get("mask"))
        logged = self.OBJECTIVE_METRICS.get(self.objective, ("val/loss", "val/ppl", "val/bpc", "val/cont_loss"))
        if monitor not in logged:
            raise ValueError(
                f"task.monitor={monitor} is not logged by task.objective={self.objective}; it logs {', '.join(logged)}"
            )
        if entp_targets < 1:
            raise ValueError(f"task.entp_targets={entp_targets} must be >= 1 (next-token predictions per window)")
        objective = self.objective  # saved resolved: a checkpoint rebuilds the objective it was trained with
        if objective == "masked_lm" and mask_id is None:  # <mask>: one id past the data's vocabulary
            mask_id, model = model["vocab_size"], for_objective(objective, model)
        self.save_hyperparameters()  # model.vocab_size saved = the embedding's rows, <mask> included
        self.mask_id = mask_id
        self.model = build_model(arch, ModelConfig(**model))
        self.tokenizer = tokenizer_from_state(tokenizer)  # char or BPE, as the data's
        self.val_loss, self.cont_loss, self.mlm_acc = MeanMetric(), MeanMetric(), MeanMetric()
        self.samples = []

    @classmethod
    def choose_objective(cls, arch: str, objective: str | None, mask: str | None) -> str:
        """task.objective for `arch`: None = its default (OBJECTIVES[arch][0]; decoder_only with model.mask=prefix:
        prefix_lm). Raises ValueError for one the arch does not train, naming those it does."""
        prefix = arch == "decoder_only" and mask == "prefix"
        if objective is None:
            return "prefix_lm" if prefix else cls.OBJECTIVES[arch][0]
        if objective not in cls.OBJECTIVES[arch]:
            owner = [a for a, objs in cls.OBJECTIVES.items() if objective in objs]
            why = f"it is +arch={owner[0]}'s" if owner else "it is unknown"
            raise ValueError(
                f"task.objective={objective} cannot train +arch={arch} in task=lm ({why}); +arch={arch} "
                f"trains {', '.join(cls.OBJECTIVES[arch])} (task.objective=null: its default)"
            )
        if arch == "decoder_only" and (objective == "prefix_lm") != prefix:
            raise ValueError(
                f"task.objective={objective} needs model.mask{'=' if objective == 'prefix_lm' else '!='}"
                f"prefix (prefix_lm is decoder_only with the prefix mask, causal_lm without it)"
            )
        return objective

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
        """{"loss": the training objective (nats/token; entp: the exact continuation loss, which its training
        estimates, `entp_training_loss`), and where defined "cont": loss on the second half's continuation
        tokens (T - T/2 + 1 of them), "cont_windows": (B,) that loss per window, "acc": masked-token accuracy}."""
        x, y = batch  # (B, T), (B, T)
        h = x.shape[1] // 2
        self._cont_tokens = x.shape[1] - h + 1
        if self.objective == "entp":  # every continuation target, each from its own prefix: exact
            cuts = torch.arange(h - 1, x.shape[1], device=x.device).expand(x.shape[0], -1)  # (B, T - h + 1)
            nll = self.entp_nll(x, y, cuts, max_tokens=ENTP_EVAL_TOKENS)
            loss = nll.mean()
            return {"loss": loss, "cont": loss, "cont_windows": nll.mean(1)}
        if self.objective == "prefix_lm":  # bidirectional over x[:, :h]: only the continuation is scored
            hidden, _ = self.model.features(x, prefix_len=h)  # (B, T, d_model)
            loss, nll = self.head_loss(hidden[:, h - 1 :], y[:, h - 1 :])  # nll (B, T - h + 1)
            return {"loss": loss, "cont": loss, "cont_windows": nll.mean(1)}
        if self.hparams.arch == "decoder_only":
            hidden, _ = self.model.features(x)  # (B, T, d_model)
            loss, nll = self.head_loss(hidden, y)
            return {"loss": loss, "cont": nll[:, h - 1 :].mean(), "cont_windows": nll[:, h - 1 :].mean(1)}
        if self.hparams.arch == "encoder_decoder":
            hidden, _ = self.model.decode_features(x[:, h - 1 :], self.model.encode(x[:, :h]))  # (B, T - h + 1, d)
            loss, nll = self.head_loss(hidden, y[:, h - 1 :])
            return {"loss": loss, "cont": loss, "cont_windows": nll.mean(1)}
        inputs, chosen = self.mask_tokens(x, generator)
        logits = self.model.lm_head(self.model.encode(inputs)[chosen]).float()  # (n_chosen, V + 1): for the accuracy
        target = x[chosen]
        loss = F.cross_entropy(logits, target)
        if self.head_z_loss():  # PaLM's z-loss over the same masked positions
            loss = loss + self.head_z_loss() * logits.logsumexp(-1).square().mean()
        return {"loss": loss, "acc": (logits.argmax(-1) == target).float().mean()}

    def head_loss(self, hidden: torch.Tensor, target: torch.Tensor):
        """(mean loss, per-token losses (B, N), detached) of the LM head on hidden (B, N, d_model) against target
        (B, N): zoo.model.chunked_ce, the (B N, V) logits never built (chunks of model.loss_chunk_size rows)."""
        return lm_head_cross_entropy(
            self.model.lm_head,
            hidden,
            target,
            chunk_size=self.model.cfg.loss_chunk_size,
            return_rows=True,
            z_loss=self.head_z_loss(),
        )

    def entp_nll(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        cuts: torch.Tensor,
        width: int | None = None,
        max_tokens: int | None = None,
    ) -> torch.Tensor:
        """ENTP's next-token losses (nats): (B, k), entry (b, i) = -log p(y[b, j] | x[b, :j+1]) with j = cuts[b, i],
        each prefix re-read alone by the bidirectional encoder (prefix_next_features; width, max_tokens there).
        x, y (B, T); cuts (B, k) long in 0 .. T-1."""
        B, k = cuts.shape
        row = torch.arange(B, device=x.device).repeat_interleave(k)
        feats = prefix_next_features(self.model, x, row, cuts.flatten() + 1, width, max_tokens)  # (B k, d_model)
        nll = lm_head_cross_entropy(
            self.model.lm_head,
            feats,
            y[row, cuts.flatten()],
            reduction="none",
            chunk_size=self.model.cfg.loss_chunk_size,
            z_loss=self.head_z_loss(),
        )  # zoo.model.chunked_ce: the (B k, V) logits never built
        return nll.view(B, k)

    def entp_training_loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        """entp's training loss (nats): per window K = min(task.entp_targets, T) targets, one drawn uniformly
        from each of K strata of the T positions (stratified_positions), each predicted from its own prefix;
        stratum i is one right-padded (B, its last position + 1) forward. The mean over strata weighted by
        their sizes is an unbiased estimate of the mean next-token loss over all T positions (equal to it when
        K = T)."""
        x, y = batch
        T = x.shape[1]
        k = min(self.hparams.entp_targets, T)
        bounds, cuts = strata(T, k), stratified_positions(x, k, generator)  # (B, K)
        loss = 0.0
        for i in range(k):
            nll = self.entp_nll(x, y, cuts[:, i : i + 1], width=bounds[i + 1])  # (B, 1)
            loss = loss + nll.mean() * ((bounds[i + 1] - bounds[i]) / T)
        return loss

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the training forward pass of `batch` (B, T) (zoo.model.cost.batch_flops):
        decoder_only (B, T); encoder_decoder encoder (B, T/2), decoder (B, T - T/2 + 1); entp one (B, w_i)
        forward per stratum i (w_i its last position + 1, K = task.entp_targets strata) with the LM head on one
        position per row;
        masked_lm (B, T) with the LM head on the expected 15% of masked positions."""
        B, T = batch[0].shape
        h = T // 2
        if self.hparams.arch == "decoder_only":
            return batch_flops(self.model, B, T)
        if self.hparams.arch == "encoder_decoder":
            return batch_flops(self.model, B, T - h + 1, h)
        if self.objective == "entp":
            widths = strata(T, min(self.hparams.entp_targets, T))[1:]
            return sum(batch_flops(self.model, B, w, scored=B) for w in widths)
        return batch_flops(self.model, B, T, scored=round(0.15 * B * T))

    def inference_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """Forward FLOPs per generated token; entp has no cache, so a token costs a whole forward over its
        seq_len-token prefix with the LM head on one position (zoo.model.cost.batch_flops)."""
        if self.objective == "entp":
            return batch_flops(self.model, 1, seq_len, scored=1)
        return super().inference_flops_per_token(seq_len, src_len)

    def training_loss(self, batch) -> torch.Tensor:
        """The training objective (nats per token): the "loss" of `losses`; entp: `entp_training_loss`."""
        if self.objective == "entp":
            return self.entp_training_loss(batch)
        return self.losses(batch)["loss"]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    def training_step(self, batch, batch_idx):
        loss = self.training_loss(batch)
        self.log_train_step(loss, batch[0].numel(), self.batch_flops(batch))
        return loss

    def on_validation_epoch_start(self):
        self._windows, self._t_val = [], time.perf_counter()

    def validation_step(self, batch, batch_idx):
        g = None
        if self.objective == "masked_lm":  # the same masks at every validation
            g = torch.Generator(device=batch[0].device).manual_seed(batch_idx)
        out = self.losses(batch, g)
        self.val_loss.update(out["loss"], weight=batch[1].numel())
        if "cont" in out:
            self.cont_loss.update(out["cont"])
            self._windows += out["cont_windows"].tolist()
        if "acc" in out:
            self.mlm_acc.update(out["acc"])

    def on_validation_epoch_end(self):
        loss = self.val_loss.compute()
        metrics = {"val/loss": loss, "val/ppl": loss.exp(), "val/bpc": loss / math.log(2)}
        if self.objective != "masked_lm":
            metrics["val/cont_loss"] = self.cont_loss.compute()
        else:
            metrics["val/mlm_acc"] = self.mlm_acc.compute()
        for m in (self.val_loss, self.cont_loss, self.mlm_acc):
            m.reset()
        before = self.best.get(self.hparams.monitor)
        self.log_validation(metrics)
        # the best moved: strictly better, as the best checkpoint (ModelCheckpoint keeps the first of equal scores)
        improved = self.hparams.monitor in metrics and self.best.get(self.hparams.monitor) != before
        if improved and self._windows and not self.trainer.sanity_checking:
            # the validation the best checkpoint scored: its per-window continuation losses (paired tests)
            self.examples = {
                "task": "lm",
                "split": "val",
                "metric": "val/cont_loss",
                "ids": list(range(len(self._windows))),
                "loss": self._windows,
                "tokens": [self._cont_tokens] * len(self._windows),
            }
            self.ms_per_example = 1000 * (time.perf_counter() - self._t_val) / len(self._windows)
        if self.trainer.sanity_checking:
            return
        if self.objective not in ("causal_lm", "entp") or not self.hparams.sample:  # left-to-right models sample
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
