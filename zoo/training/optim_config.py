"""The optimizer and LR schedule of every task, from the task config's optimizer / scheduler keys."""

import difflib
import logging
import math

from zoo.errors import ConfigError, check_warmup_steps, is_number, is_whole
from zoo.training.optim import (
    COOLDOWN_SHAPES,
    BudgetCosine,
    BudgetNoam,
    ConfigLambdaLR,
    Noam,
    StepWarmupWatch,
    WarmupCosine,
    WarmupStableDecay,
    adamw,
    check_length,
)

log = logging.getLogger("zoo")

# every key configure_optimizers reads; any other (+task.optimizer.lrr=...) would be ignored, so it is refused
OPTIMIZER_KEYS = ("lr", "betas", "weight_decay", "eps")
SCHEDULER_KEYS = ("kind", "warmup_steps", "decay_steps", "min_lr", "warmup_fraction", "decay_start", "decay_shape")
WARMUP_SHARE = 0.1  # a config's warm-up longer than the run is scaled to this share of the run's steps
WARMUP_KEY = "task.scheduler.warmup_steps"
FRACTION_KEY = "task.scheduler.warmup_fraction"


def check_keys(optimizer, scheduler) -> None:
    """Raise ValueError for a key of task.optimizer / task.scheduler outside OPTIMIZER_KEYS / SCHEDULER_KEYS,
    naming the nearest allowed key."""
    for group, given, allowed in (("optimizer", optimizer, OPTIMIZER_KEYS), ("scheduler", scheduler, SCHEDULER_KEYS)):
        for key in given or {}:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean task.{group}.{close[0]}? " if close else ""
                raise ValueError(
                    f"task.{group}.{key} is not a key of task.{group}, and nothing would read it; "
                    f"{hint}its keys are: {', '.join(allowed)}"
                )


def _number(value) -> bool:
    """Whether `value` is a finite real number (not a bool, not a string)."""
    return is_number(value) and math.isfinite(value)


def check_values(optimizer) -> None:
    """Raise ValueError naming the key and its range for a task.optimizer value AdamW cannot take (Loshchilov &
    Hutter 2019): lr > 0, betas two numbers in [0, 1), weight_decay >= 0, eps > 0, all finite."""
    optimizer = optimizer or {}
    lr = optimizer.get("lr")
    if not _number(lr) or lr <= 0:
        raise ValueError(f"task.optimizer.lr={lr!r} must be a positive number (the peak learning rate, e.g. 3e-4)")
    betas = optimizer.get("betas", (0.9, 0.999))
    if (
        isinstance(betas, (str, bytes))
        or not hasattr(betas, "__len__")
        or len(betas) != 2
        or not all(_number(b) and 0 <= b < 1 for b in betas)
    ):
        raise ValueError(
            f"task.optimizer.betas={betas!r} must be two numbers in [0, 1), the decay rates of Adam's two moment "
            f"averages (e.g. [0.9, 0.999])"
        )
    for key, low, default, hint in (("weight_decay", ">= 0", 0.1, "0 = none"), ("eps", "> 0", 1e-8, "e.g. 1e-8")):
        value = optimizer.get(key, default)
        if not _number(value) or value < 0 or (key == "eps" and value == 0):
            raise ValueError(f"task.optimizer.{key}={value!r} must be a number {low} ({hint})")


SCHEDULE_KINDS = ("cosine", "noam", "wsd")


def check_schedule_kind(scheduler) -> None:
    """Raise ValueError for an unknown task.scheduler.kind, and for kind=wsd a decay_start that is not null or a
    whole number >= 0, a decay_steps not after it, or a decay_shape outside COOLDOWN_SHAPES."""
    scheduler = scheduler or {}
    kind = scheduler.get("kind", "cosine")
    if kind not in SCHEDULE_KINDS:
        raise ValueError(f"task.scheduler.kind={kind!r} is unknown; allowed: {', '.join(SCHEDULE_KINDS)}")
    if kind != "wsd":
        return
    start, end = scheduler.get("decay_start"), scheduler.get("decay_steps")
    if start is not None and (not is_whole(start) or start < 0):
        raise ValueError(
            f"task.scheduler.decay_start={start!r} must be the step the cool-down starts (a whole number >= 0), "
            "or null for a constant rate after the warm-up"
        )
    if start is not None and end is not None and is_whole(end) and end <= start:
        raise ValueError(
            f"task.scheduler.decay_steps={end} must be after task.scheduler.decay_start={start}: the cool-down "
            "runs from decay_start to decay_steps"
        )
    shape = scheduler.get("decay_shape") or "1-sqrt"
    if shape not in COOLDOWN_SHAPES:
        raise ValueError(f"task.scheduler.decay_shape={shape!r} is unknown; allowed: {', '.join(COOLDOWN_SHAPES)}")


