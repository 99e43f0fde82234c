"""zoo.model.loss.chunked_ce: the fused, chunked output projection + cross-entropy equals the plain path
(F.linear + F.cross_entropy) in loss and gradients, and its peak memory stays far below it."""

import math
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from zoo.model import DecoderOnly, EncoderDecoder, EncoderOnly, ModelConfig
from zoo.model.loss import chunked_ce, liger
from zoo.model.loss.chunked_ce import (
    auto_chunk_size,
    chunked_cross_entropy_rows,
    linear_cross_entropy,
    lm_head_cross_entropy,
)

IGNORE = -100
FP32_TOL = 1e-6  # loss and every gradient entry, fp32 against the float64 reference and the plain fp32 path
FP32_REL = 1e-5  # ... and relative Frobenius error of each gradient
# with a z-loss term (rows of ~10-20 nats, sums of 500, gradients up to 16): every entry within this share of
# its tensor's largest entry (measured: fp32 chunked and plain paths both within 6e-7 of the float64 reference)
FP32_SCALE_REL = 2e-6
# bf16 autocast (8-bit mantissa, 2^-8 = 0.4% per rounding): loss within 1e-2 nats and gradients within 2%
# (relative Frobenius error) of the float64 reference
BF16_LOSS_TOL, BF16_GRAD_REL = 1e-2, 2e-2
N, D, V = 50, 24, 97


def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.double() - ref.double()).norm() / ref.double().norm()).item()


