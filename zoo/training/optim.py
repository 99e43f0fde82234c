"""Optimizer and learning-rate schedule shared by every task."""

import logging
import math
from collections.abc import Sequence

import torch
from torch import nn

log = logging.getLogger("zoo")
WATCH_FROM = 0.1  # StepWarmupWatch estimates the run's steps once this share of the budget is spent


FUSED_DEVICES = ("cpu", "cuda")  # where torch's fused AdamW kernel runs


def fused_ok(params) -> bool:
    """Whether torch.optim.AdamW(fused=True) takes these parameters: plain tensors (not FSDP's FlatParameter or
    a DTensor) of a floating dtype on a device of FUSED_DEVICES."""
    return all(
        type(p) in (torch.Tensor, nn.Parameter) and p.device.type in FUSED_DEVICES and p.is_floating_point()
        for p in params
    )


def adamw(
    model: nn.Module,
    lr: float,
    betas: Sequence[float] = (0.9, 0.999),
    weight_decay: float = 0.1,
    eps: float = 1e-8,
    fused: bool | None = None,
) -> torch.optim.AdamW:
    """AdamW (Loshchilov & Hutter 2019) with weight decay on matrices only (dim >= 2: Linear and
    Embedding weights); biases and norm gains get none (nanoGPT configure_optimizers).
    fused None: torch's fused kernel where fused_ok (one kernel per step for all tensors; PyTorch's default on
    CPU is a Python loop over them, a share of a small model's step), else PyTorch's default; False: the
    default. The fused kernel's updates match the default's to float rounding."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    use_fused = fused_ok(params) if fused is None else fused
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, **({"fused": True} if use_fused else {}))


def is_fused(optimizer) -> bool:
    """Whether every parameter group of `optimizer` runs torch's fused kernel (Adam / AdamW with fused=True)."""
    return bool(optimizer is not None and optimizer.param_groups) and all(
        g.get("fused") for g in optimizer.param_groups
    )


def clip_grad_norm(params, max_norm: float, optimizer=None) -> torch.Tensor:
    """Clip the global L2 norm of the gradients of `params` to max_norm: scale them by
    min(1, max_norm / (norm + 1e-6)), torch.nn.utils.clip_grad_norm_'s rule. With a fused `optimizer`
    (is_fused), the scale rides in its next step: its grad_scale, which the fused kernel divides each gradient
    by as it reads it (the hook torch.amp.GradScaler uses), so no pass over the gradients is spent on it; the
    step that follows must be that optimizer's, before the gradients are read. Otherwise the gradients are
    scaled in place (torch.nn.utils.clip_grads_with_norm_).
    Returns the total norm before clipping (0-dim tensor). Raises ValueError if max_norm <= 0."""
    if not max_norm > 0:
        raise ValueError(f"gradient clipping needs a positive max_norm, got {max_norm}")
    params = [p for p in params if p.grad is not None]
    if not params:
        return torch.tensor(0.0)
    total = torch.nn.utils.get_total_norm([p.grad for p in params])  # the norm of the per-tensor norms
    if is_fused(optimizer):
        optimizer.grad_scale = torch.clamp((total + 1e-6) / max_norm, min=1.0)
    else:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total


