"""A few training steps of a tiny language model, in one process or FSDP-sharded over a gloo group of CPU
processes (tests/test_distributed.py's fast FSDP check): the task's own configure_optimizers under the wrapped
model, as Lightning calls it, each rank on its share of the same global batches."""

import os
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F

MODEL = dict(vocab_size=23, d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0, max_len=16)
STEPS, BATCH, T = 3, 4, 12


def task_and_batches():
    """The LanguageModeling task (seeded init; lr 1e-2, weight decay 0.1, warm-up 1) and STEPS global batches
    (x, y) of (BATCH, T) token ids."""
    from zoo.tasks.lm import LanguageModeling

    torch.manual_seed(0)
    task = LanguageModeling(
        "decoder_only", MODEL, {"chars": "".join(chr(97 + i) for i in range(23))}, {"lr": 1e-2}, {"warmup_steps": 1}
    )
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, 23, (STEPS, BATCH, T + 1), generator=g)
    return task, [(b[:, :-1], b[:, 1:]) for b in text]


def train(task, module, batches, rank=0, world=1):
    """STEPS optimizer steps of task.configure_optimizers() (with `module`, the model as wrapped, as the strategy's
    model) on rows rank::world of each global batch; the loss is the mean next-token cross-entropy."""
    task.trainer = SimpleNamespace(
        max_steps=STEPS, strategy=SimpleNamespace(model=module), precision_plugin=None, max_epochs=None
    )
    out = task.configure_optimizers()
    opt, sched = out["optimizer"], out["lr_scheduler"]["scheduler"]
    for x, y in batches:
        logits = module(x[rank::world])  # (B / world, T, V)
        F.cross_entropy(logits.flatten(0, 1), y[rank::world].flatten()).backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    return opt


def fsdp_worker(rank: int, world: int, port: int, out: str) -> None:
    """One rank: the model wrapped by zoo's FSDPStrategy with conf/trainer/fsdp.yaml's settings (one FSDP unit per
    layer, FULL_SHARD, Lightning's use_orig_params=True) on the CPU; rank 0 saves the full trained weights and the
    optimizer's weight-decay groups to `out`."""
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    from zoo.training.distributed import FSDPStrategy, layer_classes

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        task, batches = task_and_batches()
        strategy = FSDPStrategy(
            auto_wrap_policy=layer_classes(),
            activation_checkpointing_policy=layer_classes(False),
            sharding_strategy="FULL_SHARD",
            state_dict_type="full",
            cpu_offload=False,
        )
        strategy.parallel_devices = [torch.device("cpu")] * world
        module = strategy._setup_model(task.model)
        assert isinstance(module, FSDP) and sum(isinstance(m, FSDP) for m in module.modules()) == 1 + MODEL["n_layers"]
        opt = train(task, module, batches, rank, world)
        groups = {g["weight_decay"]: len(g["params"]) for g in opt.param_groups}
        with FSDP.summon_full_params(module, writeback=False):
            state = {k: v.clone() for k, v in task.model.state_dict().items()}
        if rank == 0:
            torch.save({"state": state, "groups": groups, "fused": [g.get("fused") for g in opt.param_groups]}, out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_fsdp(tmp: Path, world: int = 2) -> dict:
    """fsdp_worker on `world` spawned processes; returns what rank 0 saved."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp / "fsdp.pt")
    mp.spawn(fsdp_worker, args=(world, port, out), nprocs=world, join=True)
    return torch.load(out, weights_only=True)
