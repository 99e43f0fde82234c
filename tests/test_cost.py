"""Tests for zoo.model.cost: closed forms (Narayanan et al. 2021; Korthikanti et al. 2022) and agreement
with torch.utils.flop_counter.FlopCounterMode on every architecture and block option.

Note on FlopCounterMode on CPU: SDPA dispatches to aten._scaled_dot_product_flash_attention_for_cpu,
which FlopCounterMode has no formula for (torch 2.13 registers only the CUDA flash / efficient / cudnn
ops), so a plain FlopCounterMode counts 0 FLOPs for attention on CPU. The tests therefore measure
(a) with torch's own sdpa_flop_count registered for the CPU op via custom_mapping, (b) through the
model's need_weights path, whose q @ k^T and weights @ v are plain matmuls FlopCounterMode counts
without help, and (c) the plain counter, which must see exactly every Linear of the model.
"""

import re

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, flop_registry, sdpa_flop_count
from zoo_run import CPU_SDPA

from zoo.model import ModelConfig, build_model
from zoo.model.cost import (
    LAYER_TERMS,
    TERMS,
    activation_memory,
    classify_flops_per_token,
    flops_per_token,
    forward_flops,
    forward_flops_by_stack,
    layer_flops,
    n_layers,
    non_embedding_param_count,
    param_count,
    summary,
    train_flops_per_token,
)

aten = torch.ops.aten
ARCHS = ("encoder_only", "decoder_only", "encoder_decoder")
B, N, S, V, D, H, DFF, L = 2, 16, 12, 100, 64, 4, 256, 2  # S: encoder-decoder source length (!= N on purpose)

OPTIONS = {
    "standard": {},
    "gelu": dict(activation="gelu"),
    "swiglu": dict(activation="swiglu"),
    "geglu": dict(activation="geglu"),
    "gqa": dict(n_kv_heads=2),
    "mqa": dict(n_kv_heads=1),
    "rope": dict(position="rope"),
    "alibi": dict(position="alibi"),
    "learned": dict(position="learned"),
    "no_positions": dict(position="none"),
    "norm_first": dict(norm_first=True),
    "rmsnorm": dict(norm="rmsnorm"),
    "no_bias": dict(bias=False),
    "prefix": dict(mask="prefix", prefix_len=5),
    "sliding": dict(mask="sliding", window=4),
    "llama_like": dict(position="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=2, bias=False, norm_first=True),
}


def make(arch, **overrides):
    kw = dict(vocab_size=V, d_model=D, n_heads=H, d_ff=DFF, n_layers=L, dropout=0.0, max_len=64)
    kw.update(overrides)
    torch.manual_seed(0)
    return build_model(arch, ModelConfig(**kw)).eval()


def inputs(arch, b=B, n=N, s=S):
    tgt = torch.randint(3, V, (b, n))
    return (torch.randint(3, V, (b, s)), tgt) if arch == "encoder_decoder" else (tgt,)


def ours(model, arch, b=B, n=N, s=S):
    return forward_flops(model, b, n, s if arch == "encoder_decoder" else None)


def _cpu_sdpa_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    return sdpa_flop_count(query_shape, key_shape, value_shape)  # torch's own formula (GQA-aware)


def measure(model, arch, custom_mapping=None, return_attention=False):
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=custom_mapping) as fc:
        model(*inputs(arch), return_attention=return_attention)
    return fc


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize("arch", ARCHS)
def test_param_count_is_numel_sum_and_tying_saves_exactly_vd(arch):
    tied, untied = make(arch, tie_embeddings=True), make(arch, tie_embeddings=False)
    for m in (tied, untied):
        assert param_count(m) == sum(p.numel() for p in m.parameters())
        assert param_count(m) == m.num_params()
    assert param_count(untied) - param_count(tied) == V * D
    # parameters() dedups: the tied LM head is the embedding's Parameter, so counting every module's
    # own weight would count V*d twice
    assert sum(p.numel() for mod in tied.modules() for p in mod.parameters(recurse=False)) == param_count(tied) + V * D


def test_param_count_closed_form_decoder_only():
    # tied embedding V*d + per post-LN layer: qkv 3d^2+3d, out d^2+d, ffn 2*d*d_ff + d_ff + d, two LNs 4d
    # = 12 d^2 + 13 d with d_ff = 4d; sinusoidal positions are a buffer; no final norm for post-LN.
    m = make("decoder_only")
    assert param_count(m) == V * D + L * (12 * D * D + 13 * D) == 106368
    assert param_count(make("decoder_only", position="learned")) == 106368 + 64 * D  # max_len * d


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_non_embedding_count_leaves_out_the_output_projection(arch, tie):
    """Kaplan et al. 2020's N leaves out the vocabulary: the token tables and the output projection, tied or
    not, so N does not grow with vocab_size. Closed form per post-LN layer (d_ff = 4 d): self-attention
    4 d^2 + 4 d, FFN 8 d^2 + 5 d, one LayerNorm per sublayer 2 d; a decoder layer with cross-attention adds
    4 d^2 + 4 d + 2 d. n_layers=2: encoder_decoder has 2 layers a side."""
    layer = 12 * D * D + 13 * D
    cross = 4 * D * D + 6 * D
    want = {"encoder_only": L * layer, "decoder_only": L * layer, "encoder_decoder": 2 * L * layer + L * cross}
    counts = {v: non_embedding_param_count(make(arch, vocab_size=v, tie_embeddings=tie)) for v in (V, 4 * V)}
    assert counts == {V: want[arch], 4 * V: want[arch]}


