"""The plan experiment=scaling prints before anything trains (a Hydra callback, ScalingPlan in
zoo.run.sweep_callback): per job, N (parameters, total and without embeddings), D (tokens), C (training FLOPs:
3 x the objective's forward FLOPs per batch, zoo.model.cost, so attention, the LM head, the encoder's source
tokens and ENTP's re-reading count), tokens per non-embedding parameter, and seconds estimated from a measured
step and evaluation time of each architecture and size. A plan over scaling.time_budget_s is refused with
its numbers before any job starts."""

import copy
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.errors import ConfigError
from zoo.model.cost import non_embedding_param_count
from zoo.run.scaling_cell import read_points
from zoo.run.train import job_task
from zoo.scaling.grid import cell_branches, cell_is_check, cell_size
from zoo.training.optim import adamw

TIMED_STEPS = 5  # training steps timed per architecture and size, after WARM_STEPS untimed
WARM_STEPS = 2


@dataclass
class PlanRow:
    """One job of the plan: the arch option (+arch=...), its cell, N, the steps it trains (trunk and cool-downs,
    or each budget alone in a cosine check cell), its budgets (done ones kept from an earlier command), D and C at
    its largest budget, and the estimated seconds of what is left."""

    arch: str
    cell: str
    params: int
    non_embedding: int
    steps: int
    evaluations: int
    done: int
    tokens: int
    flops: float
    seconds: float

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.non_embedding


