"""The block options the Hugging Face families need (zoo.model): each one's math, and defaults unchanged."""

import math

import pytest
import torch
import torch.nn.functional as F

from zoo.model import DecoderOnly, EncoderDecoder, EncoderOnly, ModelConfig, build_model
from zoo.model.blocks.embedding import Embedding
from zoo.model.blocks.feedforward import FeedForward
from zoo.model.blocks.heads import LMHead, make_lm_head
from zoo.model.blocks.positions import LearnedPositions, RelativePositionBias, sinusoidal_table, t5_buckets
from zoo.model.blocks.scaled_dot_product import attend

SMALL = dict(vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0, max_len=32)


def test_defaults_build_the_same_modules_and_weights():
    cfg = ModelConfig(**SMALL)
    for arch in ("encoder_only", "decoder_only", "encoder_decoder"):
        torch.manual_seed(0)
        m = build_model(arch, cfg)
        assert type(m.lm_head) is torch.nn.Linear and m.lm_head.bias is None
        assert not any(k.split(".")[-2] in ("types", "rel_bias") for k in m.state_dict())
    emb = Embedding(40, 16)
    assert emb.norm is None and emb.types is None


@pytest.mark.parametrize(
    "act, fn",
    [
        ("gelu_tanh", lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))),
        ("silu", lambda x: x * torch.sigmoid(x)),
    ],
)
def test_ungated_activations(act, fn):
    torch.manual_seed(0)
    ff = FeedForward(8, 16, act)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ff(x), ff.linear2(fn(ff.linear1(x))), atol=1e-6, rtol=1e-6)


def test_geglu_tanh_is_gated_with_the_tanh_gelu():
    torch.manual_seed(0)
    ff = FeedForward(8, 16, "geglu_tanh")
    assert ff.linear1.out_features == 32
    x = torch.randn(2, 3, 8)
    gate, up = ff.linear1(x).chunk(2, -1)
    torch.testing.assert_close(ff(x), ff.linear2(F.gelu(gate, approximate="tanh") * up))


def test_attention_scale():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 2, 5, 4).unbind(0)
    out, w = attend(q, k, v, scale=1.0, need_weights=True)
    torch.testing.assert_close(w, (q @ k.transpose(-1, -2)).softmax(-1))
    torch.testing.assert_close(attend(q, k, v, scale=1.0)[0], out, atol=1e-6, rtol=1e-6)
    plain, _ = attend(q, k, v)
    torch.testing.assert_close(attend(q, k, v, scale=0.5)[0], plain)  # 1/sqrt(4) = the default
    m = DecoderOnly(ModelConfig(**SMALL, attn_scale=1.0))
    assert m.decoder.layers[0].self_attn.scale == 1.0
    with pytest.raises(ValueError, match="attn_scale"):
        ModelConfig(**SMALL, attn_scale=0.0)


def test_split_sinusoidal_layout_is_the_interleaved_table_permuted():
    inter, split = sinusoidal_table(10, 8), sinusoidal_table(10, 8, "split")
    torch.testing.assert_close(split, torch.cat([inter[:, 0::2], inter[:, 1::2]], 1))
    odd = sinusoidal_table(10, 7, "split")
    torch.testing.assert_close(odd[:, :4], sinusoidal_table(10, 7)[:, 0::2])
    with pytest.raises(ValueError, match="sinusoidal_layout"):
        ModelConfig(**SMALL, sinusoidal_layout="zigzag")


def test_learned_position_offset():
    pos = LearnedPositions(4, 10, offset=2)
    assert pos.weight.shape == (12, 4)
    p = torch.tensor([[0, 1, 9]])
    assert torch.equal(pos(p), pos.weight[p + 2])
    with pytest.raises(ValueError, match="max_len"):
        pos(torch.tensor([[10]]))


