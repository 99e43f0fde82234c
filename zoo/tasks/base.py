"""What every task's LightningModule shares: step logging, best-metric tracking, the optimizer, and the
runtime options model.compile and FSDP's sharded parameters."""

import gc
import math
import time
import types

import lightning.pytorch as pl
import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from lightning.pytorch.trainer.states import TrainerFn
from torch import nn

from zoo.data.info import CHECKPOINT_KEY
from zoo.model.blocks.layer import DecoderLayer, EncoderLayer
from zoo.tasks.batch_contract import check_batch
from zoo.tasks.objectives import check_monitor, objective_class
from zoo.training.callbacks.checkpoint import validation_due
from zoo.training.checkpoint_io import settle_epoch_end
from zoo.training.distributed import full_params, is_fsdp
from zoo.training.optim import clip_grad_norm, is_fused
from zoo.training.optim_config import configure_optimizers
from zoo.training.schedule_fit import fit_schedule

LOWER_IS_BETTER = ("loss", "ppl", "bpc")
BUDGET_COST = {
    "tokens": "tokens",
    "flops": "flops",
    "time": "seconds",
}  # budget kind -> its key of TaskBase.cost  # metric name endings; any other metric (acc, f1, bleu, ...): higher


def metric_mode(name: str) -> str:
    """'min' for a metric that is better lower (its name ends in loss, ppl or bpc), else 'max'."""
    return "min" if name.endswith(LOWER_IS_BETTER) else "max"


_COMPILED = {}  # (layer class, compile options) -> torch.compile(layer class's forward), shared by all its layers


def _layer_forward(self, *args, **kwargs):
    """forward of a layer after compile_layers: the compiled forward in training, the eager one otherwise."""
    if self.training and torch.is_grad_enabled():
        return self.compiled_forward(self, *args, **kwargs)
    return type(self).forward(self, *args, **kwargs)


def compile_layers(model: nn.Module, **compile_kwargs) -> int:
    """Regional compilation: every EncoderLayer / DecoderLayer of `model` runs torch.compile(layer class's
    forward, **compile_kwargs) in training (module in train mode, grad enabled). All layers of a class share
    one compiled graph (their parameters are its inputs), so compile time does not grow with n_layers.
    Evaluation, generation and beam search run eagerly: their lengths and KV caches change every step and
    would recompile. Parameters, state_dict and checkpoints are unchanged. Idempotent; returns the number of
    layers switched to the compiled forward by this call."""
    key_opts = tuple(sorted(compile_kwargs.items()))
    n = 0
    for layer in model.modules():
        if isinstance(layer, (EncoderLayer, DecoderLayer)) and "compiled_forward" not in vars(layer):
            key = (type(layer), key_opts)
            if key not in _COMPILED:
                _COMPILED[key] = torch.compile(type(layer).forward, **compile_kwargs)
            layer.compiled_forward = _COMPILED[key]
            layer.forward = types.MethodType(_layer_forward, layer)
            n += 1
    return n


def compile_training_loss(task: "TaskBase", **compile_kwargs) -> bool:
    """Whole-model compilation: task.training_loss (embeddings, every layer, head and cross-entropy) runs as
    torch.compile(task.training_loss, **compile_kwargs), as nanoGPT compiles its model with the loss. Only
    the training step calls training_loss, so evaluation, generation and beam search stay eager. Compile
    time grows with depth (the layers are unrolled into one graph); data-dependent shapes (encoder_only's
    masked positions) split the graph there. Parameters, state_dict and checkpoints are unchanged.
    Idempotent; returns True if this call compiled it."""
    if "training_loss" in vars(task):
        return False
    task.training_loss = torch.compile(task.training_loss, **compile_kwargs)
    return True


