"""GPT-2 <-> DecoderOnly (transformers' GPT2LMHeadModel), exact at toy size, random init, no download."""

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import assert_close, assert_same_state, hf_saved_keys, right_padded, saved_keys, seeded  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402
from zoo.interop.load import load_into  # noqa: E402
from zoo.model import DecoderOnly, ModelConfig  # noqa: E402
from zoo.model.decoding.generate import left_pad  # noqa: E402

V, PAD, BOS, EOS = 97, 0, 1, 2


def tiny_gpt2(**over):
    seeded()
    kw = dict(
        vocab_size=V,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    return tf.GPT2LMHeadModel(tf.GPT2Config(**{**kw, **over})).eval()


def zoo_gpt2_like(**over):
    seeded(1)
    kw = dict(
        vocab_size=V,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_layers=2,
        position="learned",
        norm_first=True,
        final_norm=True,
        scale_embeddings=False,
        activation="gelu_tanh",
        max_len=64,
        init="gpt2",
        dropout=0.0,
    )
    return DecoderOnly(ModelConfig(**{**kw, **over})).eval()


def perturbed(model, std=0.1):
    """model with N(0, std^2) noise added to every parameter: GPT-2's init (std 0.02) keeps the MLP's inputs so
    small that gelu and its tanh approximation give the same logits within 2e-6, under assert_close's 1e-5; after
    this they differ by 5e-4 (measured), while a faithful conversion stays within 1e-6."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * std)
    return model


@pytest.mark.parametrize(
    "over", [{}, {"activation_function": "relu", "tie_word_embeddings": False}, {"scale_attn_weights": False}]
)
def test_logits_match_with_padding_and_lengths(over):
    hf = perturbed(tiny_gpt2(**over))
    m, cfg = zhf.from_hf(hf)
    assert cfg.tie_embeddings == hf.config.tie_word_embeddings
    ids, kpm = right_padded([10, 7, 3], V, PAD)
    with torch.no_grad():
        want = hf(ids, attention_mask=(~kpm).long()).logits
        got = m(ids, key_padding_mask=kpm)
    assert_close(got[~kpm], want[~kpm])
    # left padding: HF's positions from the mask (as its generate computes them) = zoo's default
    ids, kpm = left_pad([[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]], PAD)
    pos = ((~kpm).long().cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        want = hf(ids, attention_mask=(~kpm).long(), position_ids=pos).logits
        got = m(ids, key_padding_mask=kpm)
    assert_close(got[~kpm], want[~kpm])


def test_greedy_generation_matches():
    hf = tiny_gpt2()
    m, _ = zhf.from_hf(hf)
    ids, kpm = left_pad([[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]], PAD)
    want = hf.generate(
        ids,
        attention_mask=(~kpm).long(),
        do_sample=False,
        num_beams=1,
        max_new_tokens=12,
        pad_token_id=PAD,
        eos_token_id=EOS,
    )
    got = m.generate(ids, 12, key_padding_mask=kpm, temperature=0.0, eos_id=EOS)
    assert torch.equal(got, want)


def test_to_hf_loads_in_transformers_with_the_same_logits(tmp_path):
    m = perturbed(zoo_gpt2_like())
    zhf.to_hf(m, tmp_path)
    hf = tf.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(hf).__name__ == "GPT2LMHeadModel"
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()
    ids, kpm = right_padded([9, 4], V, PAD)
    with torch.no_grad():
        assert_close(m(ids, key_padding_mask=kpm)[~kpm], hf(ids, attention_mask=(~kpm).long()).logits[~kpm])
    assert saved_keys(tmp_path) == hf_saved_keys(hf, tmp_path / "hf")  # tied weights stored once, like transformers


@pytest.mark.parametrize("over", [{}, {"tie_embeddings": False, "activation": "gelu"}])
def test_round_trip_is_bit_for_bit(tmp_path, over):
    m = zoo_gpt2_like(**over)
    back, cfg = zhf.from_hf(zhf.to_hf(m, tmp_path))
    assert_same_state(m, back)
    assert cfg.tie_embeddings == m.cfg.tie_embeddings and cfg.activation == m.cfg.activation


@pytest.mark.parametrize(
    "over, option",
    [
        ({"position": "rope"}, "model.position='rope'"),
        ({"norm_first": False}, "model.norm_first=False"),
        ({"n_kv_heads": 2}, "model.n_kv_heads=2"),
        ({"activation": "swiglu"}, "model.activation='swiglu'"),
        ({"mask": "prefix"}, "model.mask='prefix'"),
    ],
)
def test_to_hf_refuses_options_gpt2_lacks(tmp_path, over, option):
    with pytest.raises(Unsupported, match=option.replace("(", r"\(")):
        zhf.to_hf(zoo_gpt2_like(**over), tmp_path)
    assert not (tmp_path / "config.json").exists()


def test_load_into_names_the_mismatching_key_and_shapes(tmp_path):
    hf = tiny_gpt2()
    hf.save_pretrained(tmp_path)
    _, cfg = zhf.from_hf(tmp_path)
    fresh = DecoderOnly(ModelConfig(**{**cfg.__dict__, "num_classes": 3}))
    load_into(fresh, tmp_path)  # a new classifier head keeps its init
    m, _ = zhf.from_hf(hf)
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in m.state_dict().items())
    shorter = DecoderOnly(ModelConfig(**{**cfg.__dict__, "max_len": 32}))
    with pytest.raises(ValueError, match=r"embed\.pos\.weight.*\(64, 32\).*\(32, 32\)"):
        load_into(shorter, tmp_path)
    other = DecoderOnly(ModelConfig(**{**cfg.__dict__, "activation": "relu"}))
    with pytest.raises(ValueError, match="model.activation"):
        load_into(other, tmp_path)