def check_optimizer_and_scheduler(optimizer: dict, scheduler: dict) -> None:
    """Every check of task.optimizer and task.scheduler that needs no run length (plain dicts): keys zoo reads
    (check_keys), AdamW's ranges (check_values), a known schedule kind, a warm-up that is a whole number of
    steps (noam: >= 1), min_lr in [0, lr], decay_steps null or a whole number of steps >= the warm-up (a
    cosine that ends before it peaks never decays as set). Raises ValueError (ConfigError) naming the key."""
    check_keys(optimizer, scheduler)
    check_values(optimizer)
    try:
        check_schedule_kind(scheduler)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    check_warmup_steps(scheduler.get("warmup_steps"), scheduler.get("kind"))
    lr, min_lr = optimizer.get("lr"), scheduler.get("min_lr")
    if min_lr is not None and (not is_number(min_lr) or not 0 <= min_lr <= (lr or math.inf)):
        raise ConfigError(
            f"task.scheduler.min_lr={min_lr!r} must be a number in [0, task.optimizer.lr={lr}]: the learning rate "
            f"the cosine decays to (a negative one ascends the loss, one above lr rises)"
        )
    decay, warmup = scheduler.get("decay_steps"), scheduler.get("warmup_steps") or 0
    if decay is not None and (not is_whole(decay) or decay < 1):
        raise ConfigError(
            f"task.scheduler.decay_steps={decay!r} must be a whole number of optimizer steps >= 1, or null (the "
            f"run's trainer.max_steps)"
        )
    if decay is not None and isinstance(warmup, int) and decay < warmup:
        raise ConfigError(
            f"task.scheduler.decay_steps={decay} ends the cosine before its warm-up "
            f"(task.scheduler.warmup_steps={warmup}) does: give decay_steps >= {warmup}, or null"
        )


def warmup_overridden(overrides, key: str = WARMUP_KEY) -> bool:
    """Whether Hydra's job overrides (e.g. ["+arch=encoder_decoder", "task.scheduler.warmup_steps=300"]) set
    `key` (task.scheduler.warmup_steps), with or without a leading + or ++."""
    return any(str(o).lstrip("+").split("=", 1)[0] == key for o in overrides)


def scaled_warmup(steps: int) -> int:
    """The warm-up (optimizer steps) a run of `steps` steps gets when its config's is longer than the run:
    WARMUP_SHARE of it, at least 1 step."""
    return max(1, round(WARMUP_SHARE * steps))


def fit_warmup(scheduler: dict, steps: int, run: str, explicit: bool, fix: str) -> dict:
    """The scheduler config for a run of `steps` optimizer steps (`run` describes the bound, e.g.
    "trainer.max_steps=150"): as given when task.scheduler.warmup_steps <= steps; a longer warm-up ends the run
    before the learning rate peaks (it reaches steps / warmup of task.optimizer.lr, and never decays).
    A longer one the user set (explicit) raises ConfigError naming both keys and `fix` (how to lengthen the
    run); a longer one from a config file (a task's default, e.g. translation's 300 steps) is scaled to
    scaled_warmup(steps) with a logged warning, and a copy of scheduler with that warm-up is returned."""
    warmup = scheduler.get("warmup_steps")
    if warmup is None or steps <= 0 or warmup <= steps:
        return scheduler
    new = scaled_warmup(steps)
    if explicit:
        raise ConfigError(
            f"{WARMUP_KEY}={warmup} is longer than the run ({run}): training would stop before the learning rate "
            f"peaks. Set {WARMUP_KEY}={new} (a tenth of the run) or anything up to {steps}, or {fix}"
        )
    log.warning(
        "%s=%s is longer than the run (%s): warming up over %d %s instead, a tenth of the run; set %s up to "
        "%d to choose another",
        WARMUP_KEY,
        warmup,
        run,
        new,
        "step" if new == 1 else "steps",
        WARMUP_KEY,
        steps,
    )
    return {**scheduler, "warmup_steps": new}