def inputs(n=N, d=D, v=V, bias=True, ignored=(), seed=0, dtype=torch.float32):
    """h (n, d) ~ N(0, 1) (a normed hidden state), W (v, d) ~ N(0, 1/d) x 3 (logits of std ~3: a peaked softmax),
    bias ~ N(0, 1) or None, all leaves requiring grad; targets with IGNORE at the `ignored` rows."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g, dtype=dtype).requires_grad_()
    w = (3 * torch.randn(v, d, generator=g, dtype=dtype) / d**0.5).requires_grad_()
    b = torch.randn(v, generator=g, dtype=dtype).requires_grad_() if bias else None
    t = torch.randint(0, v, (n,), generator=g)
    t[list(ignored)] = IGNORE
    return h, w, b, t


def leaves(h, w, b):
    return [x for x in (h, w, b) if x is not None]


def plain_loss(h, w, b, t, ls=0.0, reduction="mean"):
    """The plain path as the tasks compute it: full logits, upcast to fp32 (float64 inputs stay float64)."""
    logits = F.linear(h, w, b)
    logits = logits if logits.dtype == torch.float64 else logits.float()
    return F.cross_entropy(logits, t, ignore_index=IGNORE, label_smoothing=ls, reduction=reduction)


def loss_and_grads(fn, h, w, b, t, weights=None):
    """fn(h, w, b) -> loss (scalar, or rows reduced with `weights`); returns (loss, [grad h, grad w, grad b])."""
    out = fn(h, w, b)
    scalar = out if out.dim() == 0 else (out * weights).sum()
    return out.detach(), list(torch.autograd.grad(scalar, leaves(h, w, b)))


def double(*xs):
    return [None if x is None else x.detach().double().requires_grad_() for x in xs]


def check_fp32(got, plain, ref):
    """got / plain: (loss, grads) in fp32, ref: float64. Every entry within FP32_TOL of both, gradients within
    FP32_REL of the reference."""
    (loss, grads), (p_loss, p_grads), (r_loss, r_grads) = got, plain, ref
    torch.testing.assert_close(loss.double(), r_loss, atol=FP32_TOL, rtol=0, equal_nan=True)
    torch.testing.assert_close(loss, p_loss, atol=FP32_TOL, rtol=0, equal_nan=True)
    assert len(grads) == len(r_grads)
    for g, p, r in zip(grads, p_grads, r_grads):
        assert g.dtype == p.dtype == torch.float32 and g.shape == r.shape
        torch.testing.assert_close(g.double(), r, atol=FP32_TOL, rtol=0)
        torch.testing.assert_close(g, p, atol=FP32_TOL, rtol=0)
        if r.norm() > 0:
            assert rel(g, r) < FP32_REL


# chunk 7 does not divide N = 50; 64 > N (one partial chunk); None = automatic. Rows 14..20 = chunk 2 of 7
# entirely ignored.
@pytest.mark.parametrize("chunk", [7, 64, None])
@pytest.mark.parametrize("ls", [0.0, 0.1])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("ignored", [(), (0, 3, *range(14, 21), 49)])
def test_mean_loss_and_gradients_equal_plain(chunk, ls, bias, ignored):
    h, w, b, t = inputs(bias=bias, ignored=ignored)
    got = loss_and_grads(
        lambda *x: linear_cross_entropy(*x[:2], t, x[2], label_smoothing=ls, chunk_size=chunk), h, w, b, t
    )
    plain = loss_and_grads(lambda *x: plain_loss(*x, t, ls), h, w, b, t)
    ref = loss_and_grads(lambda *x: plain_loss(*x, t, ls), *double(h, w, b), t)
    check_fp32(got, plain, ref)


@pytest.mark.parametrize("ls", [0.0, 0.2])
def test_sum_reduction_and_scaled_backward(ls):
    """reduction=sum, and a loss multiplied before backward (the stored gradients are scaled by grad_output)."""
    h, w, b, t = inputs(ignored=(1, 2, 30))
    for red, factor in (("sum", 1.0), ("mean", 0.37)):
        got = loss_and_grads(
            lambda *x: factor * linear_cross_entropy(*x[:2], t, x[2], label_smoothing=ls, reduction=red, chunk_size=16),
            h,
            w,
            b,
            t,
        )
        ref = loss_and_grads(lambda *x: factor * plain_loss(*x, t, ls, red), *double(h, w, b), t)
        plain = loss_and_grads(lambda *x: factor * plain_loss(*x, t, ls, red), h, w, b, t)
        scale = 1.0 if red == "mean" else N  # a sum of N row losses carries N times the rounding of one
        torch.testing.assert_close(got[0].double(), ref[0], atol=scale * FP32_TOL, rtol=0)
        torch.testing.assert_close(got[0], plain[0], atol=scale * FP32_TOL, rtol=0)
        for g, p, r in zip(got[1], plain[1], ref[1]):  # sum: entries of O(1), so also 1e-6 relative
            torch.testing.assert_close(g.double(), r, atol=FP32_TOL, rtol=FP32_TOL)
            torch.testing.assert_close(g, p, atol=FP32_TOL, rtol=FP32_TOL)
            assert rel(g, r) < FP32_REL


@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_reduction_none_rows_and_their_gradients(ls):
    """reduction=none: per-row losses (0 where ignored) and, through the recomputing backward, the gradients of
    any weighted sum of them (as translation's encoder_ar weights its rows)."""
    h, w, b, t = inputs(ignored=(5, 6, 7))
    weights = torch.rand(N, generator=torch.Generator().manual_seed(3))
    got = loss_and_grads(
        lambda *x: linear_cross_entropy(*x[:2], t, x[2], label_smoothing=ls, reduction="none", chunk_size=9),
        h,
        w,
        b,
        t,
        weights,
    )
    ref = loss_and_grads(lambda *x: plain_loss(*x, t, ls, "none"), *double(h, w, b), t, weights.double())
    plain = loss_and_grads(lambda *x: plain_loss(*x, t, ls, "none"), h, w, b, t, weights)
    assert got[0].shape == (N,) and bool((got[0][[5, 6, 7]] == 0).all())
    # per row: the rounding of one loss of ~ln V (ulp(4) = 4.8e-7 in fp32)
    torch.testing.assert_close(got[0].double(), ref[0], atol=2 * FP32_TOL, rtol=0)
    torch.testing.assert_close(got[0], plain[0], atol=2 * FP32_TOL, rtol=0)
    for g, p, r in zip(got[1], plain[1], ref[1]):
        torch.testing.assert_close(g.double(), r, atol=FP32_TOL, rtol=0)
        torch.testing.assert_close(g, p, atol=FP32_TOL, rtol=0)
        assert rel(g, r) < FP32_REL


def test_rows_without_grad_and_return_rows():
    """Evaluation: under no_grad the chunked rows equal torch's reduction=none (and carry no graph); with
    return_rows the training call returns them too, detached, with the differentiable mean."""
    h, w, b, t = inputs(ignored=(0, 10, 11))
    ref = F.cross_entropy(F.linear(h, w, b).double(), t, label_smoothing=0.1, reduction="none")
    with torch.no_grad():
        rows = linear_cross_entropy(h, w, t, b, label_smoothing=0.1, reduction="none", chunk_size=8)
        mean = linear_cross_entropy(h, w, t, b, label_smoothing=0.1, chunk_size=8)
    evaluated = chunked_cross_entropy_rows(h.view(5, 10, D), w, t.view(5, 10), b, label_smoothing=0.1, chunk_size=8)
    assert rows.grad_fn is None and mean.grad_fn is None and evaluated.shape == (5, 10)
    torch.testing.assert_close(rows.double(), ref, atol=2 * FP32_TOL, rtol=0)
    torch.testing.assert_close(evaluated.flatten(), rows, atol=0, rtol=0)
    torch.testing.assert_close(mean.double(), ref.sum() / (t != IGNORE).sum(), atol=FP32_TOL, rtol=0)
    loss, rows2 = linear_cross_entropy(h, w, t, b, label_smoothing=0.1, chunk_size=8, return_rows=True)
    assert loss.requires_grad and not rows2.requires_grad
    torch.testing.assert_close(rows2, rows, atol=0, rtol=0)
    torch.testing.assert_close(loss, mean, atol=FP32_TOL, rtol=0)


@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_all_targets_ignored_is_nan_with_zero_gradients_as_torch(ls):
    h, w, b, t = inputs(ignored=range(N))
    got = loss_and_grads(
        lambda *x: linear_cross_entropy(*x[:2], t, x[2], label_smoothing=ls, chunk_size=16), h, w, b, t
    )
    plain = loss_and_grads(lambda *x: plain_loss(*x, t, ls), h, w, b, t)
    assert torch.isnan(plain[0]) and torch.isnan(got[0])  # 0 / 0, torch's definition
    for g, p in zip(got[1], plain[1]):
        assert bool((p == 0).all()) and bool((g == 0).all())
    with torch.no_grad():
        assert torch.isnan(linear_cross_entropy(h, w, t, b, label_smoothing=ls, chunk_size=16))
        assert bool((linear_cross_entropy(h, w, t, b, reduction="none", chunk_size=16) == 0).all())


def test_chunk_size_zero_is_the_plain_path():
    h, w, b, t = inputs(ignored=(4,))
    got = loss_and_grads(
        lambda *x: linear_cross_entropy(*x[:2], t, x[2], label_smoothing=0.1, chunk_size=0), h, w, b, t
    )
    plain = loss_and_grads(lambda *x: plain_loss(*x, t, 0.1), h, w, b, t)
    torch.testing.assert_close(got[0], plain[0], atol=0, rtol=0)
    for g, p in zip(got[1], plain[1]):
        torch.testing.assert_close(g, p, atol=0, rtol=0)


def test_only_the_needed_gradients_flow():
    """A frozen head (W without grad) or frozen inputs: only the leaves that require grad get gradients."""
    h, w, b, t = inputs(bias=False)
    w.requires_grad_(False)
    (gh,) = torch.autograd.grad(linear_cross_entropy(h, w, t, chunk_size=16), [h])
    (ph,) = torch.autograd.grad(plain_loss(h, w, None, t), [h])
    torch.testing.assert_close(gh, ph, atol=FP32_TOL, rtol=0)
    h.requires_grad_(False)
    w.requires_grad_(True)
    (gw,) = torch.autograd.grad(linear_cross_entropy(h, w, t, chunk_size=16), [w])
    (pw,) = torch.autograd.grad(plain_loss(h, w, None, t), [w])
    torch.testing.assert_close(gw, pw, atol=FP32_TOL, rtol=0)


@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_bf16_autocast_close_to_fp32_reference(ls):
    """Under bf16 autocast the projections read bf16 operands (as F.linear would), their sums, softmax and loss
    in fp32: within the stated bf16 tolerance of the float64 reference; gradients in the parameters' dtype
    (fp32), no worse than F.linear + F.cross_entropy under autocast."""
    h, w, b, t = inputs(n=300, d=64, v=1000, ignored=range(0, 300, 7))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = loss_and_grads(
            lambda *x: linear_cross_entropy(*x[:2], t, x[2], label_smoothing=ls, chunk_size=64), h, w, b, t
        )
        plain = loss_and_grads(lambda *x: plain_loss(*x, t, ls), h, w, b, t)
    ref = loss_and_grads(lambda *x: plain_loss(*x, t, ls), *double(h, w, b), t)
    assert got[0].dtype == torch.float32
    assert abs(got[0].item() - ref[0].item()) < BF16_LOSS_TOL
    assert abs(got[0].item() - bf16_reference(h, w, b, t, ls)) < 1e-5  # the bf16 operands' fp32 logits
    for g, p, r in zip(got[1], plain[1], ref[1]):
        assert g.dtype == torch.float32
        assert rel(g, r) < BF16_GRAD_REL
        assert rel(g, r) < 1.5 * rel(p, r) + 1e-4  # no worse than the plain path under autocast
    assert rel(got[1][0], ref[1][0]) > 1e-4  # the projections did run in bf16 (an fp32 run is ~1e-7)


def bf16_reference(h, w, b, t, ls=0.0):
    """The float64 loss of h, w, b rounded to bf16 (what autocast feeds the projection): the exact products a bf16
    GEMM accumulates in fp32, before it rounds its output."""
    r = [None if x is None else x.detach().bfloat16().double() for x in (h, w, b)]
    return plain_loss(*r, t, ls).item()


@pytest.mark.parametrize("chunk_size", [None, 16, 0], ids=["auto", "chunked", "plain"])
def test_bf16_logits_are_not_rounded_before_the_softmax(chunk_size):
    """Two classes whose logits 100 and 100.25 (bf16-exact operands) differ by less than a bf16 step at 100
    (0.5): the loss of the lower one is log(1 + e^0.25) = 0.826, as F.cross_entropy on the fp32 logits gives;
    rounding the logits to bf16 first makes it log 2 = 0.693. Under bf16 autocast and in a bf16 model the
    softmax statistics come from the GEMM's fp32 sums, for the fused and the plain path alike."""
    h = torch.tensor([[1.0, 1.0]], requires_grad=True)
    w = torch.tensor([[100.0, 0.0], [100.0, 0.25]], requires_grad=True)
    t = torch.tensor([0])
    want = math.log1p(math.exp(0.25))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = linear_cross_entropy(h, w, t, chunk_size=chunk_size)
        with torch.no_grad():
            rows = chunked_cross_entropy_rows(h, w, t, chunk_size=chunk_size)
    assert abs(got.item() - want) < 1e-6 and abs(rows.item() - want) < 1e-6, (got.item(), rows.item())
    got.backward()
    assert torch.allclose(h.grad, torch.tensor([[0.0, 0.25 * torch.sigmoid(torch.tensor(0.25)).item()]]), atol=1e-2)
    hb, wb = h.detach().bfloat16(), w.detach().bfloat16().requires_grad_()
    assert abs(linear_cross_entropy(hb, wb, t, chunk_size=chunk_size).item() - want) < 1e-6  # a bf16 model


@pytest.mark.parametrize("chunk_size", [64, 0], ids=["chunked", "plain"])
def test_bf16_loss_is_exact_for_the_bf16_operands(chunk_size):
    """At V = 1000, logits of std ~3 with a bias: under bf16 autocast the loss is the float64 loss of the
    bf16-rounded operands within fp32 rounding (1e-5 nats); rounding the logits to bf16 adds ~1e-3."""
    h, w, b, t = inputs(n=300, d=64, v=1000, ignored=range(0, 300, 7))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = linear_cross_entropy(h, w, t, b, chunk_size=chunk_size, label_smoothing=0.1)
    want = bf16_reference(h, w, b, t, 0.1)
    assert abs(got.item() - want) < 1e-5, (got.item(), want)


def model_cases():
    """(name, model, hidden states fn, head weight, targets, tied input embedding) for each architecture, tied
    head, dropout 0, from the attribute names the tasks would use."""
    cfg = dict(vocab_size=61, d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.0, max_len=32, bias=True)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(3, 61, (3, 12), generator=g)
    y = torch.randint(3, 61, (3, 12), generator=g)
    y[0, 8:] = IGNORE
    torch.manual_seed(0)
    dec = DecoderOnly(ModelConfig(**cfg, norm_first=True))
    enc = EncoderOnly(ModelConfig(**cfg))
    s2s = EncoderDecoder(ModelConfig(**cfg))
    return [
        ("decoder_only", dec, lambda: dec.features(x)[0], lambda: dec(x), dec.lm_head.weight, dec.embed.tok.weight, y),
        ("encoder_only", enc, lambda: enc.encode(x), lambda: enc(x), enc.lm_head.weight, enc.embed.tok.weight, y),
        (
            "encoder_decoder",
            s2s,
            lambda: s2s.decode_features(x, s2s.encode(x))[0],
            lambda: s2s(x, x),
            s2s.lm_head.weight,
            s2s.tgt_embed.tok.weight,
            y,
        ),
    ]


@pytest.mark.parametrize("case", range(3), ids=["decoder_only", "encoder_only", "encoder_decoder"])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_every_architecture_with_its_tied_embedding(case, ls):
    """Each model's hidden states + its (tied) head weight through linear_cross_entropy give the same loss and
    the same gradient for every parameter as its logits through F.cross_entropy: the tied embedding's gradient
    sums the head's and the input embedding's contributions."""
    name, model, features, logits, head, embedding, y = model_cases()[case]
    assert head is embedding  # tied: the head's weight is the input embedding
    model.train()
    params = [p for p in model.parameters()]
    loss = lm_head_cross_entropy(model.lm_head, features(), y, label_smoothing=ls, chunk_size=5)
    got = torch.autograd.grad(loss, params)
    ref_loss = F.cross_entropy(logits().flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE, label_smoothing=ls)
    ref = torch.autograd.grad(ref_loss, params)
    torch.testing.assert_close(loss, ref_loss, atol=FP32_TOL, rtol=0)
    for (pname, _), g, r in zip(model.named_parameters(), got, ref):
        torch.testing.assert_close(g, r, atol=FP32_TOL, rtol=0, msg=f"{name}.{pname}")
    # the embedding's gradient does have both parts: without the head's it would differ
    emb_only = torch.autograd.grad(
        F.cross_entropy(F.linear(features().flatten(0, 1), head.detach()), y.flatten(), label_smoothing=ls), [embedding]
    )[0]
    assert (emb_only - got[[p is embedding for p in params].index(True)]).abs().max() > 1e-3


def test_auto_chunk_size_and_config_key():
    assert auto_chunk_size(8192, 50257) == 512 and auto_chunk_size(100, 50257) == 100
    assert auto_chunk_size(10**6, 65) == 64 * 2**20 // (4 * 65) // 64 * 64
    assert all(1 <= auto_chunk_size(n, v) <= n for n in (1, 7, 513, 4096) for v in (2, 65, 8000, 50257))
    assert ModelConfig().loss_chunk_size is None and ModelConfig(loss_chunk_size=0).loss_chunk_size == 0
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="loss_chunk_size"):
            ModelConfig(loss_chunk_size=bad)
    h, w, b, t = inputs()
    with pytest.raises(ValueError, match="chunk_size"):
        linear_cross_entropy(h, w, t, chunk_size=-2)
    with pytest.raises(ValueError, match="reduction"):
        linear_cross_entropy(h, w, t, reduction="avg")
    with pytest.raises(ValueError, match="target"):
        linear_cross_entropy(h, w, t[:-1])


