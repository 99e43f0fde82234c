"""Positional encodings against closed forms computed with Python's math module."""

import math

import pytest
import torch

from zoo.model import DecoderOnly, ModelConfig
from zoo.model.blocks.positions import (
    ALiBi,
    LearnedPositions,
    RotaryPositions,
    SinusoidalPositions,
    alibi_slopes,
    apply_rotary,
    sinusoidal_table,
)

# ---- sinusoidal ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [8, 7, 1])
def test_sinusoidal_closed_form(d_model):
    max_len = 60
    pe = sinusoidal_table(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float32
    for pos in (0, 1, 5, 17, 59):
        for col in range(d_model):
            i = col // 2
            angle = pos / 10000 ** (2 * i / d_model)
            want = math.sin(angle) if col % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, col].item() - want) < 1e-6, (pos, col)


def test_sinusoidal_odd_last_column_is_sine():
    pe = sinusoidal_table(10, 7)
    want = [math.sin(p / 10000 ** (6 / 7)) for p in range(10)]
    assert torch.allclose(pe[:, 6], torch.tensor(want), atol=1e-6)


def test_sinusoidal_module_lookup_and_max_len():
    mod = SinusoidalPositions(6, 16)
    pos = torch.tensor([[0, 3, 15], [2, 2, 1]])
    assert torch.equal(mod(pos), sinusoidal_table(16, 6)[pos])
    assert not any(True for _ in mod.parameters())  # a buffer, not a parameter
    with pytest.raises(ValueError, match="max_len=16"):
        mod(torch.tensor([[16]]))


def test_learned_positions_lookup():
    torch.manual_seed(0)
    mod = LearnedPositions(4, 10)
    pos = torch.tensor([[0, 9, 4]])
    assert torch.equal(mod(pos), mod.weight[pos])
    with pytest.raises(ValueError, match="max_len=10"):
        mod(torch.tensor([[10]]))


# ---- RoPE ----------------------------------------------------------------------------------------------


def rotate_by_hand(x, m, base=10000.0):
    """Apply the 2x2 rotations with angles m * theta_i, theta_i = base^(-2i/d), to pairs (x_2i, x_2i+1)."""
    d = len(x)
    out = []
    for i in range(d // 2):
        a = m * base ** (-2 * i / d)
        x0, x1 = x[2 * i], x[2 * i + 1]
        out += [math.cos(a) * x0 - math.sin(a) * x1, math.sin(a) * x0 + math.cos(a) * x1]
    return out


def rope_apply(rope, x, positions):
    """x: (T, d) rotated at positions (T,) -> (T, d)."""
    cos, sin = rope(positions[None])  # (1, 1, T, d/2)
    return apply_rotary(x[None, None], cos, sin)[0, 0]


def test_rope_hand_worked_head_dim_4():
    rope = RotaryPositions(4, 64)
    x = [0.3, -1.2, 2.0, 0.7]
    for m in (0, 1, 2, 7, 50):
        got = rope_apply(rope, torch.tensor([x]), torch.tensor([m]))[0]
        assert torch.allclose(got, torch.tensor(rotate_by_hand(x, m)), atol=1e-6), m
    # m = 1, pair 0 rotates by exactly 1 radian, pair 1 by 10000^(-1/2) = 0.01 radian
    got = rope_apply(rope, torch.tensor([x]), torch.tensor([1]))[0]
    assert abs(got[0].item() - (math.cos(1) * 0.3 + math.sin(1) * 1.2)) < 1e-6
    assert abs(got[3].item() - (math.sin(0.01) * 2.0 + math.cos(0.01) * 0.7)) < 1e-6


def test_rope_tables_closed_form():
    rope = RotaryPositions(8, 32, base=500.0)
    for m in (0, 3, 31):
        for i in range(4):
            a = m * 500.0 ** (-2 * i / 8)
            assert abs(rope.cos[m, i].item() - math.cos(a)) < 1e-6
            assert abs(rope.sin[m, i].item() - math.sin(a)) < 1e-6


def test_rope_preserves_norm_and_relative_property():
    torch.manual_seed(0)
    d = 8
    rope = RotaryPositions(d, 128)
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)

    def dot(m, n):
        rq = rope_apply(rope, q.float()[None], torch.tensor([m]))[0].double()
        rk = rope_apply(rope, k.float()[None], torch.tensor([n]))[0].double()
        return (rq @ rk).item()

    for m, n in ((5, 2), (40, 37), (100, 97)):  # m - n = 3
        assert abs(dot(m, n) - dot(3, 0)) < 1e-5
    for m, n in ((9, 13), (60, 64)):  # m - n = -4
        assert abs(dot(m, n) - dot(0, 4)) < 1e-5
    assert abs(dot(7, 7) - (q @ k).item()) < 1e-5  # same position: no rotation on the product
    # a different offset changes the product (so the check above is meaningful)
    assert abs(dot(5, 2) - dot(5, 1)) > 1e-3
    # rotation keeps the norm
    x = torch.randn(10, d)
    assert torch.allclose(rope_apply(rope, x, torch.arange(10)).norm(dim=-1), x.norm(dim=-1), atol=1e-5)