# ---------------------------------------------------------------- closed forms


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("b,n,d,h", [(2, 16, 64, 4), (3, 7, 96, 8), (1, 33, 48, 1)])
def test_standard_layer_is_24bNd2_plus_4bN2d(bias, activation, b, n, d, h):
    cfg = ModelConfig(
        vocab_size=V,
        d_model=d,
        n_heads=h,
        d_ff=4 * d,
        n_layers=3,
        activation=activation,
        bias=bias,
        dropout=0.0,
        max_len=64,
    )
    per_layer = layer_flops(cfg, b, n)
    assert sum(per_layer.values()) == 24 * b * n * d * d + 4 * b * n * n * d
    assert all(per_layer[k] == 0 for k in LAYER_TERMS if k.startswith("cross_"))
    flops = forward_flops(build_model("decoder_only", cfg), b, n)
    assert flops["logits"] == 2 * b * n * d * V
    assert flops["total"] - flops["logits"] == 3 * (24 * b * n * d * d + 4 * b * n * n * d)
    assert flops["total"] == sum(flops[k] for k in TERMS)


def test_encoder_decoder_closed_form():
    # encoder layers on S source tokens; decoder layers on N target tokens add cross-attention:
    # q + out 4bNd^2, kv over the memory 4bSd^2 (MHA), scores + values 4bNSd.
    m = make("encoder_decoder")
    by_stack = forward_flops_by_stack(m, B, N, S)
    enc, dec = sum(by_stack["encoder"].values()), sum(by_stack["decoder"].values())
    assert enc == L * (24 * B * S * D * D + 4 * B * S * S * D)
    assert dec == L * (
        24 * B * N * D * D + 4 * B * N * N * D + 4 * B * N * D * D + 4 * B * S * D * D + 4 * B * N * S * D
    )
    assert by_stack["head"] == {"logits": 2 * B * N * D * V}
    assert forward_flops(m, B, N, S)["total"] == enc + dec + 2 * B * N * D * V
    # src_len defaults to seq_len
    assert forward_flops(m, B, N) == forward_flops(m, B, N, N)


def test_gated_ffn_and_grouped_query_terms():
    cfg = ModelConfig(vocab_size=V, d_model=D, n_heads=H, n_kv_heads=1, d_ff=DFF, activation="swiglu")
    t = layer_flops(cfg, B, N, memory_len=S)
    kv_dim = D // H  # one K/V head
    assert t["attention_qkv"] == 2 * B * N * D * (D + 2 * kv_dim)
    assert t["attention_scores"] == t["attention_values"] == 2 * B * N * N * D  # every query head still multiplies
    assert t["cross_kv"] == 2 * B * S * D * 2 * kv_dim
    assert t["cross_scores"] == t["cross_values"] == 2 * B * N * S * D
    assert t["ffn"] == 6 * B * N * D * DFF  # d -> 2 d_ff (gate, up), d_ff -> d


# ---------------------------------------------------------------- FlopCounterMode


def _by_term(fc):
    """FlopCounterMode's per-module counts mapped onto our terms (summed over layers and stacks)."""
    counts = fc.get_flop_counts()
    out = dict.fromkeys(TERMS, 0)
    suffix = {
        r"self_attn\.qkv_proj": "attention_qkv",
        r"self_attn\.out_proj": "attention_out",
        r"cross_attn\.q_proj": "cross_q",
        r"cross_attn\.kv_proj": "cross_kv",
        r"cross_attn\.out_proj": "cross_out",
        r"ffn": "ffn",
    }
    for name, ops in counts.items():
        for pat, term in suffix.items():
            if re.search(r"\.layers\.\d+\." + pat + "$", name):
                out[term] += sum(ops.values())
        if re.search(r"\.layers\.\d+\.self_attn$", name):
            out["attention_scores"] += sum(v for op, v in ops.items() if op == CPU_SDPA)  # scores + values
        if re.search(r"\.layers\.\d+\.cross_attn$", name):
            out["cross_scores"] += sum(v for op, v in ops.items() if op == CPU_SDPA)
        if name.endswith(".lm_head"):
            out["logits"] += sum(ops.values())
    return out


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("arch", ARCHS)
def test_forward_flops_match_flop_counter(arch, option):
    """SDPA path (the default forward), CPU SDPA op counted with torch's sdpa_flop_count: every term and
    the total agree exactly (the spec allows 2%; there is nothing uncounted to absorb)."""
    m = make(arch, **OPTIONS[option])
    want = ours(m, arch)
    fc = measure(m, arch, custom_mapping={CPU_SDPA: _cpu_sdpa_flop})
    assert fc.get_total_flops() == pytest.approx(want["total"], rel=0.02)
    assert fc.get_total_flops() == want["total"]
    got = _by_term(fc)
    for term in ("attention_qkv", "attention_out", "cross_q", "cross_kv", "cross_out", "ffn", "logits"):
        assert got[term] == want[term], term
    assert got["attention_scores"] == want["attention_scores"] + want["attention_values"]
    assert got["cross_scores"] == want["cross_scores"] + want["cross_values"]


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("arch", ARCHS)
def test_forward_flops_match_plain_flop_counter_on_explicit_attention(arch, option):
    """return_attention=True computes q @ k^T and weights @ v as matmuls (K/V repeated per query head for
    GQA): a plain FlopCounterMode, no custom formula, counts exactly our total."""
    m = make(arch, **OPTIONS[option])
    assert measure(m, arch, return_attention=True).get_total_flops() == ours(m, arch)["total"]


