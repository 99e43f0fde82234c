"""The plan experiment=scaling prints before anything trains (a Hydra callback, ScalingPlan in
zoo.run.sweep_callback): per job, N (parameters, total and without embeddings), D (tokens), C (training FLOPs:
3 x the objective's forward FLOPs per batch, zoo.model.cost, so attention, the LM head, the encoder's source
tokens and ENTP's re-reading count), tokens per non-embedding parameter, and seconds estimated from a measured
step and evaluation time of each architecture and size (with the spread of its timed repeats). A plan over
scaling.time_budget_s is refused with its numbers before any job starts; scaling.dry_run=true prints it and stops."""

import copy
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.errors import ConfigError
from zoo.model.cost import non_embedding_param_count
from zoo.run.cell_points import point_kind, read_points, same_point
from zoo.run.cell_segments import trunk_checkpoint_steps, trunk_segments
from zoo.run.conf import CONF_DIR
from zoo.run.job import checked_config, job_task
from zoo.run.plan_timing import REPEATS, busy_note, timing
from zoo.run.scaling_cell import set_tuned_rate
from zoo.run.scaling_data import check_passes, check_window, is_translation, set_step_tokens, study_data, train_tokens
from zoo.run.scaling_identity import check_same_design, design, family_label, legacy_design
from zoo.run.scaling_table import table_point
from zoo.scaling.checks import LONG_REACH, LONG_REACH_SIZES
from zoo.scaling.design import check_design
from zoo.scaling.grid import cell_branches, cell_is_check, cell_size


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
    spread: float = 0.0  # seconds: half the range of `seconds` at the fastest and slowest timed repeat

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.non_embedding


def job_steps(cfg: DictConfig, done: set, trunk=()) -> tuple[int, int]:
    """(optimizer steps, Trainers) a job still runs: a cool-down cell's trunk fits from its checkpoints on disk
    (`trunk`: their steps; zoo.run.cell_segments.trunk_segments, as the cell trains them) to each cool-down start
    left, and each cool-down left and its validation; a cosine check cell each budget left from step 0 and its
    validation. `done`: the budgets' end steps already in its points.csv."""
    s = cfg.scaling
    size = OmegaConf.to_container(s.sizes[cell_size(s.cell, s.sizes)], resolve=True)
    plan = [b for b in cell_branches(s.cell, size, s) if b.end not in done]
    if cell_is_check(s.cell):
        return sum(b.end for b in plan), 2 * len(plan)
    every, have = int(s.get("checkpoint_every") or 0), set(trunk)
    steps = segments = 0
    for b in plan:
        for at, nxt in trunk_segments(have, b.start, every):
            steps, segments = steps + nxt - at, segments + 1
            have.add(nxt)
        steps, segments = steps + b.end - b.start, segments + 2
    return steps, segments


def cell_dir(sweep_dir, arch: str, cfg: DictConfig, subdir: str = "${hydra:runtime.choices.arch}-${scaling.cell}"):
    """The run directory of a job in sweep_dir: `subdir` (the raw hydra.sweep.subdir) resolved against the job's
    config; None where it names other hydra: values than the arch choice."""
    text = subdir.replace("${hydra:runtime.choices.arch}", arch)
    if "${hydra:" in text:
        return None
    job = copy.deepcopy(cfg)
    with open_dict(job):
        job._run_subdir = text
        return Path(sweep_dir) / str(job._run_subdir)


def job_left(cfg: DictConfig, folder) -> tuple[set, set]:
    """(the end steps of the budgets in the cell folder's points.csv under this design, its trunk checkpoints'
    steps); both empty without a folder."""
    if folder is None:
        return set(), set()
    s = cfg.scaling
    budgets = cell_branches(s.cell, OmegaConf.to_container(s.sizes[cell_size(s.cell, s.sizes)], resolve=True), s)
    kind, cooldown = point_kind(s.cell), float(s.cooldown)
    rows = read_points(Path(folder) / "points.csv")
    done = {b.end for b in budgets if any(same_point(r, b, kind, cooldown) for r in rows) or table_point(cfg, b)}
    return done, trunk_checkpoint_steps(Path(folder) / "trunk")


