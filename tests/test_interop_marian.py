"""Marian <-> EncoderDecoder (transformers' MarianMTModel), exact at toy size, random init, no download."""
import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import assert_close, assert_same_config, assert_same_state, hf_saved_keys, right_padded, saved_keys, seeded  # noqa: E402
from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.families import Unsupported  # noqa: E402
from zoo.model import EncoderDecoder, ModelConfig  # noqa: E402

V, PAD, EOS = 97, 58, 0


def perturb(model, std=0.05):
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:  # not the frozen sinusoidal tables
                p.add_(torch.randn_like(p) * std)
    return model


def tiny_marian(logits_bias=True, **over):
    seeded()
    kw = dict(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
              pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=EOS, scale_embedding=True)
    hf = perturb(tf.MarianMTModel(tf.MarianConfig(**{**kw, **over}))).eval()
    if logits_bias:
        hf.final_logits_bias.normal_()
    hf.generation_config.forced_eos_token_id = None  # zoo's generate has no forced last token
    return hf


def zoo_marian_like(**over):
    seeded(1)
    kw = dict(vocab_size=V, d_model=32, n_heads=4, d_ff=64, n_layers=2, position="sinusoidal",
              sinusoidal_layout="split", max_len=64, pad_id=PAD, bos_id=1, eos_id=EOS, decoder_start_id=PAD,
              dropout=0.0)
    return EncoderDecoder(ModelConfig(**{**kw, **over})).eval()


def batch(src_vocab=V, tgt_vocab=V):
    src, skpm = right_padded([10, 6, 3], src_vocab, PAD if src_vocab == V else 0)
    tgt = torch.randint(3, min(tgt_vocab, PAD), (3, 7))
    tgt[:, 0] = PAD
    return src, skpm, tgt


CASES = [{}, {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 80},
         {"share_encoder_decoder_embeddings": False, "tie_word_embeddings": False, "activation_function": "swish",
          "scale_embedding": False, "decoder_layers": 1}]


@pytest.mark.parametrize("over", CASES)
def test_logits_match_with_padding_and_lengths(over):
    hf = tiny_marian(**over)
    m, cfg = zhf.from_hf(hf)
    assert cfg.lm_head_bias and cfg.decoder_start_id == PAD
    src, skpm, tgt = batch(tgt_vocab=cfg.vocab_size)
    with torch.no_grad():
        want = hf(input_ids=src, attention_mask=(~skpm).long(), decoder_input_ids=tgt).logits
        assert_close(m(src, tgt, src_key_padding_mask=skpm), want)
        src1 = src[2:, :3]  # the shortest row alone, unpadded
        assert_close(m(src1, tgt[2:]), hf(input_ids=src1, decoder_input_ids=tgt[2:]).logits)


@pytest.mark.parametrize("over", CASES[:2])
def test_greedy_generation_matches(over):
    hf = tiny_marian(logits_bias=False, **over)
    m, cfg = zhf.from_hf(hf)
    src, skpm, _ = batch()
    want = hf.generate(src, attention_mask=(~skpm).long(), do_sample=False, num_beams=1, max_new_tokens=12)
    assert torch.equal(m.generate(src, 12, src_key_padding_mask=skpm), want)


@pytest.mark.parametrize("over", [{}, {"tie_embeddings": True, "share_embeddings": True, "lm_head_bias": True},
                                  {"tie_embeddings": False, "activation": "gelu", "scale_embeddings": False}])
def test_to_hf_loads_in_transformers_with_the_same_logits(tmp_path, over):
    m = zoo_marian_like(**over)
    zhf.to_hf(m, tmp_path)
    hf = tf.AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(hf).__name__ == "MarianMTModel"
    src, skpm, tgt = batch()
    with torch.no_grad():
        want = hf(input_ids=src, attention_mask=(~skpm).long(), decoder_input_ids=tgt).logits
        assert_close(m(src, tgt, src_key_padding_mask=skpm), want)
    assert saved_keys(tmp_path) == hf_saved_keys(hf, tmp_path / "hf")


@pytest.mark.parametrize("over", [{}, {"share_embeddings": True, "lm_head_bias": True},
                                  {"tie_embeddings": False, "src_vocab_size": 70, "n_decoder_layers": 1}])
def test_round_trip_is_bit_for_bit(tmp_path, over):
    m = zoo_marian_like(**over)
    back, cfg = zhf.from_hf(zhf.to_hf(m, tmp_path))
    assert_same_state(m, back)
    assert_same_config(cfg, m.cfg)


@pytest.mark.parametrize("over, option", [({"sinusoidal_layout": "interleaved"}, "model.sinusoidal_layout='interleaved'"),
                                          ({"position": "alibi"}, "model.position='alibi'"),
                                          ({"position": "rope"}, "model.position='rope'"),
                                          ({"norm_first": True}, "model.norm_first=True"),
                                          ({"share_embeddings": True, "tie_embeddings": False}, "tie_embeddings")])
def test_to_hf_refuses_options_marian_lacks(tmp_path, over, option):
    with pytest.raises(Unsupported, match=option):
        zhf.to_hf(zoo_marian_like(**over), tmp_path)
