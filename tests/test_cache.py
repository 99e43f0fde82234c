"""Cached incremental decoding gives the logits of a full forward pass, and generate() with and without
the cache gives the same tokens."""

import pytest
import torch
from zoo_run import TINY_CONFIG, tiny_config, tokens

from zoo.model import DecoderOnly, EncoderDecoder
from zoo.model.blocks.kv_cache import KVCache
from zoo.model.decoding.generate import left_pad

POSITIONS = ["sinusoidal", "learned", "rope", "alibi", "none"]
TOL = 1e-5
V = TINY_CONFIG["vocab_size"]


def config(position="rope", **kw):
    return tiny_config(position=position, **kw)


def decoder_only(position="rope", seed=0, **kw):
    torch.manual_seed(seed)
    return DecoderOnly(config(position, **kw)).eval()


def encoder_decoder(position="rope", seed=0, **kw):
    torch.manual_seed(seed)
    return EncoderDecoder(config(position, **kw)).eval()


def cached_logits(model, idx, chunks, key_padding_mask=None, prefix_len=None):
    """Feed idx (B, T) to model with a cache, in chunks of the given sizes; return the (B, T, V) logits."""
    B, T = idx.shape
    assert sum(chunks) == T
    cache = model.new_cache(B, T)
    out, t = [], 0
    for n in chunks:
        kpm = key_padding_mask[:, : t + n] if key_padding_mask is not None else None
        out.append(model(idx[:, t : t + n], key_padding_mask=kpm, cache=cache, prefix_len=prefix_len))
        t += n
        assert cache.offset == t
    return torch.cat(out, dim=1)


# ---- DecoderOnly -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", POSITIONS)
def test_decoder_only_prompt_then_one_token_at_a_time(position):
    model = decoder_only(position)
    idx = tokens(2, 10)
    with torch.no_grad():
        full = model(idx)
        cached = cached_logits(model, idx, [4] + [1] * 6)
    assert (cached - full).abs().max() <= TOL
    # the check is not vacuous: logits differ between positions
    assert (full[:, 4] - full[:, 5]).abs().max() > 1e-3


@pytest.mark.parametrize("position", ["rope", "alibi", "learned"])
def test_decoder_only_multi_token_chunks_after_offset(position):
    """A chunk of several new tokens at offset > 0 uses the bottom-right aligned causal mask."""
    model = decoder_only(position)
    idx = tokens(2, 10)
    with torch.no_grad():
        full = model(idx)
        cached = cached_logits(model, idx, [3, 3, 1, 2, 1])
    assert (cached - full).abs().max() <= TOL


