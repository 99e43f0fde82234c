"""T5 <-> EncoderDecoder (transformers' T5ForConditionalGeneration), exact at toy size, random init, no download:
position=t5_relative, RMSNorm, no attention scaling, ReLU / gated-GELU FFN, the tied-head rescale."""

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import (  # noqa: E402
    assert_round_trip_is_bit_for_bit,
    assert_same_logits,
    hf_greedy,
    hf_saved_keys,
    load_in_transformers,
    perturb,
    saved_keys,
    seeded,
    seq2seq_batch,
    zoo_seq2seq,
)

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402

V, PAD, EOS = 97, 0, 1
V10 = {}  # T5 v1.0: ReLU, tied head, output rescale
V11 = {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}  # v1.1: gated GELU, own head, no rescale
TIED_NO_RESCALE = {"tie_word_embeddings": False, "untie": False}


def tiny_t5(untie=None, **over):
    seeded()
    kw = dict(
        vocab_size=V,
        d_model=32,
        d_kv=8,
        num_heads=4,
        d_ff=64,
        num_layers=2,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
        decoder_start_token_id=PAD,
        pad_token_id=PAD,
        eos_token_id=EOS,
    )
    hf = perturb(tf.T5ForConditionalGeneration(tf.T5Config(**{**kw, **over})), 0.1)
    if untie is not False and over.get("tie_word_embeddings") is False:  # a v1.1 checkpoint has its own head
        hf.lm_head.weight = torch.nn.Parameter(torch.randn(V, 32) * 0.2)
    return hf.eval()


def zoo_t5_like(**over):
    kw = dict(
        vocab_size=V,
        position="t5_relative",
        rel_buckets=8,
        rel_max_distance=20,
        norm="rmsnorm",
        norm_eps=1e-6,
        bias=False,
        norm_first=True,
        attn_scale=1.0,
        scale_embeddings=False,
        share_embeddings=True,
        lm_head_scale=True,
        activation="relu",
        pad_id=PAD,
        eos_id=EOS,
        bos_id=2,
        decoder_start_id=PAD,
    )
    return zoo_seq2seq(**{**kw, **over})


def batch():
    return seq2seq_batch([30, 16, 3], V, PAD, 25, start=PAD)  # distances beyond max_distance: the log buckets


@pytest.mark.parametrize("over", [V10, V11, TIED_NO_RESCALE])
def test_logits_match_with_padding_and_lengths(over):
    hf = tiny_t5(**over)
    m, cfg = zhf.from_hf(hf)
    assert cfg.position == "t5_relative" and cfg.attn_scale == 1.0 and cfg.norm == "rmsnorm"
    assert cfg.lm_head_scale == (over.get("tie_word_embeddings") is not False)
    assert cfg.tie_embeddings == (over is not V11)
    assert cfg.activation == ("geglu_tanh" if over is V11 else "relu")
    assert_same_logits(m, hf, *batch(), alone=(3, 4))


@pytest.mark.parametrize("over", [V10, V11])
def test_greedy_generation_matches(over):
    hf = tiny_t5(**over)
    m, _ = zhf.from_hf(hf)
    src, skpm, _ = batch()
    got = m.generate(src, 24, src_key_padding_mask=skpm)
    assert torch.equal(got, hf_greedy(hf, src, skpm, 24))
    assert got[:, 1:].ne(PAD).any()  # it generated something


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"tie_embeddings": False, "lm_head_scale": False, "activation": "geglu_tanh"},
        {"lm_head_scale": False},
        {"tie_embeddings": False, "activation": "swiglu"},
    ],
)
def test_to_hf_loads_in_transformers_with_the_same_logits(tmp_path, over):
    m = zoo_t5_like(**over)
    hf = load_in_transformers(m, tmp_path, "T5ForConditionalGeneration")
    assert (hf.lm_head.weight.data_ptr() == hf.shared.weight.data_ptr()) == m.cfg.tie_embeddings
    assert_same_logits(m, hf, *batch())
    assert saved_keys(tmp_path) == hf_saved_keys(hf, tmp_path / "hf")


@pytest.mark.parametrize(
    "over", [{}, {"tie_embeddings": False, "lm_head_scale": False, "activation": "geglu_tanh", "n_decoder_layers": 1}]
)
def test_round_trip_is_bit_for_bit(tmp_path, over):
    assert_round_trip_is_bit_for_bit(zoo_t5_like(**over), tmp_path)


@pytest.mark.parametrize(
    "over, option",
    [
        ({"attn_scale": None}, "model.attn_scale=None"),
        ({"norm": "layernorm"}, "model.norm='layernorm'"),
        ({"bias": True}, "model.bias=True"),
        ({"share_embeddings": False}, "model.share_embeddings=False"),
        ({"activation": "geglu"}, "model.activation='geglu'"),
    ],
)
def test_to_hf_refuses_options_t5_lacks(tmp_path, over, option):
    with pytest.raises(Unsupported, match=option):
        zhf.to_hf(zoo_t5_like(**over), tmp_path)


def test_d_kv_other_than_d_model_over_heads_is_refused():
    seeded()
    hf = tf.T5ForConditionalGeneration(
        tf.T5Config(vocab_size=V, d_model=32, d_kv=4, num_heads=4, d_ff=64, num_layers=1)
    )
    with pytest.raises(Unsupported, match="d_kv=4"):
        zhf.from_hf(hf)
