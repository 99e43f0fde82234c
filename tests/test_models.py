"""The three architectures and their blocks: gradients, causality, attention maps, tying, init,
feed-forward / norm / residual formulas and pooling, each against a hand computation."""

import math

import pytest
import torch
import torch.nn.functional as F
from zoo_run import TINY_CONFIG, tiny_config, tokens

from zoo.model import DecoderOnly, EncoderDecoder, EncoderOnly, build_model
from zoo.model.blocks.attention import record_weights
from zoo.model.blocks.embedding import Embedding
from zoo.model.blocks.feedforward import FeedForward
from zoo.model.blocks.layer import DecoderLayer, EncoderLayer
from zoo.model.blocks.norm import RMSNorm, make_norm
from zoo.model.blocks.positions import SinusoidalPositions, sinusoidal_table
from zoo.model.blocks.residual import Residual
from zoo.model.decoding.generate import left_pad
from zoo.model.encoder_only import pool

V, D, H, FF, L = (TINY_CONFIG[k] for k in ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers"))
config = tiny_config  # ModelConfig(**TINY_CONFIG, **kw)


def other_token(t):
    return (t - 3 + 7) % (V - 3) + 3


# ---- gradients -------------------------------------------------------------------------------------------

GRAD_CASES = [
    dict(),
    dict(tie_embeddings=False),
    dict(norm_first=True, activation="swiglu", norm="rmsnorm", position="learned", tie_embeddings=False),
    dict(norm_first=True, activation="geglu", position="rope", n_kv_heads=2, init="gpt2"),
    dict(position="alibi", n_kv_heads=1, bias=False, activation="gelu"),
]


def assert_all_grads(model):
    names = [n for n, _ in model.named_parameters()]
    assert names
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert bool(torch.isfinite(p.grad).all()), name
        assert p.grad.norm() > 0, name


@pytest.mark.parametrize("kw", GRAD_CASES)
def test_every_parameter_gets_gradient_encoder_only(kw):
    torch.manual_seed(0)
    model = EncoderOnly(config(num_classes=3, **kw))
    idx = tokens(3, 8)
    kpm = torch.zeros(3, 8, dtype=torch.bool)
    kpm[1, 6:] = True
    lm = F.cross_entropy(model(idx, key_padding_mask=kpm).view(-1, V), tokens(3, 8, seed=2).view(-1))
    cls = F.cross_entropy(model.classify(idx, key_padding_mask=kpm), torch.tensor([0, 1, 2]))
    (lm + cls).backward()
    assert_all_grads(model)


@pytest.mark.parametrize("kw", GRAD_CASES)
def test_every_parameter_gets_gradient_decoder_only(kw):
    torch.manual_seed(0)
    model = DecoderOnly(config(**kw))
    idx = tokens(2, 9)
    F.cross_entropy(model(idx[:, :-1]).reshape(-1, V), idx[:, 1:].reshape(-1)).backward()
    assert_all_grads(model)


@pytest.mark.parametrize(
    "kw", GRAD_CASES + [dict(share_embeddings=True), dict(share_embeddings=True, tie_embeddings=False)]
)
def test_every_parameter_gets_gradient_encoder_decoder(kw):
    torch.manual_seed(0)
    model = EncoderDecoder(config(**kw))
    src, tgt = tokens(2, 7, seed=3), tokens(2, 9, seed=4)
    src_pad = torch.tensor([[False] * 7, [False] * 5 + [True] * 2])
    logits = model(src, tgt[:, :-1], src_key_padding_mask=src_pad)
    F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1)).backward()
    assert_all_grads(model)


def test_build_model_dispatch():
    cfg = config()
    assert type(build_model("encoder_only", cfg)) is EncoderOnly
    assert type(build_model("decoder_only", cfg)) is DecoderOnly
    assert type(build_model("encoder_decoder", cfg)) is EncoderDecoder


