"""experiment=scaling's grid (conf/experiment/scaling.yaml): the resolvers that turn a cell (`s2_seed3`) and a
size into a model shape, a batch and the steps of its trunk and cool-down branches; the design's checks.

The design (docs/scaling-laws.md): per size and seed one constant-rate trunk, and at each budget b (tokens per
non-embedding parameter) a cool-down branch from the trunk's checkpoint at (1 - cooldown) b to b (Hägele et al.
2024); a cell named SIZE_seedN_cosine trains each budget alone with a cosine schedule instead, the check of the
cool-down points. The plan printed before anything trains: zoo.run.scaling_plan; the runner: zoo.run.scaling_cell."""

import functools
import math
import re
from dataclasses import dataclass

from omegaconf import DictConfig, ListConfig, OmegaConf

from zoo.errors import ConfigError, is_number, is_whole
from zoo.model import ModelConfig, build_model
from zoo.model.cost import non_embedding_param_count
from zoo.training.optim import COOLDOWN_SHAPES

CELL = re.compile(
    r"^(?P<size>[A-Za-z0-9]+)_seed(?P<seed>[0-9]+)"
    r"(?P<check>_cosine)?(?:_lr(?P<lr>[0-9]+(?:\.[0-9]*)?(?:e-?[0-9]+)?))?$"
)
SIZE_KEYS = ("d_model", "n_heads", "n_layers", "batch_size", "lr")  # required; a size may also set budgets, seeds
OPTIONAL_SIZE_KEYS = ("budgets", "seeds", "lr_grid")  # lr_grid: the tuning stage's rates (with lr: tuned)
TUNED = "tuned"  # a size's lr: each family's best rate of the tuning stage (zoo.scaling.tune)
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


def size_seeds(name: str, size, seed_size: str, seeds: int) -> int:
    """The seeds of a size: its own `seeds` when it sets them, else `seeds` at seed_size and 1 elsewhere."""
    own = size.get("seeds") if hasattr(size, "get") else None
    if own is not None:
        if not is_whole(own) or own < 1:
            raise ConfigError(f"scaling.sizes.{name}.seeds={own!r} must be a positive whole number")
        return int(own)
    return int(seeds) if name == seed_size else 1


def check_listing(sizes, check_sizes) -> None:
    """ConfigError unless every entry of scaling.sizes is a mapping and scaling.check_sizes a list (or null)."""
    for name, size in sizes.items():
        if not isinstance(size, (dict, DictConfig)):
            raise ConfigError(
                f"scaling.sizes.{name}={size!r} must be a size ({{d_model: 32, n_heads: 2, n_layers: 2, "
                f"batch_size: 8, lr: 8.0e-3}}); leave a size out with '~scaling.sizes.{name}'"
            )
    if check_sizes is not None and not isinstance(check_sizes, (list, tuple, ListConfig)):
        raise ConfigError(f"scaling.check_sizes={check_sizes!r} must be a list of size names, e.g. [s1, s2] ([]: none)")


def cells(
    sizes, seed_size: str, seeds: int, check_sizes=(), tune_seeds: int = 0, stage: str = "all", check_seeds: int = 1
) -> str:
    """The swept cells, smallest size first in each group: the tuning stage (tune_cell_names), then SIZE_seed1 ..
    SIZE_seedK for every size (K: size_seeds), then SIZE_seedN_cosine for each size of check_sizes and seed N <=
    check_seeds (the cool-down check). stage: "all"; "tune", the tuning stage alone; "check", the check's tuning
    cells and the check cells alone."""
    names = list(sizes)
    check_listing(sizes, check_sizes)
    if seed_size not in names:
        raise ConfigError(f"scaling.seed_size={seed_size} is not a key of scaling.sizes ({', '.join(names)})")
    for key, value in (("seeds", seeds), ("check_seeds", check_seeds)):
        if not is_whole(value) or value < 1:
            raise ConfigError(f"scaling.{key}={value!r} must be a positive whole number")
    for name in check_sizes or ():
        if name not in names:
            raise ConfigError(f"scaling.check_sizes names {name!r}, not a key of scaling.sizes ({', '.join(names)})")
    if stage not in STAGES:
        raise ConfigError(f"scaling.stage={stage!r} must be one of {', '.join(STAGES)}")
    checks = [f"{name}_seed{n}_cosine" for name in check_sizes or () for n in range(1, int(check_seeds) + 1)]
    tune = tune_cell_names(sizes, tune_seeds, check_sizes, cosine_only=stage == "check")
    if stage == "tune" and not tune:
        raise ConfigError("scaling.stage=tune, but no size has lr: tuned with an lr_grid: there is nothing to tune")
    if stage != "all":
        return ",".join(tune + (checks if stage == "check" else []))
    study = [f"{n}_seed{s}" for n in names for s in range(1, size_seeds(n, sizes[n], seed_size, seeds) + 1)]
    return ",".join(tune + study + checks)


