"""zoo.training.optim.adamw: decay on matrices only, torch's fused kernel where it applies, and the same
updates as PyTorch's own AdamW; clip_grad_norm: torch's clipping rule, inside the fused kernel."""

import pytest
import torch
from torch import nn

from zoo.model import ModelConfig, build_model
from zoo.training.optim import adamw, clip_grad_norm, fused_ok, is_fused


def _model(seed=0):
    torch.manual_seed(seed)
    return build_model("decoder_only", ModelConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=2, d_ff=32))


def test_fused_kernel_matches_pytorchs_adamw():
    """Five steps on the same gradients: the fused kernel (the default on CPU) and PyTorch's default
    implementation (fused=False) leave the same weights to float rounding; decay on matrices only."""
    fused_model, plain_model = _model(), _model()
    fused, plain = adamw(fused_model, 1e-2, weight_decay=0.1), adamw(plain_model, 1e-2, weight_decay=0.1, fused=False)
    assert fused.defaults["fused"] is True and not plain.defaults["fused"]
    assert [g["weight_decay"] for g in fused.param_groups] == [0.1, 0.0]
    assert all(p.dim() >= 2 for p in fused.param_groups[0]["params"])
    assert all(p.dim() < 2 for p in fused.param_groups[1]["params"])
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        for a, b in zip(fused_model.parameters(), plain_model.parameters()):
            a.grad = torch.randn(a.shape, generator=g)
            b.grad = a.grad.clone()
        fused.step()
        plain.step()
    start = _model().state_dict()
    for (k, a), b in zip(fused_model.state_dict().items(), plain_model.state_dict().values()):
        assert not torch.equal(a, start[k])  # every tensor moved (the embedding, norms and biases too)
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_fused_only_for_plain_floating_tensors():
    """A Parameter subclass (FSDP's FlatParameter is one) or an integer tensor gets PyTorch's default AdamW."""

    class Flat(nn.Parameter):
        pass

    assert fused_ok([nn.Parameter(torch.zeros(2, 2)), torch.zeros(3)])
    assert not fused_ok([Flat(torch.zeros(2, 2))])
    assert not fused_ok([torch.zeros(2, dtype=torch.long)])
    assert not fused_ok([nn.Parameter(torch.zeros(2, 2, device="meta"))])


@pytest.mark.parametrize("scale", [30.0, 0.01], ids=["clipped", "under_the_norm"])
def test_clip_in_the_fused_kernel_matches_torchs_clip(scale):
    """Five steps: zoo's clip_grad_norm carried by the fused AdamW kernel (its grad_scale) and
    torch.nn.utils.clip_grad_norm_ before PyTorch's default AdamW leave the same weights to float rounding,
    and report the same total norm, whether the norm is over max_norm (scaled) or under it (untouched)."""
    fused_model, plain_model = _model(), _model()
    fused, plain = adamw(fused_model, 1e-2), adamw(plain_model, 1e-2, fused=False)
    assert is_fused(fused) and not is_fused(plain)
    g = torch.Generator().manual_seed(2)
    for _ in range(5):
        for a, b in zip(fused_model.parameters(), plain_model.parameters()):
            a.grad = scale * torch.randn(a.shape, generator=g)
            b.grad = a.grad.clone()
        ours = clip_grad_norm(fused_model.parameters(), 1.0, fused)
        theirs = torch.nn.utils.clip_grad_norm_(plain_model.parameters(), 1.0)
        torch.testing.assert_close(ours, theirs)
        assert (theirs > 1.0) == (scale > 1.0)  # the two cases clip and do not clip
        fused.step()
        plain.step()
    for a, b in zip(fused_model.state_dict().values(), plain_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_clip_without_a_fused_optimizer_scales_the_gradients_in_place():
    """No optimizer (or an unfused one): the gradients themselves are scaled, as torch's clip_grad_norm_ does."""
    a, b = _model(), _model()
    g = torch.Generator().manual_seed(3)
    for p, q in zip(a.parameters(), b.parameters()):
        p.grad = 10 * torch.randn(p.shape, generator=g)
        q.grad = p.grad.clone()
    clip_grad_norm(a.parameters(), 0.5, adamw(a, 1e-2, fused=False))
    torch.nn.utils.clip_grad_norm_(b.parameters(), 0.5)
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    total = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in a.parameters()]))
    torch.testing.assert_close(total, torch.tensor(0.5), rtol=1e-5, atol=0)
    with pytest.raises(ValueError, match="positive max_norm"):
        clip_grad_norm(a.parameters(), 0.0)
