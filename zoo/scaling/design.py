"""experiment=scaling's design checks (check_design), grouped by what they check, before anything trains."""

import math

from omegaconf import DictConfig, ListConfig

from zoo.errors import ConfigError, is_number, is_whole
from zoo.scaling.sizes import (
    OPTIONAL_SIZE_KEYS,
    SIZE_KEYS,
    TUNED,
    branches,
    size_seeds,
    step_tokens,
    warmup_steps,
)
from zoo.scaling.tune import check_rates, read_sweep_table
from zoo.training.optim import COOLDOWN_SHAPES


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
    rates = check_rates(grid, f"scaling.sizes.{name}.lr_grid", ": lr: tuned needs")
    if not is_whole(tune_seeds) or tune_seeds < 1:
        raise ConfigError(
            f"scaling.tune_seeds={tune_seeds!r} must be a positive whole number when a size's lr is tuned "
            f"(scaling.sizes.{name}.lr=tuned)"
        )
    return rates


def check_design(scaling, sizes_used=None) -> None:
    """Refuse a design the study cannot run, before any training (ConfigError naming the key): budgets (the study's,
    or a size's own) that are not positive numbers, a cool-down not in (0, 1) or of an unknown scaling.cooldown_shape,
    a trunk shorter than a cool-down's start (scaling.trunk_tokens_per_param), a size whose keys are missing, whose
    lr is not a positive number, whose batch is not a positive whole number of windows, or whose budget is under 2
    batches, and a budget whose cool-down starts inside the warm-up or spans no step. sizes_used: the size names to
    check (default every size)."""
    budgets, block, warmup_tpp, cooldown = check_settings(scaling)
    for name in sizes_used or list(scaling.sizes):
        size = _check_size(scaling, name)
        _check_branches(name, size, budgets, cooldown, block, warmup_steps(size, warmup_tpp, block))


def check_settings(scaling, measured_block: bool = False) -> tuple:
    """The study-wide part of check_design, no size's shape or steps: the listing of scaling.sizes and their keys,
    the budgets (the study's and each size's own), the window, warm-up, cool-down (share and shape), checkpoint
    interval, trunk and tuning table (its file and header; its rows are each cell's). Cheap:
    zoo.run.sweep_callback.ScalingPlan runs it once on the multirun's config, before composing the jobs.
    measured_block: a null scaling.block_size is left to each job (a translation study measures it from the data,
    zoo.run.scaling_data). Returns (budgets, block_size, warmup_tokens_per_param, cooldown); raises ConfigError
    naming the key."""
    check_listing(scaling.sizes, scaling.get("check_sizes"))
    budgets, own = _check_budgets(scaling)
    _check_size_keys(scaling.sizes)
    block, warmup_tpp, cooldown = _check_schedule(scaling, measured_block)
    _check_trunk(scaling.get("trunk_tokens_per_param"), budgets, own, cooldown)
    if scaling.get("tuning_table"):
        read_sweep_table(scaling.tuning_table)  # a missing or malformed table, before any job is composed
    return budgets, block, warmup_tpp, cooldown


def _check_budgets(scaling) -> tuple:
    """(scaling.budgets, {size: its own budgets}): ConfigError unless each is a list of distinct positive numbers."""
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
    return budgets, own


def _check_size_keys(sizes) -> None:
    """ConfigError for a key of a size that is not a size key (SIZE_KEYS, OPTIONAL_SIZE_KEYS)."""
    for name, size in sizes.items():
        unknown = [k for k in size if k not in (*SIZE_KEYS, *OPTIONAL_SIZE_KEYS)]
        if unknown:
            raise ConfigError(
                f"scaling.sizes.{name}.{unknown[0]} is not a size key; a size sets {', '.join(SIZE_KEYS)} and may "
                f"set {', '.join(OPTIONAL_SIZE_KEYS)}"
            )


def _check_schedule(scaling, measured_block: bool = False) -> tuple:
    """(block_size, warmup_tokens_per_param, cooldown): ConfigError for a window, warm-up, cool-down, checkpoint
    interval or cool-down shape the trunk and its branches cannot use (a null window passes when measured_block)."""
    block = scaling.get("block_size")
    if not (measured_block and block is None) and (not is_whole(block) or block < 1):
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
    return block, warmup_tpp, cooldown


def _check_trunk(trunk, budgets, own, cooldown: float) -> None:
    """ConfigError for a trunk (scaling.trunk_tokens_per_param) that ends before the last cool-down starts."""
    top = max([*budgets, *(b for v in own.values() for b in v)])  # the study's and every size's own
    reach = (1 - cooldown) * top
    if trunk is not None and (not is_number(trunk) or trunk < reach):
        raise ConfigError(
            f"scaling.trunk_tokens_per_param={trunk!r} ends the trunk before the cool-down of budget {top:g} "
            f"starts ({reach:g} tokens per parameter): raise it to at least {reach:g}, or null to take what the "
            "budgets need"
        )


def _check_size(scaling, name: str):
    """The size `name` of scaling.sizes: ConfigError when it is missing, or its keys, shape, seeds, lr, lr_grid or
    batch are not what a size needs."""
    size = scaling.sizes.get(name)
    if size is None:
        raise ConfigError(f"scaling.sizes has no size {name!r}")
    missing = [k for k in SIZE_KEYS if size.get(k) is None]
    if missing:
        raise ConfigError(f"scaling.sizes.{name} needs {', '.join(missing)} (each size sets {', '.join(SIZE_KEYS)})")
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
    return size


def _check_branches(name: str, size, budgets, cooldown: float, block: int, warm: int) -> None:
    """ConfigError for a budget of the size under 2 batches, whose cool-down starts inside the warm-up (`warm`
    steps) or spans no step, or that ends at the step of another (one point would replace the other)."""
    batch = size.get("batch_size")
    key = f"scaling.sizes.{name}.budgets" if size.get("budgets") else "scaling.budgets"  # where they come from
    ends = {}
    for br in branches(size, budgets, cooldown, block):
        if (other := ends.setdefault(br.end, br.tokens_per_param)) != br.tokens_per_param:
            raise ConfigError(
                f"{key}: budgets {other:g} and {br.tokens_per_param:g} at size {name} both end at step {br.end} "
                f"({step_tokens(size, block):,} tokens a step): give budgets at least a step apart"
            )
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
