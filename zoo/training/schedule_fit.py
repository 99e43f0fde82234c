"""The learning-rate schedule fitted to the run's length: a warm-up longer than the run is scaled (a config
file's) or refused (the command line's), task.scheduler.warmup_fraction becomes steps, and a wsd cool-down must
start before the run ends."""

import logging

from zoo.errors import ConfigError, is_number, is_whole

log = logging.getLogger("zoo")

WARMUP_SHARE = 0.1  # a config's warm-up longer than the run is scaled to this share of the run's steps
WARMUP_KEY = "task.scheduler.warmup_steps"
FRACTION_KEY = "task.scheduler.warmup_fraction"


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


def warmup_share(cfg, overrides):
    """task.scheduler of cfg after its warm-up share is checked: warmup_fraction, when set, in (0, 1]
    (ConfigError otherwise); a warm-up in steps given on the command line (`overrides`) replaces a config file's
    share, which is dropped from cfg, and both given there raise ConfigError. Returns (task.scheduler, whether
    the command line set task.scheduler.warmup_steps)."""
    from omegaconf import open_dict

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
    return sched, explicit


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

    sched, explicit = warmup_share(cfg, overrides)
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
