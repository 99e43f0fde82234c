"""The timed units: one training step as a closure, and the inputs it runs on."""

import contextlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from zoo.training.optim import adamw


def autocast(device: str, precision: str):
    """torch.autocast to bfloat16 for precision 'bf16' (as Lightning's precision='bf16-mixed'), a no-op
    context for 'fp32'."""
    if precision == "bf16":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def random_tokens(shape, vocab: int, device: str, seed: int = 0) -> torch.Tensor:
    """Uniform token ids in [0, vocab) of the given shape, from a seeded CPU generator (the same on
    every device), moved to `device`."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g).to(device)


def train_step(
    model: nn.Module,
    forward: Callable[[nn.Module], torch.Tensor],
    targets: torch.Tensor,
    precision: str = "fp32",
    lr: float = 1e-4,
    loss_fn: Callable[[nn.Module], torch.Tensor] | None = None,
) -> Callable[[], None]:
    """One training step as a zero-argument closure: logits = forward(model) (B, T, V) under bf16
    autocast if precision == 'bf16' -> cross-entropy against targets (B, T) in fp32 (or loss_fn(model), the
    contender's own loss, under the same autocast) -> backward -> AdamW step (zoo.training.optim.adamw, lr 1e-4,
    weight decay on matrices only) -> zero_grad(set_to_none=True)."""
    opt = adamw(model, lr=lr)
    device = targets.device.type

    def step():
        with autocast(device, precision):
            if loss_fn is not None:
                loss = loss_fn(model)
            else:
                logits = forward(model)
        if loss_fn is None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


@torch.no_grad()
def initial_loss(model: nn.Module, forward: Callable[[nn.Module], torch.Tensor], targets: torch.Tensor) -> float:
    """Cross-entropy (nats) of the freshly initialised model on the timed batch: ~ln(vocab) when its
    initialisation is sane (saturated softmaxes make CPU backward passes slow, see TorchGPT)."""
    return F.cross_entropy(forward(model).float().flatten(0, 1), targets.flatten()).item()
