"""The optimizer and LR schedule of every task, from the task config's optimizer / scheduler keys (checked by
zoo.training.optim_checks, fitted to the run by zoo.training.schedule_fit)."""

from zoo.training.optim import (
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
from zoo.training.optim_checks import check_keys, check_schedule_kind, check_values


def lr_lambda(optimizer: dict, scheduler: dict, max_steps: int, progress=None):
    """The per-step learning-rate multiplier of scheduler.kind (configure_optimizers' rules), wrapped in
    StepWarmupWatch when a budget's `progress` runs it and the warm-up is counted in steps."""
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
    return fn


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
    fn = lr_lambda(optimizer, scheduler, max_steps, progress)
    sched = ConfigLambdaLR(opt, fn)  # a resumed run follows its own config's schedule
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