def warmup_cosine(step: int, warmup_steps: int, decay_steps: int, lr: float, min_lr: float) -> float:
    """Learning rate at `step` (optimizer steps): linear warmup from lr/warmup_steps to lr over warmup_steps,
    cosine decay to min_lr at decay_steps, min_lr after (nanoGPT train.py get_lr; Loshchilov & Hutter 2017)."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= decay_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, decay_steps - warmup_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


class WarmupCosine:
    """LambdaLR multiplier for warmup_cosine (a picklable object, so the scheduler's state is plain data)."""

    def __init__(self, warmup_steps: int, decay_steps: int, lr: float, min_lr: float):
        self.warmup_steps, self.decay_steps, self.lr, self.min_lr = warmup_steps, decay_steps, lr, min_lr

    def __call__(self, step: int) -> float:
        return warmup_cosine(step, self.warmup_steps, self.decay_steps, self.lr, self.min_lr) / self.lr


COOLDOWN_SHAPES = ("1-sqrt", "linear", "cosine")


def warmup_stable_decay(
    step: int, warmup_steps: int, decay_start: "int | None", decay_steps: int, lr: float, min_lr: float, shape: str
) -> float:
    """Learning rate at `step` of a warm-up / stable / decay schedule (Hu et al. 2024, MiniCPM; Hägele et al. 2024,
    "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations"): linear warm-up from
    lr/warmup_steps to lr over warmup_steps, lr until decay_start (None: for ever, a constant-rate trunk), then a
    cool-down to min_lr at decay_steps, min_lr after. The cool-down's shape, with progress
    p = (step - decay_start) / (decay_steps - decay_start) in [0, 1):
    1-sqrt: lr - (lr - min_lr) sqrt(p) (Hägele et al.'s choice); linear: lr - (lr - min_lr) p; cosine: min_lr +
    (lr - min_lr) (1 + cos(pi p)) / 2; so the first cool-down step runs at lr and the rate reaches min_lr at
    decay_steps, as in Hägele et al.'s code. Raises ValueError for an unknown shape or decay_steps <= decay_start."""
    if shape not in COOLDOWN_SHAPES:
        raise ValueError(f"task.scheduler.decay_shape={shape!r} is unknown; allowed: {', '.join(COOLDOWN_SHAPES)}")
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if decay_start is None or step < decay_start:
        return lr
    if decay_steps <= decay_start:
        raise ValueError(f"the cool-down ends at step {decay_steps}, not after its start at step {decay_start}")
    p = min(1.0, (step - decay_start) / (decay_steps - decay_start))
    if shape == "1-sqrt":
        return lr - (lr - min_lr) * math.sqrt(p)
    if shape == "linear":
        return lr - (lr - min_lr) * p
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * p)) * (lr - min_lr)


def check_length(scheduler: dict, max_steps: int, progress=None) -> None:
    """Raise ValueError when the schedule needs a step count the run does not give: a cosine over steps, and a
    wsd with a cool-down (decay_start), end at task.scheduler.decay_steps, else at max_steps (<= 0: none);
    a wsd's end must come after its decay_start."""
    kind, start = scheduler.get("kind", "cosine"), scheduler.get("decay_start")
    if not ((kind == "cosine" and progress is None) or (kind == "wsd" and start is not None)):
        return
    end = scheduler.get("decay_steps") or max_steps
    if end <= 0:
        raise ValueError(
            f"task.scheduler.kind={kind} needs the step its {'cosine' if kind == 'cosine' else 'cool-down'} ends "
            f"at, and this run gives no step count: give task.scheduler.decay_steps=N, or bound the run by "
            "trainer.max_steps=N"
        )
    if kind == "wsd" and end <= start:
        raise ValueError(
            f"the cool-down ends at step {end}, not after its start at step {start}: give task.scheduler."
            f"decay_steps (or trainer.max_steps) above task.scheduler.decay_start={start}"
        )


class WarmupStableDecay:
    """LambdaLR multiplier for warmup_stable_decay (picklable, like WarmupCosine)."""

    def __init__(self, warmup_steps: int, decay_start, decay_steps: int, lr: float, min_lr: float, shape: str):
        self.args = (warmup_steps, decay_start, decay_steps, lr, min_lr, shape)
        self.lr = lr

    def __call__(self, step: int) -> float:
        return warmup_stable_decay(step, *self.args) / self.lr


class BudgetCosine:
    """LambdaLR multiplier for a run bounded by tokens, FLOPs or time rather than steps (whose step count is not
    known in advance): linear warmup, then cosine from lr to min_lr over the budget's spent fraction
    p = progress() in [0, 1] (lr(p) = min_lr + (lr - min_lr) (1 + cos(pi p)) / 2; budget-aware schedules,
    Li et al. 2020, "Budgeted Training"). The warmup covers the first warmup_fraction of the budget when given
    (so architectures whose steps cost differently warm up over the same compute), else warmup_steps steps.
    progress is read at each step, so a resumed run (its cost restored from the checkpoint) continues the
    same curve."""

    def __init__(self, warmup_steps: int, progress, lr: float, min_lr: float, warmup_fraction: "float | None" = None):
        self.warmup_steps, self.progress, self.lr, self.min_lr = warmup_steps, progress, lr, min_lr
        self.warmup_fraction = warmup_fraction

    def __call__(self, step: int) -> float:
        p = min(1.0, max(0.0, float(self.progress())))
        if self.warmup_fraction:
            if p < self.warmup_fraction:
                return max(p / self.warmup_fraction, 1e-3)  # the first step (p = 0) still moves, at lr / 1000
        elif step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        return (self.min_lr + 0.5 * (1.0 + math.cos(math.pi * p)) * (self.lr - self.min_lr)) / self.lr


