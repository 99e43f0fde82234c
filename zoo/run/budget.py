"""A run's training budget: `budget.kind` steps | tokens | flops | time and `budget.value` (conf/config.yaml).

steps bounds the run by optimizer steps (trainer.max_steps; a value, when given, sets it). tokens, flops and
time bound it by the training cost the task counts (zoo.tasks.base.TaskBase.cost: tokens read, 3 x forward
FLOPs of the padded batches, seconds in training steps); the run stops at the first step that reaches the
value, and a cosine schedule decays over the spent fraction (zoo.training.optim.BudgetCosine). Matching budgets by
FLOPs or time gives architectures whose steps cost differently the same compute (Kaplan et al. 2020;
T5, Raffel et al. 2020, sec. 3.2.1, matches by cost the same way).
"""

import math

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import InterpolationResolutionError

from zoo.errors import BudgetError, ConfigError, is_number

KINDS = ("steps", "tokens", "flops", "time")
UNITS = {"steps": "optimizer steps", "tokens": "tokens", "flops": "training FLOPs", "time": "seconds"}


def cell_value(kind: str, budgets) -> "float | None":
    """The budget of `kind` among a benchmark's budgets ({steps, tokens, flops, time}, conf/benchmark/); None for
    steps, which the benchmark's trainer.max_steps already holds (so a trainer.max_steps override still bounds
    the run)."""
    if kind == "steps":
        return None
    if kind not in KINDS:
        raise BudgetError(f"compare.budget={kind!r} is unknown; allowed: {', '.join(KINDS)}")
    if budgets is None or budgets.get(kind) is None:
        raise BudgetError(
            f"this cell has no {kind} budget: set one in compare.budgets (e.g. "
            f"compare.budgets.lm.{kind}=...), or compare.budget=steps"
        )
    return budgets[kind]


# ${zoo_budget:${compare.budget},${benchmark_budget}} in conf/experiment/compare.yaml
OmegaConf.register_new_resolver("zoo_budget", cell_value, replace=True)


def unwrapped(e: BaseException) -> BaseException:
    """The error that OmegaConf's InterpolationResolutionError or Hydra's InstantiationException e was raised
    around (its __cause__, else its __context__, while handling it), through nested interpolations
    (${a.${resolver:...}} wraps the resolver's error twice), or e itself when it wraps none."""
    inner = e.__cause__ or e.__context__
    if inner is None:
        return e
    return unwrapped(inner) if isinstance(inner, InterpolationResolutionError) else inner


def apply_budget(cfg: DictConfig) -> dict:
    """Check cfg.budget and make the trainer follow it; returns {"kind", "value"} (value of steps: the
    resulting trainer.max_steps, -1 when epochs bound the run). tokens / flops / time lift the trainer's step
    and epoch bounds (-1), so the budget alone stops the run.
    Raises BudgetError for an unknown kind or a missing, non-positive, NaN or infinite value."""
    budget = cfg.get("budget") or {}
    kind, value = budget.get("kind", "steps"), budget.get("value")
    if kind not in KINDS:
        raise BudgetError(f"budget.kind={kind!r} is unknown; allowed: {', '.join(KINDS)}")
    # NaN and inf fail `0 < value < inf`: a budget they set would never be spent
    if value is not None and (not is_number(value) or not 0 < value < math.inf):
        raise BudgetError(f"budget.value={value!r} must be a positive, finite number of {UNITS[kind]}")
    if kind == "steps":
        if value is not None:
            if value != int(value):
                raise BudgetError(f"budget.value={value!r}: a steps budget is a whole number of optimizer steps")
            with open_dict(cfg):
                cfg.trainer.max_steps = int(value)
        return {"kind": "steps", "value": int(cfg.trainer.get("max_steps", -1))}
    if value is None:
        raise BudgetError(f"budget.kind={kind} needs budget.value (the {UNITS[kind]} each run may spend)")
    with open_dict(cfg):
        cfg.trainer.max_steps, cfg.trainer.max_epochs = -1, -1
    return {"kind": kind, "value": float(value)}


def ignored_bounds(kind: str, overrides) -> list[str]:
    """The command-line overrides (e.g. ["+arch=decoder_only", "trainer.max_steps=50"]) of trainer.max_steps or
    trainer.max_epochs that a tokens / flops / time budget (`kind`) lifts: apply_budget sets both to -1, so the
    budget alone ends the run; [] for a steps budget."""
    if kind == "steps":
        return []
    keys = ("trainer.max_steps", "trainer.max_epochs")
    return [o for o in overrides if str(o).lstrip("+").split("=", 1)[0] in keys]


def budget_steps(cfg: DictConfig, budget: dict) -> "tuple[int, int] | None":
    """(optimizer steps, tokens a step) of a tokens budget on data whose every step reads the same tokens:
    language-modeling data (a datamodule of BATCH "lm": data.batch_size windows, the global batch, of
    data.block_size tokens) times trainer.accumulate_grad_batches. The run stops at the first step whose tokens
    reach budget.value (zoo.tasks.base.TaskBase.cost), so steps = ceil(value / tokens a step). None for another
    budget or other data, whose steps cost differently."""
    data = cfg.get("data") or {}
    target = data.get("_target_")
    if budget["kind"] != "tokens" or not target or getattr(get_class(target), "BATCH", None) != "lm":
        return None
    per_step = int(data.batch_size) * int(data.block_size) * int(cfg.trainer.get("accumulate_grad_batches") or 1)
    return math.ceil(budget["value"] / per_step), per_step


def schedule_bound(cfg: DictConfig, budget: dict) -> "tuple[int, str, str] | None":
    """(steps, the bound in words, how to lengthen it) of a wsd schedule in a run bounded by a tokens / flops /
    time budget that needs its step count (a cool-down from task.scheduler.decay_start ends where the budget
    does; warmup_fraction is a share of the steps): budget_steps. None where none is needed (another kind or
    bound, or a constant rate warming up over warmup_steps). Raises ConfigError where the budget gives none."""
    sched = cfg.task.get("scheduler") or {}
    if sched.get("kind") != "wsd" or budget["kind"] == "steps":
        return None
    if sched.get("decay_start") is None and sched.get("warmup_fraction") is None:
        return None
    found = budget_steps(cfg, budget)
    if found is None:
        raise ConfigError(
            f"task.scheduler.kind=wsd needs the run's step count (to end the cool-down from decay_start, or to warm "
            f"up over warmup_fraction), and budget.kind={budget['kind']} fixes none here (only a tokens budget on "
            "language-modeling data does: batch_size x block_size tokens a step); use budget.kind=steps, or "
            "task.scheduler.kind=cosine, which decays over the budget's spent share"
        )
    steps, per_step = found
    run = f"budget.value={budget['value']:g} tokens, {steps} steps of {per_step:,}"
    warmup = sched.get("warmup_steps") or 0
    return steps, run, f"raise budget.value to at least {warmup * per_step} ({warmup} steps' tokens)"