@pytest.mark.slow
@pytest.mark.e2e
def test_peak_memory_far_below_the_plain_path():
    """Peak memory growth of one forward + backward at N = 4096, V = 50,257, d = 256 (fp32), each path in a fresh
    process (zoo.bench.loss.loss_peak: VmHWM over the steady state): plain holds several (N, V) fp32 tensors
    (823 MB each); chunked one (512, V) buffer (103 MB) plus grad W (V, d, 51 MB) and grad h. Measured bound:
    chunked <= 0.25 x plain and <= 400 MB."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the peak RSS")
    from zoo.bench.loss import run_loss_peak_child

    peaks = {k: run_loss_peak_child(k, 4096, 256, 50257, threads=2)["peak_bytes"] for k in ("plain", "chunked")}
    mb = {k: v / 2**20 for k, v in peaks.items()}
    assert mb["plain"] > 4096 * 50257 * 4 / 2**20, mb  # at least one full logits tensor: the measure sees it
    assert mb["chunked"] <= 0.25 * mb["plain"] and mb["chunked"] <= 400, mb


@pytest.mark.e2e
def test_peak_memory_below_the_plain_path_at_a_small_shape():
    """The fast version of test_peak_memory_far_below_the_plain_path, the same measure (loss_peak in a fresh
    process) at N = 2048, V = 16,384, d = 64: plain holds several (N, V) fp32 tensors (128 MB each); chunked its
    automatic chunk of 1,024 rows (64 MB). Measured: plain 384 MB, chunked 68 MB (0.18); bound 0.3."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the peak RSS")
    from zoo.bench.loss import run_loss_peak_child

    peaks = {k: run_loss_peak_child(k, 2048, 64, 16384, threads=1)["peak_bytes"] for k in ("plain", "chunked")}
    mb = {k: v / 2**20 for k, v in peaks.items()}
    assert mb["plain"] > 2 * 2048 * 16384 * 4 / 2**20, mb  # two full logits tensors at least: the measure sees them
    assert mb["chunked"] <= 0.3 * mb["plain"], mb