STAGES = ("all", "tune", "check")  # scaling.stage: the whole sweep, its tuning stage, or the cool-down check


def tune_cell_names(sizes, tune_seeds, check_sizes=(), cosine_only: bool = False) -> list[str]:
    """The tuning stage's cells, smallest size first: SIZE_seedS_lrR for every size whose lr is `tuned`, each seed
    S <= tune_seeds and each rate R of its lr_grid; then SIZE_seedS_cosine_lrR for each tuned size of check_sizes
    (the cosine schedule's own rate, for the cool-down check). ConfigError for a grid or seed count the stage cannot
    use."""
    out, cosine = [], []
    for name, size in sizes.items():
        grid = check_lr_grid(name, size, tune_seeds)
        runs = [(s, rate_name(r)) for s in range(1, int(tune_seeds or 0) + 1) for r in grid]
        out += [f"{name}_seed{s}_lr{r}" for s, r in runs]
        if name in (check_sizes or ()):
            cosine += [f"{name}_seed{s}_cosine_lr{r}" for s, r in runs]
    return cosine if cosine_only else out + cosine


def check_lr_grid(name: str, size, tune_seeds) -> list[float]:
    """A size's tuning rates, smallest first ([] when its lr is a number). ConfigError: lr_grid beside a numeric lr
    (it would do nothing), lr: tuned without a grid of >= 3 distinct positive rates, or with tune_seeds < 1."""
    lr, grid = size.get("lr"), size.get("lr_grid")
    if lr != TUNED:
        if grid is not None:
            raise ConfigError(
                f"scaling.sizes.{name}.lr_grid is set but scaling.sizes.{name}.lr={lr!r} is a fixed rate, so the "
                f"grid would not be used: set scaling.sizes.{name}.lr=tuned to tune it, or "
                f"scaling.sizes.{name}.lr_grid=null"
            )
        return []
    listed = isinstance(grid, (list, tuple, ListConfig))
    if not listed or len(grid) < 3 or not all(is_number(r) and math.isfinite(r) and r > 0 for r in grid):
        raise ConfigError(
            f"scaling.sizes.{name}.lr_grid={grid!r}: lr: tuned needs a list of at least 3 positive peak rates, "
            "e.g. [4.0e-3, 5.7e-3, 8.0e-3] (the best must lie inside it)"
        )
    if len(set(map(float, grid))) < len(grid):
        raise ConfigError(f"scaling.sizes.{name}.lr_grid={list(grid)!r} names a rate twice: give each rate once")
    if not is_whole(tune_seeds) or tune_seeds < 1:
        raise ConfigError(
            f"scaling.tune_seeds={tune_seeds!r} must be a positive whole number when a size's lr is tuned "
            f"(scaling.sizes.{name}.lr=tuned)"
        )
    return sorted(float(r) for r in grid)


def layers(arch: str, n_layers: int) -> int:
    """The layers of `arch` at a size of n_layers: encoder_decoder has n_layers / 2 a side (so the parameter
    counts match with d_ff 3 d_model: 10 d^2 + 14 d^2 per encoder + decoder pair = 2 x 12 d^2)."""
    if arch != "encoder_decoder":
        return n_layers
    if n_layers % 2:
        raise ConfigError(
            f"a scaling size has n_layers={n_layers}: encoder_decoder splits it in halves; use an even number"
        )
    return n_layers // 2


def d_ff(arch: str, d_model: int) -> int:
    """4 d_model; encoder_decoder 3 d_model (matched parameter counts, `layers`)."""
    return 3 * d_model if arch == "encoder_decoder" else 4 * d_model


def size_non_embedding(size) -> int:
    """Non-embedding parameters of decoder_only at a size ({d_model, n_heads, n_layers}): the N of its tokens
    per parameter, the same for every architecture at that size. Counted once per shape (_non_embedding)."""
    return _non_embedding(int(size["d_model"]), int(size["n_heads"]), int(size["n_layers"]))


