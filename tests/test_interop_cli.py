"""python -m zoo.convert from-hf / to-hf, and a converted checkpoint loaded the way zoo loads run checkpoints."""

import json

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_interop_util import assert_close, assert_same_state, right_padded, seeded  # noqa: E402

from zoo.interop.checkpoints import model_from_checkpoint, zoo_checkpoint  # noqa: E402
from zoo.interop.convert import main  # noqa: E402
from zoo.interop.load import config_of, load_into  # noqa: E402
from zoo.model import EncoderDecoder, ModelConfig  # noqa: E402


def test_from_hf_then_to_hf_with_the_tokenizer(tmp_path, capsys):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", *"abcdefghij"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    seeded()
    hf = tf.GPT2LMHeadModel(
        tf.GPT2Config(
            vocab_size=len(vocab),
            n_embd=16,
            n_layer=1,
            n_head=2,
            n_positions=32,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
    ).eval()
    src = tmp_path / "hf"
    hf.save_pretrained(src)
    tok.save(str(src / "tokenizer.json"))
    folder = tmp_path / "out"
    folder.mkdir()  # from-hf names a file: a folder is refused before converting, and nothing is left behind
    assert main(["from-hf", str(src), str(folder)]) == 2
    assert "is a folder; from-hf writes one file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "out"]
    assert main(["from-hf", str(src), str(tmp_path / "gpt2.ckpt")]) == 0
    (tmp_path / "notes.txt").write_text("mine")  # to-hf names a folder: an existing file is refused, untouched
    assert main(["to-hf", str(tmp_path / "gpt2.ckpt"), str(tmp_path / "notes.txt")]) == 2
    assert "is a file; to-hf writes a folder" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"
    ckpt = torch.load(tmp_path / "gpt2.ckpt", weights_only=True)
    assert ckpt["hyper_parameters"]["arch"] == "decoder_only" and "json" in ckpt["hyper_parameters"]["tokenizer"]
    model = model_from_checkpoint(ckpt)
    ids, kpm = right_padded([6, 2], len(vocab), 0)
    with torch.no_grad():
        assert_close(model(ids, key_padding_mask=kpm)[~kpm], hf(ids, attention_mask=(~kpm).long()).logits[~kpm])
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    torch.save(ckpt, run / "checkpoints" / "last.ckpt")
    assert main(["to-hf", str(run), str(tmp_path / "out")]) == 0
    assert "GPT2LMHeadModel" in capsys.readouterr().out
    back = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert all(torch.equal(back.state_dict()[k], v) for k, v in hf.state_dict().items())
    fast = tf.AutoTokenizer.from_pretrained(tmp_path / "out")
    assert fast("abc")["input_ids"] == tok.encode("abc").ids and fast.eos_token == "</s>"


def test_to_hf_refusal_names_the_option_and_exits_2(tmp_path, capsys):
    m = EncoderDecoder(ModelConfig(vocab_size=30, d_model=16, n_heads=2, d_ff=32, n_layers=1, position="alibi"))
    torch.save(zoo_checkpoint(m), tmp_path / "m.ckpt")
    assert main(["to-hf", str(tmp_path / "m.ckpt"), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "model.position='alibi'" in err and "t5_relative (t5)" in err
    assert main(["from-hf", str(tmp_path), str(tmp_path / "x.ckpt")]) == 2
    assert "config.json" in capsys.readouterr().err


def test_unsupported_family_directory_exits_2(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert main(["from-hf", str(tmp_path), str(tmp_path / "x.ckpt")]) == 2
    assert "supported families: gpt2, bert, marian, bart, t5" in capsys.readouterr().err


def test_load_into_from_a_zoo_checkpoint_and_a_run(tmp_path):
    seeded()
    m = EncoderDecoder(ModelConfig(vocab_size=30, d_model=16, n_heads=2, d_ff=32, n_layers=1)).eval()
    torch.save(zoo_checkpoint(m), tmp_path / "m.ckpt")
    arch, cfg = config_of(tmp_path / "m.ckpt")
    fresh = EncoderDecoder(cfg)
    assert_same_state(load_into(fresh, tmp_path / "m.ckpt").eval(), m)


def test_missing_source_path_exits_2_without_a_hub_lookup(tmp_path, capsys):
    """A local path that does not exist is named, with what to give instead; no hub request, no traceback."""
    missing = tmp_path / "no_such_dir"
    assert main(["from-hf", str(missing), str(tmp_path / "x.ckpt")]) == 2
    err = capsys.readouterr().err
    assert f"{missing} does not exist" in err and "hub id" in err
    assert not (tmp_path / "x.ckpt").exists()
