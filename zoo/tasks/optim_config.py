"""The optimizer and LR schedule of every task, from the task config's optimizer / scheduler keys."""

import difflib

from zoo.optim import BudgetCosine, ConfigLambdaLR, Noam, WarmupCosine, adamw

# every key configure_optimizers reads; any other (+task.optimizer.lrr=...) would be ignored, so it is refused
OPTIMIZER_KEYS = ("lr", "betas", "weight_decay", "eps")
SCHEDULER_KEYS = ("kind", "warmup_steps", "decay_steps", "min_lr", "warmup_fraction")


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


def configure_optimizers(model, optimizer: dict, scheduler: dict, max_steps: int, progress=None):
    """AdamW (decay on matrices only) + a per-step LambdaLR: scheduler.kind cosine (linear warmup, cosine to
    min_lr at decay_steps, default max_steps) or noam (Vaswani et al. 2017 eq. 3, peak lr at warmup_steps).
    progress: a function returning the fraction of a token / FLOP / time budget spent; given, cosine decays
    over it instead of over steps, warming up over scheduler.warmup_fraction of it when set (BudgetCosine; noam
    has no horizon and ignores both).
    Returns Lightning's optimizer dict. Raises ValueError for an unknown kind or key (check_keys)."""
    check_keys(optimizer, scheduler)
    opt = adamw(
        model,
        optimizer["lr"],
        optimizer.get("betas", (0.9, 0.999)),
        optimizer.get("weight_decay", 0.1),
        optimizer.get("eps", 1e-8),
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
    elif kind == "noam":
        fn = Noam(scheduler["warmup_steps"])
    else:
        raise ValueError(f"task.scheduler.kind={kind!r} is unknown; allowed: cosine, noam")
    sched = ConfigLambdaLR(opt, fn)  # a resumed run follows its own config's schedule
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
