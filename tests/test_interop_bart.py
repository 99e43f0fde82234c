"""BART <-> EncoderDecoder (transformers' BartForConditionalGeneration), exact at toy size, random init, no download."""
import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import (assert_close, assert_same_config, assert_same_state, hf_saved_keys,  # noqa: E402
                               right_padded, saved_keys, seeded)
from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.families import Unsupported  # noqa: E402
from zoo.model import EncoderDecoder, ModelConfig  # noqa: E402

V, BOS, PAD, EOS = 97, 0, 1, 2


def perturb(model, std=0.05):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * std)
    return model


def tiny_bart(logits_bias=True, **over):
    seeded()
    kw = dict(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
              bos_token_id=BOS, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=EOS)
    hf = perturb(tf.BartForConditionalGeneration(tf.BartConfig(**{**kw, **over}))).eval()
    if logits_bias:
        hf.final_logits_bias.normal_()
    hf.generation_config.forced_eos_token_id = None  # zoo's generate has no forced last token
    hf.generation_config.forced_bos_token_id = None
    return hf


def zoo_bart_like(**over):
    seeded(1)
    kw = dict(vocab_size=V, d_model=32, n_heads=4, d_ff=64, n_layers=2, position="learned", position_offset=2,
              embed_norm=True, share_tokens=True, scale_embeddings=False, activation="gelu", max_len=64,
              bos_id=BOS, pad_id=PAD, eos_id=EOS, decoder_start_id=EOS, dropout=0.0)
    return EncoderDecoder(ModelConfig(**{**kw, **over})).eval()


def batch():
    src, skpm = right_padded([10, 6, 3], V, PAD)
    tgt = torch.randint(3, V, (3, 7))
    tgt[:, 0] = EOS
    return src, skpm, tgt


CASES = [{}, {"tie_word_embeddings": False, "scale_embedding": True, "activation_function": "relu",
              "decoder_layers": 1}]


@pytest.mark.parametrize("over", CASES)
def test_logits_match_with_padding_and_lengths(over):
    hf = tiny_bart(**over)
    m, cfg = zhf.from_hf(hf)
    assert cfg.lm_head_bias and cfg.share_tokens == cfg.tie_embeddings == hf.config.tie_word_embeddings
    src, skpm, tgt = batch()
    with torch.no_grad():
        want = hf(input_ids=src, attention_mask=(~skpm).long(), decoder_input_ids=tgt).logits
        assert_close(m(src, tgt, src_key_padding_mask=skpm), want)
        src1 = src[2:, :3]
        assert_close(m(src1, tgt[2:, :4]), hf(input_ids=src1, decoder_input_ids=tgt[2:, :4]).logits)


@pytest.mark.parametrize("over", CASES)
def test_greedy_generation_matches(over):
    hf = tiny_bart(logits_bias=False, **over)
    m, _ = zhf.from_hf(hf)
    src, skpm, _ = batch()
    want = hf.generate(src, attention_mask=(~skpm).long(), do_sample=False, num_beams=1, max_new_tokens=12)
    assert torch.equal(m.generate(src, 12, src_key_padding_mask=skpm), want)


def test_beam_search_starts_from_the_decoder_start_token():
    """zoo's beam search on a converted BART starts from its decoder_start_token_id (EOS), so beam size 1 gives
    HF's greedy tokens."""
    from zoo.model.beam_search import beam_search

    hf = tiny_bart(logits_bias=False)
    m, _ = zhf.from_hf(hf)
    src, skpm, _ = batch()
    want = hf.generate(src, attention_mask=(~skpm).long(), do_sample=False, num_beams=1, max_new_tokens=12)
    got = beam_search(m, src, skpm, beam_size=1, max_len=12, length_penalty=0.0)
    assert got[:, 0].tolist() == [EOS] * 3
    for row_got, row_want in zip(got.tolist(), want.tolist()):  # HF pads finished rows; zoo pads with pad_id
        assert row_got[:len(row_want)] == row_want[:len(row_got)]


@pytest.mark.parametrize("over", [{}, {"share_tokens": False, "tie_embeddings": False, "lm_head_bias": True,
                                       "scale_embeddings": True}])
def test_to_hf_loads_in_transformers_with_the_same_logits(tmp_path, over):
    m = zoo_bart_like(**over)
    zhf.to_hf(m, tmp_path)
    hf = tf.AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(hf).__name__ == "BartForConditionalGeneration"
    src, skpm, tgt = batch()
    with torch.no_grad():
        want = hf(input_ids=src, attention_mask=(~skpm).long(), decoder_input_ids=tgt).logits
        assert_close(m(src, tgt, src_key_padding_mask=skpm), want)
    assert saved_keys(tmp_path) == hf_saved_keys(hf, tmp_path / "hf")


@pytest.mark.parametrize("over", [{}, {"share_tokens": False, "tie_embeddings": False, "lm_head_bias": True,
                                       "n_decoder_layers": 1}])
def test_round_trip_is_bit_for_bit(tmp_path, over):
    m = zoo_bart_like(**over)
    back, cfg = zhf.from_hf(zhf.to_hf(m, tmp_path))
    assert_same_state(m, back)
    assert_same_config(cfg, m.cfg)


@pytest.mark.parametrize("over, option", [({"position_offset": 0}, "model.position_offset=0"),
                                          ({"embed_norm": False}, "model.embed_norm=False"),
                                          ({"share_tokens": False}, "share_tokens"),
                                          ({"norm": "rmsnorm"}, "model.norm='rmsnorm'"),
                                          ({"final_norm": True}, "model.final_norm=true")])
def test_to_hf_refuses_options_bart_lacks(tmp_path, over, option):
    with pytest.raises(Unsupported, match=option):
        zhf.to_hf(zoo_bart_like(**over), tmp_path)
