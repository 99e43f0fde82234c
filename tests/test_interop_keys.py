"""Every key of a converted checkpoint is used or named: a weight the conversion does not use (an extra key,
BERT's pooler, a table no forward reads) or one the checkpoint lacks is named in a warning, never dropped or
filled in silently; a complete checkpoint converts without one."""

import logging

import pytest
import torch

tf = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402
from test_interop_bart import tiny_bart  # noqa: E402
from test_interop_bert import tiny_bert  # noqa: E402
from test_interop_gpt2 import tiny_gpt2  # noqa: E402
from test_interop_half import SOURCES  # noqa: E402  -- the six sources, T5 v1.1 among them
from test_interop_marian import tiny_marian  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def zoo_warnings(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("zoo") and r.levelno >= 30)


def edit_weights(d, edit):
    """Rewrite d/model.safetensors through edit(state dict) (in place)."""
    sd = load_file(str(d / "model.safetensors"))
    edit(sd)
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize("source", SOURCES)
def test_a_complete_checkpoint_converts_without_a_warning(tmp_path, caplog, source):
    SOURCES[source]().save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(tmp_path)
    assert zoo_warnings(caplog) == ""


@pytest.mark.parametrize("source", SOURCES)
def test_an_extra_key_is_named(tmp_path, caplog, source):
    """A weight the family's model has no place for (another task's head, a renamed layer) is named."""
    SOURCES[source]().save_pretrained(tmp_path)
    edit_weights(tmp_path, lambda sd: sd.update({"extra_head.dense.weight": torch.ones(4, 4)}))
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(tmp_path)
    assert "extra_head.dense.weight" in zoo_warnings(caplog)
    assert "did not load" in zoo_warnings(caplog)


def test_a_missing_key_is_named(tmp_path, caplog):
    """A weight the checkpoint lacks is initialised at random by transformers: named, not converted silently."""
    tiny_gpt2().save_pretrained(tmp_path)
    edit_weights(tmp_path, lambda sd: sd.pop("transformer.ln_f.bias"))
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(tmp_path)
    assert "transformer.ln_f.bias" in zoo_warnings(caplog) and "at random" in zoo_warnings(caplog)


def test_weights_no_zoo_block_reads_are_named(caplog):
    """BERT's pooler, and an untied BERT whose unused cls.predictions.bias differs from the decoder's bias (the
    one transformers' forward reads): both named; tied copies are used, not named."""
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(tiny_bert("BertModel"))
    assert "bert.pooler.dense.weight" in zoo_warnings(caplog) and "pooler" in zoo_warnings(caplog)
    caplog.clear()
    hf = tiny_bert(tie_word_embeddings=False)
    head = hf.cls.predictions
    with torch.no_grad():
        head.decoder.bias = torch.nn.Parameter(head.bias.detach() + 1.0)
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(hf)
    assert zoo_warnings(caplog).endswith("dropped: cls.predictions.bias")


def test_an_untied_bart_shared_table_is_named_when_it_differs(caplog):
    """Untied BART keeps a `shared` table its forward never reads (to_hf writes the decoder's back there): a copy
    of the decoder's passes, a different one is named."""
    hf = tiny_bart(tie_word_embeddings=False)
    with torch.no_grad():
        hf.model.shared.weight.copy_(hf.model.decoder.embed_tokens.weight)
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(hf)
    assert zoo_warnings(caplog) == ""
    with torch.no_grad():
        hf.model.shared.weight.add_(1.0)
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(hf)
    assert "dropped: model.shared.weight" in zoo_warnings(caplog)


def test_a_marian_position_table_other_than_the_sinusoid_is_named(caplog):
    """Marian's position table is computed, not read: a stored one other than zoo's sinusoid is named."""
    hf = tiny_marian()
    with torch.no_grad():
        hf.model.decoder.embed_positions.weight.mul_(2.0)
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(hf)
    assert "model.decoder.embed_positions.weight" in zoo_warnings(caplog)
    assert "model.encoder.embed_positions.weight" not in zoo_warnings(caplog)


OLD_T5_KEY = "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"


@pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "pytorch_model.bin"])
def test_a_key_transformers_ignores_is_named(tmp_path, caplog, safe):
    """An old T5 checkpoint's cross-attention relative bias (no forward reads it): transformers drops it without
    a word (T5's _keys_to_ignore_on_load_unexpected), so it is read from the checkpoint's own keys and named."""
    SOURCES["t5"]().save_pretrained(tmp_path)
    edit_weights(tmp_path, lambda sd: sd.update({OLD_T5_KEY: torch.randn(8, 4)}))
    if not safe:  # the older format: a pickled state dict
        torch.save(load_file(str(tmp_path / "model.safetensors")), tmp_path / "pytorch_model.bin")
        (tmp_path / "model.safetensors").unlink()
    _, info = zhf.load_hf_model(tmp_path)
    assert OLD_T5_KEY not in info["unexpected_keys"]  # transformers' own report leaves it out
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(tmp_path)
    assert OLD_T5_KEY in zoo_warnings(caplog) and "did not load" in zoo_warnings(caplog)


def test_a_renamed_legacy_key_is_not_named(tmp_path, caplog):
    """A key transformers loads under another name (a legacy LayerNorm.gamma / beta) is used: not named."""
    SOURCES["bert"]().save_pretrained(tmp_path)
    old = "bert.embeddings.LayerNorm."

    def rename(sd):
        sd[old + "gamma"], sd[old + "beta"] = sd.pop(old + "weight"), sd.pop(old + "bias")

    edit_weights(tmp_path, rename)
    with caplog.at_level(logging.WARNING):
        m, _ = zhf.from_hf(tmp_path)
    assert zoo_warnings(caplog) == ""
    assert torch.equal(m.embed.norm.weight, SOURCES["bert"]().bert.embeddings.LayerNorm.weight)


def test_gpt2s_stored_causal_masks_are_not_named_unless_they_differ(tmp_path, caplog):
    """Old GPT-2 checkpoints store each layer's causal mask (attn.bias, lower-triangular ones), which transformers
    ignores and zoo computes: not named; a stored mask that is not causal is."""
    SOURCES["gpt2"]().save_pretrained(tmp_path)
    causal = torch.ones(1, 1, 64, 64).tril()
    edit_weights(tmp_path, lambda sd: sd.update({f"transformer.h.{i}.attn.bias": causal.clone() for i in (0, 1)}))
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(tmp_path)
    assert zoo_warnings(caplog) == ""
    edit_weights(tmp_path, lambda sd: sd.update({"transformer.h.1.attn.bias": torch.ones(1, 1, 64, 64)}))
    with caplog.at_level(logging.WARNING):
        zhf.from_hf(tmp_path)
    assert zoo_warnings(caplog).endswith("did not load, so zoo does not convert them: transformer.h.1.attn.bias")
