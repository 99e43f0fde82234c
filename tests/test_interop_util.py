"""Helpers for the Hugging Face interop tests (tiny random HF models, no download) and the family-independent
checks: an unsupported family is refused naming the supported ones, zoo's special ids, load_into's errors."""

import json

import pytest
import torch

tf = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402
from zoo.interop.families.config import zoo_ids  # noqa: E402
from zoo.interop.families.registry import SUPPORTED  # noqa: E402
from zoo.model import EncoderDecoder, ModelConfig  # noqa: E402

TOL = 1e-5


def seeded(seed=0):
    torch.manual_seed(seed)


def assert_close(a, b, tol=TOL):
    diff = (a - b).abs().max().item()
    assert diff <= tol, f"max |diff| = {diff}"


def assert_same_state(m1, m2):
    """Bit-for-bit: the same keys, the same dtype / shape / values, the same ties."""
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert list(s1) == list(s2)
    for k in s1:
        assert s1[k].dtype == s2[k].dtype and torch.equal(s1[k], s2[k]), k
    p1 = {k: v.data_ptr() for k, v in s1.items()}
    p2 = {k: v.data_ptr() for k, v in s2.items()}
    assert [sorted(k for k in p1 if p1[k] == p1[j]) for j in p1] == [
        sorted(k for k in p2 if p2[k] == p2[j]) for j in p2
    ]


def saved_keys(d):
    from safetensors import safe_open

    with safe_open(str(d / "model.safetensors"), "pt") as f:
        return set(f.keys())


def hf_saved_keys(hf_model, d):
    """The keys transformers' own save_pretrained writes (tied weights once)."""
    hf_model.save_pretrained(d)
    return saved_keys(d)


def right_padded(lengths, vocab, pad, low=3):
    """(ids (B, T) right-padded with pad, key_padding_mask (B, T) True = padding), tokens in [low, vocab)."""
    T = max(lengths)
    ids = torch.full((len(lengths), T), pad, dtype=torch.long)
    kpm = torch.ones(len(lengths), T, dtype=torch.bool)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(low, vocab, (n,))
        kpm[i, :n] = False
    return ids, kpm


def perturb(model, std=0.05):
    """Add N(0, std^2) noise to every trainable parameter (not frozen ones such as Marian's sinusoidal tables):
    no weight keeps its initial value (zeros, ones), so a swapped or dropped weight shows in the logits."""
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * std)
    return model


# the toy size of the BART-layout HF models (BART, Marian) and of zoo's EncoderDecoders compared with them
HF_BART_LAYOUT_SIZE = dict(
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
)
ZOO_SIZE = dict(d_model=32, n_heads=4, d_ff=64, n_layers=2, max_len=64, dropout=0.0)


def tiny_bart_layout(model_cls, config_cls, config, logits_bias=True):
    """A random HF seq2seq of BART's layout (model_cls(config_cls(...)): BART, Marian) at the toy size, config
    adding to / overriding it: seeded, perturbed, eval mode, with a random final_logits_bias if logits_bias, and
    no forced last EOS in generation (zoo's generate has no forced last token)."""
    seeded()
    hf = perturb(model_cls(config_cls(**{**HF_BART_LAYOUT_SIZE, **config}))).eval()
    if logits_bias:
        hf.final_logits_bias.normal_()
    hf.generation_config.forced_eos_token_id = None
    return hf


def zoo_seq2seq(**cfg):
    """zoo's EncoderDecoder at the toy size (ZOO_SIZE, cfg adding to / overriding it), seeded(1), eval mode."""
    seeded(1)
    return EncoderDecoder(ModelConfig(**{**ZOO_SIZE, **cfg})).eval()


def seq2seq_batch(lengths, vocab, pad, tgt_len, start, tgt_high=None):
    """(src, src key padding mask, tgt): right_padded(lengths, vocab, pad) sources and random targets
    (len(lengths), tgt_len) of tokens in [3, tgt_high or vocab), each starting with `start`."""
    src, skpm = right_padded(lengths, vocab, pad)
    tgt = torch.randint(3, tgt_high or vocab, (len(lengths), tgt_len))
    tgt[:, 0] = start
    return src, skpm, tgt


def assert_same_logits(m, hf, src, skpm, tgt, alone=None):
    """zoo's m gives HF's hf logits (TOL) on the padded batch; with alone=(source length, target length or None),
    also on the last row alone, unpadded: its first source / target tokens."""
    with torch.no_grad():
        want = hf(input_ids=src, attention_mask=(~skpm).long(), decoder_input_ids=tgt).logits
        assert_close(m(src, tgt, src_key_padding_mask=skpm), want)
        if alone is not None:
            src1, tgt1 = src[-1:, : alone[0]], tgt[-1:, : alone[1]]
            assert_close(m(src1, tgt1), hf(input_ids=src1, decoder_input_ids=tgt1).logits)