# ---- causality and prefix LM --------------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["sinusoidal", "learned", "rope", "alibi", "none"])
def test_decoder_only_is_causal(position):
    torch.manual_seed(0)
    model = DecoderOnly(config(position=position)).eval()
    idx = tokens(2, 10)
    t = 4
    idx2 = idx.clone()
    idx2[:, t + 1 :] = other_token(idx2[:, t + 1 :])
    with torch.no_grad():
        a, b = model(idx), model(idx2)
    assert (a[:, : t + 1] - b[:, : t + 1]).abs().max() <= 1e-6
    assert (a[:, t + 1 :] - b[:, t + 1 :]).abs().max() > 1e-3


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi"])
def test_encoder_only_is_bidirectional(position):
    torch.manual_seed(0)
    model = EncoderOnly(config(position=position)).eval()
    idx = tokens(2, 10)
    idx2 = idx.clone()
    idx2[:, 8] = other_token(idx2[:, 8])
    with torch.no_grad():
        a, b = model(idx), model(idx2)
    assert (a[:, 2] - b[:, 2]).abs().min() > 0  # an earlier position sees the later change
    assert (a[:, 2] - b[:, 2]).abs().max() > 1e-3


@pytest.mark.parametrize("position", ["rope", "alibi", "learned"])
def test_prefix_lm_dependencies(position):
    torch.manual_seed(0)
    P, T = 4, 9
    model = DecoderOnly(config(position=position, mask="prefix", prefix_len=P)).eval()
    idx = tokens(2, T)
    with torch.no_grad():
        base = model(idx)
        inside = idx.clone()
        inside[:, P - 1] = other_token(inside[:, P - 1])  # last prefix token
        a = model(inside)
        after = idx.clone()
        after[:, 6] = other_token(after[:, 6])  # a token beyond the prefix
        b = model(after)
    for t in range(P - 1):  # earlier prefix positions see the later prefix token
        assert (a[:, t] - base[:, t]).abs().max() > 1e-3, t
    assert (b[:, :6] - base[:, :6]).abs().max() <= 1e-6  # nothing before it sees it
    assert (b[:, 6:] - base[:, 6:]).abs().max() > 1e-3


# ---- padding is invisible ----------------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_encoder_only_right_padding_invisible(position):
    torch.manual_seed(0)
    model = EncoderOnly(config(position=position)).eval()
    idx = tokens(2, 8)
    kpm = torch.zeros(2, 8, dtype=torch.bool)
    kpm[1, 5:] = True
    with torch.no_grad():
        full = model(idx, key_padding_mask=kpm)
        alone = model(idx[1:, :5])
    assert (full[1, :5] - alone[0]).abs().max() <= 1e-5


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi"])
def test_encoder_decoder_source_padding_invisible(position):
    torch.manual_seed(0)
    model = EncoderDecoder(config(position=position)).eval()
    src, tgt = tokens(2, 7, seed=3), tokens(2, 5, seed=4)
    src_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    with torch.no_grad():
        full = model(src, tgt, src_key_padding_mask=src_pad)
        alone = model(src[1:, :4], tgt[1:])
    assert (full[1] - alone[0]).abs().max() <= 1e-5


# ---- return_attention ----------------------------------------------------------------------------------------


def check_weights(w, shape, causal=False, pad=None):
    """w (B, h, T_q, T_k): shape, rows sum to 1, zero above the diagonal when causal, zero on pad keys."""
    assert w.shape == shape
    assert bool((w >= 0).all())
    assert torch.allclose(w.sum(-1), torch.ones(shape[:3]), atol=1e-5)
    if causal:
        above = torch.ones(shape[2], shape[3], dtype=torch.bool).triu(1)
        assert bool((w[..., above] == 0).all())
    if pad is not None:
        assert bool((w.masked_select(pad[:, None, None, :]) == 0).all())


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi"])
def test_return_attention_decoder_only(position):
    torch.manual_seed(0)
    model = DecoderOnly(config(position=position)).eval()
    idx = tokens(2, 8)
    with torch.no_grad():
        logits, attn = model(idx, return_attention=True)
        plain = model(idx)
    assert (logits - plain).abs().max() <= 1e-5
    assert len(attn) == L
    for self_w, cross_w in attn:
        assert cross_w is None
        check_weights(self_w, (2, H, 8, 8), causal=True)


