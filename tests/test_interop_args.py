"""zoo.interop's public functions refuse a bad argument at their top, naming the function, the argument and the
value, before anything is read or written (an empty path would read or write the current directory)."""

import pytest
import torch

from zoo.interop import hf as zhf
from zoo.interop.checkpoints import (
    check_state,
    checkpoint_config,
    model_from_checkpoint,
    read_zoo_checkpoint,
    zoo_checkpoint,
)
from zoo.interop.convert import check_source, main
from zoo.interop.hf_tokenizer import hf_tokenizer_state, write_tokenizer
from zoo.interop.load import load_into, read_checkpoint
from zoo.model import DecoderOnly, ModelConfig


@pytest.fixture
def model():
    """A toy decoder_only in GPT-2's layout (to_hf writes it: tests/test_interop_settings.py's BASE)."""
    gpt2 = dict(position="learned", norm_first=True, final_norm=True, scale_embeddings=False, activation="gelu_tanh")
    return DecoderOnly(ModelConfig(vocab_size=30, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=32, **gpt2))


@pytest.fixture
def here(tmp_path, monkeypatch):
    """The current directory is an empty tmp_path: what an empty path would read or write."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m, d: zhf.from_hf(""), r"from_hf: hf_model_or_dir='' is not a path"),
        (lambda m, d: zhf.from_hf(None), r"from_hf: hf_model_or_dir=None is not a path"),
        (lambda m, d: zhf.from_hf(d, family=5), r"from_hf: family=5 \(int\) is not a family name"),
        (lambda m, d: zhf.load_hf_model(3.5), r"load_hf_model: src=3.5 is not a path"),
        (lambda m, d: zhf.to_hf(m, ""), r"to_hf: out_dir='' is not a path"),
        (lambda m, d: zhf.to_hf(m, d / "file.txt"), r"to_hf: out_dir='.*file.txt' is a file; it writes a folder"),
        (lambda m, d: read_zoo_checkpoint(""), r"read_zoo_checkpoint: path='' is not a path"),
        (lambda m, d: model_from_checkpoint("m.ckpt"), r"model_from_checkpoint: ckpt='m.ckpt' \(str\) is not a"),
        (lambda m, d: checkpoint_config({"arch": "decoder_only"}), r"checkpoint_config: hp must be a checkpoint"),
        (lambda m, d: check_state(m, [("w", torch.zeros(1))]), r"check_state: state must be a dict of tensors"),
        (lambda m, d: check_state(m, {"head.weight": [1.0]}), r"check_state: state\['head.weight'\] is a list"),
        (lambda m, d: hf_tokenizer_state(d / "nope"), r"hf_tokenizer_state: path='.*nope' is not a directory"),
        (lambda m, d: write_tokenizer({"json": "{}"}, d / "nope", m.cfg), r"write_tokenizer: out='.*nope' is not"),
        (lambda m, d: zoo_checkpoint(m, tokenizer="bpe"), r"zoo_checkpoint: tokenizer='bpe' \(str\) is not a tok"),
        (lambda m, d: read_checkpoint(None), r"read_checkpoint: dir_or_ckpt=None is not a path"),
        (lambda m, d: load_into(m, ""), r"read_checkpoint: dir_or_ckpt='' is not a path"),
        (lambda m, d: check_source(""), r"source '' is empty: give a transformers checkpoint directory or a hub id"),
    ],
)
def test_public_functions_name_a_bad_argument(model, here, call, message):
    (here / "file.txt").write_text("not a folder")
    with pytest.raises(ValueError, match=message):
        call(model, here)
    assert sorted(p.name for p in here.iterdir()) == ["file.txt"]  # nothing read as, or written to, the cwd


def test_convert_refuses_an_empty_source_with_exit_2(here, capsys):
    assert main(["from-hf", "", str(here / "out.ckpt")]) == 2
    assert capsys.readouterr().err == (
        "zoo.convert: error: source '' is empty: give a transformers checkpoint directory or a hub id\n"
    )
    assert list(here.iterdir()) == []