def test_embedding_norm_and_token_types():
    torch.manual_seed(0)
    m = EncoderOnly(
        ModelConfig(**SMALL, position="learned", embed_norm=True, type_vocab_size=2, scale_embeddings=False)
    )
    e = m.embed
    idx = torch.randint(0, 40, (2, 5))
    pos = torch.arange(5).unsqueeze(0)
    want = F.layer_norm(e.tok(idx) + e.types.weight[0] + e.pos(pos), (16,), e.norm.weight, e.norm.bias, 1e-5)
    torch.testing.assert_close(e(idx, pos), want)


def test_lm_head_options():
    torch.manual_seed(0)
    cfg = ModelConfig(**SMALL, activation="gelu", lm_head_transform=True, lm_head_bias=True, lm_head_scale=True)
    head = make_lm_head(cfg, 40)
    assert isinstance(head, LMHead) and isinstance(head, torch.nn.Linear)
    x = torch.randn(2, 3, 16)
    h = F.layer_norm(F.gelu(head.dense(x)), (16,), head.norm.weight, head.norm.bias, 1e-5) * 16**-0.5
    torch.testing.assert_close(head(x), h @ head.weight.T + head.bias)
    m = EncoderOnly(cfg)
    assert m.lm_head.weight is m.embed.tok.weight  # still tied
    with pytest.raises(ValueError, match="gated"):
        make_lm_head(ModelConfig(**SMALL, activation="swiglu", lm_head_transform=True), 40)


def test_share_tokens_and_decoder_start():
    m = EncoderDecoder(ModelConfig(**SMALL, share_tokens=True, position="learned", decoder_start_id=5))
    assert m.src_embed is not m.tgt_embed and m.src_embed.tok.weight is m.tgt_embed.tok.weight
    assert m.src_embed.pos.weight is not m.tgt_embed.pos.weight
    out = m.eval().generate(torch.randint(3, 40, (2, 4)), 3)
    assert (out[:, 0] == 5).all()
    with pytest.raises(ValueError, match="share_tokens"):
        ModelConfig(**SMALL, share_tokens=True, src_vocab_size=30)
    with pytest.raises(ValueError, match="decoder_start_id"):
        ModelConfig(**SMALL, decoder_start_id=40)


def test_t5_buckets():
    rel = torch.arange(-200, 201).unsqueeze(0)
    b = t5_buckets(rel, True, 32, 128)[0]
    assert b[200].item() == 0 and b[201].item() == 16 + 1 and b[199].item() == 1  # 0, +1, -1
    assert b.max().item() == 31 and b.min().item() == 0
    assert b[200 + 128 :].eq(31).all() and b[: 200 - 127].eq(15).all()  # beyond max_distance: the last bucket
    c = t5_buckets(rel, False, 32, 128)[0]
    assert c[200:].eq(0).all() and c[199].item() == 1 and c.max().item() == 31  # causal: later keys share bucket 0


def test_t5_relative_bias_in_every_architecture_and_with_the_cache():
    torch.manual_seed(0)
    for arch in ("encoder_only", "decoder_only", "encoder_decoder"):
        m = build_model(arch, ModelConfig(**SMALL, position="t5_relative", rel_buckets=8, rel_max_distance=16)).eval()
        stacks = [s for s in ("encoder", "decoder") if hasattr(m, s)]
        assert all(getattr(m, s).rel_bias.weight.shape == (8, 2) for s in stacks)
        if arch == "encoder_decoder":
            assert m.encoder.rel_bias.bidirectional and not m.decoder.rel_bias.bidirectional
    m = DecoderOnly(ModelConfig(**SMALL, position="t5_relative", rel_buckets=8, rel_max_distance=16)).eval()
    idx = torch.randint(0, 40, (2, 9))
    full = m(idx)
    cache = m.new_cache(2, 9)
    steps = [m(idx[:, :5], cache=cache)] + [m(idx[:, t : t + 1], cache=cache) for t in range(5, 9)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    rb = RelativePositionBias(2, 8, 16, bidirectional=True)
    assert rb(3, 5, 2).shape == (1, 2, 3, 5)