@pytest.mark.parametrize("position", ["sinusoidal", "alibi"])
def test_return_attention_encoder_only(position):
    torch.manual_seed(0)
    model = EncoderOnly(config(position=position)).eval()
    idx = tokens(2, 8)
    kpm = torch.zeros(2, 8, dtype=torch.bool)
    kpm[0, 6:] = True
    with torch.no_grad():
        logits, attn = model(idx, key_padding_mask=kpm, return_attention=True)
        plain = model(idx, key_padding_mask=kpm)
    assert (logits - plain).abs().max() <= 1e-5
    assert len(attn) == L
    for w in attn:
        check_weights(w, (2, H, 8, 8), pad=kpm)
        assert bool((w[1] > 0).all())  # bidirectional, no padding in row 1: every weight positive


def test_return_attention_encoder_decoder():
    torch.manual_seed(0)
    model = EncoderDecoder(config(position="rope", n_kv_heads=2)).eval()
    src, tgt = tokens(2, 7, seed=3), tokens(2, 5, seed=4)
    src_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    with torch.no_grad():
        logits, attn = model(src, tgt, src_key_padding_mask=src_pad, return_attention=True)
        plain = model(src, tgt, src_key_padding_mask=src_pad)
    assert (logits - plain).abs().max() <= 1e-5
    assert len(attn["encoder"]) == L and len(attn["decoder"]) == L
    for w in attn["encoder"]:
        check_weights(w, (2, H, 7, 7), pad=src_pad)
    for self_w, cross_w in attn["decoder"]:
        check_weights(self_w, (2, H, 5, 5), causal=True)
        check_weights(cross_w, (2, H, 5, 7), pad=src_pad)


def test_return_attention_left_padded_decoder_only():
    """Left padding: pad query rows see nothing (all-zero weights), real rows sum to 1 and skip pad keys."""
    torch.manual_seed(0)
    model = DecoderOnly(config(position="rope")).eval()
    idx, kpm = left_pad([[5, 6, 7, 8, 9], [10, 11]], pad_id=0)
    with torch.no_grad():
        logits, attn = model(idx, key_padding_mask=kpm, return_attention=True)
        plain = model(idx, key_padding_mask=kpm)
    real = ~kpm
    assert (logits[real] - plain[real]).abs().max() <= 1e-5
    for w, _ in attn:
        assert bool((w[1, :, :3] == 0).all())  # the three pad rows of row 1
        assert torch.allclose(w[1, :, 3:].sum(-1), torch.ones(H, 2), atol=1e-5)
        assert bool((w[1, :, :, :3] == 0).all())  # no query attends to a pad key


def test_record_weights_scope_and_checkpointing():
    """record_weights: inside, every attention module keeps its last weights (attend's own need_weights
    result); outside, none is kept and a nested block restores the outer one's. In training with activation
    checkpointing, return_attention gives the plain model's loss and gradients (dropout on) and the same maps."""
    torch.manual_seed(0)
    model = DecoderOnly(config(dropout=0.1)).eval()
    idx = tokens(2, 8)
    mha = model.decoder.layers[0].self_attn
    with torch.no_grad(), record_weights(model) as mods:
        assert len(mods) == L and all(m.record_weights for m in mods)
        model(idx)
        outer = mha.attn_weights
        with record_weights(mha):
            model(idx[:, :5])
            assert mha.attn_weights.shape == (2, H, 5, 5)
        assert mha.record_weights and mha.attn_weights is outer and outer.shape == (2, H, 8, 8)
    assert not mha.record_weights and mha.attn_weights is None
    with torch.no_grad():
        model(idx)
    assert mha.attn_weights is None

    ckpt = DecoderOnly(config(dropout=0.1, activation_checkpointing=True))
    ckpt.load_state_dict(model.state_dict())
    results = []
    for m in (model.train(), ckpt.train()):
        torch.manual_seed(1)
        logits, attn = m(idx, return_attention=True)
        logits.square().mean().backward()
        results.append((logits.detach(), [w for w, _ in attn], {n: p.grad for n, p in m.named_parameters()}))
    (la, wa, ga), (lb, wb, gb) = results
    assert torch.equal(la, lb) and all(torch.equal(a, b) for a, b in zip(wa, wb))
    for n in ga:
        torch.testing.assert_close(gb[n], ga[n], rtol=0, atol=1e-7, msg=n)


