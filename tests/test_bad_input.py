"""Bad configurations and inputs raise ValueError naming the key and the value."""
import pytest
import torch

from zoo.model import DecoderOnly, EncoderDecoder, EncoderOnly, ModelConfig, build_model
from zoo.model.feedforward import FeedForward
from zoo.model.generate import sample_next
from zoo.model.init import init_weights
from zoo.model.norm import make_norm

SMALL = dict(vocab_size=50, d_model=16, n_heads=4, d_ff=32, n_layers=2, dropout=0.0, max_len=16)


def cfg(**kw):
    return ModelConfig(**{**SMALL, **kw})


def test_valid_small_config():
    c = cfg()
    assert c.head_dim == 4 and c.kv_heads == 4


def test_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"model\.d_model=30 .*model\.n_heads=4"):
        cfg(d_model=30)


def test_n_heads_not_divisible_by_n_kv_heads():
    with pytest.raises(ValueError, match=r"model\.n_heads=4 .*model\.n_kv_heads=3"):
        cfg(n_kv_heads=3)


@pytest.mark.parametrize("key,value", [("activation", "tanh"), ("norm", "batchnorm"), ("position", "t5"),
                                       ("mask", "diagonal"), ("init", "kaiming"), ("pooling", "max"),
                                       ("compile_scope", "everything")])
def test_unknown_choice(key, value):
    with pytest.raises(ValueError, match=rf"model\.{key}='{value}' is unknown"):
        cfg(**{key: value})


def test_rope_odd_head_dim():
    with pytest.raises(ValueError, match=r"model\.position='rope'.*12/4=3"):
        cfg(d_model=12, n_heads=4, position="rope")
    cfg(d_model=12, n_heads=4, position="sinusoidal")  # odd head_dim is fine without RoPE


@pytest.mark.parametrize("kw,key", [(dict(dropout=1.0), "dropout"), (dict(attn_dropout=-0.1), "attn_dropout"),
                                    (dict(mask="sliding", window=0), "window"), (dict(prefix_len=-1), "prefix_len"),
                                    (dict(vocab_size=0), "vocab_size"), (dict(n_layers=-1), "n_layers"),
                                    (dict(src_vocab_size=0), "src_vocab_size=0"),
                                    (dict(src_vocab_size=-5), "src_vocab_size=-5"),
                                    (dict(share_embeddings=True, src_vocab_size=40),
                                     "share_embeddings.*src_vocab_size=40"),
                                    (dict(pad_id=2), "pad_id=2 and model.eos_id=2 are the same id"),
                                    (dict(bos_id=2), "bos_id=2 and model.eos_id=2 are the same id"),
                                    (dict(bos_id=0), "pad_id=0 and model.bos_id=0 are the same id")])
def test_other_bad_values(kw, key):
    with pytest.raises(ValueError, match=rf"model\.{key}"):
        cfg(**kw)


def test_from_dict_unknown_key():
    with pytest.raises(ValueError, match="n_head"):
        ModelConfig.from_dict({**SMALL, "n_head": 4})
    assert ModelConfig.from_dict(SMALL).d_model == 16


def test_validate_after_mutation():
    c = cfg()
    c.n_heads = 5
    with pytest.raises(ValueError, match=r"model\.n_heads=5"):
        DecoderOnly(c)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi"])
def test_sequence_longer_than_max_len(position):
    model = DecoderOnly(cfg(position=position)).eval()
    model(torch.full((1, 16), 5))  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        model(torch.full((1, 17), 5))


def test_learned_positions_explicit_position_beyond_max_len():
    model = EncoderOnly(cfg(position="learned")).eval()
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        model(torch.full((1, 3), 5), positions=torch.tensor([[0, 1, 16]]))


@pytest.mark.parametrize("bad", [50, 1000, -1])
@pytest.mark.parametrize("arch", ["encoder_only", "decoder_only"])
def test_token_outside_vocabulary(arch, bad):
    model = build_model(arch, cfg())
    idx = torch.tensor([[3, 4, bad, 5]])
    with pytest.raises(ValueError, match=rf"token id {bad} .*model\.vocab_size"):
        model(idx)


def test_token_outside_vocabulary_encoder_decoder():
    model = EncoderDecoder(cfg(src_vocab_size=30))
    ok = torch.tensor([[3, 4, 5]])
    model(torch.tensor([[29, 3]]), ok)  # the source vocabulary is 30
    with pytest.raises(ValueError, match=r"\[0, 30\).*model\.vocab_size"):
        model(torch.tensor([[30, 3]]), ok)
    with pytest.raises(ValueError, match=r"token id 50 .*\[0, 50\)"):
        model(ok, torch.tensor([[3, 50]]))


def test_key_padding_mask_wrong_shape_and_dtype():
    model = DecoderOnly(cfg())
    idx = torch.full((2, 5), 5)
    with pytest.raises(ValueError, match="key_padding_mask"):
        model(idx, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_padding_mask must be bool"):
        model(idx, key_padding_mask=torch.zeros(2, 5, dtype=torch.long))


def test_generate_beyond_max_len():
    model = DecoderOnly(cfg())
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        model.generate(torch.full((1, 10), 5), max_new_tokens=7)
    with pytest.raises(ValueError, match=r"model\.max_len=16"):
        EncoderDecoder(cfg()).generate(torch.full((1, 4), 5), max_new_tokens=16)


@pytest.mark.parametrize("kw", [dict(temperature=-1.0), dict(top_k=0), dict(top_p=0.0), dict(top_p=1.5)])
def test_sample_next_bad_arguments(kw):
    with pytest.raises(ValueError, match="temperature"):
        sample_next(torch.zeros(1, 5), **kw)


def test_cross_attention_needs_memory():
    model = EncoderDecoder(cfg())
    with pytest.raises(ValueError, match="memory"):
        model.decoder(torch.zeros(1, 3, 16))


def test_block_constructors_reject_unknown_names():
    with pytest.raises(ValueError, match="activation='tanh'"):
        FeedForward(8, 16, "tanh")
    with pytest.raises(ValueError, match="norm='batchnorm'"):
        make_norm("batchnorm", 8)
    with pytest.raises(ValueError, match="init='kaiming'"):
        init_weights(torch.nn.Linear(2, 2), "kaiming")
    with pytest.raises(ValueError, match="arch='gpt'"):
        build_model("gpt", cfg())


@pytest.mark.parametrize("key,value", [("compile", "no"), ("bias", 1), ("final_norm", "off")])
def test_switches_must_be_booleans(key, value):
    """A yes/no key given anything but true / false (Hydra reads `model.compile=no` as the string 'no',
    which Python would take as true) is refused by name."""
    with pytest.raises(ValueError, match=rf"model\.{key}={value!r} must be true or false"):
        cfg(**{key: value})
