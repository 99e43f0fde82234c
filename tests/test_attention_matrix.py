"""Every combination of MultiHeadAttention's inputs equals one plain reference, or raises.

Reference: float64 softmax(q k^T / sqrt(d) + bias + mask) v from the module's own projections, where
is_causal means "the query at absolute position p sees keys 0..p", intersected with the given mask, and a
row with no visible key outputs zeros. A cached run feeds the sequence in chunks through a KVCache, each
chunk with its rows of the full mask and bias over every key so far; the reference of a chunk is over the
keys fed so far, which for a causal mask is the single full pass.
"""

import itertools
import math

import pytest
import torch

from zoo.model.blocks import masks
from zoo.model.blocks.attention import AttentionInputs, MultiHeadAttention, record_weights
from zoo.model.blocks.kv_cache import KVCache
from zoo.model.blocks.positions import ALiBi
from zoo.model.blocks.scaled_dot_product import attend

B, T, D_MODEL, H, H_KV = 2, 7, 16, 4, 2
HD = D_MODEL // H
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}
MASKS = ("none", "padding", "causal", "prefix", "sliding", "padding+causal")
CHUNKS = {0: None, 1: [T], 2: [4, 3], 3: [2, 3, 2]}  # cache: none, or filled in 1, 2, 3 chunks


def full_mask(kind: str):
    """(B|1, 1, T, T) bool or None. Padding: row 1's first two keys (a left-padded prompt), so under
    causal its first two queries see nothing."""
    kpm = torch.zeros(B, T, dtype=torch.bool)
    kpm[1, :2] = True
    pad = masks.padding(kpm)  # (B, 1, 1, T)
    return {
        "none": None,
        "padding": pad.expand(B, 1, T, T),
        "causal": masks.causal(T)[None, None],
        "prefix": masks.prefix_lm(T, T, prefix_len=3)[None, None],
        "sliding": masks.sliding_window(T, T, window=3)[None, None],
        "padding+causal": pad & masks.causal(T),
    }[kind]


