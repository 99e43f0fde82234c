"""How many threads each training process gives torch: `threads` in conf/config.yaml.

torch's default is one intra-op thread per core for every process. Processes that share a machine then ask
for more threads than it has cores, and each step waits on the others' threads (oversubscription). zoo
knows how many processes it starts on one machine (the CPU processes of a DDP run, trainer.devices, and the
parallel jobs of a multirun launcher, hydra.launcher.n_jobs) and gives each cores // processes threads.
Other work on the machine (another user's job) cannot be known here: set `threads` by hand then.
"""

import logging
import os

import torch

from zoo.errors import is_whole

log = logging.getLogger("zoo")


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity; os.cpu_count() where affinity is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def choose_threads(requested: int | None, cores: int, processes: int, env: str | None) -> tuple[int, str]:
    """(threads per process, why). requested: the `threads` key (None = automatic); env: OMP_NUM_THREADS as
    set by the user (kept when `threads` is None). Automatic: max(1, cores // processes).
    Raises ValueError for a requested count below 1."""
    if requested is not None:
        if not is_whole(requested) or requested < 1:
            raise ValueError(f"threads={requested!r} must be a positive integer (or null: automatic)")
        return requested, f"threads={requested}"
    if env:
        try:
            return max(1, int(env)), f"OMP_NUM_THREADS={env}"
        except ValueError:
            pass
    n = max(1, cores // max(1, processes))
    return n, f"{cores} cores / {processes} process{'es' if processes > 1 else ''} on this machine"


def processes_per_machine(cfg) -> int:
    """The training processes zoo starts on this machine: CPU DDP devices x parallel multirun jobs."""
    trainer = cfg.get("trainer") or {}
    devices = trainer.get("devices", 1)
    per_run = devices if trainer.get("accelerator") == "cpu" and isinstance(devices, int) and devices > 0 else 1
    jobs = 1
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            n_jobs = (HydraConfig.get().launcher or {}).get("n_jobs")
            jobs = n_jobs if isinstance(n_jobs, int) and n_jobs > 0 else 1
    except Exception:  # noqa: BLE001 -- no Hydra config: one job
        jobs = 1
    return per_run * jobs


def set_threads(cfg) -> int:
    """Set torch's intra-op threads for this process from cfg.threads (module docstring) and log the
    choice; returns the count. Raises ValueError for a bad `threads`."""
    n, why = choose_threads(
        cfg.get("threads"), available_cores(), processes_per_machine(cfg), os.environ.get("OMP_NUM_THREADS")
    )
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    log.info("torch threads per process: %d (%s; threads=N sets it)", n, why)
    return n
