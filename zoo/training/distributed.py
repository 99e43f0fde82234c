"""DDP and FSDP strategies that work under Hydra: `python -m zoo trainer=ddp|ddp_cpu|fsdp`.

Lightning starts the extra processes of a single-node DDP/FSDP run by re-running the command line
(`python -m zoo <sys.argv>`) with LOCAL_RANK=1..N-1. Under Hydra that breaks in two ways, which
HydraSubprocessLauncher avoids:

1. In a multirun (`python -m zoo -m seed=1,2 trainer=ddp_cpu`), sys.argv still holds `-m` and the sweep, so
   every child process starts a sweep of its own (into another timestamped sweep dir, with a sweeper that
   samples, with other values) instead of joining the one job it belongs to. Children here get the job's
   own overrides (one value per key, from HydraConfig), `hydra.mode=RUN` and `hydra.run.dir=<the job's
   output dir>` (quoted: commas and spaces stay literal): all ranks of a job share its output dir, and
   each job runs once, on all ranks.
2. After a job, the launching process keeps LOCAL_RANK, WORLD_SIZE, MASTER_PORT ... in its environment and
   its process group open, so Lightning believes the next sweep job was started by torchrun and spawns
   nothing. The launcher forgets that state when a new run starts in the same process.

Processes started by torchrun or SLURM's srun are not re-launched; give every process the same
`hydra.run.dir` there (README, "Scaling out"), or each picks its own timestamped dir (a warning says so).
Only global rank 0 writes checkpoints, results.json and logger output (Lightning's rank-zero rules and
zoo.run.train), whatever the launcher.
"""

import os
import re
import subprocess
import sys
from contextlib import contextmanager, nullcontext

import torch
from lightning.pytorch.plugins.environments import LightningEnvironment
from lightning.pytorch.strategies import DDPStrategy as _DDPStrategy
from lightning.pytorch.strategies import FSDPStrategy as _FSDPStrategy
from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher
from lightning.pytorch.utilities import rank_zero_warn
from torch import nn

LAUNCHER_ENV = "ZOO_DDP_LAUNCHER_PID"  # set by the process that started the others
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE", LAUNCHER_ENV)
# hydra overrides that belong to the parent's sweep, not to one job's process
_PARENT_ONLY = (
    "hydra.run.",
    "hydra.sweep.",
    "hydra.mode",
    "hydra.job.name",
    "hydra.output_subdir",
    "hydra/launcher",
    "hydra/sweeper",
    "hydra.launcher.",
    "hydra.sweeper.",
    "hydra.callbacks",
)


def quote(value) -> str:
    """str(value) as a single-quoted Hydra override value: commas, spaces, '=' stay literal. Quotes and
    the backslashes before a quote (or the end) are escaped, as Hydra's override grammar asks."""
    escaped = re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), str(value))
    return f"'{escaped}'"


def hydra_child_command(local_rank: int) -> tuple[list, str]:
    """The command line and cwd that run the current Hydra job (not the whole sweep) as process
    local_rank: [python, -m, zoo, --config-name=..., <the job's overrides>, hydra.mode=RUN,
    hydra.run.dir=<the job's output dir>, hydra.output_subdir=null, hydra.job.name=...]."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import get_original_cwd, to_absolute_path

    import __main__

    hc = HydraConfig.get()
    if __main__.__spec__ is None:  # python path/to/script.py
        cmd = [sys.executable, to_absolute_path(sys.argv[0])]
    else:
        cmd = [sys.executable, "-m", __main__.__spec__.name]
    for source in hc.runtime.config_sources:
        if source.provider == "main" and source.schema == "file":
            cmd.append(f"--config-path={source.path}")
        elif source.provider == "command-line" and source.schema == "file":
            cmd.append(f"--config-dir={source.path}")
    cmd.append(f"--config-name={hc.job.config_name}")
    cmd += list(hc.overrides.task)
    cmd += [o for o in hc.overrides.hydra if not o.lstrip("+~").startswith(_PARENT_ONLY)]
    cmd += [
        "hydra.mode=RUN",
        f"hydra.run.dir={quote(hc.runtime.output_dir)}",
        "hydra.output_subdir=null",
        f"hydra.job.name=train_ddp_process_{local_rank}",
    ]
    return cmd, get_original_cwd()


def forget_previous_launch() -> None:
    """Drop what an earlier run of this process left behind as the launcher of its DDP processes (the
    previous job of a Hydra multirun): the process group and the environment variables that would make
    Lightning think torchrun started this process."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    for key in DIST_ENV:
        os.environ.pop(key, None)