@functools.cache
def _non_embedding(d_model: int, n_heads: int, n_layers: int) -> int:
    """size_non_embedding of one shape: built once, not at every resolver, plan row and check that asks (a
    101 M-parameter size takes seconds to build)."""
    cfg = ModelConfig(vocab_size=2, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff("", d_model))
    return non_embedding_param_count(build_model("decoder_only", cfg))


@dataclass(frozen=True)
class Branch:
    """One budget of a size: `tokens_per_param` b, the trunk step its cool-down starts from (`start`) and the step
    it ends at (`end`, the budget: round(b N / tokens a step)). A cosine check cell trains 0 .. end alone."""

    tokens_per_param: float
    start: int
    end: int


def step_tokens(size, block_size: int) -> int:
    """Tokens an optimizer step reads at a size: its batch_size (windows) x block_size."""
    return int(size["batch_size"]) * int(block_size)


def warmup_steps(size, warmup_tokens_per_param: float, block_size: int) -> int:
    """The warm-up of a size in steps: warmup_tokens_per_param x N tokens (Porian et al. 2024 warm up over N
    tokens), at least 1."""
    return max(1, round(warmup_tokens_per_param * size_non_embedding(size) / step_tokens(size, block_size)))


def size_budgets(size, budgets) -> list[float]:
    """A size's budgets (tokens per non-embedding parameter), smallest first: its own `budgets` when it sets them,
    else the study's (scaling.budgets)."""
    return sorted(float(x) for x in (size.get("budgets") or budgets))


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


