"""What every objective shares. An objective is the rule by which a task trains one architecture: the model
class it needs (ARCH), the model fields it adds (model_fields), how a batch becomes inputs and targets (its
losses), what it costs (batch_flops), and how it decodes. The task (zoo.tasks.lm, zoo.tasks.translation,
zoo.tasks.classification) holds the loop-facing code: logging, metrics, examples."""

import torch

from zoo.model.cost import flops_per_token
from zoo.model.loss.chunked_ce import lm_head_cross_entropy

IGNORE = -100  # target positions the loss skips, chosen by position (padding, source), never by token id


class Objective:
    """Base of every objective. An instance serves one task (`task`: its model, hparams and head_z_loss).

    Class attributes, read by zoo.run.checks before any model is built:
    NAME: task.objective's value, recorded in results.json. TASK: the task kind (lm, translation,
    classification). ARCH: the architecture it trains. MASKS: the model.mask values it trains with (None: any;
    a mask that lets the model see the tokens it predicts is left out). METRICS: the validation metrics it logs
    (what task.monitor may name). SOURCE: how it reads a translation pair's source: "apart" (an encoder reads
    it), "joined" (source and target in one sequence), None (no source)."""

    NAME: str = ""
    TASK: str = ""
    ARCH: str = ""
    MASKS: tuple | None = None
    METRICS: tuple = ("val/loss",)
    SOURCE: str | None = None
    ONE_VOCABULARY = False  # True: source and target ids share one sequence, so one vocabulary (joint_vocab)
    OPTIONS: tuple = ()  # the task options only this objective reads (task.<name>)
    FIXED_SPECIAL_IDS = False  # True: writes zoo.data.bpe's fixed special ids (CLS_ID, MASK_ID, ...) into inputs

    def __init__(self, task):
        self.task = task

    @property
    def model(self):
        return self.task.model

    @property
    def hparams(self):
        return self.task.hparams

    @classmethod
    def check_options(cls, **options) -> None:
        """Raise ValueError for a task option this objective cannot train with (task.<name>=value)."""

    @classmethod
    def check_model(cls, model: dict, window: int | None = None, arch: str | None = None) -> None:
        """Raise ValueError for a model field this objective would not obey (the run is refused, never trained
        with the field silently replaced). model: ModelConfig fields; window: the data's training window
        (data.block_size, tokens) where it has one; arch: the architecture trained. Default: model.prefix_len,
        read only with model.mask=prefix, is refused with any other mask; an objective that trains a prefix
        mask says how it reads it (zoo.run.plan.RunPlan.from_config calls this once per run)."""
        if model.get("prefix_len") and model.get("mask") != "prefix":
            raise ValueError(
                f"model.prefix_len={model['prefix_len']} is read only with model.mask=prefix (this run: "
                f"model.mask={model.get('mask')}); drop model.prefix_len (0)"
            )

    @classmethod
    def model_fields(cls, model: dict) -> dict:
        """The ModelConfig fields this objective trains with, from the run's (`model`, with the data's sizes);
        zoo.run.plan.RunPlan.with_data applies it once. Default: `model` as it is."""
        return model

    @classmethod
    def task_fields(cls, model: dict) -> dict:
        """The task arguments this objective adds to a run, from the model fields before model_fields (e.g.
        masked_lm's mask_id). Default: none."""
        return {}

    def forward_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """Forward FLOPs per token of the model at the data's typical lengths (tokens): seq_len the target (or
        only) sequence, src_len the source. SOURCE "apart" reads them apart; "joined" reads source + target as
        one sequence; otherwise seq_len alone. See zoo.model.cost.flops_per_token (Kaplan et al. 2020's
        2 x parameters per token plus attention)."""
        if self.SOURCE != "apart":
            seq_len, src_len = seq_len + (src_len or 0) * (self.SOURCE == "joined"), None
        return flops_per_token(self.model, seq_len, src_len)

    def inference_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """Forward FLOPs per generated (or classified) token: with a KV cache a new token costs about one
        token's forward pass, forward_flops_per_token. Objectives without a cache override it."""
        return self.forward_flops_per_token(seq_len, src_len)

    def training_loss(self, batch) -> torch.Tensor:
        """The scalar a training step backpropagates (nats per token, or per example for classification)."""
        raise NotImplementedError

    def batch_flops(self, batch) -> float:
        """Forward FLOPs of the training forward pass of `batch` at its padded shapes (zoo.model.cost)."""
        raise NotImplementedError

    def head_loss(self, hidden: torch.Tensor, target: torch.Tensor, **kwargs):
        """zoo.model.loss.chunked_ce.lm_head_cross_entropy of the LM head on hidden (..., d_model) against target,
        chunked by model.loss_chunk_size, with the task's z-loss in training (TaskBase.head_z_loss): the
        (rows, V) logits are never built."""
        return lm_head_cross_entropy(
            self.model.lm_head,
            hidden,
            target,
            chunk_size=self.model.cfg.loss_chunk_size,
            z_loss=self.task.head_z_loss(),
            **kwargs,
        )


class LMObjective(Objective):
    """An objective of task=lm on (x, y) windows (B, T), y = x shifted left by one. Every one but masked_lm
    predicts the same continuation: the T - T/2 + 1 targets y[:, T/2-1:] (val/cont_loss)."""

    TASK = "lm"
    METRICS = ("val/loss", "val/ppl", "val/bpc", "val/cont_loss")
    SAMPLES = False  # a left-to-right model: the task prints a sample of its text at each validation

    def losses(self, batch, generator: torch.Generator | None = None) -> dict:
        """{"loss": the objective (nats/token), and where defined "cont": the loss on the continuation tokens,
        "cont_windows": (B,) that loss per window, "acc": masked-token accuracy}."""
        raise NotImplementedError

    def validation_generator(self, batch_idx: int, device) -> torch.Generator | None:
        """The generator of a validation batch's random draws (None: the objective draws nothing)."""
        return None

    def training_loss(self, batch) -> torch.Tensor:
        return self.losses(batch)["loss"]


class TranslationObjective(Objective):
    """An objective of task=translation on zoo.data.translation_set.collate_translation batches."""

    TASK = "translation"
    METRICS = ("val/loss", "val/bleu", "val/chrf")

    def loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        """The training objective (nats per target token) of a batch."""
        raise NotImplementedError

    def eval_loss(self, batch, batch_idx: int) -> dict:
        """{"loss": the validation / test loss of a batch, "weight": the tokens it averages} and any other
        metric as (value, weight) under its name without the split (cmlm's "length_acc")."""
        return {"loss": self.loss(batch), "weight": (~batch["tgt_key_padding_mask"]).sum()}

    def translate(self, batch, beam_size: int = 1) -> list:
        """Hypotheses (token-id lists, specials removed) for a batch; greedy with beam_size 1."""
        raise NotImplementedError

    def training_loss(self, batch) -> torch.Tensor:
        return self.loss(batch)

    def trim(self, out: torch.Tensor) -> list:
        """Generated rows (B, N) as token-id lists: each cut at its first EOS, padding removed."""
        eos, pad = self.model.cfg.eos_id, self.model.cfg.pad_id
        hyps = []
        for row in out.tolist():
            row = row[: row.index(eos)] if eos in row else row
            hyps.append([t for t in row if t != pad])
        return hyps