def reference(mha: MultiHeadAttention, x, mask, bias, is_causal, chunks):
    """(y (B, T, d_model), weights (B, h, T, T)) in float64: each chunk's queries over the keys fed so far
    (all T keys in one pass), weights zero-padded to T keys."""
    W, b = mha.qkv_proj.weight.double(), mha.qkv_proj.bias.double()
    qkv = x.double() @ W.T + b
    kv = H_KV * HD
    q = qkv[..., :D_MODEL].view(B, T, H, HD).transpose(1, 2)
    k = qkv[..., D_MODEL : D_MODEL + kv].view(B, T, H_KV, HD).transpose(1, 2).repeat_interleave(H // H_KV, 1)
    v = qkv[..., D_MODEL + kv :].view(B, T, H_KV, HD).transpose(1, 2).repeat_interleave(H // H_KV, 1)
    outs, ws, s = [], [], 0
    for n in chunks or [T]:
        e = s + n
        scores = q[:, :, s:e] @ k[:, :, :e].transpose(-2, -1) / math.sqrt(HD)  # (B, h, n, e)
        if bias is not None:
            scores = scores + bias[..., s:e, :e].double()
        m = mask[..., s:e, :e] if mask is not None else None
        if is_causal:  # absolute position p = s + i sees keys 0..p
            c = torch.arange(e)[None, :] <= torch.arange(s, e)[:, None]
            m = c if m is None else m & c
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf"))
        w = torch.nan_to_num(scores.softmax(-1), nan=0.0)
        outs.append(w @ v[:, :, :e])
        ws.append(torch.nn.functional.pad(w, (0, T - e)))
        s = e
    out = torch.cat(outs, 2).transpose(1, 2).reshape(B, T, D_MODEL)
    return out @ mha.out_proj.weight.double().T + mha.out_proj.bias.double(), torch.cat(ws, 2)


def run(mha, x, mask, bias, is_causal, chunks, need_weights, dtype):
    """zoo's output over the whole sequence: one pass, or chunk by chunk through a KVCache; the weights are
    what record_weights kept (with need_weights), else what the module holds (None: nothing recorded)."""
    with record_weights(mha, need_weights):
        if chunks is None:
            y = mha(x, attn=AttentionInputs(mask=mask, bias=bias, is_causal=is_causal))
            return y, mha.attn_weights
        cache = KVCache(B, H_KV, T, HD, dtype=dtype)
        ys, ws, s = [], [], 0
        for n in chunks:
            e = s + n
            m = mask[..., s:e, :e] if mask is not None else None
            bi = bias[..., s:e, :e] if bias is not None else None
            attn = AttentionInputs(mask=m, bias=bi, is_causal=is_causal)
            ys.append(mha(x[:, s:e], attn=attn, cache=cache))
            w = mha.attn_weights
            ws.append(torch.nn.functional.pad(w, (0, T - e)) if w is not None else None)
            s = e
        return torch.cat(ys, 1), (torch.cat(ws, 2) if need_weights else ws[-1])


CASES = list(
    itertools.product(
        MASKS, (False, True), ("none", "alibi"), sorted(CHUNKS), (False, True), (torch.float32, torch.bfloat16)
    )
)


@pytest.mark.parametrize(
    "mask_kind,is_causal,bias_kind,n_chunks,need_weights,dtype",
    CASES,
    ids=["-".join(str(c).replace("torch.", "") for c in case) for case in CASES],
)
def test_attention_matches_reference(mask_kind, is_causal, bias_kind, n_chunks, need_weights, dtype):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D_MODEL, H, H_KV).to(dtype).eval()
    x = torch.randn(B, T, D_MODEL).to(dtype)
    mask = full_mask(mask_kind)
    bias = ALiBi(H, T)(T, T, causal=is_causal or mask_kind in ("causal", "sliding", "padding+causal"))
    bias = bias if bias_kind == "alibi" else None
    chunks = CHUNKS[n_chunks]
    y, w = run(mha, x, mask, bias, is_causal, chunks, need_weights, dtype)
    ref_y, ref_w = reference(mha, x, mask, bias, is_causal, chunks)
    assert y.dtype == dtype and bool(torch.isfinite(y).all())
    assert (y.double() - ref_y).abs().max() < TOL[dtype]
    if need_weights:
        assert (w.double() - ref_w).abs().max() < TOL[dtype]
    else:
        assert w is None
    if is_causal or mask_kind in ("causal", "sliding", "padding+causal"):  # chunking changes nothing
        full_y, _ = reference(mha, x, mask, bias, is_causal, None)
        assert (ref_y - full_y).abs().max() < 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padding_with_is_causal_is_both(dtype):
    """The reported fault: a padding mask with is_causal=True kept only the padding (default path) and the
    weights path replaced the mask with its own causal one; both now apply both, and agree."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8).to(dtype) for _ in range(3))
    pad = masks.padding(torch.tensor([[True, False, False, False, False]]))
    out, _ = attend(q, k, v, mask=pad, is_causal=True)
    out_w, w = attend(q, k, v, mask=pad, is_causal=True, need_weights=True)
    both = pad & masks.causal(5)
    ref, _ = attend(q.double(), k.double(), v.double(), mask=both)
    assert (out.double() - ref).abs().max() < TOL[dtype] and (out_w.double() - ref).abs().max() < TOL[dtype]
    assert torch.equal(w[0, 0] > 0, both[0, 0].expand(5, 5) & (torch.arange(5) > 0)[:, None])


def test_refused_combinations():
    q, k, v = (torch.randn(1, 2, 5, 8) for _ in range(3))
    with pytest.raises(ValueError, match="is_causal=True with 5 queries but 3 keys"):
        attend(q, k[:, :, :3], v[:, :, :3], is_causal=True)
    with pytest.raises(ValueError, match="must be bool"):
        attend(q, k, v, mask=torch.zeros(5, 5))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 4\) does not broadcast"):
        attend(q, k, v, mask=torch.ones(5, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"bias of shape \(1, 3, 5, 5\) does not broadcast"):
        attend(q, k, v, bias=torch.zeros(1, 3, 5, 5))
    cross = MultiHeadAttention(16, 2, cross=True)
    with pytest.raises(ValueError, match="is_causal=True in cross-attention"):
        cross(torch.randn(1, 3, 16), memory=torch.randn(1, 4, 16), attn=AttentionInputs(is_causal=True))
    mha = MultiHeadAttention(16, 2)
    cache = KVCache(1, 2, 8, 8)
    mha(torch.randn(1, 3, 16), attn=AttentionInputs(is_causal=True), cache=cache)
    with pytest.raises(ValueError, match=r"mask of shape \(1, 1, 2, 2\) does not broadcast .* cached"):
        mha(torch.randn(1, 2, 16), attn=AttentionInputs(mask=torch.ones(1, 1, 2, 2, dtype=torch.bool)), cache=cache)
