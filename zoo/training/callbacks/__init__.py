"""zoo.training.callbacks: Lightning callbacks of zoo's own."""

from zoo.training.callbacks.finite_loss import FiniteLoss


def always_callbacks() -> list:
    """The callbacks of every training run, whatever callbacks= says: FiniteLoss stops a diverging run."""
    return [FiniteLoss()]