def hf_greedy(hf, src, skpm, max_new_tokens):
    """transformers' greedy generate on the padded source batch."""
    return hf.generate(src, attention_mask=(~skpm).long(), do_sample=False, num_beams=1, max_new_tokens=max_new_tokens)


def load_in_transformers(m, d, class_name):
    """m written by zoo.interop.hf.to_hf into d and loaded by transformers' AutoModelForSeq2SeqLM (eval mode),
    asserted to be a `class_name`."""
    zhf.to_hf(m, d)
    hf = tf.AutoModelForSeq2SeqLM.from_pretrained(d).eval()
    assert type(hf).__name__ == class_name
    return hf


def assert_round_trip_is_bit_for_bit(m, d):
    """zoo -> HF (to_hf into d) -> zoo (from_hf) gives m's state bit for bit and its config."""
    back, cfg = zhf.from_hf(zhf.to_hf(m, d))
    assert_same_state(m, back)
    assert_same_config(cfg, m.cfg)


def test_unsupported_family_is_refused_naming_the_supported_ones(tmp_path):
    cfg = tf.LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
    )
    model = tf.LlamaForCausalLM(cfg)
    for src in (model, tmp_path):
        if src is tmp_path:
            model.save_pretrained(tmp_path)
        with pytest.raises(Unsupported) as e:
            zhf.from_hf(src)
        assert "llama" in str(e.value) and all(f in str(e.value) for f in SUPPORTED)


def test_a_directory_without_config_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        zhf.from_hf(tmp_path)


def test_zoo_ids_are_distinct_and_keep_hf_ids_where_they_are():
    assert zoo_ids(0, 1, 2, 10) == {"pad_id": 0, "bos_id": 1, "eos_id": 2}
    assert zoo_ids(None, 9, 9, 10) == {"pad_id": 0, "bos_id": 1, "eos_id": 9}  # GPT-2: bos = eos, no pad
    assert zoo_ids(5, None, 1, 10) == {"pad_id": 5, "bos_id": 0, "eos_id": 1}  # T5: no bos
    assert zoo_ids(0, None, None, 10) == {"pad_id": 0, "bos_id": 2, "eos_id": 1}  # BERT: pad only, kept
    assert zoo_ids(3, None, 0, 10) == {"pad_id": 3, "bos_id": 1, "eos_id": 0}  # a placeholder skips real ids


def test_hf_config_json_is_what_transformers_reads(tmp_path):
    from zoo.model import ModelConfig, build_model

    m = build_model(
        "decoder_only",
        ModelConfig(
            vocab_size=40,
            d_model=16,
            n_heads=2,
            d_ff=32,
            n_layers=1,
            position="learned",
            norm_first=True,
            scale_embeddings=False,
            activation="gelu_tanh",
            max_len=32,
        ),
    )
    zhf.to_hf(m, tmp_path)
    c = json.loads((tmp_path / "config.json").read_text())
    assert c["model_type"] == "gpt2" and c["n_layer"] == 1 and c["activation_function"] == "gelu_new"


def assert_same_config(a, b):
    """Equal ModelConfigs up to spellings of one value (attn_dropout None = dropout, final_norm None = norm_first)
    and the init scheme (weights are copied)."""
    from dataclasses import asdict

    skip = {"attn_dropout", "final_norm", "init"}
    da, db = ({k: v for k, v in asdict(c).items() if k not in skip} for c in (a, b))
    assert da == db, {k: (da[k], db[k]) for k in da if da[k] != db[k]}
    assert (a.attention_dropout, a.use_final_norm) == (b.attention_dropout, b.use_final_norm)


def test_the_registry_holds_one_module_per_family():
    """zoo.interop.families: every module besides the shared ones (config, weights, registry) holds families the
    registry lists, each family's class is transformers' task class of its model_type, and its architecture is
    the one zoo builds for that class (a causal LM: decoder_only, a masked LM: encoder_only, seq2seq:
    encoder_decoder)."""
    import importlib
    import pkgutil

    import zoo.interop.families as package
    from zoo.interop.families.config import Family
    from zoo.interop.families.registry import ARCH_OF, FAMILIES, HF_CLASSES

    shared = {"config", "weights", "registry"}
    modules = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name not in shared)
    assert modules == ["bart", "bert", "gpt2", "t5"]
    found = {}
    for name in modules:
        module = importlib.import_module(f"zoo.interop.families.{name}")
        found.update(
            {
                c.name: c
                for c in vars(module).values()
                if isinstance(c, type) and issubclass(c, Family) and "name" in vars(c)
            }
        )
    assert found == FAMILIES and sorted(FAMILIES) == sorted(SUPPORTED) == ["bart", "bert", "gpt2", "marian", "t5"]
    from transformers.models.auto import modeling_auto as auto

    kind = {
        "decoder_only": auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        "encoder_only": auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    }
    for family, hf_class in HF_CLASSES.items():
        assert getattr(tf, hf_class).config_class.model_type == family
        names = kind.get(ARCH_OF[family], auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
        assert names[family] == hf_class