class HydraSubprocessLauncher(_SubprocessScriptLauncher):
    """Lightning's subprocess launcher, starting each child as the current Hydra *job* (see module doc).
    Without Hydra it behaves as Lightning's."""

    def launch(self, function, *args, trainer=None, **kwargs):
        if not self.procs and os.environ.get(LAUNCHER_ENV) == str(os.getpid()):
            forget_previous_launch()  # a new run in the process that launched the previous one
            if isinstance(self.cluster_environment, LightningEnvironment):
                self.cluster_environment._main_port = -1  # pick a fresh free port
        return super().launch(function, *args, trainer=trainer, **kwargs)

    def _call_children_scripts(self) -> None:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return super()._call_children_scripts()
        self._check_can_spawn_children()
        self.procs = []
        env = self.cluster_environment
        os.environ["MASTER_ADDR"] = env.main_address
        os.environ["MASTER_PORT"] = str(env.main_port)
        os.environ["NODE_RANK"] = str(env.node_rank())
        os.environ["LOCAL_RANK"] = str(env.local_rank())
        os.environ["WORLD_SIZE"] = str(self.num_processes * self.num_nodes)
        os.environ[LAUNCHER_ENV] = str(os.getpid())
        for local_rank in range(1, self.num_processes):
            child_env = {**os.environ, "LOCAL_RANK": str(local_rank)}
            command, cwd = hydra_child_command(local_rank)
            self.procs.append(subprocess.Popen(command, env=child_env, cwd=cwd))


def _warn_if_run_dirs_differ(strategy) -> None:
    """torchrun / srun start every process with its own Hydra config: without a fixed hydra.run.dir each
    picks its own timestamped dir."""
    if not strategy.cluster_environment.creates_processes_externally or LAUNCHER_ENV in os.environ:
        return
    if strategy.world_size < 2:
        return
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        hydra = HydraConfig.get().overrides.hydra
        if not any(o.startswith(("hydra.run.dir=", "hydra.sweep.dir=")) for o in hydra):
            rank_zero_warn(
                "processes started by torchrun/srun without hydra.run.dir=...: each process resolves "
                "its own timestamped output dir. Pass the same hydra.run.dir to every process, e.g. "
                "hydra.run.dir=outputs/$SLURM_JOB_ID (README, 'Scaling out')."
            )


class HydraLaunch:
    """What zoo's strategies add to Lightning's: processes launched with HydraSubprocessLauncher, and a
    warning when the processes' run dirs differ (torchrun / srun without hydra.run.dir)."""

    def _configure_launcher(self) -> None:
        super()._configure_launcher()
        if type(self._launcher) is _SubprocessScriptLauncher:
            self._launcher = HydraSubprocessLauncher(self.cluster_environment, self.num_processes, self.num_nodes)

    def setup_environment(self) -> None:
        super().setup_environment()
        _warn_if_run_dirs_differ(self)


class DDPStrategy(HydraLaunch, _DDPStrategy):
    """Lightning's DDPStrategy (one model replica per process, gradients all-reduced), launching its
    processes with HydraSubprocessLauncher. Every argument is DDPStrategy's (process_group_backend:
    None = nccl on GPUs, gloo on the CPU)."""


