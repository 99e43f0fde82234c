"""zoo.model.blocks.masks (True = may attend) against masks built by explicit Python loops over (i, j)."""

import pytest
import torch

from zoo.model.blocks import masks


def loop_mask(T_q, T_k, rule):
    """(T_q, T_k) bool with m[i, j] = rule(i, j), built one entry at a time."""
    return torch.tensor([[bool(rule(i, j)) for j in range(T_k)] for i in range(T_q)], dtype=torch.bool)


def loop_batched(B, T_q, T_k, rule):
    """(B, 1, T_q, T_k) bool with m[b, 0, i, j] = rule(b, i, j)."""
    return torch.tensor(
        [[[[bool(rule(b, i, j)) for j in range(T_k)] for i in range(T_q)]] for b in range(B)], dtype=torch.bool
    )


KPM = torch.tensor(
    [
        [False, False, False, False, False, True, True],  # right padding
        [True, True, False, False, False, False, False],  # left padding
        [False, False, False, False, False, False, False],
    ]
)  # none


def test_causal_square():
    T = 6
    assert torch.equal(masks.causal(T), loop_mask(T, T, lambda i, j: j <= i))


@pytest.mark.parametrize("offset,T_q", [(0, 4), (3, 1), (3, 4), (5, 2)])
def test_causal_offset_bottom_right(offset, T_q):
    """A query block starting at offset k: query i sees keys 0..k+i."""
    T_k = offset + T_q
    expected = loop_mask(T_q, T_k, lambda i, j: j <= offset + i)
    assert torch.equal(masks.causal(T_q, offset=offset), expected)
    assert torch.equal(masks.causal(T_q, T_k, offset=offset), expected)
    # the last query row of a block always sees every key
    assert bool(masks.causal(T_q, offset=offset)[-1].all())


def test_bidirectional():
    assert torch.equal(masks.bidirectional(3, 5), loop_mask(3, 5, lambda i, j: True))


def test_padding_convention_and_shape():
    m = masks.padding(KPM)
    assert m.shape == (3, 1, 1, 7)
    expected = loop_batched(3, 1, 7, lambda b, i, j: not bool(KPM[b, j]))
    assert torch.equal(m, expected)


def test_padding_rejects_non_bool():
    with pytest.raises(ValueError, match="bool"):
        masks.padding(KPM.long())


@pytest.mark.parametrize("P", [0, 1, 3, 6])
def test_prefix_lm_int(P):
    T = 6
    expected = loop_mask(T, T, lambda i, j: j < P or j <= i)
    assert torch.equal(masks.prefix_lm(T, prefix_len=P), expected)


def test_prefix_lm_with_offset():
    T_q, offset, P = 2, 4, 3
    expected = loop_mask(T_q, offset + T_q, lambda i, j: j < P or j <= offset + i)
    assert torch.equal(masks.prefix_lm(T_q, prefix_len=P, offset=offset), expected)


def test_prefix_lm_per_row_tensor():
    T, P = 5, [0, 2, 5]
    m = masks.prefix_lm(T, prefix_len=torch.tensor(P))
    assert m.shape == (3, 1, T, T)
    assert torch.equal(m, loop_batched(3, T, T, lambda b, i, j: j < P[b] or j <= i))


@pytest.mark.parametrize("W", [1, 2, 3, 10])
def test_sliding_window(W):
    T = 7
    expected = loop_mask(T, T, lambda i, j: i - W < j <= i)
    m = masks.sliding_window(T, window=W)
    assert torch.equal(m, expected)
    # each row sees exactly min(i + 1, W) keys
    assert m.sum(1).tolist() == [min(i + 1, W) for i in range(T)]


def test_sliding_window_offset():
    T_q, offset, W = 3, 5, 3
    expected = loop_mask(T_q, offset + T_q, lambda i, j: offset + i - W < j <= offset + i)
    assert torch.equal(masks.sliding_window(T_q, window=W, offset=offset), expected)


def test_combine_causal_and_padding():
    T = 7
    m = masks.combine(masks.causal(T), masks.padding(KPM))
    assert m.shape == (3, 1, T, T)
    assert torch.equal(m, loop_batched(3, T, T, lambda b, i, j: j <= i and not bool(KPM[b, j])))


def test_combine_prefix_and_padding():
    T, P = 7, 3
    m = masks.combine(masks.prefix_lm(T, prefix_len=P), masks.padding(KPM))
    assert torch.equal(m, loop_batched(3, T, T, lambda b, i, j: (j < P or j <= i) and not bool(KPM[b, j])))


def test_combine_none():
    c = masks.causal(4)
    assert masks.combine(None, None) is None
    assert masks.combine(None, c, None) is c


# ---- masks.build ---------------------------------------------------------------------------------------


def test_build_causal_fast_path():
    m, is_causal = masks.build("causal", 8, 8)
    assert m is None and is_causal is True


def test_build_causal_single_query_without_padding():
    m, is_causal = masks.build("causal", 1, 9, offset=8)
    assert m is None and is_causal is False


def test_build_causal_explicit_when_needed():
    m, is_causal = masks.build("causal", 5, 5, need_explicit=True)
    assert is_causal is False
    assert torch.equal(m, loop_mask(5, 5, lambda i, j: j <= i))


def test_build_causal_block_with_offset():
    m, is_causal = masks.build("causal", 3, 7, offset=4)
    assert is_causal is False
    assert torch.equal(m, loop_mask(3, 7, lambda i, j: j <= 4 + i))


def test_build_causal_with_padding():
    m, is_causal = masks.build("causal", 7, 7, key_padding_mask=KPM)
    assert is_causal is False
    assert torch.equal(m.expand(3, 1, 7, 7), loop_batched(3, 7, 7, lambda b, i, j: j <= i and not bool(KPM[b, j])))


def test_build_causal_single_query_with_padding():
    m, is_causal = masks.build("causal", 1, 7, offset=6, key_padding_mask=KPM)
    assert is_causal is False
    assert torch.equal(m.expand(3, 1, 1, 7), loop_batched(3, 1, 7, lambda b, i, j: not bool(KPM[b, j])))


def test_build_bidirectional():
    assert masks.build("bidirectional", 4, 4) == (None, False)
    m, is_causal = masks.build("bidirectional", 4, 4, need_explicit=True)
    assert not is_causal and torch.equal(m, loop_mask(4, 4, lambda i, j: True))
    m, is_causal = masks.build("bidirectional", 7, 7, key_padding_mask=KPM)
    assert not is_causal
    assert torch.equal(m.expand(3, 1, 7, 7), loop_batched(3, 7, 7, lambda b, i, j: not bool(KPM[b, j])))


def test_build_prefix_and_sliding():
    m, _ = masks.build("prefix", 7, 7, key_padding_mask=KPM, prefix_len=2)
    assert torch.equal(
        m.expand(3, 1, 7, 7), loop_batched(3, 7, 7, lambda b, i, j: (j < 2 or j <= i) and not bool(KPM[b, j]))
    )
    P = [1, 4, 0]
    m, _ = masks.build("prefix", 7, 7, prefix_len=torch.tensor(P))
    assert torch.equal(m, loop_batched(3, 7, 7, lambda b, i, j: j < P[b] or j <= i))
    m, _ = masks.build("sliding", 2, 7, offset=5, window=3)
    assert torch.equal(m, loop_mask(2, 7, lambda i, j: 5 + i - 3 < j <= 5 + i))


def test_build_unknown_kind():
    with pytest.raises(ValueError, match="mask='diagonal'"):
        masks.build("diagonal", 3, 3)