def test_layer_parameter_order():
    """Optimizer states in checkpoints index parameters by order: EncoderLayer keeps self-attention,
    feed-forward, then its norms; DecoderLayer each norm after its sublayer."""

    def parts(layer):
        return list(dict.fromkeys(n.split(".")[0] for n, _ in layer.named_parameters()))

    assert parts(EncoderLayer(config())) == ["self_attn", "ffn", "self_attn_sub", "ffn_sub"]
    cross = ["self_attn", "self_attn_sub", "cross_attn", "cross_attn_sub", "ffn", "ffn_sub"]
    assert parts(DecoderLayer(config())) == cross
    assert parts(DecoderLayer(config(), cross_attention=False)) == ["self_attn", "self_attn_sub", "ffn", "ffn_sub"]


# ---- tying and parameter counts -------------------------------------------------------------------------------


def expected_params(cfg, arch):
    """Parameter count by hand (layernorm, biases, absolute positions none / sinusoidal)."""
    d, f, kv = cfg.d_model, cfg.d_ff, cfg.kv_heads * cfg.head_dim
    norm = 2 * d
    attn_self = d * (d + 2 * kv) + (d + 2 * kv) + d * d + d
    attn_cross = d * d + d + d * 2 * kv + 2 * kv + d * d + d
    f1 = 2 * f if cfg.activation in ("swiglu", "geglu") else f
    ffn = d * f1 + f1 + f * d + d
    final = norm if cfg.use_final_norm else 0
    head = 0 if cfg.tie_embeddings else cfg.vocab_size * d
    emb = cfg.vocab_size * d
    if arch == "decoder_only":
        return emb + L * (attn_self + ffn + 2 * norm) + final + head
    if arch == "encoder_only":
        return emb + L * (attn_self + ffn + 2 * norm) + final + head + d * cfg.num_classes + cfg.num_classes
    src = 0 if cfg.share_embeddings else emb
    return (
        emb
        + src
        + L * (attn_self + ffn + 2 * norm)
        + final
        + L * (attn_self + attn_cross + ffn + 3 * norm)
        + final
        + head
    )


@pytest.mark.parametrize("arch", ["encoder_only", "decoder_only", "encoder_decoder"])
@pytest.mark.parametrize("tie", [True, False])
def test_tied_embeddings_and_num_params(arch, tie):
    cfg = config(tie_embeddings=tie, n_kv_heads=2, activation="swiglu", norm_first=True)
    model = build_model(arch, cfg)
    tok = (model.tgt_embed if arch == "encoder_decoder" else model.embed).tok.weight
    assert (model.lm_head.weight is tok) == tie
    unique = {id(p): p for p in model.parameters()}
    assert model.num_params() == sum(p.numel() for p in unique.values())
    assert model.num_params() == expected_params(cfg, arch)


def test_tied_embedding_is_one_tensor_in_training():
    torch.manual_seed(0)
    model = DecoderOnly(config(tie_embeddings=True))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    idx = tokens(2, 6)
    F.cross_entropy(model(idx).view(-1, V), idx.view(-1)).backward()
    opt.step()
    assert model.lm_head.weight is model.embed.tok.weight
    assert model.lm_head.weight.data_ptr() == model.embed.tok.weight.data_ptr()


