"""The plan's timing (zoo.run.scaling_plan): seconds per training step and per evaluation of a job's model, measured
on random windows (a language model) or on real batches (a translation job), and a note when the machine was busy."""

import os
import statistics
import time
from dataclasses import dataclass

import torch
from omegaconf import DictConfig

from zoo.run import scaling_translation as translation
from zoo.run.scaling_data import is_translation
from zoo.scaling.grid import cell_size
from zoo.training.optim import adamw

REPEATS, STEPS_PER_REPEAT = 3, 2  # training steps timed per architecture and size, after WARM_STEPS untimed
WARM_STEPS = 2


@dataclass
class Timing:
    """An architecture and size's measured seconds: per training step (the mean of REPEATS repeats of
    STEPS_PER_REPEAT steps, and the fastest and slowest repeat's) and per evaluation."""

    step: float
    fastest: float
    slowest: float
    evaluation: float

    @property
    def spread(self) -> float:
        """Half the range of the repeats, a share of the mean step."""
        return (self.slowest - self.fastest) / 2 / self.step


def measure(task, batch_size: int, block_size: int, val_batches: int) -> Timing:
    """The Timing of `task` on random windows (B, T): a step is training_loss + backward + AdamW, timed in
    REPEATS repeats of STEPS_PER_REPEAT steps after WARM_STEPS untimed; an evaluation is val_batches batches of
    the objective's validation losses without gradients."""
    g = torch.Generator().manual_seed(0)
    vocab = task.model.cfg.vocab_size - (task.mask_id is not None)
    x = torch.randint(0, vocab, (batch_size, block_size + 1), generator=g)
    batch = (x[:, :-1], x[:, 1:])
    opt = adamw(task.model, lr=1e-4)  # the runs' optimizer and kernel
    task.train()
    repeats = []
    for i in range(WARM_STEPS + REPEATS * STEPS_PER_REPEAT):
        if i >= WARM_STEPS and (i - WARM_STEPS) % STEPS_PER_REPEAT == 0:
            t0 = time.perf_counter()
        task.training_loss(batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= WARM_STEPS and (i - WARM_STEPS) % STEPS_PER_REPEAT == STEPS_PER_REPEAT - 1:
            repeats.append((time.perf_counter() - t0) / STEPS_PER_REPEAT)
    task.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        task.losses(batch, task.objective_impl.validation_generator(0, x.device))
    return Timing(statistics.fmean(repeats), min(repeats), max(repeats), (time.perf_counter() - t0) * val_batches)


def timing(cfg: DictConfig, task, data) -> tuple[Timing, float, int, float]:
    """(Timing, training FLOPs a step, tokens a step, seconds of the BLEU / chrF scoring at the largest budget) of a
    job: an LM job's on random windows (measure); a translation job's on real batches of `data`, its set-up
    datamodule (zoo.run.scaling_translation), its tokens a step the target tokens (scaling.block_size)."""
    if not is_translation(cfg):
        B, T = cfg.data.batch_size, cfg.data.block_size
        x = torch.zeros(B, T, dtype=torch.long)
        return measure(task, B, T, -(-int(cfg.data.val_windows) // B)), 3.0 * task.batch_flops((x, x)), B * T, 0.0
    size = cfg.scaling.sizes[cell_size(cfg.scaling.cell, cfg.scaling.sizes)]
    per_step = int(size.batch_size)  # batches a step (trainer.accumulate_grad_batches; zoo.run.scaling_data)
    flops = translation.mean_step_flops(task, data)
    steps = [per_step * x for x in translation.time_steps(task, data, WARM_STEPS, REPEATS, STEPS_PER_REPEAT, flops)]
    t = Timing(statistics.fmean(steps), min(steps), max(steps), translation.time_evaluation(task, data))
    scoring = translation.time_scoring(task, data, int(cfg.scaling.get("bleu_sentences", 200)))
    tokens = per_step * int(cfg.scaling.block_size)
    return t, per_step * flops, tokens, scoring


def busy_note() -> str:
    """The empty string on an idle machine; else a sentence that the steps were timed beside other work (the
    1-minute load average over the CPU count), so the estimate is high."""
    load, cpus = (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0), os.cpu_count() or 1
    if load <= cpus:
        return ""
    return (
        f". The steps were timed at a load average of {load:.1f} on {cpus} CPUs: other processes slowed them, so "
        "the estimate is high; time the plan on an idle machine (scaling.dry_run=true) before changing the design"
    )