@pytest.mark.parametrize("option", ["standard", "gqa", "swiglu"])
@pytest.mark.parametrize("arch", ARCHS)
def test_plain_flop_counter_sees_every_linear_exactly(arch, option):
    """A plain FlopCounterMode on CPU misses the SDPA products (no formula for the CPU op), so it counts
    our total minus scores and values, i.e. every projection, FFN and the LM head exactly. If a later
    torch registers the CPU op, it counts the full total."""
    m = make(arch, **OPTIONS[option])
    want = ours(m, arch)
    sdpa = want["attention_scores"] + want["attention_values"] + want["cross_scores"] + want["cross_values"]
    expected = want["total"] if CPU_SDPA in flop_registry else want["total"] - sdpa
    assert measure(m, arch).get_total_flops() == expected


# ---------------------------------------------------------------- per token, memory, summary


@pytest.mark.parametrize("arch", ARCHS)
def test_flops_per_token(arch):
    m = make(arch)
    src = S if arch == "encoder_decoder" else None
    total = forward_flops(m, 3, N, src)["total"]
    assert flops_per_token(m, N, src) == total / (3 * N)
    assert train_flops_per_token(m, N, src) == 3 * total / (3 * N)
    if arch == "decoder_only":  # per token: L (24 d^2 + 4 N d) + 2 d V
        assert flops_per_token(m, N) == L * (24 * D * D + 4 * N * D) + 2 * D * V == 217600


@pytest.mark.parametrize("arch", ARCHS)
def test_classify_flops_per_token_matches_flop_counter(arch):
    """classify() runs no LM head: FlopCounterMode (CPU SDPA counted with torch's formula) over
    model.classify on b sequences of N tokens, divided by b * N, equals classify_flops_per_token exactly."""
    m = make(arch, num_classes=3)
    ids = torch.randint(3, V, (B, N))
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping={CPU_SDPA: _cpu_sdpa_flop}) as fc:
        m.classify(ids)
    assert classify_flops_per_token(m, N) == fc.get_total_flops() / (B * N)
    assert classify_flops_per_token(m, N) < flops_per_token(m, N, N if arch == "encoder_decoder" else None)
    with pytest.raises(ValueError, match="num_classes > 0"):
        classify_flops_per_token(make(arch), N)


def test_activation_memory_closed_form():
    # l * (34 b N d + 5 b N^2 h) bytes = 2 * (34*2*16*64 + 5*2*256*4) = 2 * (69632 + 10240)
    assert activation_memory(make("decoder_only"), B, N) == 159744
    assert activation_memory(make("encoder_only"), B, N) == 159744
    # encoder-decoder: l = both stacks
    assert n_layers(make("encoder_decoder", n_encoder_layers=3, n_decoder_layers=1)) == 4
    assert activation_memory(make("encoder_decoder"), B, N) == 2 * 159744
    assert activation_memory(make("decoder_only"), 1, 128) == 2 * (34 * 128 * 64 + 5 * 128 * 128 * 4)


def test_summary():
    m = make("encoder_decoder")
    s = summary(m, B, N, S)
    assert s == {
        "params": param_count(m),
        "forward_flops": forward_flops(m, B, N, S)["total"],
        "flops_per_token": flops_per_token(m, N, S),
        "train_flops_per_token": train_flops_per_token(m, N, S),
        "activation_memory_bytes": activation_memory(m, B, N),
    }


def test_errors():
    with pytest.raises(TypeError, match="EncoderOnly"):
        forward_flops(nn.Linear(2, 2), 1, 1)
    with pytest.raises(ValueError, match="src_len"):
        forward_flops(make("decoder_only"), B, N, src_len=4)
    with pytest.raises(ValueError, match="seq_len"):
        forward_flops(make("decoder_only"), B, 0)