def fit_schedule(scheduler: dict, steps: int, run: str, explicit: bool, fix: str) -> dict:
    """The scheduler config of a run of `steps` optimizer steps (`run` describes the bound): the warm-up is judged
    against the schedule's own length, task.scheduler.decay_steps for a cosine that sets it (so a run trained in
    legs, each a few steps of one schedule, keeps it), else the run's steps. task.scheduler.warmup_fraction, when
    set, is the share of that length the warm-up covers (round(fraction x length) steps, at least 1; the
    fraction is then consumed: null in the copy returned); otherwise fit_warmup (a warm-up longer than the
    length: ConfigError when `explicit`, else scaled with a warning). A length of 0 (unknown) leaves the
    scheduler as it is."""
    decay = scheduler.get("decay_steps") if scheduler.get("kind", "cosine") == "cosine" else None
    length = decay or steps
    if length <= 0:
        return scheduler
    fraction = scheduler.get("warmup_fraction")
    if fraction:
        return {**scheduler, "warmup_steps": max(1, round(fraction * length)), "warmup_fraction": None}
    if decay:
        run = f"the schedule's task.scheduler.decay_steps={decay}"
        fix = f"raise task.scheduler.decay_steps to at least {scheduler.get('warmup_steps')}"
    return fit_warmup(scheduler, length, run, explicit, fix)


def check_schedule(cfg, overrides, bound: "tuple[int, str, str] | None" = None) -> None:
    """Before any data is read, after check_config (which checks that task.scheduler.warmup_steps is a whole
    number): task.scheduler.warmup_fraction, when set, is a share of the run in (0, 1]; a warm-up given on the
    command line wins over a config file's share (the share is dropped), and both given there are refused.
    In a run bounded by trainer.max_steps, or by `bound` (steps, the bound in words, how to lengthen it: a
    tokens budget's steps, zoo.run.budget.schedule_bound, whose end then becomes task.scheduler.decay_steps
    where that is null), the warm-up is fitted in cfg (fit_schedule: the share of the schedule's length, or a
    warm-up checked against that length: one from the command line that is longer raises ConfigError, a config
    file's is scaled), and a wsd decay_start at or after the end (decay_steps null) raises ConfigError. Runs
    bounded by epochs are fitted when their step count is known
    (TaskBase.configure_optimizers); other runs bounded by tokens, FLOPs or time warm up over the share of the
    budget, or warn while they run when a warm-up in steps outlasts them (zoo.training.optim.StepWarmupWatch)."""
    from omegaconf import DictConfig, OmegaConf, open_dict

    sched = cfg.task.get("scheduler") or {}
    fraction = sched.get("warmup_fraction")
    if fraction is not None and (not is_number(fraction) or not 0 < fraction <= 1):
        raise ConfigError(
            f"task.scheduler.warmup_fraction={fraction!r} must be a share of the budget in (0, 1] (e.g. 0.1), or "
            f"null to warm up over task.scheduler.warmup_steps"
        )
    explicit = warmup_overridden(overrides)
    if fraction is not None and explicit:
        if warmup_overridden(overrides, FRACTION_KEY):
            raise ConfigError(
                f"{WARMUP_KEY}={sched.get('warmup_steps')} and {FRACTION_KEY}={fraction} both set the warm-up: "
                f"give one (the steps, or the share of the run)"
            )
        log.info(
            "%s=%s (command line) replaces the config's %s=%s",
            WARMUP_KEY,
            sched.get("warmup_steps"),
            FRACTION_KEY,
            fraction,
        )
        with open_dict(cfg):
            cfg.task.scheduler.warmup_fraction = None
        sched = cfg.task.scheduler
    steps = cfg.trainer.get("max_steps")
    run, fix = f"trainer.max_steps={steps}", f"raise trainer.max_steps to at least {sched.get('warmup_steps')}"
    if bound is not None:
        steps, run, fix = bound
    if not is_whole(steps) or steps <= 0:
        return
    plain = OmegaConf.to_container(sched, resolve=True) if isinstance(sched, DictConfig) else dict(sched)
    start = plain.get("decay_start") if plain.get("kind") == "wsd" else None
    if start is not None and plain.get("decay_steps") is None and steps <= start:
        raise ConfigError(
            f"task.scheduler.decay_start={start} is not before the run's end ({run}), so the cool-down would never "
            f"run: give a decay_start below {steps}, or task.scheduler.decay_steps"
        )
    fitted = fit_schedule(plain, steps, run, explicit, fix)
    with open_dict(cfg):
        if fitted is not plain:
            cfg.task.scheduler.warmup_steps = fitted["warmup_steps"]
            cfg.task.scheduler.warmup_fraction = fitted.get("warmup_fraction")
        if bound is not None and sched.get("decay_steps") is None:
            cfg.task.scheduler.decay_steps = steps  # the cool-down ends where the budget does


