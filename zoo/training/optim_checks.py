"""What task.optimizer and task.scheduler may hold, checked before a run builds them: the keys zoo reads,
AdamW's ranges, a known schedule kind and its values."""

import difflib
import math

from zoo.errors import ConfigError, check_warmup_steps, is_number, is_whole
from zoo.training.optim import COOLDOWN_SHAPES

# every key configure_optimizers reads; any other (+task.optimizer.lrr=...) would be ignored, so it is refused
OPTIMIZER_KEYS = ("lr", "betas", "weight_decay", "eps")
SCHEDULER_KEYS = ("kind", "warmup_steps", "decay_steps", "min_lr", "warmup_fraction", "decay_start", "decay_shape")
SCHEDULE_KINDS = ("cosine", "noam", "wsd")


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
