"""Checks of how long a run trains: something ends it, its learning-rate schedule has a length, and
trainer.max_epochs, accumulate_grad_batches and val_check_interval are in range. The schedule's own values:
zoo.training.optim_checks."""

from omegaconf import DictConfig

from zoo.errors import ConfigError, is_number, is_whole


def check_run_end(cfg: DictConfig) -> None:
    """trainer.max_steps is -1 or a positive whole number; with -1 something else ends the run (max_epochs, a
    budget of tokens, flops or time, max_time); a run that trainer.max_time alone bounds gives its cosine or wsd
    cool-down a length (task.scheduler.decay_steps, or budget.kind=time). ConfigError otherwise."""
    max_steps = cfg.trainer.get("max_steps")
    whole = is_whole(max_steps)
    if max_steps is not None and (not whole or max_steps == 0 or max_steps < -1):
        what = "would train nothing" if whole else "is not a whole number"
        raise ConfigError(
            f"trainer.max_steps={max_steps!r} {what}: give a positive number of optimizer steps, or -1 "
            f"with trainer.max_epochs=N or a budget.kind of tokens, flops or time to end the run"
        )
    epochs, budget = cfg.trainer.get("max_epochs"), (cfg.get("budget") or {}).get("kind", "steps")
    ends = epochs not in (None, -1) or budget not in (None, "steps") or cfg.trainer.get("max_time") is not None
    if max_steps == -1 and not ends:
        raise ConfigError(
            "trainer.max_steps=-1 and trainer.max_epochs=-1 (no max_time, no budget) leave the run without an "
            "end, and its learning-rate schedule without a length: give trainer.max_steps=N, "
            "trainer.max_epochs=N, or a budget.kind of tokens, flops or time"
        )
    sched = (cfg.task.get("scheduler") if cfg.get("task") is not None else None) or {}
    only_time = max_steps == -1 and epochs in (None, -1) and budget in (None, "steps")
    cools = sched.get("kind") == "wsd" and sched.get("decay_start") is not None
    if only_time and cools and sched.get("decay_steps") is None:
        raise ConfigError(
            f"trainer.max_time={cfg.trainer.get('max_time')} alone bounds the run, so the wsd cool-down from "
            "task.scheduler.decay_start has no step to end at: give task.scheduler.decay_steps=N or "
            "trainer.max_steps=N"
        )
    if only_time and sched.get("kind", "cosine") == "cosine" and sched.get("decay_steps") is None:
        raise ConfigError(
            f"trainer.max_time={cfg.trainer.get('max_time')} alone bounds the run, so the cosine learning-rate "
            f"schedule has no length to decay over: give budget.kind=time budget.value=SECONDS (the cosine decays "
            f"over the time), task.scheduler.decay_steps=N, task.scheduler.kind=noam, or trainer.max_steps=N"
        )


def check_run_length(cfg: DictConfig) -> None:
    """trainer.max_epochs is -1 (none), null or a positive whole number; accumulate_grad_batches >= 1;
    val_check_interval > 0; ConfigError otherwise. The schedule's own values: zoo.training.optim_checks."""
    epochs = cfg.trainer.get("max_epochs")
    if epochs is not None and (not is_whole(epochs) or epochs == 0 or epochs < -1):
        raise ConfigError(
            f"trainer.max_epochs={epochs!r} must be a positive whole number, or -1 to leave the run to "
            f"trainer.max_steps or a budget"
        )
    accumulate = cfg.trainer.get("accumulate_grad_batches")
    if accumulate is not None and (not is_whole(accumulate) or accumulate < 1):
        raise ConfigError(
            f"trainer.accumulate_grad_batches={accumulate!r} must be a whole number >= 1 (batches per optimizer step)"
        )
    every = cfg.trainer.get("val_check_interval")
    if every is not None and (not is_number(every) or not every > 0):
        raise ConfigError(
            f"trainer.val_check_interval={every!r} must be > 0: a share of an epoch in (0, 1] or a whole number of "
            f"training batches"
        )
