"""experiment=scaling's grid (conf/experiment/scaling.yaml): the cells' names, the swept cells, and the resolvers
that turn a cell (`s2_seed3`) and a size into a model shape, a batch and the steps of its trunk and cool-down
branches. A size's shapes and budgets: zoo.scaling.sizes; the design's checks: zoo.scaling.design.

The design (docs/scaling-laws.md): per size and seed one constant-rate trunk, and at each budget b (tokens per
non-embedding parameter) a cool-down branch from the trunk's checkpoint at (1 - cooldown) b to b (Hägele et al.
2024); a cell named SIZE_seedN_cosine trains each budget alone with a cosine schedule instead, the check of the
cool-down points. The plan printed before anything trains: zoo.run.scaling_plan; the runner: zoo.run.scaling_cell."""

import math
import re

from omegaconf import OmegaConf

from zoo.errors import ConfigError, is_whole
from zoo.scaling.design import check_listing, check_lr_grid
from zoo.scaling.sizes import (
    TUNED,
    Branch,
    branches,
    d_ff,
    layers,
    middle_budget,
    size_budgets,
    size_seeds,
    warmup_steps,
)

CELL = re.compile(
    r"^(?P<size>[A-Za-z0-9]+)_seed(?P<seed>[0-9]+)"
    r"(?P<check>_cosine)?(?:_lr(?P<lr>[0-9]+(?:\.[0-9]*)?(?:e-?[0-9]+)?))?$"
)
CHECK_BUDGETS = 3  # a cosine check cell trains its size's smallest three budgets alone


def cell_size(cell: str, sizes=None) -> str:
    """ "s2_seed3" -> "s2". Raises ConfigError for a cell not written SIZE_seedN[_cosine], or whose size is not a
    key of `sizes` (scaling.sizes) when given."""
    size = _cell(cell)["size"]
    if sizes is not None and size not in sizes:
        raise ConfigError(
            f"scaling.cell={cell!r} names size {size!r}, which scaling.sizes does not define; "
            f"pick one of {', '.join(sizes)} (or add {size} to scaling.sizes)"
        )
    return size


def cell_seed(cell: str) -> int:
    """ "s2_seed3" -> 3."""
    return int(_cell(cell)["seed"])


def cell_is_check(cell: str) -> bool:
    """Whether the cell trains each budget alone with a cosine schedule ("s1_seed1_cosine"): the cool-down check."""
    return _cell(cell)["check"] is not None


def cell_lr(cell: str) -> float | None:
    """The peak rate of a tuning cell ("s2_seed1_lr0.011" -> 0.011); None for every other cell."""
    lr = _cell(cell)["lr"]
    return None if lr is None else float(lr)


def cell_is_tune(cell: str) -> bool:
    """Whether the cell is one run of the tuning stage: its size's middle budget at the rate in its name
    (SIZE_seedN_lrR), or, with the cosine schedule, the middle of the check's budgets (SIZE_seedN_cosine_lrR)."""
    return _cell(cell)["lr"] is not None


def rate_name(lr: float) -> str:
    """A rate as a tuning cell writes it: 0.011 -> "0.011", 2e-05 -> "2e-05" (Python's shortest repr)."""
    return repr(float(lr))


def _cell(cell) -> dict:
    m = CELL.match(str(cell))
    if m is None:
        raise ConfigError(
            f"scaling.cell={cell!r} must be SIZE_seedN (or SIZE_seedN_cosine), e.g. s2_seed1 (a key of scaling.sizes)"
        )
    return m.groupdict()


