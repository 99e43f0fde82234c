"""zoo.training.optim.adamw: decay on matrices only, torch's fused kernel where it applies, and the same
updates as PyTorch's own AdamW."""

import torch
from torch import nn

from zoo.model import ModelConfig, build_model
from zoo.training.optim import adamw, fused_ok


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