def plan(jobs: list[tuple[str, DictConfig]], info: dict, job_overhead_s: float, sweep_dir=None, subdir=None, data=None):
    """The plan of `jobs` ((arch option, composed job config), in sweep order) on the data's `info`
    (model_info): one PlanRow each, with what is left when `sweep_dir` holds an earlier command's points and trunk
    checkpoints (each job's folder: `subdir`, the raw hydra.sweep.subdir, default ARCH-CELL); a Timing measured
    once per architecture and size (timing; data: the set-up datamodule, which a translation job's times), a line
    on stderr each; job_overhead_s per Trainer (its set-up)."""
    timed, rows = {}, []
    keys = list(dict.fromkeys((arch, cell_size(cfg.scaling.cell)) for arch, cfg in jobs))
    for arch, cfg in jobs:
        task = job_task(cfg, info, "plan")
        folder = None if sweep_dir is None else cell_dir(sweep_dir, arch, cfg, *([subdir] if subdir else []))
        done, trunk = job_left(cfg, folder)
        n_steps, segments = job_steps(cfg, done, trunk)
        size = OmegaConf.to_container(cfg.scaling.sizes[cell_size(cfg.scaling.cell, cfg.scaling.sizes)], resolve=True)
        budgets = cell_branches(cfg.scaling.cell, size, cfg.scaling)
        key = (arch, cell_size(cfg.scaling.cell))
        if key not in timed:
            timed[key] = timing(cfg, task, data)
            t = timed[key][0]
            print(
                f"zoo: scaling plan: timed {arch} {key[1]} ({len(timed)}/{len(keys)}): {1e3 * t.step:.3g} ms a step "
                f"(± {100 * t.spread:.0f}% over {REPEATS} repeats), {t.evaluation:.3g} s a validation",
                file=sys.stderr,
                flush=True,
            )
        t, step_flops, step_tokens, scoring = timed[key]
        left = sum(b.end not in done for b in budgets)
        scored = scoring if budgets[-1].end not in done and point_kind(cfg.scaling.cell) == "cooldown" else 0.0
        rows.append(
            PlanRow(
                arch=arch,
                cell=str(cfg.scaling.cell),
                params=task.model.num_params(),
                non_embedding=non_embedding_param_count(task.model),
                steps=n_steps,
                evaluations=len(budgets),
                done=len(budgets) - left,
                tokens=budgets[-1].end * step_tokens,
                flops=step_flops * budgets[-1].end,
                seconds=n_steps * t.step + left * t.evaluation + scored + segments * job_overhead_s,
                spread=n_steps * (t.slowest - t.fastest) / 2,
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
    total, spread = sum(r.seconds for r in rows), sum(r.spread for r in rows)
    lines.append(
        f"{len(rows)} jobs, estimated {total:.0f} s ± {_g(spread)} s ({_g(100 * spread / max(total, 1e-9))}%) for "
        f"what is left (±: the steps' time at the fastest to the slowest of {REPEATS} timed repeats; the "
        "overhead per Trainer is scaling.job_overhead_s). steps: what a job still trains (its trunk from its last "
        "checkpoint and its cool-downs, or a cosine check's budgets alone); D and C: its largest budget; done: "
        "budgets already in its points.csv (kept from an earlier command)"
    )
    return "\n".join(lines)


def _g(x: float) -> str:
    """x to the unit from 10 up, to 2 significant digits below."""
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def left_out(archs) -> str | None:
    """The line naming the architectures of conf/arch that the sweep's `archs` (its +arch options) leave out and
    how to add them; None when it runs them all."""
    missing = sorted({p.stem for p in Path(CONF_DIR, "arch").glob("*.yaml")} - set(archs))
    if not missing:
        return None
    return (
        f"left out: {', '.join(missing)} (add {'it' if len(missing) == 1 else 'them'} with the same command and "
        f"+arch={','.join(missing)}: {'its' if len(missing) == 1 else 'their'} cells go into the same folder)"
    )


def reach_note(rows: list[PlanRow]) -> str | None:
    """The line warning that a family's sizes leave the gates' long reach uncheckable (fewer than
    LONG_REACH_SIZES sizes of N <= N_max / LONG_REACH, N non-embedding parameters, zoo.scaling.checks.long_reach);
    None when every family's can."""
    notes = []
    for arch in dict.fromkeys(r.arch for r in rows):
        sizes = {r.cell.split("_")[0]: r.non_embedding for r in rows if r.arch == arch}
        top = max(sizes.values())
        fit = [name for name, n in sizes.items() if n <= top / LONG_REACH]
        if len(fit) < LONG_REACH_SIZES:
            notes.append(f"{arch} ({len(fit)}: {', '.join(fit) or 'none'})")
    if not notes:
        return None
    return (
        f"note: the long-reach gate will not be checkable: it fits the sizes of N <= N_max / {LONG_REACH:g} and needs "
        f"{LONG_REACH_SIZES}, here {'; '.join(notes)}. Add a smaller size or a larger one to judge it"
    )


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
            f"'~scaling.sizes.{size}'), or raise scaling.time_budget_s{busy_note()}"
        )


def check_run_dirs(jobs: list[tuple[str, DictConfig]], subdir: str) -> None:
    """Raise ConfigError when two jobs of the sweep would write the same run directory: `subdir` is the raw
    hydra.sweep.subdir (experiment=scaling: arch and scaling.cell), resolved
    against each job's config; a key swept beside those (task.optimizer.lr=...) needs a place in it. A subdir
    naming other hydra: values than the arch choice is not checked."""
    seen = {}
    for i, (arch, cfg) in enumerate(jobs):
        path = cell_dir("", arch, cfg, subdir)
        if path is None:
            return
        name = str(path)
        if name in seen:
            raise ConfigError(
                f"jobs {seen[name]} and {i} of the sweep would write the same run directory {name!r} "
                f"(hydra.sweep.subdir={subdir}); add the key swept beside them to it, e.g. "
                "hydra.sweep.subdir='${hydra:runtime.choices.arch}-${scaling.cell}-lr${task.optimizer.lr}'"
            )
        seen[name] = i


def check_cell_dirs(jobs: list[tuple[str, DictConfig]], sweep_dir, subdir: str) -> None:
    """Raise ConfigError (zoo.run.scaling_identity.check_same_design) for the first job whose folder in sweep_dir
    holds a cell of another design; `jobs`: (arch option, job config as zoo.run.job.checked_config returns it)."""
    for arch, cfg in jobs:
        folder = cell_dir(sweep_dir, arch, cfg, subdir)
        if folder is not None and planned_rate(cfg, sweep_dir, folder):
            label = family_label(cfg)
            check_same_design(folder, design(cfg, label), legacy_design(cfg, label), write=False)


def planned_rate(cfg: DictConfig, sweep_dir, folder: Path) -> bool:
    """Set a tuned cell's rate as its run will (zoo.run.scaling_cell.set_tuned_rate) where its tuning stage is done;
    returns whether its design is known. A best rate at an edge of its grid is refused here, before anything trains;
    a tuning stage not yet done is not (it comes first in the sweep), unless the cell's folder already holds a cell,
    which can only have run after it."""
    try:
        set_tuned_rate(cfg, sweep_dir)
    except ConfigError as e:
        if "tuning runs are not done" in str(e) and not (folder / "cell.json").is_file():
            return False
        raise
    return True


def run_plan(config: DictConfig, jobs: list[tuple[str, DictConfig]], dm=None) -> list[PlanRow]:
    """experiment=scaling's plan of the sweep `jobs` (zoo.run.sweep_callback.sweep_jobs) under its multirun
    `config`: checks every job (run directories, design, the job's own config checks, its folder's cell.json),
    then times them (plan), prints the table and what it leaves out, and writes plan.json; returns the rows.
    dm: the sweep's datamodule when already set up (check_corpus). Raises ConfigError (or the job checks'
    errors) before anything is timed."""
    subdir = OmegaConf.to_container(config.hydra.sweep, resolve=False)["subdir"]
    check_run_dirs(jobs, subdir)
    translating = is_translation(jobs[0][1])
    if translating and dm is None:  # a translation design's steps need the data's target tokens a batch
        dm = study_data(jobs[0][1].data)
    checked = []
    for arch, job in jobs:  # a bad design or job config exits 2 before anything is timed
        if translating:
            set_step_tokens(job, dm)
        else:
            check_window(job)
        check_design(job.scaling, [cell_size(job.scaling.cell, job.scaling.sizes)])
        checked.append((arch, checked_config(copy.deepcopy(job))[0]))  # the job's own checks, run now
    check_cell_dirs(checked, config.hydra.sweep.dir, subdir)
    dm = dm or study_data(jobs[0][1].data)
    check_passes(jobs, train_tokens(dm), "target tokens" if translating else "tokens")
    overhead = float(config.scaling.get("job_overhead_s", 10))
    print(f"zoo: scaling plan: {len(jobs)} jobs checked; timing each architecture and size", file=sys.stderr)
    rows = plan(jobs, dm.model_info(), overhead, config.hydra.sweep.dir, subdir, data=dm)
    lines = [line for line in (left_out(arch for arch, _ in jobs), reach_note(rows)) if line]
    print("\n".join(["zoo: scaling plan", plan_table(rows), *lines]), flush=True)
    out = Path(config.hydra.sweep.dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return rows
