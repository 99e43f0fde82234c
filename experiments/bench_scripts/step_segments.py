"""Where zoo's training loop spends a step, against a plain loop (issue 28, experiments/RESULTS.md "Scaling").

Runs one experiment=scaling job in zoo's Trainer (zoo.bench.throughput.zoo_run, its loggers and callbacks)
with a callback that stamps Lightning's hooks, and the same model in a plain loop stamped between its
statements; prints the median milliseconds of each segment (steps 5 .. 40):

    python experiments/bench_scripts/step_segments.py [--size s1] [--arch decoder_only] [--reps 3]

Lightning's automatic optimization runs, per step: on_train_batch_start, the closure (training_step, then
on_before_zero_grad and zero_grad, then on_before_backward, backward, on_after_backward), then
on_before_optimizer_step, gradient clipping, the AdamW step, on_train_batch_end, and the fetch of the next
batch with the loop's bookkeeping. Matching segments: zoo's "batch_start->before_zero" is the plain loop's
"loss" plus Lightning's closure set-up; "before_backward->after_backward" is "backward"; "before_opt->batch_end"
is "clip" + "opt" + "sched+zero"; "batch_end->batch_start" is "fetch" plus the loop's bookkeeping.
"""

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import lightning.pytorch as pl
import torch
from omegaconf import OmegaConf

from zoo.bench import throughput as T
from zoo.training.optim_config import configure_optimizers

SKIP = 5  # steps not counted at the start of each run
STEPS = 40  # steps counted


class Stamps(pl.Callback):
    """(hook name, perf_counter) at each of the step's hooks."""

    HOOKS = ("batch_start", "before_zero", "before_backward", "after_backward", "before_opt", "batch_end")

    def __init__(self):
        self.marks = []

    def _mark(self, name):
        self.marks.append((name, time.perf_counter()))

    def on_train_batch_start(self, *args):
        self._mark("batch_start")

    def on_before_zero_grad(self, *args):
        self._mark("before_zero")

    def on_before_backward(self, *args):
        self._mark("before_backward")

    def on_after_backward(self, *args):
        self._mark("after_backward")

    def on_before_optimizer_step(self, *args):
        self._mark("before_opt")

    def on_train_batch_end(self, *args):
        self._mark("batch_end")

    def segments(self) -> dict[str, float]:
        """{"a->b": median ms} over consecutive stamps after the first SKIP steps."""
        marks = self.marks[SKIP * len(self.HOOKS) :]
        seg = {}
        for (a, ta), (b, tb) in zip(marks, marks[1:]):
            seg.setdefault(f"{a}->{b}", []).append(tb - ta)
        return {k: 1e3 * statistics.median(v) for k, v in seg.items() if len(v) > SKIP}


def plain_segments(cfg, datamodule, info) -> dict[str, float]:
    """The plain loop of zoo.bench.throughput.plain_run (zoo's fused AdamW), stamped between statements."""
    task = T.seeded_task(cfg, info)
    task.train()
    optim = configure_optimizers(
        task.model,
        OmegaConf.to_container(cfg.task.optimizer),
        OmegaConf.to_container(cfg.task.scheduler),
        int(cfg.trainer.max_steps),
    )
    opt, sched = optim["optimizer"], optim["lr_scheduler"]["scheduler"]
    it = iter(copy.copy(datamodule).train_dataloader())
    seg = {k: [] for k in ("fetch", "loss", "backward", "clip", "opt", "sched+zero")}
    for i in range(SKIP + STEPS):
        t = [time.perf_counter()]
        batch = next(it)
        t.append(time.perf_counter())
        loss = task.training_loss(batch)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        torch.nn.utils.clip_grad_norm_(task.parameters(), cfg.trainer.gradient_clip_val)
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        sched.step()
        opt.zero_grad(set_to_none=True)
        t.append(time.perf_counter())
        if i >= SKIP:
            for k, a, b in zip(seg, t, t[1:]):
                seg[k].append(b - a)
    return {k: 1e3 * statistics.median(v) for k, v in seg.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="s1")
    parser.add_argument("--arch", default="decoder_only", choices=T.ARCHS)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("WANDB_MODE", "offline")
    T.WARM_STEPS, T.TIMED_STEPS = 1, SKIP + STEPS
    stamps = Stamps()
    build = T.build_trainer

    def stamped(cfg, tags):
        trainer, loggers = build(cfg, tags)
        trainer.callbacks.insert(0, stamps)
        return trainer, loggers

    T.build_trainer = stamped
    with tempfile.TemporaryDirectory() as out:
        cfg = T.job_config(args.arch, f"{args.size}_seed1", out)
        data = T.build_data(cfg, {})[:2]
        for rep in range(args.reps):
            stamps.marks.clear()
            T.zoo_run(cfg, *data)
            zoo, plain = stamps.segments(), plain_segments(cfg, *data)
            print(f"{args.size} {args.arch} rep {rep}", file=sys.stderr)
            print("  zoo:   " + " | ".join(f"{k} {v:.2f}" for k, v in zoo.items()), file=sys.stderr)
            print(f"         total {sum(zoo.values()):.2f} ms", file=sys.stderr)
            print("  plain: " + " | ".join(f"{k} {v:.2f}" for k, v in plain.items()), file=sys.stderr)
            print(f"         total {sum(plain.values()):.2f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