@pytest.mark.parametrize("position", POSITIONS)
def test_decoder_only_left_padded_prompts_of_different_lengths(position):
    model = decoder_only(position)
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14, 15]]
    idx, kpm = left_pad(prompts, pad_id=0)
    n_new = 5
    cont = tokens(3, n_new, seed=2)
    idx_full = torch.cat([idx, cont], dim=1)
    kpm_full = torch.cat([kpm, torch.zeros(3, n_new, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        full = model(idx_full, key_padding_mask=kpm_full)
        cached = cached_logits(model, idx_full, [idx.shape[1]] + [1] * n_new, key_padding_mask=kpm_full)
        real = ~kpm_full
        assert (cached[real] - full[real]).abs().max() <= TOL
        # each row's real tokens give the logits of that sequence run alone, unpadded
        for b, p in enumerate(prompts):
            alone = model(torch.cat([torch.tensor(p), cont[b]])[None])[0]
            assert (full[b][real[b]] - alone).abs().max() <= TOL


@pytest.mark.parametrize("position", ["rope", "alibi", "sinusoidal"])
def test_decoder_only_prefix_lm_cached_equals_full(position):
    model = decoder_only(position, mask="prefix", prefix_len=4)
    idx = tokens(2, 10)
    with torch.no_grad():
        full = model(idx)
        cached = cached_logits(model, idx, [5] + [1] * 5)  # the first chunk covers the prefix
    assert (cached - full).abs().max() <= TOL


def test_decoder_only_prefix_lm_per_row_prefix_cached_equals_full():
    model = decoder_only("rope", mask="prefix")
    idx = tokens(3, 10)
    prefix = torch.tensor([2, 5, 0])
    with torch.no_grad():
        full = model(idx, prefix_len=prefix)
        cached = cached_logits(model, idx, [5] + [1] * 5, prefix_len=prefix)
        assert (cached - full).abs().max() <= TOL
        # the per-row prefix is applied per row: row 1 (prefix 5) differs from a causal run
        causal = model(idx, prefix_len=0)
    assert (full[2] - causal[2]).abs().max() <= TOL  # prefix 0 = causal
    assert (full[1, :4] - causal[1, :4]).abs().max() > 1e-4


@pytest.mark.parametrize("position", ["rope", "alibi", "learned"])
def test_decoder_only_sliding_window_cached_equals_full(position):
    model = decoder_only(position, mask="sliding", window=3)
    idx = tokens(2, 11)
    with torch.no_grad():
        full = model(idx)
        cached = cached_logits(model, idx, [4] + [1] * 7)
        assert (cached - full).abs().max() <= TOL
        # the window is in effect: token 0 does not reach position 10 through 2 layers of window 3
        idx2 = idx.clone()
        idx2[:, 0] = (idx2[:, 0] + 1 - 3) % (V - 3) + 3
        assert (model(idx2)[:, 10] - full[:, 10]).abs().max() <= 1e-6
        assert (model(idx2)[:, 2] - full[:, 2]).abs().max() > 1e-4


@pytest.mark.parametrize("n_kv_heads", [2, 1])
@pytest.mark.parametrize("position", ["rope", "alibi", "sinusoidal"])
def test_decoder_only_gqa_cached_equals_full(n_kv_heads, position):
    model = decoder_only(position, n_kv_heads=n_kv_heads)
    assert model.decoder.layers[0].self_attn.qkv_proj.out_features == 32 + 2 * n_kv_heads * 8
    idx = tokens(2, 9)
    with torch.no_grad():
        full = model(idx)
        cache = model.new_cache(2, 9)
        cached = torch.cat(
            [model(idx[:, :3], cache=cache)] + [model(idx[:, t : t + 1], cache=cache) for t in range(3, 9)], dim=1
        )
    assert cache.self_attn[0].k.shape == (2, n_kv_heads, 9, 8)
    assert (cached - full).abs().max() <= TOL


def test_cache_reorder_keeps_rows():
    """DecodingCache.reorder (beam search) keeps the selected rows' keys and values."""
    model = decoder_only("rope")
    idx = tokens(3, 8)
    index = torch.tensor([2, 0, 2])
    with torch.no_grad():
        cache = model.new_cache(3, 8)
        model(idx[:, :5], cache=cache)
        cache.reorder(index)
        reordered = idx[index]
        steps = torch.cat([model(reordered[:, t : t + 1], cache=cache) for t in range(5, 8)], dim=1)
        full = model(reordered)
    assert (steps - full[:, 5:]).abs().max() <= TOL


def test_kv_cache_update_and_overflow():
    c = KVCache(1, 2, 4, 3)
    k = torch.randn(1, 2, 3, 3)
    v = torch.randn(1, 2, 3, 3)
    ks, vs = c.update(k, v)
    assert torch.equal(ks, k) and torch.equal(vs, v) and c.pos == 3
    k2, v2 = torch.randn(1, 2, 1, 3), torch.randn(1, 2, 1, 3)
    ks, vs = c.update(k2, v2)
    assert torch.equal(ks, torch.cat([k, k2], 2)) and torch.equal(vs, torch.cat([v, v2], 2))
    with pytest.raises(ValueError, match="max_len=4"):
        c.update(k2, v2)


# ---- EncoderDecoder --------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", POSITIONS)
def test_encoder_decoder_cached_decode_equals_full(position):
    model = encoder_decoder(position)
    src = tokens(2, 7, seed=3)
    src_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    tgt = tokens(2, 8, seed=4)
    with torch.no_grad():
        memory = model.encode(src, src_pad)
        full = model.decode(tgt, memory, memory_key_padding_mask=src_pad)
        assert (model(src, tgt, src_key_padding_mask=src_pad) - full).abs().max() <= TOL
        cache = model.new_cache(2, 8, 7)
        steps = [model.decode(tgt[:, :2], memory, memory_key_padding_mask=src_pad, cache=cache)]
        steps += [
            model.decode(tgt[:, t : t + 1], memory, memory_key_padding_mask=src_pad, cache=cache) for t in range(2, 8)
        ]
        cached = torch.cat(steps, dim=1)
    assert (cached - full).abs().max() <= TOL
    assert cache.cross_attn[0].pos == 7  # the memory's K/V were computed once


# ---- generate ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", POSITIONS)
def test_generate_cache_equals_no_cache_greedy(position):
    model = decoder_only(position)
    idx, kpm = left_pad([[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]], pad_id=0)
    a = model.generate(idx, 8, key_padding_mask=kpm, temperature=0.0, use_cache=True)
    b = model.generate(idx, 8, key_padding_mask=kpm, temperature=0.0, use_cache=False)
    assert a.shape == (3, 5 + 8)
    assert torch.equal(a, b)
    assert torch.equal(a[:, :5], idx)
    # greedy continuation of each row equals the greedy continuation of that prompt alone
    alone = model.generate(torch.tensor([[10, 11]]), 8, temperature=0.0)
    assert torch.equal(a[1, 5:], alone[0, 2:])


def test_generate_greedy_is_argmax_of_full_forward():
    model = decoder_only("rope")
    idx = tokens(2, 4)
    out = model.generate(idx, 5, temperature=0.0)
    with torch.no_grad():
        logits = model(out[:, :-1])
    assert torch.equal(out[:, 4:], logits[:, 3:].argmax(-1))


def expected_with_eos(ref, T, eos, pad):
    """Apply per-row EOS to a no-EOS greedy output ref (B, T + n): tokens after a row's first generated EOS
    become pad; the output stops once every row has finished."""
    out = ref.clone()
    stops = []
    for b in range(ref.shape[0]):
        hits = (ref[b, T:] == eos).nonzero()
        if len(hits):
            s = T + int(hits[0])
            out[b, s + 1 :] = pad
            stops.append(s)
        else:
            stops.append(ref.shape[1] - 1)
    return out[:, : max(stops) + 1]


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_each_row_stops_at_its_own_eos(use_cache):
    model = decoder_only("rope", seed=0, tie_embeddings=False)  # untied: varied greedy tokens, no loop of one
    idx, kpm = left_pad([[5, 6, 7, 8], [9, 10, 11, 12]], pad_id=0)
    T, n = idx.shape[1], 10
    ref = model.generate(idx, n, key_padding_mask=kpm, temperature=0.0)
    # pick an EOS that row 0 emits first at a step where row 1 has not emitted it (so rows stop apart)
    eos = None
    for s in range(1, n - 1):
        tok = int(ref[0, T + s])
        if tok not in ref[0, T : T + s].tolist() and tok not in ref[1, T : T + s + 1].tolist() and tok != 0:
            eos, step = tok, s
            break
    assert eos is not None, ref
    out = model.generate(idx, n, key_padding_mask=kpm, temperature=0.0, eos_id=eos, use_cache=use_cache)
    want = expected_with_eos(ref, T, eos, model.cfg.pad_id)
    assert torch.equal(out, want)
    assert int(out[0, T + step]) == eos and bool((out[0, T + step + 1 :] == model.cfg.pad_id).all())
    assert out.shape[1] > T + step + 1  # row 1 kept going after row 0 stopped


def test_generate_stops_early_when_all_rows_finish():
    model = decoder_only("rope", seed=0)
    idx = tokens(2, 3)
    ref = model.generate(idx, 6, temperature=0.0)
    eos = int(ref[0, 3])  # row 0's first generated token
    out = model.generate(idx, 6, temperature=0.0, eos_id=eos)
    assert torch.equal(out, expected_with_eos(ref, 3, eos, model.cfg.pad_id))


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi"])
def test_encoder_decoder_generate_cache_equals_no_cache(position):
    model = encoder_decoder(position)
    src = tokens(2, 6, seed=5)
    src_pad = torch.tensor([[False] * 6, [False] * 3 + [True] * 3])
    a = model.generate(src, 7, src_key_padding_mask=src_pad, use_cache=True)
    b = model.generate(src, 7, src_key_padding_mask=src_pad, use_cache=False)
    assert torch.equal(a, b)
    assert bool((a[:, 0] == model.cfg.bos_id).all())
    # greedy: each token is the argmax of the teacher-forced logits of the tokens before it
    with torch.no_grad():
        logits = model(src, a[:, :-1], src_key_padding_mask=src_pad)
    assert torch.equal(a[:, 1:], logits.argmax(-1))


def test_encoder_decoder_generate_stops_rows_at_eos():
    model = encoder_decoder("rope", tie_embeddings=False)
    src = tokens(2, 6, seed=5)
    ref = model.generate(src, 8)
    eos = None
    for s in range(1, 7):
        tok = int(ref[0, 1 + s])
        if tok not in ref[0, 1 : 1 + s].tolist() and tok not in ref[1, 1 : 2 + s].tolist() and tok != 0:
            eos = tok
            break
    assert eos is not None, ref
    model.cfg.eos_id = eos
    for use_cache in (True, False):
        out = model.generate(src, 8, use_cache=use_cache)
        assert torch.equal(out, expected_with_eos(ref, 1, eos, model.cfg.pad_id))