def cells(
    sizes,
    seed_size: str,
    seeds: int,
    check_sizes=(),
    tune_seeds: int = 0,
    stage: str = "all",
    check_seeds: int = 1,
    tune_seed_start: int = 1,
    seed_start: int = 1,
) -> str:
    """The swept cells, smallest size first in each group: the tuning stage (tune_cell_names), then SIZE_seedS ..
    SIZE_seed(S+K-1) for every size (S: seed_start, K: size_seeds), then SIZE_seedN_cosine for each size of
    check_sizes and seed N of S .. S+check_seeds-1 (the cool-down check: each beside the study cell of its seed).
    stage: "all"; "tune", the tuning stage alone; "check", the check's tuning cells and the check cells alone.
    tune_seed_start: the tuning runs' first seed (tune_cell_names); seed_start: the study cells' and the check
    cells' (scaling.seed_start: 3 keeps them apart from tuning seeds 1-2)."""
    names = list(sizes)
    check_listing(sizes, check_sizes)
    if seed_size not in names:
        raise ConfigError(f"scaling.seed_size={seed_size} is not a key of scaling.sizes ({', '.join(names)})")
    for key, value in (("seeds", seeds), ("check_seeds", check_seeds), ("seed_start", seed_start)):
        if not is_whole(value) or value < 1:
            raise ConfigError(f"scaling.{key}={value!r} must be a positive whole number")
    for name in check_sizes or ():
        if name not in names:
            raise ConfigError(f"scaling.check_sizes names {name!r}, not a key of scaling.sizes ({', '.join(names)})")
    if stage not in STAGES:
        raise ConfigError(f"scaling.stage={stage!r} must be one of {', '.join(STAGES)}")
    first = int(seed_start)
    checks = [f"{name}_seed{n}_cosine" for name in check_sizes or () for n in range(first, first + int(check_seeds))]
    tune = tune_cell_names(sizes, tune_seeds, check_sizes, cosine_only=stage == "check", seed_start=tune_seed_start)
    if stage == "tune" and not tune:
        raise ConfigError("scaling.stage=tune, but no size has lr: tuned with an lr_grid: there is nothing to tune")
    if stage == "check" and not check_sizes:
        raise ConfigError("scaling.stage=check, but scaling.check_sizes is empty: name the sizes to check, e.g. [s1]")
    if stage != "all":
        return ",".join(tune + (checks if stage == "check" else []))
    study = [f"{n}_seed{s}" for n in names for s in range(first, first + size_seeds(n, sizes[n], seed_size, seeds))]
    return ",".join(tune + study + checks)


STAGES = ("all", "tune", "check")  # scaling.stage: the whole sweep, its tuning stage, or the cool-down check


def tune_seed_range(tune_seeds, seed_start=1) -> range:
    """The tuning runs' seeds: tune_seeds of them from seed_start (scaling.tune_seed_start). ConfigError for a
    seed_start that is not a positive whole number."""
    if not is_whole(seed_start) or seed_start < 1:
        raise ConfigError(f"scaling.tune_seed_start={seed_start!r} must be a positive whole number: the first seed")
    return range(int(seed_start), int(seed_start) + int(tune_seeds or 0))


def tune_cell_names(sizes, tune_seeds, check_sizes=(), cosine_only: bool = False, seed_start: int = 1) -> list[str]:
    """The tuning stage's cells, smallest size first: SIZE_seedS_lrR for every size whose lr is `tuned`, each of
    tune_seeds seeds S from seed_start and each rate R of its lr_grid; then SIZE_seedS_cosine_lrR for each tuned size
    of check_sizes (the cosine schedule's own rate, for the cool-down check). With seed_start 1 a study cell of seed 1
    at its tuned rate repeats the winning tuning run, so its middle-budget point is the one that won the selection
    (biased low); a seed_start above the study's seeds (e.g. 101) keeps the two apart. ConfigError for a grid, seed
    count or seed_start the stage cannot use."""
    seeds = tune_seed_range(tune_seeds, seed_start)
    out, cosine = [], []
    for name, size in sizes.items():
        grid = check_lr_grid(name, size, tune_seeds)
        runs = [(s, rate_name(r)) for s in seeds for r in grid]
        out += [f"{name}_seed{s}_lr{r}" for s, r in runs]
        if name in (check_sizes or ()):
            cosine += [f"{name}_seed{s}_cosine_lr{r}" for s, r in runs]
    return cosine if cosine_only else out + cosine


