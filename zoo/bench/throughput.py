"""Benchmark 9: experiment=scaling's training throughput, size by size and architecture by architecture: zoo's
training loop (the study's own Trainer, loggers and callbacks, built by zoo.run.train) against a plain PyTorch
loop over the same model, batch, loss, optimizer and schedule, in one process; and what torch.compile costs
and gains at these sizes."""

import copy
import math
import os
import tempfile
import time

import lightning.pytorch as pl
import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.bench.options import Options
from zoo.bench.overhead import quiet_lightning
from zoo.bench.report import fmt, progress
from zoo.bench.throughput_report import throughput_text
from zoo.bench.timing import Timed, interleaved, median
from zoo.run.conf import CONF_DIR
from zoo.run.job import build_data, compose_job, job_task
from zoo.run.scaling_plan import job_steps
from zoo.run.train import build_trainer, log_config
from zoo.scaling.sizes import size_non_embedding, size_seeds
from zoo.training.optim import clip_grad_norm
from zoo.training.optim_config import configure_optimizers

ARCHS = ("decoder_only", "prefix_lm", "encoder_decoder", "encoder_only")
# Untimed steps at the start of every run: the first steps allocate, compiled ones compile, and the first step
# the loggers write creates their files and metric objects (a one-off of ~10 ms, set-up like the loggers' own).
# It covers trainer.log_every_n_steps steps, so that the first logged step (log_every_n_steps - 1) is among them.
WARM_STEPS = 10
# Steps timed per run, start of step WARM_STEPS to start of step WARM_STEPS + TIMED_STEPS: a multiple of
# log_every_n_steps, so the logged steps weigh in at the share they have in a whole run.
TIMED_STEPS = 20


def check_window(every: int) -> None:
    """Raise ValueError unless the timed window starts after the first logged step and spans whole logging
    periods of trainer.log_every_n_steps = every (WARM_STEPS >= every, TIMED_STEPS a multiple of every)."""
    if WARM_STEPS < every or TIMED_STEPS % every:
        raise ValueError(
            f"the timed window (steps {WARM_STEPS} to {WARM_STEPS + TIMED_STEPS}) must start after the first logged "
            f"step and span whole logging periods of trainer.log_every_n_steps={every}: set WARM_STEPS >= {every} "
            f"and TIMED_STEPS to a multiple of {every} in zoo/bench/throughput.py"
        )


def job_config(arch: str, cell: str, out_dir: str, extra: tuple[str, ...] = ()) -> DictConfig:
    """The composed config of `python -m zoo experiment=scaling +benchmark=scaling +arch=<arch>
    scaling.cell=<cell> <extra>`, writing under out_dir (a job of the study, as its sweep composes it), resolved
    (the next job composed resets what ${hydra:...} reads)."""
    overrides = [f"+arch={arch}", "experiment=scaling", "+benchmark=scaling", f"scaling.cell={cell}", *extra]
    cfg = compose_job(overrides, out_dir)
    OmegaConf.resolve(cfg)
    return cfg


def seeded_task(cfg: DictConfig, info: dict) -> pl.LightningModule:
    """The job's task with the weights seed cfg.seed gives (both loops start from the same ones)."""
    torch.manual_seed(cfg.seed)
    return job_task(cfg, info, "bench")


class StepClock(pl.Callback):
    """Seconds from the start of training step `warm` to the start of step `warm + timed` (each timed step with
    everything the loop does around it: data, logging, callbacks), and from fit start to step `warm`."""

    def __init__(self, warm: int, timed: int):
        self.warm, self.timed = warm, timed
        self.t_fit = self.t0 = self.t1 = None

    def on_fit_start(self, trainer, pl_module):
        self.t_fit = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.warm:
            self.t0 = time.perf_counter()
        elif trainer.global_step == self.warm + self.timed:
            self.t1 = time.perf_counter()

    def seconds(self) -> tuple[float, float]:
        """(seconds of the timed steps, seconds before them). Raises RuntimeError if the run stopped early."""
        if self.t0 is None or self.t1 is None:
            raise RuntimeError(f"the run stopped before step {self.warm + self.timed}")
        return self.t1 - self.t0, self.t0 - self.t_fit