class TaskBase(pl.LightningModule):
    """Subclasses set self.model (a zoo.model architecture), self.objective_impl (its zoo.tasks.objectives
    objective, which owns the losses, costs and decoding) and save hparams with optimizer, scheduler,
    monitor and monitor_mode. `best` holds the best value of each validation metric (direction:
    metric_mode, min for loss / ppl / bpc, else max); the monitored one is what zoo.run.train returns to sweepers."""

    BATCH = None  # the kind of batch it reads ("lm", "classification", "translation"), as datamodules declare it
    # what a batch must hold: {key: (dtype, ndim)} for dict batches, or a tuple of (dtype, ndim) for tuples
    BATCH_CONTRACT: "dict | tuple" = {}

    def __init__(self):
        super().__init__()
        self.best = {}
        self._t_last = None  # when train/loss was last logged, and the tokens trained since (tokens/s)
        self._tokens_since = 0
        self._t_batch = None
        # cumulative training cost of the run (all ranks; kept in checkpoints): forward + backward FLOPs
        # (3 x the forward FLOPs of the padded batches, zoo.model.cost), tokens read, seconds in training steps
        self.cost = {"flops": 0.0, "tokens": 0, "seconds": 0.0}
        self.budget = None  # (kind: tokens | flops | time, value): the run stops when cost reaches it (zoo.run.train)

    @classmethod
    def objective_for(cls, arch: str, objective: str | None, model: dict, monitor: str):
        """The objective class that trains `arch` in this task (zoo.tasks.objectives.objective_class: `objective`
        or the arch's default for model["mask"]), which must log `monitor`. Raises ValueError for an arch the
        task does not train, an objective the arch does not, or a monitor the objective does not log."""
        if arch not in cls.ARCHS:
            raise ValueError(f"task={cls.BATCH} trains arch in {cls.ARCHS}; got arch={arch!r}")
        rule = objective_class(cls.BATCH, arch, objective, model.get("mask"))
        check_monitor(rule, monitor)
        return rule

    def budget_progress(self) -> float:
        """The fraction of the run's budget spent: cost[kind] / value (tokens, flops, seconds), else
        global_step / max_steps; 0.0 when the run is unbounded."""
        if self.budget is not None:
            kind, value = self.budget
            return self.cost[BUDGET_COST[kind]] / value
        max_steps = self.trainer.max_steps if self._trainer is not None else -1
        return self.global_step / max_steps if max_steps > 0 else 0.0

    def forward_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """Forward FLOPs per token of this task's model at the data's typical lengths (tokens): seq_len the
        target (or only) sequence, src_len the source, read as the objective reads them
        (zoo.tasks.objectives.base.Objective.forward_flops_per_token)."""
        return self.objective_impl.forward_flops_per_token(seq_len, src_len)

    def on_train_start(self):
        """Freeze the objects alive now (the config, the Trainer, loggers, data) out of Python's cyclic garbage
        collector until training ends: a collection triggered by the loop's per-step objects would otherwise
        rescan them all, a pause small models feel every few steps. Unfrozen in on_train_end."""
        gc.collect()
        gc.freeze()

    def on_train_end(self):
        gc.unfreeze()

    def teardown(self, stage: str):
        gc.unfreeze()  # also after a run that raised before on_train_end

    def log_train_step(self, loss: torch.Tensor, tokens, forward_flops: float) -> None:
        """Add the batch to `cost`: tokens, and 3 x forward_flops (the FLOPs of this batch's forward pass at its
        padded shape; backward = 2 x forward, Kaplan et al. 2020 sec. 2.1), both times the number of processes.
        On the steps the loggers write (trainer.log_every_n_steps) log train/loss, lr and tokens/s (the tokens
        trained since the last logged step over the seconds since then); the other steps log nothing, as each
        self.log call costs Lightning about a millisecond, a share of a small model's step."""
        world = self.trainer.world_size if self._trainer is not None else 1
        self.cost["flops"] += 3.0 * float(forward_flops) * world
        self.cost["tokens"] += int(tokens) * world
        self._tokens_since += int(tokens)
        if self._trainer is not None and not self.trainer._logger_connector.should_update_logs:
            return
        now = time.perf_counter()
        if self._t_last is not None:
            self.log("tokens/s", self._tokens_since / (now - self._t_last), on_step=True, on_epoch=False)
        self._t_last, self._tokens_since = now, 0
        self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        self.log("lr", self.trainer.optimizers[0].param_groups[0]["lr"], on_step=True, on_epoch=False)

    def log_validation(self, metrics: dict) -> None:
        """Log the epoch's validation metrics and update `best` (skipped while sanity checking)."""
        self.log_dict(metrics, prog_bar=True)
        if self.trainer.sanity_checking:
            return
        # the training cost behind these scores: curves against FLOPs and seconds (zoo.report, zoo.dashboard)
        self.log_dict({f"cost/{k}": float(v) for k, v in self.cost.items()})
        for k, v in metrics.items():
            better = min if metric_mode(k) == "min" else max
            self.best[k] = better(self.best.get(k, float(v)), float(v))
        self._t_last, self._tokens_since = None, 0  # validation time is not training throughput

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Record the task class, so a checkpoint from another task is refused before training (zoo.run.train),
        and the datamodule's data settings (its data_info(), under zoo.data.info.CHECKPOINT_KEY), which
        zoo.report and zoo.generate read."""
        checkpoint["zoo_task"] = type(self).__name__
        checkpoint["zoo_cost"] = dict(self.cost)
        data_info = getattr(self.trainer.datamodule, "data_info", None)
        if data_info is not None:
            checkpoint[CHECKPOINT_KEY] = data_info()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Before Lightning restores its loops from an epoch-end checkpoint, record whether that epoch finished
        or max_steps cut it (zoo.training.checkpoint_io.settle_epoch_end): the resumed run then reads the batches, and
        validates and checkpoints at the steps, of an uninterrupted run. A resumed fit also continues the
        checkpoint's training cost; loading one to test it leaves the cost of the run that trained."""
        settle_epoch_end(checkpoint)
        if self._trainer is None or self.trainer.state.fn == TrainerFn.FITTING:
            # resume continues the cost; the test of the best checkpoint keeps the whole run's, not its own
            self.cost.update(checkpoint.get("zoo_cost", {}))

    def on_train_batch_start(self, batch, batch_idx) -> None:
        """Check the first batch against BATCH_CONTRACT, before any training step. Keep the step that loggers
        record equal to the optimizer step. Lightning counts it separately
        (_batches_that_stepped) and adds one when it resumes from a checkpoint it assumes was written inside
        a batch; zoo's last.ckpt is written at the epoch end, so resumed runs would log every step one late."""
        if not getattr(self, "_batch_checked", False):
            check_batch(self, batch)
            self._batch_checked = True
        self.trainer.fit_loop.epoch_loop._batches_that_stepped = self.trainer.global_step
        self._t_batch = time.perf_counter()

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        """Reaching trainer.max_steps, or the budget (self.budget), mid-epoch sets trainer.should_stop, so Lightning
        validates (and the checkpoint callback scores) the final weights instead of ending on the last epoch's
        numbers; where the schedule would not have validated, stop_validation marks it
        (zoo.training.callbacks.checkpoint.BestCheckpoint).
        The batch's wall time (training step, backward, optimizer step) is added to cost["seconds"]."""
        if self._t_batch is not None:
            self.cost["seconds"] += time.perf_counter() - self._t_batch
            self._t_batch = None
        if 0 < self.trainer.max_steps <= self.trainer.global_step or (self.budget and self.budget_progress() >= 1):
            self.trainer.should_stop = True
            self.stop_validation = not validation_due(self.trainer, batch_idx)  # read by BestCheckpoint

    def inference_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """Forward FLOPs per generated (or classified) token at the data's typical lengths (the objective's:
        about one token's forward pass with a KV cache, a whole forward over the prefix without one)."""
        return self.objective_impl.inference_flops_per_token(seq_len, src_len)

    def training_loss(self, batch) -> torch.Tensor:
        """The training objective of a batch: a scalar (nats per token, or per example for classification)
        that training_step backpropagates. Every task overrides it; model.compile_scope=model compiles it."""
        raise NotImplementedError

    def head_z_loss(self) -> float:
        """The z-loss weight of the LM head's loss now: task.z_loss in training mode (PaLM's auxiliary term,
        Chowdhery et al. 2022, sec. 5: a regulariser of the training loss), 0 in evaluation, so val / test
        losses stay the plain (label-smoothed) cross-entropy; 0 for checkpoints saved without the key."""
        return float(self.hparams.get("z_loss", 0.0)) if self.training else 0.0

    def configure_model(self):
        """Lightning hook, run before DDP / FSDP wrap the module: model.compile=true compiles the layers
        (compile_layers) or, with model.compile_scope=model, the whole training loss (compile_training_loss)."""
        if not self.model.cfg.compile:
            return
        if self.model.cfg.compile_scope == "model":
            compile_training_loss(self)
        else:
            compile_layers(self.model)

    def configure_optimizers(self):
        # under FSDP the parameters are flat 1-D shards here; weight decay picks matrices by their real shape
        scheduler = self.hparams.scheduler
        if self.trainer.max_steps > 0 or self.budget is not None:
            steps = self.trainer.max_steps
        else:
            # a run bounded by epochs (max_steps -1) decays over the steps those epochs of its data take, and a
            # warm-up longer than them is scaled; trainer.max_time alone gives no step count (inf): noam needs
            # none, and check_config refuses a cosine without task.scheduler.decay_steps there
            estimated = self.trainer.estimated_stepping_batches
            steps = int(estimated) if math.isfinite(estimated) else 0
            run = f"the {steps} optimizer steps of trainer.max_epochs={self.trainer.max_epochs}"
            scheduler = fit_schedule(dict(scheduler), steps, run, explicit=False, fix="")
        wrapped = getattr(self.trainer.strategy, "model", None)
        with full_params(wrapped):
            return configure_optimizers(
                self.model,
                self.hparams.optimizer,
                scheduler,
                steps,
                self.budget_progress if self.budget is not None else None,
                fused=None if self.fused_adamw_ok(wrapped) else False,
            )

    def fused_adamw_ok(self, wrapped) -> bool:
        """Whether this run may take torch's fused AdamW: not under FSDP (`wrapped`, the strategy's model, holds
        sharded views) and not under Lightning's mixed precision (its MixedPrecision plugin refuses gradient
        clipping with an optimizer that unscales gradients itself, as the fused one does); PyTorch's default
        AdamW there."""
        return not is_fsdp(wrapped) and not isinstance(self.trainer.precision_plugin, MixedPrecision)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        """trainer.gradient_clip_val clips the global gradient norm: under FSDP with FSDP's own
        clip_grad_norm_ (torch.nn.utils.clip_grad_norm_ would see only this process's shards); with torch's fused
        AdamW (configure_optimizers' choice outside FSDP and mixed precision) inside its kernel
        (zoo.training.optim.clip_grad_norm); otherwise as Lightning clips."""
        by_norm = gradient_clip_val and gradient_clip_algorithm in (None, "norm")
        wrapped = getattr(self.trainer.strategy, "model", None)
        if by_norm and is_fsdp(wrapped):
            wrapped.clip_grad_norm_(gradient_clip_val)
        elif by_norm and is_fused(optimizer):
            clip_grad_norm([p for g in optimizer.param_groups for p in g["params"]], gradient_clip_val, optimizer)
        else:
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