def measure(task, batch_size: int, block_size: int, val_batches: int) -> tuple[float, float]:
    """(seconds per training step, seconds per evaluation) of `task` on random windows (B, T): the step is
    training_loss + backward + AdamW, timed over TIMED_STEPS after WARM_STEPS untimed; an evaluation is val_batches
    batches of the objective's validation losses without gradients."""
    g = torch.Generator().manual_seed(0)
    vocab = task.model.cfg.vocab_size - (task.mask_id is not None)
    x = torch.randint(0, vocab, (batch_size, block_size + 1), generator=g)
    batch = (x[:, :-1], x[:, 1:])
    opt = adamw(task.model, lr=1e-4)  # the runs' optimizer and kernel
    task.train()
    for i in range(WARM_STEPS + TIMED_STEPS):
        if i == WARM_STEPS:
            t0 = time.perf_counter()
        task.training_loss(batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step = (time.perf_counter() - t0) / TIMED_STEPS
    task.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        task.losses(batch, task.objective_impl.validation_generator(0, x.device))
    return step, (time.perf_counter() - t0) * val_batches


def job_steps(cfg: DictConfig, done: set) -> tuple[int, int]:
    """(optimizer steps, segments) a job still trains: a cool-down cell's trunk to its last cool-down start not yet
    trained (its checkpoints count from the largest budget done) and each cool-down left; a cosine check cell each
    budget left from step 0. `done`: the budgets' end steps already in its points.csv."""
    s = cfg.scaling
    size = OmegaConf.to_container(s.sizes[cell_size(s.cell, s.sizes)], resolve=True)
    every_budget = cell_branches(s.cell, size, s)
    plan = [b for b in every_budget if b.end not in done]
    if not plan:
        return 0, 0
    if cell_is_check(s.cell):
        return sum(b.end for b in plan), len(plan)
    trained = max([b.start for b in every_budget if b.end in done] or [0])
    trunk = max(0, max(b.start for b in plan) - trained)
    every = int(s.get("checkpoint_every") or 0)
    segments = len(plan) + (math.ceil(trunk / every) if every else 1) + len(plan)
    return trunk + sum(b.end - b.start for b in plan), segments


def plan(jobs: list[tuple[str, DictConfig]], info: dict, job_overhead_s: float, sweep_dir=None) -> list[PlanRow]:
    """The plan of `jobs` ((arch option, composed job config), in sweep order) on the data's `info`
    (model_info): one PlanRow each, with what is left when `sweep_dir` holds an earlier command's points; step and
    evaluation times measured once per architecture and size; job_overhead_s per segment (a Trainer's set-up)."""
    timed, rows = {}, []
    for arch, cfg in jobs:
        task = job_task(cfg, info, "plan")
        B, T = cfg.data.batch_size, cfg.data.block_size
        done = set()
        if sweep_dir is not None:
            points = Path(sweep_dir) / f"{arch}-{cfg.scaling.cell}" / "points.csv"
            done = {int(r["steps"]) for r in read_points(points)}
        n_steps, segments = job_steps(cfg, done)
        size = OmegaConf.to_container(cfg.scaling.sizes[cell_size(cfg.scaling.cell, cfg.scaling.sizes)], resolve=True)
        budgets = cell_branches(cfg.scaling.cell, size, cfg.scaling)
        key = (arch, cell_size(cfg.scaling.cell))
        if key not in timed:
            timed[key] = measure(task, B, T, -(-int(cfg.data.val_windows) // B))
        step_s, eval_s = timed[key]
        x = torch.zeros(B, T, dtype=torch.long)
        left = sum(b.end not in done for b in budgets)
        rows.append(
            PlanRow(
                arch=arch,
                cell=str(cfg.scaling.cell),
                params=task.model.num_params(),
                non_embedding=non_embedding_param_count(task.model),
                steps=n_steps,
                evaluations=len(budgets),
                done=len(budgets) - left,
                tokens=budgets[-1].end * B * T,
                flops=3.0 * task.batch_flops((x, x)) * budgets[-1].end,
                seconds=n_steps * step_s + left * eval_s + segments * job_overhead_s,
            )
        )
    return rows


def plan_table(rows: list[PlanRow]) -> str:
    """The plan as a text table, one line per job, and its total."""
    lines = [
        f"{'arch':<16}{'cell':<18}{'N':>10}{'N non-emb':>11}{'steps':>8}{'D tokens':>12}{'C FLOPs':>11}{'D/N':>6}"
        f"{'done':>6}{'est. s':>8}"
    ]
    for r in rows:
        lines.append(
            f"{r.arch:<16}{r.cell:<18}{r.params:>10,}{r.non_embedding:>11,}{r.steps:>8,}{r.tokens:>12,}{r.flops:>11.3g}"
            f"{r.tokens_per_param:>6.1f}{f'{r.done}/{r.evaluations}':>6}{r.seconds:>8.0f}"
        )
    lines.append(
        f"{len(rows)} jobs, estimated {sum(r.seconds for r in rows):.0f} s for what is left. steps: what a job still "
        "trains (its trunk and cool-downs, or a cosine check's budgets alone); D and C: its largest budget; done: "
        "budgets already in its points.csv (kept from an earlier command)"
    )
    return "\n".join(lines)


def check_budget(rows: list[PlanRow], budget_s: float, sizes=None) -> None:
    """Raise ConfigError naming the estimate, the budget and the fixes when the plan is over budget_s; sizes
    (scaling.sizes): the budgets to lower are the longest job's size's own where it sets them."""
    total = sum(r.seconds for r in rows)
    if total > budget_s:
        worst = max(rows, key=lambda r: r.seconds)
        size = worst.cell.split("_")[0]
        own = sizes is not None and size in sizes and (sizes[size] or {}).get("budgets") is not None
        raise ConfigError(
            f"the scaling plan needs an estimated {total:.0f} s, over scaling.time_budget_s={budget_s:g}; its "
            f"longest job is {worst.arch} {worst.cell} ({worst.seconds:.0f} s). Lower "
            f"{f'scaling.sizes.{size}.budgets' if own else 'scaling.budgets'}, drop a size from scaling.sizes (e.g. "
            f"'~scaling.sizes.{size}'), or raise scaling.time_budget_s"
        )


def check_run_dirs(jobs: list[tuple[str, DictConfig]], subdir: str) -> None:
    """Raise ConfigError when two jobs of the sweep would write the same run directory: `subdir` is the raw
    hydra.sweep.subdir (experiment=scaling: arch and scaling.cell), resolved
    against each job's config; a key swept beside those (task.optimizer.lr=...) needs a place in it. A subdir
    naming other hydra: values than the arch choice is not checked."""
    seen = {}
    for i, (arch, cfg) in enumerate(jobs):
        text = subdir.replace("${hydra:runtime.choices.arch}", arch)
        if "${hydra:" in text:
            return
        job = copy.deepcopy(cfg)
        with open_dict(job):
            job._run_subdir = text
            name = str(job._run_subdir)
        if name in seen:
            raise ConfigError(
                f"jobs {seen[name]} and {i} of the sweep would write the same run directory {name!r} "
                f"(hydra.sweep.subdir={subdir}); add the key swept beside them to it, e.g. "
                "hydra.sweep.subdir='${hydra:runtime.choices.arch}-${scaling.cell}-lr${task.optimizer.lr}'"
            )
        seen[name] = i