def zoo_run(cfg: DictConfig, datamodule, info: dict) -> tuple[float, float, pl.LightningModule]:
    """WARM_STEPS + TIMED_STEPS + 1 steps of cfg's task under the Trainer zoo.run.train builds for it
    (loggers, callbacks, progress bar, gradient clipping), validation off, on a fresh copy of the set-up
    datamodule. Returns (*StepClock.seconds(), the trained task)."""
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.trainer.max_steps = WARM_STEPS + TIMED_STEPS + 1
        cfg.trainer.limit_val_batches = 0
    task = seeded_task(cfg, info)
    clock, dm = StepClock(WARM_STEPS, TIMED_STEPS), copy.copy(datamodule)
    with quiet_lightning():
        trainer, loggers = build_trainer(cfg, [cfg.arch, "bench"])
        trainer.callbacks.append(clock)
        top = {"params": task.model.num_params(), "flops_per_token": 0.0}
        log_config(cfg, task, dm, trainer, loggers, top)  # the run's one config, as zoo.run.train logs it
        trainer.fit(task, datamodule=dm)
        for logger in trainer.loggers:  # as zoo.run.train ends a run: the next run's wandb logger starts anew
            if hasattr(logger.experiment, "finish"):
                logger.experiment.finish()
    return (*clock.seconds(), task)


def plain_run(cfg: DictConfig, datamodule, info: dict, fused: bool | None = False) -> tuple[float, pl.LightningModule]:
    """A plain PyTorch loop on the same task's model and loss (task.training_loss), optimizer and schedule
    (zoo.training.optim_config.configure_optimizers) and gradient clipping, as many steps as zoo_run: next
    batch, loss, backward, gradient clipping, optimizer step, scheduler step, zero_grad(set_to_none=True).
    fused: zoo.training.optim.adamw's; False (default): PyTorch's own AdamW implementation and
    torch.nn.utils.clip_grad_norm_, as a plain loop gets them; None: zoo's kernels, the same as zoo_run's
    (torch's fused AdamW where it applies, carrying zoo.training.optim.clip_grad_norm's scale; the norm taken
    over the optimizer's parameters in its order, as Lightning does, so that both loops round alike).
    Returns (seconds from the start of step WARM_STEPS to the start of step WARM_STEPS + TIMED_STEPS, the
    trained task)."""
    task = seeded_task(cfg, info)
    task.train()
    n = WARM_STEPS + TIMED_STEPS
    sched_cfg = OmegaConf.to_container(cfg.task.scheduler)
    opt_cfg = OmegaConf.to_container(cfg.task.optimizer)
    optim = configure_optimizers(task.model, opt_cfg, sched_cfg, n + 1, fused=fused)  # zoo_run's max_steps
    opt, sched = optim["optimizer"], optim["lr_scheduler"]["scheduler"]
    clip = cfg.trainer.gradient_clip_val
    it = iter(copy.copy(datamodule).train_dataloader())
    for i in range(n + 1):
        if i == WARM_STEPS:
            t0 = time.perf_counter()
        elif i == n:
            elapsed = time.perf_counter() - t0
        loss = task.training_loss(next(it))
        loss.backward()
        if clip and fused is False:
            torch.nn.utils.clip_grad_norm_(task.parameters(), clip)
        elif clip:
            clip_grad_norm([p for g in opt.param_groups for p in g["params"]], clip, opt)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    return elapsed, task


def size_rows(size: str, cfgs: dict, data, opts: Options) -> tuple[list[list], dict, dict]:
    """The table rows of one size: per architecture, the ms per step of zoo, of the plain loop with PyTorch's
    AdamW (plain_run(fused=False)) and of the plain loop with zoo's AdamW kernel (plain_run(fused=None)), each
    the median of opts.reps interleaved repetitions; tokens/s of zoo and the plain loop; and plain / zoo and
    plain with zoo's AdamW / zoo, with the repetitions zoo won. Also per architecture zoo's (median seconds per
    step, median seconds from fit start to the timed steps), and the median seconds per step of (zoo, plain,
    plain+k)."""
    contenders, before = {}, {arch: [] for arch in cfgs}

    def zoo(arch, cfg):
        step_s, before_s, _ = zoo_run(cfg, *data)
        before[arch].append(before_s)
        return Timed(step_s)

    for arch, cfg in cfgs.items():
        contenders[f"{arch} zoo"] = lambda arch=arch, cfg=cfg: zoo(arch, cfg)
        contenders[f"{arch} plain"] = lambda cfg=cfg: Timed(plain_run(cfg, *data, fused=False)[0])
        contenders[f"{arch} kernels"] = lambda cfg=cfg: Timed(plain_run(cfg, *data, fused=None)[0])
    times = interleaved(contenders, opts.reps, opts.warmup)
    per_step = {a: tuple(median(times[f"{a} {c}"]) / TIMED_STEPS for c in ("zoo", "plain", "kernels")) for a in cfgs}
    eager = {a: (per_step[a][0], median(before[a])) for a in cfgs}

    def ratio(ref, z):
        wins = sum(a <= b for a, b in zip(z, ref))
        return f"{median(ref) / median(z):.3f} ({wins}/{len(z)})"

    rows = []
    for arch, cfg in cfgs.items():
        tokens = TIMED_STEPS * cfg.data.batch_size * cfg.data.block_size
        z, p, k = times[f"{arch} zoo"], times[f"{arch} plain"], times[f"{arch} kernels"]
        rows.append(
            [
                size,
                arch,
                f"{size_non_embedding(cfg.scaling.sizes[size]):,}",
                fmt(1e3 * median(z) / TIMED_STEPS),
                fmt(1e3 * median(p) / TIMED_STEPS),
                fmt(1e3 * median(k) / TIMED_STEPS),
                fmt(tokens / median(z)),
                fmt(tokens / median(p)),
                ratio(p, z),
                ratio(k, z),
            ]
        )
    return rows, eager, per_step


