"""Learning-rate schedules against references that are not zoo's: closed forms written here and PyTorch's own
schedulers (LinearLR, CosineAnnealingLR, SequentialLR, LambdaLR). Every rate is read from the optimizer as
configure_optimizers' scheduler steps it, as a run does: the warm-up end, mid-decay, the end and past it, Noam
against Vaswani et al. 2017 eq. 3, a budget-bounded cosine, and a run resumed from the scheduler's state."""

import math

import pytest
import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LinearLR, SequentialLR

from zoo.training.optim_config import configure_optimizers

LR, MIN_LR = 1e-2, 1e-4


def cosine_lr(step: int, warmup: int, decay: int, lr: float, min_lr: float) -> float:
    """nanoGPT's get_lr (train.py) written out: linear warm-up lr (step + 1) / warmup for step < warmup, then
    min_lr + (lr - min_lr) (1 + cos(pi (step - warmup) / (decay - warmup))) / 2 (Loshchilov & Hutter 2017),
    min_lr from step decay on."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= decay:
        return min_lr
    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * (step - warmup) / (decay - warmup))) / 2


def noam_lrate(step_num: int, d_model: int, warmup: int) -> float:
    """Vaswani et al. 2017, eq. 3: lrate = d_model^-0.5 min(step_num^-0.5, step_num warmup^-1.5), step_num
    counted from 1."""
    return d_model**-0.5 * min(step_num**-0.5, step_num * warmup**-1.5)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))


def rates(sched: dict, steps: int, lr: float = LR, max_steps: int = 100, state=None, progress=None):
    """The lr of optimizer steps 0 .. steps-1 of configure_optimizers' AdamW + LambdaLR, read before each step
    as Lightning logs it; with `state` (a scheduler state_dict) the scheduler resumes from it first. Returns
    (rates, the scheduler's state_dict at the end)."""
    out = configure_optimizers(model(), {"lr": lr}, sched, max_steps, progress)
    opt, scheduler = out["optimizer"], out["lr_scheduler"]["scheduler"]
    if state is not None:
        scheduler.load_state_dict(state)
    got = []
    for _ in range(steps):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    return got, scheduler.state_dict()


def torch_rates(make, steps: int, lr: float = LR) -> list:
    """The lr of steps 0 .. steps-1 of a PyTorch scheduler make(optimizer) on an SGD optimizer of base lr `lr`."""
    opt = torch.optim.SGD(model().parameters(), lr=lr)
    sched = make(opt)
    got = []
    for _ in range(steps):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return got


@pytest.mark.parametrize("warmup, decay", [(4, 20), (1, 9), (10, 11)])
def test_cosine_matches_the_closed_form_and_torchs_schedulers(warmup, decay):
    """warmup_steps=w, decay_steps=d: every rate of steps 0 .. d+5 equals nanoGPT's closed form; the warm-up
    equals torch's LinearLR(1/w -> 1 over w - 1 steps) and the decay torch's CosineAnnealingLR(T_max = d - w,
    eta_min = min_lr) behind it (SequentialLR); the named points hold exactly."""
    got, _ = rates({"kind": "cosine", "warmup_steps": warmup, "decay_steps": decay, "min_lr": MIN_LR}, decay + 6)
    want = [cosine_lr(s, warmup, decay, LR, MIN_LR) for s in range(decay + 6)]
    assert got == pytest.approx(want, rel=1e-12)

    def linear_then_cosine(opt):
        ramp = LinearLR(opt, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1)
        cos = CosineAnnealingLR(opt, T_max=decay - warmup, eta_min=MIN_LR)
        return SequentialLR(opt, [ramp, cos], milestones=[warmup])

    assert got[: decay + 1] == pytest.approx(torch_rates(linear_then_cosine, decay + 1), rel=1e-9)
    assert got[warmup - 1] == got[warmup] == pytest.approx(LR, rel=1e-12)  # the warm-up's end: the peak
    if (decay - warmup) % 2 == 0:
        assert got[(warmup + decay) // 2] == pytest.approx((LR + MIN_LR) / 2, rel=1e-12)  # mid-decay
    assert got[decay] == got[decay + 5] == MIN_LR  # the end, and past it


def test_cosine_decays_over_max_steps_without_decay_steps():
    """decay_steps unset: the cosine ends at max_steps (12 here): step 8 = a quarter-turn of the way from 4."""
    got, _ = rates({"kind": "cosine", "warmup_steps": 4, "min_lr": 0.0}, 14, max_steps=12)
    assert got == pytest.approx([cosine_lr(s, 4, 12, LR, 0.0) for s in range(14)], rel=1e-12)
    assert got[8] == pytest.approx(LR * (1 + math.cos(math.pi / 2)) / 2, rel=1e-12)  # half-way: LR / 2
    assert got[6] == pytest.approx(LR * (1 + math.cos(math.pi / 4)) / 2, rel=1e-12)


@pytest.mark.parametrize("d_model, warmup", [(512, 400), (32, 7)])
def test_noam_is_the_papers_eq_3(d_model, warmup):
    """kind=noam with lr = the paper's peak d_model^-0.5 warmup^-0.5 gives exactly eq. 3's lrate at every step
    (optimizer step s is the paper's step_num s + 1): rising linearly to the peak at step_num = warmup, then
    decaying as step_num^-0.5; torch's LambdaLR on the paper's formula gives the same rates."""
    peak = d_model**-0.5 * warmup**-0.5
    steps = sorted({0, 1, warmup // 2, warmup - 2, warmup - 1, warmup, warmup + 1, 2 * warmup, 4 * warmup - 1})
    got, _ = rates({"kind": "noam", "warmup_steps": warmup}, max(steps) + 1, lr=peak)
    for s in steps:
        assert got[s] == pytest.approx(noam_lrate(s + 1, d_model, warmup), rel=1e-12), s
    assert got[warmup - 1] == pytest.approx(peak, rel=1e-12) and max(got) == got[warmup - 1]
    assert got[4 * warmup - 1] == pytest.approx(peak / 2, rel=1e-12)  # step_num 4 warmup: half the peak
    paper = torch_rates(lambda opt: LambdaLR(opt, lambda s: noam_lrate(s + 1, d_model, warmup) / peak), len(got), peak)
    assert got == pytest.approx(paper, rel=1e-12)


def test_noam_scales_with_the_configured_lr():
    """Another lr scales eq. 3 by lr / peak: lr at step_num = warmup, and lr sqrt(warmup / step_num) after."""
    got, _ = rates({"kind": "noam", "warmup_steps": 5}, 40, lr=3e-4)
    assert got[4] == pytest.approx(3e-4, rel=1e-12)
    assert got[0] == pytest.approx(3e-4 / 5, rel=1e-12)  # step_num 1: lr warmup^-1
    assert got[19] == pytest.approx(3e-4 * math.sqrt(5 / 20), rel=1e-12)
    assert got[39] == pytest.approx(3e-4 * math.sqrt(5 / 40), rel=1e-12)


def test_budget_cosine_follows_the_spent_share():
    """A budget-bounded run: after a warm-up of 2 steps ((step + 1) / 2 of lr) the rate is
    min_lr + (lr - min_lr) (1 + cos(pi p)) / 2 at the budget's spent share p when the scheduler steps (Li et al.
    2020), p clipped to [0, 1]; with warmup_fraction f the warm-up is lr p / f (at least lr / 1000)."""
    spent = [0.0]
    sched = {"kind": "cosine", "warmup_steps": 2, "min_lr": MIN_LR}
    out = configure_optimizers(model(), {"lr": LR}, sched, 0, lambda: spent[0])
    opt, scheduler = out["optimizer"], out["lr_scheduler"]["scheduler"]
    shares = [0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.3]  # spent when the scheduler steps after step k
    got = [opt.param_groups[0]["lr"]]
    for p in shares:
        opt.step()
        spent[0] = p
        scheduler.step()
        got.append(opt.param_groups[0]["lr"])
    assert got[:2] == pytest.approx([LR / 2, LR], rel=1e-12)  # the warm-up (steps 0, 1)
    want = [MIN_LR + (LR - MIN_LR) * (1 + math.cos(math.pi * min(p, 1))) / 2 for p in shares[1:]]
    assert got[2:] == pytest.approx(want, rel=1e-12)
    assert got[4] == pytest.approx((LR + MIN_LR) / 2, rel=1e-12) and got[-2] == got[-1] == MIN_LR
    frac = {**sched, "warmup_fraction": 0.2}
    for p, lr in ((0.1, LR * 0.1 / 0.2), (0.0, LR / 1000)):
        spent[0] = p
        out = configure_optimizers(model(), {"lr": LR}, frac, 0, lambda: spent[0])
        assert out["optimizer"].param_groups[0]["lr"] == pytest.approx(lr, rel=1e-12)


@pytest.mark.parametrize(
    "first, then, want",
    [
        (
            {"kind": "cosine", "warmup_steps": 3, "decay_steps": 16, "min_lr": MIN_LR},
            {"kind": "cosine", "warmup_steps": 3, "decay_steps": 16, "min_lr": MIN_LR},
            lambda s: cosine_lr(s, 3, 16, LR, MIN_LR),
        ),
        (  # a resumed run with a longer horizon follows its own config's schedule, not the checkpoint's
            {"kind": "cosine", "warmup_steps": 3, "decay_steps": 8, "min_lr": MIN_LR},
            {"kind": "cosine", "warmup_steps": 3, "decay_steps": 16, "min_lr": MIN_LR},
            lambda s: cosine_lr(s, 3, 16, LR, MIN_LR),
        ),
        (
            {"kind": "noam", "warmup_steps": 4},
            {"kind": "noam", "warmup_steps": 4},
            lambda s: LR * noam_lrate(s + 1, 64, 4) / noam_lrate(4, 64, 4),
        ),
    ],
    ids=["cosine", "cosine_longer", "noam"],
)
def test_resumed_scheduler_continues_the_closed_form(first, then, want):
    """Six steps, the scheduler's state saved (as a checkpoint holds it), and a new scheduler from the resumed
    run's config loaded with it: the rates of steps 6 .. 19 are the closed form's, from the first one on."""
    before, state = rates(first, 6)
    after, _ = rates(then, 14, state=state)
    assert before == pytest.approx([want(s) for s in range(6)] if first == then else before, rel=1e-12)
    assert after == pytest.approx([want(s) for s in range(6, 20)], rel=1e-12)
