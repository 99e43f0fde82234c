"""zoo's error classes and the small value checks more than one layer makes. Imports nothing from zoo: every
other module may import it (the import-linter contract in .importlinter keeps it at the bottom).

A run that raises ConfigError, DataError, BudgetError or InitFromError before training prints the message and
exits with 2 (zoo.run.exits.handle_error); each message names the key or file at fault and the fix."""


class ConfigError(ValueError):
    """A bad or contradictory config, found before any training starts."""


class DataError(RuntimeError):
    """A dataset file is unknown, cannot be found or downloaded, is malformed, or fails its checksum."""


class BudgetError(ValueError):
    """A bad budget.* config (zoo.run.budget)."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite (zoo.training.callbacks.finite_loss): `step` is the optimizer
    step whose loss it was, as the logs count them. zoo.run.exits.handle_error prints it and exits with 1."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


class InitFromError(ValueError):
    """A bad model.init_from: a checkpoint zoo cannot read, or one whose shape the run cannot take
    (zoo.interop.init_from)."""


def is_whole(value) -> bool:
    """Whether `value` is an int and not a bool (True is an int in Python): a count a config may give."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """Whether `value` is an int or a float and not a bool; NaN and inf included: callers bound the range."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_fraction(key: str, value, fix: str) -> None:
    """Raise ValueError unless value is a number in [0, 1): `key` names the option, `fix` the usual value
    (label smoothing, an EMA decay)."""
    if not is_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"{key}={value!r} must be a number in [0, 1); {fix}")


def check_z_loss(z_loss, key: str = "z_loss") -> float:
    """z_loss as a float; raises ValueError naming `key` unless it is a finite number >= 0 (0 = off; PaLM,
    Chowdhery et al. 2022, uses 1e-4)."""
    if not is_number(z_loss) or not 0.0 <= z_loss < float("inf"):
        raise ValueError(
            f"{key}={z_loss!r} must be a non-negative number: the weight of log(Z)^2 in the training loss "
            f"(0 = off, PaLM uses 1e-4)"
        )
    return float(z_loss)


def check_warmup_steps(warmup, kind: str | None, key: str = "task.scheduler.warmup_steps") -> None:
    """Raise ConfigError unless warmup is None or a whole number of optimizer steps >= 0; for the noam
    schedule (`kind`), >= 1: its peak is at warmup (Vaswani et al. 2017, eq. 3:
    lr * min(step^-0.5, step * warmup^-1.5) * warmup^0.5)."""
    if warmup is not None and (not is_whole(warmup) or warmup < 0):
        raise ConfigError(
            f"{key}={warmup!r} must be a whole number of optimizer steps >= 0, e.g. "
            f"{key}=100 (a negative or fractional warm-up would bend the schedule)"
        )
    if kind == "noam" and not (warmup or 0) >= 1:
        raise ConfigError(
            f"task.scheduler.kind=noam needs {key} >= 1 (its peak is at "
            f"warmup_steps: lr * min(step^-0.5, step * warmup^-1.5) * warmup^0.5); "
            f"got {warmup}"
        )


def listed(items: list[str], k: int, sep: str = ", ") -> str:
    """The first `k` of `items` joined by `sep`, then "and N more" when there are more (an error message's list)."""
    return sep.join(items[:k]) + (f" and {len(items) - k} more" if len(items) > k else "")
