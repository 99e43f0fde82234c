"""How a run's error leaves the process: bad input (zoo.errors' ConfigError, DataError, BudgetError, InitFromError,
a constructor's ValueError, the Trainer's MisconfigurationException) as one line and exit 2, a diverged run
(TrainingDiverged) as one line and exit 1, anything else re-raised with its traceback."""

import sys

from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from lightning.fabric.utilities.exceptions import MisconfigurationException
from omegaconf.errors import InterpolationResolutionError

from zoo.data.resolver import DataError
from zoo.errors import ConfigError, TrainingDiverged
from zoo.interop.init_from import InitFromError
from zoo.run.budget import BudgetError, unwrapped


def basic_multirun() -> bool:
    """True in a multirun of Hydra's basic sweeper, whose jobs are independent (a grid): one job's bad input
    need not stop the others. A search sweeper (Optuna) proposes its next job from the last one's value."""
    if not (HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN):
        return False
    return str(HydraConfig.get().sweeper.get("_target_", "")).endswith("BasicSweeper")


def handle_error(e: BaseException) -> float:
    """Bad input (ConfigError, DataError, BudgetError, a constructor's ValueError, the Trainer's
    MisconfigurationException: trainer=gpu on a machine without one, trainer.devices=0): print its message
    and exit with 2; a diverged run (TrainingDiverged) the same way with 1. In a grid multirun (basic_multirun),
    raise it instead, so Hydra runs the other jobs and fails at the end. Re-raise anything else."""
    line, code = one_line(e)
    if line is not None:
        print(f"zoo: error: {line}", file=sys.stderr)  # the message says what and how to fix, no traceback
        if not basic_multirun():
            sys.exit(code)
    raise e


def one_line(e: BaseException) -> tuple:
    """(the message handle_error prints, its exit code), or (None, None) for an error it re-raises as it is."""
    if isinstance(e, TrainingDiverged):
        return str(e), 1
    # a datamodule's, task's or Trainer's constructor, or a resolver (${zoo_budget:...}) that OmegaConf wraps
    wrapped = isinstance(e, (InstantiationException, InterpolationResolutionError))
    cause = unwrapped(e) if wrapped else e
    if cause is not e and isinstance(cause, MisconfigurationException):
        # Lightning's message names its own argument, not the config key or a way out
        return (
            f"the trainer config (trainer=..., trainer.*): {cause}; trainer=cpu runs on any machine, "
            "trainer=ddp_cpu in several CPU processes, trainer=gpu / ddp / fsdp need GPUs"
        ), 2
    if isinstance(cause, (ConfigError, DataError, BudgetError, InitFromError)) or (
        cause is not e and isinstance(cause, ValueError)
    ):
        return str(cause), 2
    return None, None