@pytest.mark.parametrize("tie", [True, False])
def test_share_embeddings_encoder_decoder(tie):
    cfg = config(share_embeddings=True, tie_embeddings=tie)
    model = EncoderDecoder(cfg)
    assert model.src_embed is model.tgt_embed
    assert (model.lm_head.weight is model.src_embed.tok.weight) == tie
    assert model.num_params() == expected_params(cfg, "encoder_decoder")
    unshared = EncoderDecoder(config(tie_embeddings=tie))
    assert unshared.src_embed is not unshared.tgt_embed
    assert unshared.num_params() - model.num_params() == V * D


# ---- initialisation ---------------------------------------------------------------------------------------------


def test_xavier_init_every_matrix():
    torch.manual_seed(0)
    cfg = config(d_model=256, n_heads=4, d_ff=512, position="sinusoidal", tie_embeddings=False, init="xavier")
    model = DecoderOnly(cfg)
    n = 0
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        fan_out, fan_in = p.shape
        want = math.sqrt(2.0 / (fan_in + fan_out))
        assert abs(p.std().item() / want - 1) < 0.05, (name, p.std().item(), want)
        assert p.abs().max().item() <= math.sqrt(6.0 / (fan_in + fan_out)) + 1e-7, name  # uniform bound
        n += 1
    assert n == 1 + L * 4 + 1  # embedding, per layer qkv / out / linear1 / linear2, lm_head
    # norms keep PyTorch's defaults
    ln = model.decoder.layers[0].ffn_sub.norm
    assert torch.equal(ln.weight, torch.ones(256)) and torch.equal(ln.bias, torch.zeros(256))


@pytest.mark.parametrize("arch", ["decoder_only", "encoder_decoder"])
def test_gpt2_init(arch):
    torch.manual_seed(0)
    cfg = config(d_model=256, n_heads=4, d_ff=512, position="learned", tie_embeddings=False, init="gpt2")
    model = build_model(arch, cfg)
    n_layers = 2 * L if arch == "encoder_decoder" else L
    residual_std = 0.02 / math.sqrt(2 * n_layers)
    n_res = 0
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            residual = name.endswith("out_proj.weight") or name.endswith("linear2.weight")
            want = residual_std if residual else 0.02
            n_res += residual
            assert abs(p.std().item() / want - 1) < 0.05, (name, p.std().item(), want)
            assert abs(p.mean().item()) < 0.1 * want, name
        elif "norm" in name:
            assert torch.equal(p, torch.ones_like(p) if name.endswith("weight") else torch.zeros_like(p)), name
        else:
            assert bool((p == 0).all()), name  # Linear biases
    # residual projections: out_proj + linear2 per layer (+ cross out_proj per decoder layer)
    assert n_res == (2 * L + 3 * L if arch == "encoder_decoder" else 2 * L)


# ---- blocks against hand formulas ---------------------------------------------------------------------------------


def silu(x):
    return x / (1 + torch.exp(-x))


def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("activation,act", [("swiglu", silu), ("geglu", gelu)])
def test_feedforward_gated(activation, act):
    torch.manual_seed(0)
    ff = FeedForward(8, 12, activation)
    assert ff.linear1.weight.shape == (24, 8)
    x = torch.randn(2, 3, 8)
    W, b = ff.linear1.weight, ff.linear1.bias
    gate = x @ W[:12].T + b[:12]
    up = x @ W[12:].T + b[12:]
    want = (act(gate) * up) @ ff.linear2.weight.T + ff.linear2.bias
    assert (ff(x) - want).abs().max() < 1e-6


@pytest.mark.parametrize("activation,act", [("relu", lambda h: h.clamp(min=0)), ("gelu", gelu)])
def test_feedforward_plain(activation, act):
    torch.manual_seed(0)
    ff = FeedForward(8, 12, activation, bias=False)
    assert ff.linear1.bias is None
    x = torch.randn(2, 3, 8)
    want = act(x @ ff.linear1.weight.T) @ ff.linear2.weight.T
    assert (ff(x) - want).abs().max() < 1e-6