def configure_optimizers(model, optimizer: dict, scheduler: dict, max_steps: int, progress=None, fused=None):
    """AdamW (decay on matrices only) + a per-step LambdaLR: scheduler.kind cosine (linear warmup, cosine to
    min_lr at decay_steps, default max_steps), noam (Vaswani et al. 2017 eq. 3, peak lr at warmup_steps) or wsd
    (warm-up, constant lr, and from decay_start a decay_shape cool-down to min_lr at decay_steps, default
    max_steps; decay_start null: constant for ever; zoo.training.optim.warmup_stable_decay).
    progress: a function returning the fraction of a token / FLOP / time budget spent; given, cosine decays
    over it instead of over steps, warming up over scheduler.warmup_fraction of it when set (BudgetCosine); noam
    warms up over that share too (BudgetNoam); a warm-up counted in steps is then watched (StepWarmupWatch).
    fused: zoo.training.optim.adamw's (None: torch's fused kernel where it applies).
    Returns Lightning's optimizer dict. Raises ValueError for an unknown kind or key (check_keys), a value
    AdamW cannot take (check_values), or a schedule without the step count it needs (check_length)."""
    check_keys(optimizer, scheduler)
    check_values(optimizer)
    check_schedule_kind(scheduler)
    check_length(scheduler, max_steps, progress)
    opt = adamw(
        model,
        optimizer["lr"],
        optimizer.get("betas", (0.9, 0.999)),
        optimizer.get("weight_decay", 0.1),
        optimizer.get("eps", 1e-8),
        fused,
    )
    kind = scheduler.get("kind", "cosine")
    if kind == "cosine" and progress is not None:
        fn = BudgetCosine(
            scheduler["warmup_steps"],
            progress,
            optimizer["lr"],
            scheduler.get("min_lr", 0.0),
            scheduler.get("warmup_fraction"),
        )
    elif kind == "cosine":
        decay = scheduler.get("decay_steps") or max_steps
        fn = WarmupCosine(scheduler["warmup_steps"], decay, optimizer["lr"], scheduler.get("min_lr", 0.0))
    elif kind == "noam" and progress is not None and scheduler.get("warmup_fraction"):
        fn = BudgetNoam(progress, scheduler["warmup_fraction"])
    elif kind == "noam":
        fn = Noam(scheduler["warmup_steps"])
    elif kind == "wsd":
        fn = WarmupStableDecay(
            scheduler["warmup_steps"],
            scheduler.get("decay_start"),
            scheduler.get("decay_steps") or max_steps,
            optimizer["lr"],
            scheduler.get("min_lr", 0.0),
            scheduler.get("decay_shape") or "1-sqrt",
        )
    else:  # check_schedule_kind
        raise AssertionError(kind)
    if progress is not None and not scheduler.get("warmup_fraction"):
        fn = StepWarmupWatch(fn, scheduler["warmup_steps"], progress)
    sched = ConfigLambdaLR(opt, fn)  # a resumed run follows its own config's schedule
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