class FSDPStrategy(HydraLaunch, _FSDPStrategy):
    """Lightning's FSDPStrategy (parameters, gradients and optimizer state sharded over the processes),
    launching its processes with HydraSubprocessLauncher. Unlike Lightning's class it also runs on the CPU
    (gloo; torch's FSDP supports it), which is how zoo tests it; on GPUs use conf/trainer/fsdp.yaml as is.
    Arguments: FSDPStrategy's; conf/trainer/fsdp.yaml wraps each EncoderLayer / DecoderLayer as one FSDP unit
    (auto_wrap_policy=layer_classes()), so the embeddings and the tied LM head share the root unit."""

    def _setup_model(self, model: nn.Module) -> nn.Module:
        if self.root_device.type != "cpu":
            return super()._setup_model(model)
        # Lightning passes device_id=root_device.index, None on the CPU, which torch's FSDP refuses
        from lightning.fabric.strategies.fsdp import _setup_activation_checkpointing
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        if not any(isinstance(m, FSDP) for m in model.modules()):
            model = FSDP(
                model,
                cpu_offload=self.cpu_offload,
                mixed_precision=self.mixed_precision_config,
                sharding_strategy=self.sharding_strategy,
                device_id=self.root_device,
                **self.kwargs,
            )
        _setup_activation_checkpointing(model, self._activation_checkpointing_kwargs)
        return model

    @contextmanager
    def _full_state_dicts_without_offload(self):
        """Lightning gathers full state dicts with offload_to_cpu=True, with which torch's FSDP crashes
        (SIGSEGV) when the parameters already are on the CPU; on the CPU gather them without offload."""
        if self.root_device.type != "cpu":
            yield
            return
        import lightning.pytorch.strategies.fsdp as lightning_fsdp
        from torch.distributed.fsdp import FullOptimStateDictConfig, FullStateDictConfig, StateDictType
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        def context(module, world_size, rank0_only=True):
            return FSDP.state_dict_type(
                module,
                StateDictType.FULL_STATE_DICT,
                FullStateDictConfig(offload_to_cpu=False, rank0_only=rank0_only),
                FullOptimStateDictConfig(offload_to_cpu=False, rank0_only=rank0_only),
            )

        original = lightning_fsdp._get_full_state_dict_context
        lightning_fsdp._get_full_state_dict_context = context
        try:
            yield
        finally:
            lightning_fsdp._get_full_state_dict_context = original

    def lightning_module_state_dict(self):
        with self._full_state_dicts_without_offload():
            return super().lightning_module_state_dict()

    def optimizer_state(self, optimizer):
        with self._full_state_dicts_without_offload():
            return super().optimizer_state(optimizer)

    def load_checkpoint(self, checkpoint_path, weights_only=None):
        with self._full_state_dicts_without_offload():
            return super().load_checkpoint(checkpoint_path, weights_only)


def is_fsdp(module) -> bool:
    """True when `module` (e.g. trainer.strategy.model) is wrapped in FSDP."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    return isinstance(module, FSDP)


def root_params(module):
    """A context for decoding outside FSDP's forward (the LM's validation sample, run from a hook): the root
    unit's own parameters (embeddings, tied head, final norms: everything not in a layer unit) get their
    real shapes; each layer unit still gathers its own in its forward, which is a collective, so every rank
    must run the same forward calls. A no-op for any other module."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    return FSDP.summon_full_params(module, recurse=False, writeback=False) if is_fsdp(module) else nullcontext()


def layer_classes(enabled: bool = True):
    """{EncoderLayer, DecoderLayer}: the Transformer layer classes, as FSDP's auto-wrap (one unit per layer)
    and activation-checkpointing policies; None when not enabled (the policy is off)."""
    from zoo.model.blocks.layer import DecoderLayer, EncoderLayer

    return {EncoderLayer, DecoderLayer} if enabled else None


def full_params(module: nn.Module):
    """A context in which an FSDP-wrapped module's parameters have their real shapes (they are flat 1-D shards
    otherwise); a no-op for any other module. The Parameter objects stay the same, so an optimizer built in
    it trains the sharded parameters."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    return FSDP.summon_full_params(module, writeback=False) if is_fsdp(module) else nullcontext()
