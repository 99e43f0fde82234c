"""attention.attend against a hand-written softmax(q k^T / sqrt(d)) v, and masked-row safety."""

import math

import pytest
import torch

from zoo.model import DecoderOnly, ModelConfig
from zoo.model.blocks import masks
from zoo.model.blocks.attention import AttentionInputs, MultiHeadAttention
from zoo.model.blocks.scaled_dot_product import attend
from zoo.model.decoding.generate import left_pad

B, H, T_Q, T_K, D = 2, 4, 5, 7, 8


def reference(q, k, v, mask=None, bias=None):
    """Plain float64 attention; k, v heads repeated (repeat_interleave) up to q's; masked-out rows -> 0."""
    q, k, v = q.double(), k.double(), v.double()
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.double()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    w = torch.nan_to_num(w, nan=0.0)  # a row with every key masked: softmax of all -inf -> zeros
    return w @ v, w


def qkv(h_kv=H, T_q=T_Q, T_k=T_K, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T_q, D, generator=g).to(dtype)
    k = torch.randn(B, h_kv, T_k, D, generator=g).to(dtype)
    v = torch.randn(B, h_kv, T_k, D, generator=g).to(dtype)
    return q, k, v


def random_mask(seed=1, full_rows=True):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(B, 1, T_Q, T_K, generator=g) > 0.4
    m[:, :, :, 0] = True  # every row sees at least one key
    if full_rows:
        m[0, 0, 2] = False  # a fully masked query row
        m[1, 0, 4] = False
    return m


def test_no_mask():
    q, k, v = qkv()
    out, w = attend(q, k, v)
    ref, _ = reference(q, k, v)
    assert w is None
    assert (out.double() - ref).abs().max() < 1e-5


def test_bool_mask():
    q, k, v = qkv()
    m = random_mask(full_rows=False)
    out, _ = attend(q, k, v, mask=m)
    ref, _ = reference(q, k, v, mask=m)
    assert (out.double() - ref).abs().max() < 1e-5
    # the mask matters: without it the output differs
    assert (attend(q, k, v)[0].double() - ref).abs().max() > 1e-2


def test_float_bias_and_bias_with_mask():
    q, k, v = qkv()
    bias = torch.randn(1, H, T_Q, T_K, generator=torch.Generator().manual_seed(3))
    out, _ = attend(q, k, v, bias=bias)
    ref, _ = reference(q, k, v, bias=bias)
    assert (out.double() - ref).abs().max() < 1e-5
    m = random_mask()
    out, _ = attend(q, k, v, mask=m, bias=bias)
    ref, _ = reference(q, k, v, mask=m, bias=bias)
    assert (out.double() - ref).abs().max() < 1e-5


@pytest.mark.parametrize("h_kv", [1, 2])
def test_gqa(h_kv):
    q, k, v = qkv(h_kv=h_kv)
    m = random_mask()
    out, _ = attend(q, k, v, mask=m)
    ref, ref_w = reference(q, k, v, mask=m)
    assert (out.double() - ref).abs().max() < 1e-5
    out_w, w = attend(q, k, v, mask=m, need_weights=True)
    assert (w.double() - ref_w).abs().max() < 1e-6
    assert (out_w - out).abs().max() < 1e-5


def test_is_causal_matches_explicit_mask():
    q, k, v = qkv(T_k=T_Q)
    out, _ = attend(q, k, v, is_causal=True)
    ref, _ = reference(q, k, v, mask=masks.causal(T_Q))
    assert (out.double() - ref).abs().max() < 1e-5
    out_w, w = attend(q, k, v, is_causal=True, need_weights=True)
    assert (out_w - out).abs().max() < 1e-5
    assert torch.equal(w[0, 0] > 0, masks.causal(T_Q))


@pytest.mark.parametrize("use_bias", [False, True])
def test_need_weights_equals_reference_and_sdpa(use_bias):
    q, k, v = qkv()
    m = random_mask()
    bias = torch.randn(1, H, T_Q, T_K, generator=torch.Generator().manual_seed(4)) if use_bias else None
    out_sdpa, none = attend(q, k, v, mask=m, bias=bias)
    out_w, w = attend(q, k, v, mask=m, bias=bias, need_weights=True)
    ref, ref_w = reference(q, k, v, mask=m, bias=bias)
    assert none is None and w.shape == (B, H, T_Q, T_K)
    assert (w.double() - ref_w).abs().max() < 1e-6
    assert (out_w - out_sdpa).abs().max() < 1e-5
    # rows sum to 1, except the fully masked ones which are all zeros
    sums = w.sum(-1)
    assert torch.allclose(sums[0, :, 2], torch.zeros(H)) and torch.allclose(sums[1, :, 4], torch.zeros(H))
    keep = m.expand(B, H, T_Q, T_K).any(-1)
    assert torch.allclose(sums[keep], torch.ones(int(keep.sum())), atol=1e-6)
    assert bool((w[~m.expand(B, H, T_Q, T_K)] == 0).all())


TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}  # measured max: 4e-7, 9e-4, 9e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("use_bias", [False, True])
def test_fully_masked_rows_zero_and_finite_grads(dtype, need_weights, use_bias):
    q, k, v = qkv(h_kv=2, dtype=dtype)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    m = random_mask()
    bias = -torch.rand(1, H, T_Q, T_K, generator=torch.Generator().manual_seed(5)).to(dtype) if use_bias else None
    out, _ = attend(q, k, v, mask=m, bias=bias, need_weights=need_weights)
    assert out.dtype == dtype
    assert bool(torch.isfinite(out).all())
    assert bool((out[0, :, 2] == 0).all()) and bool((out[1, :, 4] == 0).all())  # exact zeros
    ref, _ = reference(q.detach(), k.detach(), v.detach(), mask=m, bias=bias)
    assert (out.detach().double() - ref).abs().max() < TOL[dtype]
    g = torch.Generator().manual_seed(6)
    (out.float() * torch.randn(out.shape, generator=g)).sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and bool(torch.isfinite(t.grad).all())
    # the masked rows contribute no gradient to their queries
    assert bool((q.grad[0, :, 2] == 0).all()) and bool((q.grad[1, :, 4] == 0).all())


def test_fully_masked_grads_match_reference_float32():
    q, k, v = qkv()
    m = random_mask()
    g = torch.Generator().manual_seed(7)
    upstream = torch.randn(B, H, T_Q, D, generator=g)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    (attend(*leaves, mask=m)[0] * upstream).sum().backward()
    ref_leaves = [t.double().clone().requires_grad_(True) for t in (q, k, v)]
    (reference(*ref_leaves, mask=m)[0] * upstream.double()).sum().backward()
    for a, b in zip(leaves, ref_leaves):
        assert (a.grad.double() - b.grad).abs().max() < 1e-5


def test_multihead_attention_module_against_reference():
    """MultiHeadAttention = out_proj(attend(split(qkv_proj(x)))) with the [W_q; W_k; W_v] layout."""
    torch.manual_seed(0)
    d_model, h, h_kv, T = 16, 4, 2, 6
    mha = MultiHeadAttention(d_model, h, h_kv)
    x = torch.randn(B, T, d_model)
    m = masks.causal(T)
    y = mha(x, attn=AttentionInputs(mask=m))
    hd = d_model // h
    W, b = mha.qkv_proj.weight, mha.qkv_proj.bias
    q = (x @ W[:d_model].T + b[:d_model]).view(B, T, h, hd).transpose(1, 2)
    k = (x @ W[d_model : d_model + h_kv * hd].T + b[d_model : d_model + h_kv * hd]).view(B, T, h_kv, hd).transpose(1, 2)
    v = (x @ W[d_model + h_kv * hd :].T + b[d_model + h_kv * hd :]).view(B, T, h_kv, hd).transpose(1, 2)
    ref, _ = reference(q, k, v, mask=m)
    ref_y = mha.out_proj(ref.float().transpose(1, 2).reshape(B, T, d_model))
    assert (y - ref_y).abs().max() < 1e-5


@pytest.mark.parametrize("position", ["rope", "alibi", "learned"])
def test_decoder_only_left_padded_finite_loss_and_grads(position):
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=50,
        d_model=16,
        n_heads=4,
        n_kv_heads=2,
        d_ff=32,
        n_layers=2,
        dropout=0.0,
        position=position,
        max_len=32,
    )
    model = DecoderOnly(cfg)
    idx, kpm = left_pad([[5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15], [16]], pad_id=0)
    logits = model(idx, key_padding_mask=kpm)
    assert bool(torch.isfinite(logits).all())
    targets = torch.randint(3, 50, idx.shape)
    targets[kpm] = -100
    loss = torch.nn.functional.cross_entropy(logits.view(-1, 50), targets.view(-1), ignore_index=-100)
    assert bool(torch.isfinite(loss))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and bool(torch.isfinite(p.grad).all()), name
    # the real tokens of a padded row equal the same prompt run alone (padding is invisible)
    alone = model(torch.tensor([[13, 14, 15]]))
    assert (logits[1, -3:] - alone[0]).abs().max() < 1e-5
