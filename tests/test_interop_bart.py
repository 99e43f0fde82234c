"""BART <-> EncoderDecoder (transformers' BartForConditionalGeneration), exact at toy size, random init, no download."""

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import (  # noqa: E402
    assert_round_trip_is_bit_for_bit,
    assert_same_logits,
    hf_greedy,
    hf_saved_keys,
    load_in_transformers,
    saved_keys,
    seq2seq_batch,
    tiny_bart_layout,
    zoo_seq2seq,
)

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402

V, BOS, PAD, EOS = 97, 0, 1, 2


def tiny_bart(logits_bias=True, **over):
    kw = dict(vocab_size=V, bos_token_id=BOS, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=EOS)
    hf = tiny_bart_layout(tf.BartForConditionalGeneration, tf.BartConfig, {**kw, **over}, logits_bias)
    hf.generation_config.forced_bos_token_id = None
    return hf


def zoo_bart_like(**over):
    kw = dict(
        vocab_size=V,
        position="learned",
        position_offset=2,
        embed_norm=True,
        share_tokens=True,
        scale_embeddings=False,
        activation="gelu",
        bos_id=BOS,
        pad_id=PAD,
        eos_id=EOS,
        decoder_start_id=EOS,
    )
    return zoo_seq2seq(**{**kw, **over})


def batch():
    return seq2seq_batch([10, 6, 3], V, PAD, 7, start=EOS)


CASES = [
    {},
    {"tie_word_embeddings": False, "scale_embedding": True, "activation_function": "relu", "decoder_layers": 1},
]


@pytest.mark.parametrize("over", CASES)
def test_logits_match_with_padding_and_lengths(over):
    hf = tiny_bart(**over)
    m, cfg = zhf.from_hf(hf)
    assert cfg.lm_head_bias and cfg.share_tokens == cfg.tie_embeddings == hf.config.tie_word_embeddings
    assert_same_logits(m, hf, *batch(), alone=(3, 4))


@pytest.mark.parametrize("over", CASES)
def test_greedy_generation_matches(over):
    hf = tiny_bart(logits_bias=False, **over)
    m, _ = zhf.from_hf(hf)
    src, skpm, _ = batch()
    assert torch.equal(m.generate(src, 12, src_key_padding_mask=skpm), hf_greedy(hf, src, skpm, 12))


def test_beam_search_starts_from_the_decoder_start_token():
    """zoo's beam search on a converted BART starts from its decoder_start_token_id (EOS), so beam size 1 gives
    HF's greedy tokens."""
    from zoo.model.decoding.beam_search import beam_search

    hf = tiny_bart(logits_bias=False)
    m, _ = zhf.from_hf(hf)
    src, skpm, _ = batch()
    want = hf_greedy(hf, src, skpm, 12)
    got = beam_search(m, src, skpm, beam_size=1, max_len=12, length_penalty=0.0)
    assert got[:, 0].tolist() == [EOS] * 3
    for row_got, row_want in zip(got.tolist(), want.tolist()):  # HF pads finished rows; zoo pads with pad_id
        assert row_got[: len(row_want)] == row_want[: len(row_got)]


@pytest.mark.parametrize(
    "over", [{}, {"share_tokens": False, "tie_embeddings": False, "lm_head_bias": True, "scale_embeddings": True}]
)
def test_to_hf_loads_in_transformers_with_the_same_logits(tmp_path, over):
    m = zoo_bart_like(**over)
    hf = load_in_transformers(m, tmp_path, "BartForConditionalGeneration")
    assert_same_logits(m, hf, *batch())
    assert saved_keys(tmp_path) == hf_saved_keys(hf, tmp_path / "hf")


@pytest.mark.parametrize(
    "over", [{}, {"share_tokens": False, "tie_embeddings": False, "lm_head_bias": True, "n_decoder_layers": 1}]
)
def test_round_trip_is_bit_for_bit(tmp_path, over):
    assert_round_trip_is_bit_for_bit(zoo_bart_like(**over), tmp_path)


@pytest.mark.parametrize(
    "over, option",
    [
        ({"position_offset": 0}, "model.position_offset=0"),
        ({"embed_norm": False}, "model.embed_norm=False"),
        ({"share_tokens": False}, "share_tokens"),
        ({"norm": "rmsnorm"}, "model.norm='rmsnorm'"),
        ({"final_norm": True}, "model.final_norm=True"),
    ],
)
def test_to_hf_refuses_options_bart_lacks(tmp_path, over, option):
    with pytest.raises(Unsupported, match=option):
        zhf.to_hf(zoo_bart_like(**over), tmp_path)
