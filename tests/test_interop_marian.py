"""Marian <-> EncoderDecoder (transformers' MarianMTModel), exact at toy size, random init, no download."""

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

V, PAD, EOS = 97, 58, 0


def tiny_marian(logits_bias=True, **over):
    kw = dict(vocab_size=V, pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=EOS, scale_embedding=True)
    return tiny_bart_layout(tf.MarianMTModel, tf.MarianConfig, {**kw, **over}, logits_bias)


def zoo_marian_like(**over):
    kw = dict(
        vocab_size=V,
        position="sinusoidal",
        sinusoidal_layout="split",
        pad_id=PAD,
        bos_id=1,
        eos_id=EOS,
        decoder_start_id=PAD,
    )
    return zoo_seq2seq(**{**kw, **over})


def batch(src_vocab=V, tgt_vocab=V):
    return seq2seq_batch(
        [10, 6, 3], src_vocab, PAD if src_vocab == V else 0, 7, start=PAD, tgt_high=min(tgt_vocab, PAD)
    )


CASES = [
    {},
    {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 80},
    {
        "share_encoder_decoder_embeddings": False,
        "tie_word_embeddings": False,
        "activation_function": "swish",
        "scale_embedding": False,
        "decoder_layers": 1,
    },
]


@pytest.mark.parametrize("over", CASES)
def test_logits_match_with_padding_and_lengths(over):
    hf = tiny_marian(**over)
    m, cfg = zhf.from_hf(hf)
    assert cfg.lm_head_bias and cfg.decoder_start_id == PAD
    assert_same_logits(m, hf, *batch(tgt_vocab=cfg.vocab_size), alone=(3, None))  # the shortest row, unpadded


@pytest.mark.parametrize("over", CASES[:2])
def test_greedy_generation_matches(over):
    hf = tiny_marian(logits_bias=False, **over)
    m, cfg = zhf.from_hf(hf)
    src, skpm, _ = batch()
    assert torch.equal(m.generate(src, 12, src_key_padding_mask=skpm), hf_greedy(hf, src, skpm, 12))


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"tie_embeddings": True, "share_embeddings": True, "lm_head_bias": True},
        {"tie_embeddings": False, "activation": "gelu", "scale_embeddings": False},
    ],
)
def test_to_hf_loads_in_transformers_with_the_same_logits(tmp_path, over):
    m = zoo_marian_like(**over)
    hf = load_in_transformers(m, tmp_path, "MarianMTModel")
    assert_same_logits(m, hf, *batch())
    assert saved_keys(tmp_path) == hf_saved_keys(hf, tmp_path / "hf")


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"share_embeddings": True, "lm_head_bias": True},
        {"tie_embeddings": False, "src_vocab_size": 70, "n_decoder_layers": 1},
    ],
)
def test_round_trip_is_bit_for_bit(tmp_path, over):
    assert_round_trip_is_bit_for_bit(zoo_marian_like(**over), tmp_path)


@pytest.mark.parametrize(
    "over, option",
    [
        ({"sinusoidal_layout": "interleaved"}, "model.sinusoidal_layout='interleaved'"),
        ({"position": "alibi"}, "model.position='alibi'"),
        ({"position": "rope"}, "model.position='rope'"),
        ({"norm_first": True}, "model.norm_first=True"),
        ({"share_embeddings": True, "tie_embeddings": False}, "tie_embeddings"),
    ],
)
def test_to_hf_refuses_options_marian_lacks(tmp_path, over, option):
    with pytest.raises(Unsupported, match=option):
        zhf.to_hf(zoo_marian_like(**over), tmp_path)