def middle_budget(size, budgets) -> float:
    """The budget a size's rates are tuned at: the middle of its budgets (of an even count, the lower middle, so
    [5, 10, 20] -> 10 and [50, 100, 200, 400] -> 100)."""
    own = size_budgets(size, budgets)
    return own[(len(own) - 1) // 2]


def branches(size, budgets, cooldown: float, block_size: int) -> list[Branch]:
    """The budgets of a size (size_budgets), smallest first, as Branch (start, end) steps."""
    n, per_step = size_non_embedding(size), step_tokens(size, block_size)
    out = []
    for b in size_budgets(size, budgets):
        end = round(b * n / per_step)
        out.append(Branch(b, round((1.0 - cooldown) * end), end))
    return out


def cell_branches(cell: str, size, scaling) -> list[Branch]:
    """A cell's budgets as Branch steps: a cool-down cell's are its size's (size_budgets); a cosine check cell
    (SIZE_seedN_cosine) trains the smallest CHECK_BUDGETS of them alone (cell_size_spec)."""
    return branches(
        cell_size_spec(cell, size, scaling.budgets), scaling.budgets, float(scaling.cooldown), int(scaling.block_size)
    )


def check_design(scaling, sizes_used=None) -> None:
    """Refuse a design the study cannot run, before any training (ConfigError naming the key): budgets (the study's,
    or a size's own) that are not positive numbers, a cool-down not in (0, 1) or of an unknown scaling.cooldown_shape,
    a trunk shorter than a cool-down's start (scaling.trunk_tokens_per_param), a size whose keys are missing, whose
    lr is not a positive number, whose batch is not a positive whole number of windows, or whose budget is under 2
    batches, and a budget whose cool-down starts inside the warm-up or spans no step. sizes_used: the size names to
    check (default every size)."""
    check_listing(scaling.sizes, scaling.get("check_sizes"))
    budgets = scaling.get("budgets")
    own = {name: size.get("budgets") for name, size in scaling.sizes.items() if size.get("budgets") is not None}
    for key, value in [("scaling.budgets", budgets)] + [(f"scaling.sizes.{n}.budgets", v) for n, v in own.items()]:
        listed = isinstance(value, (list, tuple, ListConfig))
        if not listed or not value or not all(is_number(b) and math.isfinite(b) and b > 0 for b in value):
            raise ConfigError(
                f"{key}={value!r} must be a list of positive tokens-per-parameter budgets, e.g. [5, 10, 20]"
            )
        if len(set(map(float, value))) < len(value):
            raise ConfigError(f"{key}={list(value)!r} names a budget twice: give each budget once")
    for name, size in scaling.sizes.items():
        unknown = [k for k in size if k not in (*SIZE_KEYS, *OPTIONAL_SIZE_KEYS)]
        if unknown:
            raise ConfigError(
                f"scaling.sizes.{name}.{unknown[0]} is not a size key; a size sets {', '.join(SIZE_KEYS)} and may "
                f"set {', '.join(OPTIONAL_SIZE_KEYS)}"
            )
    block = scaling.get("block_size")
    if not is_whole(block) or block < 1:
        raise ConfigError(f"scaling.block_size={block!r} must be a positive whole number of tokens per window")
    warmup_tpp = scaling.get("warmup_tokens_per_param", 1.0)
    if not is_number(warmup_tpp) or not math.isfinite(warmup_tpp) or warmup_tpp < 0:
        raise ConfigError(
            f"scaling.warmup_tokens_per_param={warmup_tpp!r} must be a number >= 0 (1: a warm-up over N tokens)"
        )
    cooldown = scaling.get("cooldown")
    if not is_number(cooldown) or not 0 < cooldown < 1:
        raise ConfigError(
            f"scaling.cooldown={cooldown!r} must be in (0, 1): the share of each budget's steps in its cool-down "
            "(Hägele et al. 2024 use 0.2); 0 is no cool-down, and 1 or more would start it before the trunk does"
        )
    every = scaling.get("checkpoint_every")
    if every is not None and (not is_whole(every) or every < 0):
        raise ConfigError(
            f"scaling.checkpoint_every={every!r} must be a whole number of steps >= 0 (0 or null: a trunk checkpoint "
            "only at each branch start)"
        )
    shape = scaling.get("cooldown_shape", "1-sqrt")
    if shape not in COOLDOWN_SHAPES:
        raise ConfigError(
            f"scaling.cooldown_shape={shape!r} is not a cool-down shape; allowed: {', '.join(COOLDOWN_SHAPES)} "
            "(Hägele et al. 2024 use 1-sqrt)"
        )
    trunk = scaling.get("trunk_tokens_per_param")
    top = max([*budgets, *(b for v in own.values() for b in v)])  # the study's and every size's own
    reach = (1 - cooldown) * top
    if trunk is not None and (not is_number(trunk) or trunk < reach):
        raise ConfigError(
            f"scaling.trunk_tokens_per_param={trunk!r} ends the trunk before the cool-down of budget {top:g} "
            f"starts ({reach:g} tokens per parameter): raise it to at least {reach:g}, or null to take what the "
            "budgets need"
        )
    for name in sizes_used or list(scaling.sizes):
        size = scaling.sizes.get(name)
        if size is None:
            raise ConfigError(f"scaling.sizes has no size {name!r}")
        missing = [k for k in SIZE_KEYS if size.get(k) is None]
        if missing:
            raise ConfigError(
                f"scaling.sizes.{name} needs {', '.join(missing)} (each size sets {', '.join(SIZE_KEYS)})"
            )
        for key in ("d_model", "n_heads", "n_layers"):
            if not is_whole(size.get(key)) or size.get(key) < 1:
                raise ConfigError(f"scaling.sizes.{name}.{key}={size.get(key)!r} must be a positive whole number")
        size_seeds(name, size, scaling.get("seed_size"), scaling.get("seeds", 1))
        lr = size.get("lr")
        if lr != TUNED and (not is_number(lr) or not math.isfinite(lr) or lr <= 0):
            raise ConfigError(
                f"scaling.sizes.{name}.lr={lr!r} must be a positive peak learning rate, e.g. 4.0e-3, or tuned (each "
                "family's best rate of its lr_grid)"
            )
        check_lr_grid(name, size, scaling.get("tune_seeds", 0))
        batch = size.get("batch_size")
        if not is_whole(batch) or batch < 1:
            raise ConfigError(f"scaling.sizes.{name}.batch_size={batch!r} must be a positive whole number of windows")
        warm = warmup_steps(size, warmup_tpp, block)
        key = f"scaling.sizes.{name}.budgets" if size.get("budgets") else "scaling.budgets"  # where they come from
        for br in branches(size, budgets, cooldown, block):
            if br.end < 2:
                raise ConfigError(
                    f"scaling.sizes.{name}.batch_size={batch}: budget {br.tokens_per_param:g} tokens per parameter "
                    f"is {br.end} batch(es) of {step_tokens(size, block):,} tokens ({batch} windows of "
                    f"scaling.block_size={block}); lower the batch or scaling.block_size, or raise {key}"
                )
            if br.end - br.start < 1 or br.start < warm:
                raise ConfigError(
                    f"{key}: budget {br.tokens_per_param:g} at size {name} cools down from step "
                    f"{br.start} to {br.end}, "
                    f"{'inside its warm-up of ' + str(warm) + ' steps' if br.start < warm else 'no step'}; "
                    f"raise the budget, lower scaling.sizes.{name}.batch_size or scaling.warmup_tokens_per_param"
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
