"""model.init_from (zoo/init_from.py): a run starts from a converted Hugging Face checkpoint (a toy BERT in
BERT's layout, with a WordPiece tokenizer.json at BERT's ids, trained on SST-2 sentences)."""

import pytest
import torch

tf = pytest.importorskip("transformers")

from test_pretrained_tokenizer import bert_like  # noqa: E402
from zoo_run import make_cfg, run_cli, sst2_rows  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.init_from import InitFromError  # noqa: E402
from zoo.interop.load import config_of  # noqa: E402
from zoo.run.train import run  # noqa: E402

pytestmark = pytest.mark.e2e  # every test here starts a run from a converted checkpoint

RUN = [
    "data.limit=256",
    "data.batch_size=32",
    "trainer.max_steps=4",
    "trainer.max_epochs=-1",
    "trainer.val_check_interval=2",
    "trainer.enable_model_summary=false",
    "logger=csv",
]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """save_pretrained of a random 2-layer BertForMaskedLM (d 32) beside its tokenizer.json."""
    d = tmp_path_factory.mktemp("bert")
    tok = bert_like([t for t, _ in sst2_rows("sentiment-train", 3000)])
    tok.save(str(d / "tokenizer.json"))
    torch.manual_seed(0)
    cfg = tf.BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=0,
    )
    tf.BertForMaskedLM(cfg).save_pretrained(d)
    return d


def test_a_run_starts_from_the_checkpoint_weights(bert_dir, tmp_path):
    """With lr 1e-30 and min_lr 0 (updates below fp32 resolution) the run's checkpoint holds exactly the converted
    BERT (every weight but the new classifier), the data uses the checkpoint's tokenizer (BERT's ids), and the
    shape is the checkpoint's."""
    lr = ["task.optimizer.lr=1e-30", "task.scheduler.min_lr=0.0"]  # the cosine decays to min_lr after warm-up
    run(make_cfg(tmp_path, [*RUN, f"model.init_from={bert_dir}", *lr], arch="encoder_only"))
    converted, cfg = zhf.from_hf(str(bert_dir))
    ckpt = torch.load(next((tmp_path / "checkpoints").glob("last.ckpt")), map_location="cpu", weights_only=True)
    hp = ckpt["hyper_parameters"]
    assert (hp["model"]["d_model"], hp["model"]["n_layers"], hp["model"]["vocab_size"]) == (32, 2, cfg.vocab_size)
    assert (hp["model"]["pad_id"], hp["model"]["num_classes"]) == (0, 2)
    assert '"[CLS]"' in hp["tokenizer"]["json"]  # the checkpoint's tokenizer.json, not a trained BPE
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    for k, v in converted.state_dict().items():
        assert torch.allclose(state[k], v, rtol=1e-6, atol=1e-20), k  # a fresh init would differ by ~0.02
    assert "classifier.weight" in state


@pytest.mark.slow  # an end-to-end run; `pytest -m slow` runs it
def test_fine_tuning_changes_the_weights(bert_dir, tmp_path):
    run(make_cfg(tmp_path, [*RUN, f"model.init_from={bert_dir}"], arch="encoder_only"))
    converted, _ = zhf.from_hf(str(bert_dir))
    ckpt = torch.load(next((tmp_path / "checkpoints").glob("last.ckpt")), map_location="cpu", weights_only=True)
    tok = converted.embed.tok.weight
    assert not torch.equal(ckpt["state_dict"]["model.embed.tok.weight"], tok)


@pytest.mark.parametrize(
    "over, message",
    [
        (["model.init_from=/nonexistent/bert"], "model.init_from=/nonexistent/bert: not found"),
    ],
)
def test_a_missing_checkpoint_is_refused(tmp_path, over, message):
    with pytest.raises(InitFromError, match=message):
        run(make_cfg(tmp_path, [*RUN, *over], arch="encoder_only"))


def test_a_directory_without_config_json_is_refused_naming_it(tmp_path):
    """A Hugging Face directory without its config.json (weights and tokenizer only), and an empty directory, are
    refused before any data work with a message that names config.json (and the files it did find)."""
    hf = tmp_path / "bert"
    hf.mkdir()
    torch.manual_seed(0)
    tf.BertForMaskedLM(
        tf.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2)
    ).save_pretrained(hf)
    (hf / "config.json").unlink()
    with pytest.raises(InitFromError, match=r"holds Hugging Face files \(model.safetensors\) but no config.json"):
        run(make_cfg(tmp_path / "a", [*RUN, f"model.init_from={hf}"], arch="encoder_only"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InitFromError, match=r"empty: no config.json \(a Hugging Face checkpoint directory\)"):
        run(make_cfg(tmp_path / "b", [*RUN, f"model.init_from={tmp_path / 'empty'}"], arch="encoder_only"))


def test_wrong_arch_and_wrong_tokenizer_are_refused_before_training(bert_dir, tmp_path):
    with pytest.raises(InitFromError, match=r"holds a encoder_only model, but this run is \+arch=decoder_only"):
        run(make_cfg(tmp_path / "a", [*RUN, f"model.init_from={bert_dir}", "task=classification"], arch="decoder_only"))
    other = tmp_path / "other.json"  # a WordPiece of another vocabulary size
    small = bert_like([t for t, _ in sst2_rows("sentiment-train", 40)])
    small.save(str(other))
    assert small.get_vocab_size() != config_of(str(bert_dir))[1].vocab_size
    with pytest.raises(InitFromError, match="the data's tokenizer gives"):
        run(
            make_cfg(
                tmp_path / "b", [*RUN, f"model.init_from={bert_dir}", f"data.tokenizer={other}"], arch="encoder_only"
            )
        )


def test_cli_exit_2(bert_dir, tmp_path):
    proc = run_cli(["+arch=decoder_only", "task=classification", f"model.init_from={bert_dir}", *RUN], cwd=tmp_path)
    assert proc.returncode == 2 and "zoo: error: model.init_from=" in proc.stderr