def test_gpu_kernel_dispatch_never_on_cpu_and_liger_call(monkeypatch):
    """With a (fake) liger-kernel installed: CPU tensors still take the pure path; liger_loss hands liger its
    argument order (weight, input, target, bias) and options, and declines releases older than 0.5."""
    calls = []

    class FakeLoss:
        def __init__(self, ignore_index, label_smoothing, reduction):
            self.opts = (ignore_index, label_smoothing, reduction)

        def __call__(self, weight, x, target, bias=None):
            calls.append(self.opts)
            return plain_loss(x, weight, bias, target, self.opts[1], self.opts[2])

    module = types.ModuleType("liger_kernel.transformers.fused_linear_cross_entropy")
    module.LigerFusedLinearCrossEntropyLoss = FakeLoss
    for name in ("liger_kernel", "liger_kernel.transformers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    version = {"liger-kernel": "0.6.1"}
    monkeypatch.setattr(liger.metadata, "version", lambda dist: version[dist])
    h, w, b, t = inputs(ignored=(2,))
    linear_cross_entropy(h, w, t, b, label_smoothing=0.1)
    assert calls == [] and not liger.external_kernel_ok(h, None, "mean", False)
    on_gpu = types.SimpleNamespace(is_cuda=True)
    assert liger.external_kernel_ok(on_gpu, None, "mean", False, 0.0, torch.float32)
    assert not liger.external_kernel_ok(on_gpu, None, "mean", False, 0.0, torch.bfloat16)  # rounds logits
    got = liger.liger_loss(h, w, t, b, IGNORE, 0.1, "sum")
    assert calls == [(IGNORE, 0.1, "sum")]
    torch.testing.assert_close(got, plain_loss(h, w, b, t, 0.1, "sum"), atol=0, rtol=0)
    version["liger-kernel"] = "0.4.2"
    assert liger.liger_loss(h, w, t, b, IGNORE, 0.1, "sum") is None


class ScaledHead(torch.nn.Linear):
    """A head with a features() step before its projection, as zoo.model.blocks.heads.LMHead has."""

    def features(self, x):
        return torch.tanh(x) * 0.5

    def forward(self, x):
        return super().forward(self.features(x))


@pytest.mark.parametrize("head_cls", [torch.nn.Linear, ScaledHead])
def test_lm_head_cross_entropy_uses_the_heads_features_and_bias(head_cls):
    torch.manual_seed(0)
    head = head_cls(D, V, bias=True)
    hidden = torch.randn(4, 9, D, requires_grad=True)
    y = torch.randint(0, V, (4, 9))
    y[1, :5] = IGNORE
    params = [hidden, head.weight, head.bias]
    loss, rows = lm_head_cross_entropy(head, hidden, y, label_smoothing=0.1, chunk_size=8, return_rows=True)
    got = torch.autograd.grad(loss, params)
    ref_loss = F.cross_entropy(head(hidden).flatten(0, 1), y.flatten(), label_smoothing=0.1)
    ref = torch.autograd.grad(ref_loss, params)
    assert rows.shape == (4, 9)
    torch.testing.assert_close(loss, ref_loss, atol=FP32_TOL, rtol=0)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, atol=FP32_TOL, rtol=0)