def test_rope_rejects_odd_head_dim():
    with pytest.raises(ValueError, match="even"):
        RotaryPositions(3, 8)


# ---- ALiBi ---------------------------------------------------------------------------------------------


def test_alibi_slopes_8_heads():
    assert alibi_slopes(8) == pytest.approx([2**-k for k in range(1, 9)], rel=1e-12)


def test_alibi_slopes_4_heads():
    assert alibi_slopes(4) == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8], rel=1e-12)


def test_alibi_slopes_6_heads_paper_rule():
    # closest power of 2 is 4 -> its slopes, then every other slope of the 8-head sequence: 2^-1, 2^-3
    want = [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]
    assert alibi_slopes(6) == pytest.approx(want, rel=1e-12)
    assert alibi_slopes(6)[4:] == pytest.approx(alibi_slopes(8)[0::2][:2], rel=1e-12)


def test_alibi_slopes_1_and_2_heads():
    assert alibi_slopes(1) == pytest.approx([2**-8])
    assert alibi_slopes(2) == pytest.approx([2**-4, 2**-8])


def test_alibi_bias_3x3_by_hand():
    alibi = ALiBi(2, 16)  # slopes 2^-4, 2^-8
    b = alibi(3, 3)
    assert b.shape == (1, 2, 3, 3)
    s0 = 1 / 16
    want0 = [
        [0.0, s0 * 1, s0 * 2],  # -s * (i - j): i=0 -> -s*(0-1) = +s, masked anyway by causality
        [-s0, 0.0, s0],
        [-2 * s0, -s0, 0.0],
    ]
    assert torch.allclose(b[0, 0], torch.tensor(want0), atol=1e-7)
    s1 = 1 / 256
    for i in range(3):
        for j in range(3):
            assert abs(b[0, 1, i, j].item() + s1 * (i - j)) < 1e-9
    # bidirectional: -slope * |i - j|
    bb = alibi(3, 3, causal=False)
    for i in range(3):
        for j in range(3):
            assert abs(bb[0, 0, i, j].item() + s0 * abs(i - j)) < 1e-9


def test_alibi_bias_offset():
    alibi = ALiBi(4, 16)
    full = alibi(6, 6)
    assert torch.equal(alibi(2, 6, offset=4), full[:, :, 4:])
    with pytest.raises(ValueError, match="max_len=16"):
        alibi(3, 17, offset=14)


def test_alibi_prefix_lm_penalises_future_prefix_keys():
    """With mask=prefix a query sees later prefix tokens; their ALiBi bias must be a penalty -slope*|i-j|
    (a bias that grows with distance to the future would favour the farthest prefix token)."""
    cfg = ModelConfig(
        vocab_size=20,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_layers=1,
        dropout=0.0,
        position="alibi",
        mask="prefix",
        prefix_len=4,
        max_len=16,
    )
    model = DecoderOnly(cfg)
    bias = model.prepare(torch.zeros(1, 6, dtype=torch.long), model.embed, "prefix")[1].bias
    slopes = alibi_slopes(2)
    for h in range(2):
        for i in range(6):
            for j in range(6):
                assert abs(bias[0, h, i, j].item() + slopes[h] * abs(i - j)) < 1e-7, (h, i, j)
