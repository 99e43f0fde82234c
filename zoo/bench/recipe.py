"""The nanoGPT CPU Shakespeare recipe as a plain PyTorch loop over zoo's model and data (used by the
overhead and precision benchmarks)."""

import copy
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from zoo.bench.steps import autocast
from zoo.bench.timing import sync
from zoo.model import ModelConfig, build_model
from zoo.training.optim import WarmupCosine, adamw

REPO = Path(__file__).resolve().parents[2]
BLOCK, BATCH = 64, 12
NANOGPT_MODEL = dict(
    d_model=128,
    n_heads=4,
    d_ff=512,
    n_layers=4,
    dropout=0.0,
    norm_first=True,
    activation="gelu",
    position="learned",
    tie_embeddings=True,
    bias=False,
    scale_embeddings=False,
    init="gpt2",
    max_len=BLOCK,
)
NANOGPT_OPTIMIZER = {"lr": 1e-3, "betas": (0.9, 0.99), "weight_decay": 0.1}


def data_mirror() -> str:
    """$ZOO_DATA_MIRROR, else ../shared/data next to the repository."""
    return os.environ.get("ZOO_DATA_MIRROR") or str(REPO.parent / "shared" / "data")


def shakespeare():
    """zoo's TinyShakespeare datamodule at the recipe's block / batch, set up (text read and tokenised).
    Raises zoo.data.DataError when the text cannot be found (see the data README)."""
    from zoo.data.shakespeare import TinyShakespeare

    dm = TinyShakespeare(block_size=BLOCK, batch_size=BATCH, mirror=data_mirror())
    dm.setup()
    return dm


def fresh(prepared):
    """A copy of a set-up datamodule sharing its data (setup() is then a no-op, the loaders start anew)."""
    return copy.copy(prepared)


def scheduler_config(K: int) -> dict:
    """The recipe's warmup-cosine schedule for a K-step run (warmup 100 steps, min lr 1e-4)."""
    return {"warmup_steps": 100, "decay_steps": K, "min_lr": 1e-4}


def plain_run(
    prepared, K: int, device: str, precision: str = "fp32", record_losses: bool = False
) -> tuple[float, list[float], nn.Module]:
    """K steps of the recipe from torch.manual_seed(0): next batch of a fresh train loader, forward (under
    bf16 autocast for precision 'bf16', like Lightning's 'bf16-mixed'), fp32 cross-entropy, backward,
    clip_grad_norm_(1.0), AdamW step, scheduler step, zero_grad(set_to_none=True).
    Returns (seconds of the loop, GPU synchronised; the per-step training losses if record_losses else [],
    the trained model). Model building is outside the timing."""
    torch.manual_seed(0)
    dm = fresh(prepared)
    model_cfg = dict(NANOGPT_MODEL, vocab_size=prepared.vocab_size)
    model = build_model("decoder_only", ModelConfig(**model_cfg)).to(device).train()
    o = NANOGPT_OPTIMIZER
    opt = adamw(model, o["lr"], o["betas"], o["weight_decay"])
    sched_cfg = scheduler_config(K)
    sched = LambdaLR(opt, WarmupCosine(sched_cfg["warmup_steps"], K, o["lr"], sched_cfg["min_lr"]))
    losses = []
    sync(device)
    t0 = time.perf_counter()
    loader = dm.train_dataloader()
    it = iter(loader)
    for _ in range(K):
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        x, y = x.to(device), y.to(device)
        with autocast(device, precision):
            logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if record_losses:
            losses.append(loss.detach())
    loss.item()
    sync(device)
    elapsed = time.perf_counter() - t0
    return elapsed, [float(v) for v in losses], model


@torch.no_grad()
def val_loss(model: nn.Module, prepared, device: str, batches: int | None = 8) -> float:
    """Mean fp32 cross-entropy (nats/token) of `model` over the first `batches` batches of the fixed
    validation windows (all of them for None)."""
    model.eval()
    total, n = 0.0, 0
    for i, (x, y) in enumerate(fresh(prepared).val_dataloader()):
        if batches is not None and i >= batches:
            break
        x, y = x.to(device), y.to(device)
        total += F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten(), reduction="sum").item()
        n += y.numel()
    model.train()
    return total / n