@pytest.mark.slow  # the benchmark's section end to end, 15 s: -m slow
@pytest.mark.e2e
def test_bench_loss_section_runs(monkeypatch):
    """`python -m zoo.bench --only loss` end to end at a tiny shape: both contenders, their ratio and peaks."""
    from zoo.bench import loss as bench_loss_module
    from zoo.bench.options import Options

    monkeypatch.setattr(bench_loss_module, "QUICK_SHAPE", (96, 16, 97))
    out = bench_loss_module.bench_loss(Options(quick=True, reps=5, warmup=0))
    rows = [line for line in out.splitlines() if line.startswith("| plain") or line.startswith("| fused")]
    assert len(rows) == 2 and "1.00 (ref)" in rows[0] and "/5)" in rows[1], out
    assert "N = 96 rows" in out and "automatic chunk = 96 rows" in out


def encoder_only_objectives():
    """(name, build(loss_chunk_size) -> task, loss(task) -> scalar) for the encoder_only objectives that score a
    subset of positions: ENTP (language modeling), encoder_ar and CMLM (translation). Each loss draws its
    positions from a fixed-seed generator, so both builds score the same ones."""
    from zoo_run import reversal_tokenizer

    from zoo.data.multi30k import collate_translation
    from zoo.tasks.lm import LanguageModeling
    from zoo.tasks.translation import Translation

    chars = {"chars": "".join(chr(32 + i) for i in range(65))}
    small = dict(d_model=32, n_heads=2, d_ff=64, n_layers=2, dropout=0.0, max_len=40)
    tok = reversal_tokenizer()
    pairs = [([7, 8, 9], [12, 13, 14, 15]), ([10, 11, 12, 13, 14, 16], [17]), ([20, 21], [22, 23, 24])]
    batch = collate_translation([(i, s + [2], [1] + t, t + [2]) for i, (s, t) in enumerate(pairs)])
    g = torch.Generator().manual_seed(0)
    text = torch.randint(0, 65, (3, 17), generator=g)
    windows = (text[:, :-1], text[:, 1:])

    def lm(chunk, z_loss=0.0):
        model = dict(small, vocab_size=65, loss_chunk_size=chunk)
        opt, sched = {"lr": 1e-3}, {"warmup_steps": 1}
        return LanguageModeling("encoder_only", model, chars, opt, sched, entp_targets=3, z_loss=z_loss)

    def translation(objective):
        def build(chunk, z_loss=0.0):
            model = dict(small, vocab_size=30, loss_chunk_size=chunk)
            kw = {"label_smoothing": 0.1, "objective": objective, "z_loss": z_loss}
            return Translation("encoder_only", model, {"src": tok, "tgt": tok}, {"lr": 1e-3}, {"warmup_steps": 1}, **kw)

        return build

    def seeded():
        return torch.Generator().manual_seed(1)

    return [
        ("entp", lm, lambda t: t.objective_impl.training_loss(windows, seeded())),
        (
            "encoder_ar",
            translation("encoder_ar"),
            lambda t: t.objective_impl.targets_loss(batch, targets=2, generator=seeded()),
        ),
        ("encoder_ar exact", translation("encoder_ar"), lambda t: t.objective_impl.targets_loss(batch)),
        ("cmlm", translation("cmlm_mask_predict"), lambda t: t.objective_impl.losses(batch, seeded())["token"]),
    ]