class Noam:
    """LambdaLR multiplier of the paper's schedule (Vaswani et al. 2017, eq. 3), normalised so the peak,
    at step warmup_steps, is the optimizer's lr: min((s+1)^-0.5, (s+1) * warmup^-1.5) * warmup^0.5."""

    def __init__(self, warmup_steps: int):
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        s = step + 1
        return min(s**-0.5, s * self.warmup_steps**-1.5) * self.warmup_steps**0.5


class BudgetNoam:
    """LambdaLR multiplier of the noam schedule (Vaswani et al. 2017, eq. 3) in a run bounded by tokens, FLOPs
    or time, warming up over warmup_fraction f of the budget: at the spent share p = progress() in [0, 1],
    min(p / f, sqrt(f / p)), the paper's linear rise and inverse square root with the share in place of the
    step (the same curve when every step costs the same), peaking at p = f; the first step (p = 0) moves at
    lr / 1000. progress is read at each step, so a resumed run (its cost restored) continues the same curve."""

    def __init__(self, progress, warmup_fraction: float):
        self.progress, self.warmup_fraction = progress, warmup_fraction

    def __call__(self, step: int) -> float:
        p = min(1.0, max(0.0, float(self.progress())))
        if p < self.warmup_fraction:
            return max(p / self.warmup_fraction, 1e-3)
        return math.sqrt(self.warmup_fraction / p)


class StepWarmupWatch:
    """LambdaLR multiplier `fn` of a run bounded by tokens, FLOPs or time whose warm-up is counted in steps
    (warmup_steps; task.scheduler.warmup_fraction unset), whose step count is not known in advance.
    Once WATCH_FROM of the budget is spent (progress() in [0, 1]) it estimates the run's steps as
    step / progress and, while still warming up, warns once when they fall short of warmup_steps: the run
    would end before its learning rate peaks. The multiplier itself is fn's, unchanged."""

    def __init__(self, fn, warmup_steps: int, progress):
        self.fn, self.warmup_steps, self.progress = fn, warmup_steps, progress
        self.warned = False

    def __call__(self, step: int) -> float:
        if not self.warned and 0 < step < self.warmup_steps:
            p = float(self.progress())
            if p >= WATCH_FROM and step / p < self.warmup_steps:
                self.warned = True
                log.warning(
                    "task.scheduler.warmup_steps=%d is longer than this run: %.0f%% of its budget is spent at step "
                    "%d, so it ends near step %d, still warming up; set task.scheduler.warmup_fraction (e.g. 0.1) "
                    "to warm up over a share of the budget",
                    self.warmup_steps,
                    100 * p,
                    step,
                    round(step / p),
                )
        return self.fn(step)


class ConfigLambdaLR(torch.optim.lr_scheduler.LambdaLR):
    """LambdaLR whose multiplier always comes from this run's config, never from a checkpoint.

    torch's LambdaLR saves the __dict__ of callable-object multipliers (WarmupCosine's warmup_steps,
    decay_steps, lr, min_lr) and load_state_dict puts them back, so a run resumed with a larger
    trainer.max_steps would keep decaying to the first run's horizon. Here the checkpoint keeps only the
    step count and base learning rates, and the resumed run follows its own schedule (as nanoGPT's get_lr
    and the Hugging Face Trainer do); with an unchanged config the schedule is the same, so resuming stays
    exact. Multipliers a checkpoint does hold (torch's own state_dict) are ignored too.
    """

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict({**state_dict, "lr_lambdas": [None] * len(self.lr_lambdas)})
        # the restored optimizer holds the lr the first run's schedule set; the next step uses this run's
        lrs = [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = lrs