def test_rmsnorm_formula():
    torch.manual_seed(0)
    n = RMSNorm(6, eps=1e-3)
    with torch.no_grad():
        n.weight.copy_(torch.randn(6))
    x = torch.randn(4, 6) * 0.1  # small enough for eps to matter
    want = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-3) * n.weight
    assert (n(x) - want).abs().max() < 1e-6
    assert isinstance(make_norm("rmsnorm", 6), RMSNorm)
    ln = make_norm("layernorm", 6, bias=False)
    assert ln.bias is None and abs(ln.eps - 1e-5) < 1e-12


def test_residual_post_ln_and_pre_ln():
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(5))
        norm.bias.copy_(torch.randn(5))
    x = torch.randn(3, 5)

    def f(h):
        return 2 * h + 1, "extra"

    def ln(h):
        return (h - h.mean(-1, keepdim=True)) / torch.sqrt(
            h.var(-1, unbiased=False, keepdim=True) + 1e-5
        ) * norm.weight + norm.bias

    post, extra = Residual(norm, 0.0, norm_first=False)(x, f)
    assert extra == "extra"
    assert (post - ln(x + 2 * x + 1)).abs().max() < 1e-5
    pre, _ = Residual(norm, 0.0, norm_first=True)(x, lambda h: 2 * h + 1)
    assert (pre - (x + 2 * ln(x) + 1)).abs().max() < 1e-5
    assert (pre - post).abs().max() > 0.1


def test_embedding_scale_and_positions():
    torch.manual_seed(0)
    emb = Embedding(V, 16, SinusoidalPositions(16, 20), scale=True)
    idx = tokens(2, 5)
    pos = torch.arange(5).expand(2, 5)
    want = emb.tok.weight[idx] * 4.0 + sinusoidal_table(20, 16)[:5]
    assert (emb(idx, pos) - want).abs().max() < 1e-6
    plain = Embedding(V, 16, None, scale=False)
    assert torch.equal(plain(idx, pos), plain.tok.weight[idx])


# ---- pooling ------------------------------------------------------------------------------------------------------


def test_pooling_against_manual():
    torch.manual_seed(0)
    h = torch.randn(3, 5, 4)
    kpm = torch.tensor(
        [[False, False, False, True, True], [False, False, False, False, False], [False, True, True, True, True]]
    )
    assert torch.equal(pool(h, kpm, "cls"), h[:, 0])
    mean = torch.stack([h[0, :3].mean(0), h[1].mean(0), h[2, :1].mean(0)])
    assert (pool(h, kpm, "mean") - mean).abs().max() < 1e-6
    last = torch.stack([h[0, 2], h[1, 4], h[2, 0]])
    assert torch.equal(pool(h, kpm, "last"), last)
    assert (pool(h, None, "mean") - h.mean(1)).abs().max() < 1e-6
    assert torch.equal(pool(h, None, "last"), h[:, -1])


@pytest.mark.parametrize("pooling", ["cls", "mean", "last"])
def test_classify_uses_pooling(pooling):
    torch.manual_seed(0)
    model = EncoderOnly(config(pooling=pooling, num_classes=3)).eval()
    idx = tokens(2, 6)
    kpm = torch.zeros(2, 6, dtype=torch.bool)
    kpm[0, 4:] = True
    with torch.no_grad():
        h = model.encode(idx, kpm)
        got = model.classify(idx, kpm)
    manual = {
        "cls": h[:, 0],
        "mean": torch.stack([h[0, :4].mean(0), h[1].mean(0)]),
        "last": torch.stack([h[0, 3], h[1, 5]]),
    }[pooling]
    assert got.shape == (2, 3)
    assert (got - (manual @ model.classifier.weight.T + model.classifier.bias)).abs().max() < 1e-5