def cell_size_spec(cell: str, size, budgets):
    """The size as a cell trains it: a cosine check cell (SIZE_seedN_cosine) trains the CHECK_BUDGETS smallest of
    its size's budgets (size_budgets) alone, so its size keeps only those; a tuning cell (SIZE_seedN_lrR) the
    middle of its budgets (middle_budget; a cosine tuning cell, of the check's); budgets: scaling.budgets."""
    own = size_budgets(size, budgets)
    if cell_is_check(cell):
        own = own[:CHECK_BUDGETS]
    if cell_is_tune(cell):
        own = [middle_budget({"budgets": own}, budgets)]
    if own == size_budgets(size, budgets):
        return size
    return {**{k: size[k] for k in size if k != "budgets"}, "budgets": own}


def cell_branches(cell: str, size, scaling) -> list[Branch]:
    """A cell's budgets as Branch steps: a cool-down cell's are its size's (size_budgets); a cosine check cell
    (SIZE_seedN_cosine) trains the smallest CHECK_BUDGETS of them alone (cell_size_spec)."""
    return branches(
        cell_size_spec(cell, size, scaling.budgets), scaling.budgets, float(scaling.cooldown), int(scaling.block_size)
    )


def _size_of(cell, sizes, block_size):
    """The cell's size, whose steps the resolvers divide by: ConfigError naming the key for a batch_size or
    block_size that is not a positive whole number (the resolvers run before check_design)."""
    name = cell_size(cell, sizes)
    batch = sizes[name].get("batch_size")
    if not is_whole(batch) or batch < 1:
        raise ConfigError(f"scaling.sizes.{name}.batch_size={batch!r} must be a positive whole number of windows")
    if not is_whole(block_size) or block_size < 1:
        raise ConfigError(f"scaling.block_size={block_size!r} must be a positive whole number of tokens per window")
    return sizes[name]


def job_max_steps(cell, sizes, budgets, block_size) -> int:
    """trainer.max_steps of a job: the step of its largest budget (a check cell: of its size's CHECK_BUDGETS
    smallest, cell_size_spec)."""
    size = _size_of(cell, sizes, block_size)
    return branches(cell_size_spec(cell, size, budgets), budgets, 0.0, block_size)[-1].end


def job_warmup(cell, sizes, warmup_tokens_per_param, block_size) -> int:
    """task.scheduler.warmup_steps of a job (warmup_steps)."""
    return warmup_steps(_size_of(cell, sizes, block_size), warmup_tokens_per_param, block_size)


def job_lr(cell, sizes) -> float:
    """task.optimizer.lr of a job: a tuning cell's own rate; a size's fixed lr; for lr: tuned, the geometric middle
    of its lr_grid until the cell's run replaces it with its family's tuned rate (zoo.scaling.tune.tuned_rate)."""
    if cell_is_tune(cell):
        return cell_lr(cell)
    size = sizes[cell_size(cell, sizes)]
    if size.get("lr") != TUNED:
        return size.get("lr")
    grid = [float(r) for r in size.get("lr_grid") or [1.0]]
    return math.exp(sum(map(math.log, grid)) / len(grid))


for _name, _fn in (
    ("zoo_cell_size", cell_size),
    ("zoo_cell_seed", cell_seed),
    ("zoo_scaling_cells", cells),
    ("zoo_scaling_layers", layers),
    ("zoo_scaling_d_ff", d_ff),
    ("zoo_scaling_max_steps", job_max_steps),
    ("zoo_scaling_warmup", job_warmup),
    ("zoo_scaling_lr", job_lr),
):
    OmegaConf.register_new_resolver(_name, _fn, replace=True)