@pytest.mark.parametrize("z_loss", [0.0, 0.01])
@pytest.mark.parametrize("case", range(4), ids=["entp", "encoder_ar", "encoder_ar exact", "cmlm"])
def test_encoder_only_objectives_equal_the_plain_path(case, z_loss):
    """ENTP, encoder_ar and CMLM train through the chunked head (model.loss_chunk_size rows a chunk): the loss
    and every parameter's gradient equal those of the plain path (loss_chunk_size=0: full logits of the scored
    positions, F.cross_entropy) within 1e-6, label smoothing included for translation, and with task.z_loss
    (the plain path's term is torch's logsumexp, test_z_loss_value_and_gradients_equal_the_unfused_reference)."""
    name, build, loss_of = encoder_only_objectives()[case]
    torch.manual_seed(0)
    chunked = build(2, z_loss)
    plain = build(0, z_loss)
    plain.load_state_dict(chunked.state_dict())
    losses, grads = [], []
    for task in (chunked, plain):
        task.train()
        loss = loss_of(task)
        losses.append(loss)
        grads.append(torch.autograd.grad(loss, [p for p in task.parameters() if p.requires_grad], allow_unused=True))
    torch.testing.assert_close(losses[0], losses[1], atol=FP32_TOL, rtol=0)
    assert losses[0].item() > 1.0  # an untrained model's loss (~ln V), not a degenerate zero
    for (pname, _), g, r in zip(chunked.named_parameters(), *grads):
        if g is None and r is None:
            continue
        torch.testing.assert_close(g, r, atol=FP32_TOL, rtol=0, msg=f"{name}: {pname}")


