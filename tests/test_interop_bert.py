"""BERT <-> EncoderOnly (transformers' BertForMaskedLM / BertModel), exact at toy size, random init, no download."""

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import (  # noqa: E402
    assert_close,
    assert_same_state,
    hf_saved_keys,
    perturb,
    right_padded,
    saved_keys,
    seeded,
)

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402
from zoo.model import EncoderOnly, ModelConfig  # noqa: E402

V, PAD = 97, 0


def tiny_bert(cls="BertForMaskedLM", **over):
    seeded()
    kw = dict(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=PAD,
    )
    return perturb(getattr(tf, cls)(tf.BertConfig(**{**kw, **over}))).eval()


def zoo_bert_like(**over):
    seeded(1)
    kw = dict(
        vocab_size=V,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_layers=2,
        position="learned",
        norm_first=False,
        scale_embeddings=False,
        activation="gelu",
        max_len=64,
        embed_norm=True,
        type_vocab_size=2,
        lm_head_transform=True,
        lm_head_bias=True,
        norm_eps=1e-12,
        dropout=0.0,
    )
    return EncoderOnly(ModelConfig(**{**kw, **over})).eval()


@pytest.mark.parametrize("over", [{}, {"hidden_act": "gelu_new", "tie_word_embeddings": False}])
def test_mlm_logits_match_with_padding_and_lengths(over):
    hf = tiny_bert(**over)
    m, cfg = zhf.from_hf(hf)
    assert cfg.lm_head_transform and cfg.lm_head_bias and cfg.tie_embeddings == hf.config.tie_word_embeddings
    for lengths in ([10, 7, 3], [5]):
        ids, kpm = right_padded(lengths, V, PAD)
        with torch.no_grad():
            want = hf(ids, attention_mask=(~kpm).long()).logits
            got = m(ids, key_padding_mask=kpm)
        assert_close(got[~kpm], want[~kpm])


def test_bert_model_hidden_states_match_and_the_pooler_is_dropped(caplog):
    hf = tiny_bert("BertModel")
    m, cfg = zhf.from_hf(hf)
    assert not cfg.lm_head_transform and m.lm_head.weight is m.embed.tok.weight
    assert "pooler" in caplog.text
    ids, kpm = right_padded([8, 5], V, PAD)
    with torch.no_grad():
        assert_close(m.encode(ids, kpm)[~kpm], hf(ids, attention_mask=(~kpm).long()).last_hidden_state[~kpm])


def test_to_hf_loads_in_transformers_with_the_same_logits(tmp_path):
    m = zoo_bert_like()
    zhf.to_hf(m, tmp_path)
    hf = tf.AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert type(hf).__name__ == "BertForMaskedLM"
    ids, kpm = right_padded([9, 4], V, PAD)
    with torch.no_grad():
        assert_close(m(ids, key_padding_mask=kpm)[~kpm], hf(ids, attention_mask=(~kpm).long()).logits[~kpm])
    assert saved_keys(tmp_path) == hf_saved_keys(hf, tmp_path / "hf")


@pytest.mark.parametrize("over", [{}, {"tie_embeddings": False, "activation": "relu"}])
def test_round_trip_is_bit_for_bit(tmp_path, over):
    m = zoo_bert_like(**over)
    back, cfg = zhf.from_hf(zhf.to_hf(m, tmp_path))
    assert_same_state(m, back)
    assert (cfg.tie_embeddings, cfg.activation) == (m.cfg.tie_embeddings, m.cfg.activation)


@pytest.mark.parametrize(
    "over, option",
    [
        ({"type_vocab_size": 0}, "model.type_vocab_size=0"),
        ({"lm_head_transform": False}, "model.lm_head_transform=False"),
        ({"norm_first": True}, "model.norm_first=True"),
        ({"position": "alibi"}, "model.position='alibi'"),
        ({"num_classes": 2}, "model.num_classes=2"),
    ],
)
def test_to_hf_refuses_options_bert_lacks(tmp_path, over, option):
    with pytest.raises(Unsupported, match=option):
        zhf.to_hf(zoo_bert_like(**over), tmp_path)