def compile_rows(size: str, cfg: DictConfig, data, eager: tuple[float, float], job_steps: int) -> list[list]:
    """One compiled run per compile scope of cfg's task (model.compile=true): the compile cost (seconds from fit
    start to the timed steps, beyond the eager run's: eager = (seconds per step, seconds before the timed
    steps)), ms per step against eager, and the steps after which compiling pays (compile cost / seconds saved
    per step) next to the job's own steps."""
    eager_step_s, eager_before_s = eager
    rows = []
    for scope in ("layers", "model"):
        c = copy.deepcopy(cfg)
        with open_dict(c):
            c.model.compile, c.model.compile_scope = True, scope
        torch._dynamo.reset()
        step_s, before_s, _ = zoo_run(c, *data)
        step_s /= TIMED_STEPS
        saved = eager_step_s - step_s
        extra = before_s - eager_before_s
        breakeven = math.ceil(extra / saved) if saved > 0 else None
        verdict = "pays" if breakeven is not None and breakeven < job_steps else "does not pay"
        rows.append(
            [
                size,
                cfg.arch,
                scope,
                fmt(extra),
                fmt(1e3 * eager_step_s),
                fmt(1e3 * step_s),
                f"{eager_step_s / step_s:.2f}",
                "never" if breakeven is None else f"{breakeven:,}",
                f"{job_steps:,}",
                verdict,
            ]
        )
    return rows


def bench_throughput(opts: Options) -> str:
    """experiment=scaling's training throughput. For every size of conf/experiment/scaling.yaml (QUICK: the
    smallest and the largest) and every architecture of the study, three contenders on the study's own data,
    model, batch (the size's batch_size windows of 128 tokens), loss, AdamW, schedule and gradient clipping, in
    this process:
      zoo: the Trainer zoo.run.train builds for the job (its loggers, wandb offline + CSV, every
      trainer.log_every_n_steps; its callbacks and progress bar), validation off;
      plain: a plain PyTorch loop (plain_run, PyTorch's AdamW);
      plain+k: the same loop with zoo's kernels (plain_run(fused=None): fused AdamW carrying the clip).
    Timed: TIMED_STEPS steps after WARM_STEPS, start of step to start of step (set-up excluded from all).
    Then the seconds of training steps over the preset's jobs at those medians (each cell's steps, its trunk and
    cool-downs, zoo.run.scaling_plan.job_steps, times its seeds; the cosine check cells left out).
    Then torch.compile: decoder_only per size, compile_scope layers and model, once each (compile_rows)."""
    if opts.device != "cpu":
        raise ValueError("throughput measures the CPU study (experiment=scaling); run it with --device cpu")
    sizes = list(OmegaConf.load(os.path.join(CONF_DIR, "experiment", "scaling.yaml")).scaling.sizes)
    if opts.quick:
        sizes = [sizes[0], sizes[-1]]
    os.environ.setdefault("WANDB_MODE", "offline")
    rows, crows = [], []
    study, jobs = [0.0, 0.0, 0.0], 0  # seconds of training steps over the preset's jobs: zoo, plain, plain+k
    with tempfile.TemporaryDirectory() as out:
        for size in sizes:
            progress(f"throughput {size}")
            cfgs = {a: job_config(a, f"{size}_seed1", os.path.join(out, f"{a}-{size}")) for a in ARCHS}
            first = cfgs[ARCHS[0]]
            check_window(int(first.trainer.log_every_n_steps))
            data = build_data(first, {})[:2]  # the size's own batch of the same windows (conf/benchmark/scaling.yaml)
            size_table, eager, per_step = size_rows(size, cfgs, data, opts)
            rows += size_table
            crows += compile_rows(size, first, data, eager[ARCHS[0]], int(first.trainer.max_steps))
            sc = first.scaling
            seeds = size_seeds(size, sc.sizes[size], sc.seed_size, sc.seeds)
            for arch, cfg in cfgs.items():
                jobs += seeds
                for i, step_s in enumerate(per_step[arch]):
                    study[i] += seeds * job_steps(cfg, set())[0] * step_s
    return throughput_text(rows, crows, study, jobs, opts, WARM_STEPS, TIMED_STEPS)