def chunked_before_z_loss(h, w, b, t, ls, chunk, scale):
    """The fp32 chunk pass as it was before the z-loss option, operation for operation (zoo.model.loss.chunk_pass):
    the reference that z_loss = 0 must reproduce bit for bit. scale (N,): d loss / d row loss. Returns
    (row losses (N,), grad h, grad w, grad b or None)."""
    N, V = h.shape[0], w.shape[0]
    valid = t != IGNORE
    rows = torch.empty(N, dtype=torch.float32)
    grad_h, grad_w = torch.empty_like(h), torch.zeros(w.shape, dtype=torch.float32)
    grad_b = torch.zeros(V, dtype=torch.float32) if b is not None else None
    buf = torch.empty((min(chunk, N), V), dtype=torch.float32)
    safe_target, wt = t.masked_fill(~valid, 0), w.t()
    for start in range(0, N, chunk):
        end = min(start + chunk, N)
        hc, z = h[start:end], buf[: end - start]
        torch.mm(hc, wt, out=z) if b is None else torch.addmm(b, hc, wt, out=z)
        tc = safe_target[start:end].unsqueeze(1)
        m = z.amax(1, keepdim=True)
        z.sub_(m)
        zt = z.gather(1, tc).squeeze(1)
        zmean = z.mean(1) if ls else None
        z.exp_()
        s = z.sum(1)
        loss = s.log() - (1.0 - ls) * zt
        if ls:
            loss -= ls * zmean
        rows[start:end] = loss.masked_fill_(~valid[start:end], 0.0)
        sc = scale[start:end]
        z.mul_((sc / s).unsqueeze(1))
        if ls:
            z.sub_((sc * (ls / z.shape[1])).unsqueeze(1))
        z.scatter_add_(1, tc, (-(1.0 - ls) * sc).unsqueeze(1))
        torch.mm(z, w, out=grad_h[start:end])
        grad_w.addmm_(z.t(), hc)
        if grad_b is not None:
            grad_b.add_(z.sum(0))
    return rows, grad_h, grad_w, grad_b


@pytest.mark.parametrize("chunk", [7, 64])
@pytest.mark.parametrize("ls", [0.0, 0.1])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_z_loss_zero_is_bit_identical_to_the_loss_before_it(chunk, ls, bias, reduction):
    """z_loss=0 (the default) runs the very operations of the cross-entropy before the option existed: the
    loss, the rows and every gradient equal chunked_before_z_loss's bit for bit (torch.equal), for the fused
    mean (gradients computed in forward) and the per-row path (recomputed in backward)."""
    h, w, b, t = inputs(bias=bias, ignored=(0, 3, *range(14, 21), 49))
    valid = t != IGNORE
    weights = torch.rand(N, generator=torch.Generator().manual_seed(3))
    for z_kw in ({}, {"z_loss": 0.0}, {"z_loss": 0}):
        out = linear_cross_entropy(h, w, t, b, label_smoothing=ls, chunk_size=chunk, reduction=reduction, **z_kw)
        grads = torch.autograd.grad(out if reduction == "mean" else (out * weights).sum(), leaves(h, w, b))
        if reduction == "mean":
            scale = valid.float() / valid.sum().clamp(min=1)
        else:
            scale = weights.masked_fill(~valid, 0.0)
        with torch.no_grad():
            rows, *ref_grads = chunked_before_z_loss(h, w, b, t, ls, chunk, scale)
        ref = rows.sum() / valid.sum() if reduction == "mean" else rows
        assert torch.equal(out.detach(), ref)
        for g, r in zip(grads, [x for x in ref_grads if x is not None]):
            assert torch.equal(g, r)
    plain = linear_cross_entropy(h, w, t, b, label_smoothing=ls, chunk_size=0, reduction=reduction, z_loss=0.0)
    assert torch.equal(plain, plain_loss(h, w, b, t, ls, reduction))  # the plain path: F.cross_entropy itself


def z_loss_reference(h, w, b, t, ls, reduction, z_loss):
    """PaLM's z-loss (Chowdhery et al. 2022, sec. 5) on full logits with torch: per non-ignored row
    F.cross_entropy + z_loss * logsumexp(logits)^2, reduced over those rows (mean: divided by their count)."""
    logits = F.linear(h, w, b)
    logits = logits if logits.dtype == torch.float64 else logits.float()
    valid = t != IGNORE
    ce = F.cross_entropy(logits, t, ignore_index=IGNORE, label_smoothing=ls, reduction="none")
    rows = ce + z_loss * logits.logsumexp(-1).square() * valid
    if reduction == "none":
        return rows
    return rows.sum() / valid.sum() if reduction == "mean" else rows.sum()


@pytest.mark.parametrize("chunk", [7, None, 0])
@pytest.mark.parametrize("ls", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_z_loss_value_and_gradients_equal_the_unfused_reference(chunk, ls, reduction):
    """With z_loss > 0 the fused chunked loss (chunks of 7, automatic, and the plain path) and its gradients wrt
    h, W and bias equal z_loss_reference's (autograd through full logits) within the fp32 tolerances, ignored
    rows excluded from the term and from the mean; the term is the difference from z_loss = 0."""
    z = 0.05  # large enough that the term moves the loss and gradients well past the tolerances
    h, w, b, t = inputs(ignored=(0, 3, *range(14, 21), 49))
    weights = torch.rand(N, generator=torch.Generator().manual_seed(3))

    def fused(*x, z_loss=z):
        return linear_cross_entropy(
            x[0], x[1], t, x[2], label_smoothing=ls, reduction=reduction, chunk_size=chunk, z_loss=z_loss
        )

    got = loss_and_grads(fused, h, w, b, t, weights)
    plain = loss_and_grads(lambda *x: z_loss_reference(*x, t, ls, reduction, z), h, w, b, t, weights)
    ref = loss_and_grads(lambda *x: z_loss_reference(*x, t, ls, reduction, z), *double(h, w, b), t, weights)
    for x, p, r in zip([got[0], *got[1]], [plain[0], *plain[1]], [ref[0], *ref[1]]):
        tol = FP32_TOL + FP32_SCALE_REL * r.abs().max().item()
        torch.testing.assert_close(x.double(), r, atol=tol, rtol=0)
        torch.testing.assert_close(x, p, atol=tol, rtol=0)
        assert x.dim() == 0 or rel(x, r) < FP32_REL
    off = loss_and_grads(lambda *x: fused(*x, z_loss=0.0), h, w, b, t, weights)
    logits = F.linear(h, w, b).detach().double()
    term = z * logits.logsumexp(-1).square() * (t != IGNORE)
    expected = {"none": term, "sum": term.sum(), "mean": term.sum() / (t != IGNORE).sum()}[reduction]
    torch.testing.assert_close((got[0] - off[0]).double(), expected, atol=1e-5, rtol=1e-5)
    assert rel(got[1][1], off[1][1]) > 1e-2  # the term's gradient is far beyond the tolerances


def test_z_loss_rows_and_no_grad_path():
    """return_rows and the gradient-free pass (torch.no_grad) give the rows with the term: the reference's."""
    h, w, b, t = inputs(ignored=(2, 9))
    ref = z_loss_reference(*double(h, w, b), t, 0.1, "none", 0.05).detach()
    tol = FP32_TOL + FP32_SCALE_REL * ref.abs().max().item()
    loss, rows = linear_cross_entropy(h, w, t, b, label_smoothing=0.1, chunk_size=7, z_loss=0.05, return_rows=True)
    torch.testing.assert_close(rows.double(), ref, atol=tol, rtol=0)
    torch.testing.assert_close(loss.double(), ref.sum() / 48, atol=tol, rtol=0)
    with torch.no_grad():
        rows = chunked_cross_entropy_rows(h, w, t, b, label_smoothing=0.1, chunk_size=7)
        got = linear_cross_entropy(h, w, t, b, label_smoothing=0.1, chunk_size=7, z_loss=0.05, reduction="none")
    torch.testing.assert_close(got.double(), ref, atol=tol, rtol=0)
    assert (got - rows)[[2, 9]].abs().max() == 0 and ((got - rows) > 0).sum() == N - 2  # ignored rows: no term


@pytest.mark.parametrize("bad", [-1e-4, float("nan"), float("inf"), True, "1e-4", None])
def test_z_loss_must_be_a_non_negative_number(bad):
    h, w, b, t = inputs()
    with pytest.raises(ValueError, match=r"z_loss=.* must be a non-negative number.*0 = off"):
        linear_cross_entropy(h, w, t, b, z_loss=bad)
    with pytest.raises(ValueError, match=r"^task\.z_loss=.* must be a non-negative number"):
        chunked_ce.check_z_loss(bad, "task.z_loss")
    assert chunked_ce.check_z_loss(0) == 0.0 and chunked_ce.check_z_loss(1e-4) == 1e-4
