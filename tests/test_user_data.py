"""A run remembers its data, and a user's own files get plain messages: fixtures written into tmp_path from
the shared datasets (a user's copy of Tiny Shakespeare's first 20 kB, an SST-2 file with a bad label), the
resolver's name / path split, results.json, W&B, checkpoints and what zoo.report / zoo.generate read back."""

import gzip
import json
import logging
from pathlib import Path

import pytest
import torch
from zoo_run import SHARED_DATA, TINY, make_cfg, needs_shared, run_cli

from zoo.data import resolver
from zoo.data.info import CHECKPOINT_KEY, from_checkpoint
from zoo.data.parallel_text import ParallelText
from zoo.data.resolver import DataError, locate
from zoo.data.text_corpus import TextCorpus
from zoo.run.train import run

pytestmark = needs_shared


@pytest.fixture
def my_text(tmp_path):
    """A user's own text named like the built-in file, tmp_path/tiny_shakespeare/input.txt: the first 20 kB of
    Tiny Shakespeare (so not the published file)."""
    path = tmp_path / "tiny_shakespeare" / "input.txt"
    path.parent.mkdir()
    path.write_bytes((SHARED_DATA / "tiny_shakespeare" / "input.txt").read_bytes()[:20_000])
    return path


@pytest.mark.e2e
def test_missing_user_path_says_not_found(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for value, shown in [
        (str(tmp_path / "my.txt"), tmp_path / "my.txt"),
        ("~/corpus", tmp_path / "corpus"),
        ("./data/mine", Path.cwd() / "data" / "mine"),
    ]:
        with pytest.raises(DataError) as e:
            locate(value, names=("tiny_shakespeare/input.txt",))
        msg = str(e.value)
        assert msg.startswith(f"not found: {shown}") and "Fix: check the path" in msg
        assert "unknown" not in msg and "sst2" not in msg  # not the resolver's 26 names
    with pytest.raises(DataError, match=rf"^not found: {tmp_path / 'nothing.txt'}"):
        run(make_cfg(tmp_path / "run", TINY + ["logger=csv", f"data.file={tmp_path / 'nothing.txt'}"]))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_user_file_named_like_a_builtin_is_never_checksummed(my_text, tmp_path, monkeypatch):
    """Its absolute path and ./tiny_shakespeare/input.txt are the user's file, used as is (sha256sum, the
    checksum's hash, is never called); the bare name is still the checksummed built-in one."""

    def no_hash(path):
        raise AssertionError(f"checksummed {path}")

    monkeypatch.setattr(resolver, "sha256sum", no_hash)
    assert locate(str(my_text)) == my_text
    monkeypatch.chdir(tmp_path)
    assert locate("./tiny_shakespeare/input.txt") == my_text
    with pytest.raises(AssertionError, match="checksummed"):
        locate("tiny_shakespeare/input.txt")


def test_data_dir_mismatch_never_says_delete(tmp_path, monkeypatch):
    """A wrong file where the resolver looks for a name (perhaps put there by the user) is left alone: the
    message says how to use it as one's own file, or where else to get the published one."""
    monkeypatch.delenv("ZOO_DATA_MIRROR")
    data = tmp_path / "data"
    (data / "tiny_shakespeare").mkdir(parents=True)
    (data / "tiny_shakespeare" / "input.txt").write_text("my own play\n" * 100)
    with pytest.raises(DataError) as e:
        locate("tiny_shakespeare/input.txt", data_dir=data)
    msg = str(e.value)
    assert "checksum mismatch" in msg and "delete" not in msg.lower() and "pass its path" in msg
    assert (data / "tiny_shakespeare" / "input.txt").read_text() == "my own play\n" * 100


@pytest.mark.e2e
def test_run_on_a_user_file_names_it_everywhere(my_text, tmp_path, capsys):
    """results.json, the W&B config and tags, the checkpoint name the user's file, not tiny_shakespeare; the
    checkpoint's data settings reach zoo.generate's messages; without them (an old checkpoint) it still loads."""
    from test_sweeps import finished_wandb_records

    from zoo.run.generate import load, main

    out = tmp_path / "run"
    run(make_cfg(out, TINY + ["trainer.max_steps=5", f"data.file={my_text}"]))  # logger: wandb (offline) + csv
    res = json.loads((out / "results.json").read_text())
    assert res["dataset"] == str(my_text) and res["data"]["files"] == {"text": str(my_text)}
    assert res["data"]["builtin"] is False and res["data"]["tokenizer"]["kind"] == "char"
    w = finished_wandb_records(out)
    assert list(w["run"].tags) == ["decoder_only", "lm", "file:input.txt"]
    c = w["config"]  # nested as W&B nests it (zoo.run.loggers.run_config)
    assert c["dataset"] == str(my_text) and c["data_info"]["files"]["text"] == str(my_text)
    assert c["data"]["file"] == str(my_text)
    ckpt_path = out / "checkpoints" / "last.ckpt"
    ckpt = torch.load(ckpt_path, weights_only=True)
    assert ckpt[CHECKPOINT_KEY] == res["data"]
    vocab = ckpt[CHECKPOINT_KEY]["tokenizer"]["vocab_size"]
    assert vocab == len(set(my_text.read_text()))
    capsys.readouterr()
    assert main([f"ckpt_path={ckpt_path}", "prompt=\u00e9", "max_new_tokens=5"]) == 2
    err = capsys.readouterr().err
    assert f"its {vocab} characters are those of {my_text}" in err and "Traceback" not in err
    del ckpt[CHECKPOINT_KEY]  # a checkpoint from before zoo stored its data
    torch.save(ckpt, tmp_path / "old.ckpt")
    assert from_checkpoint(ckpt) == {
        "dataset": "unknown",
        "stored": False,
        "note": "the checkpoint predates stored data settings",
    }
    assert load(str(tmp_path / "old.ckpt"))[2] == 32
    assert main([f"ckpt_path={tmp_path / 'old.ckpt'}", "prompt=ROMEO:", "max_new_tokens=5", "seed=1"]) == 0


@pytest.mark.e2e
def test_sst2_label_outside_the_classes_is_refused_before_training(tmp_path):
    """A user's SST-2 file with label 7 on line 3: `zoo: error: FILE, line 3: ...` with the fix, exit 2,
    no traceback, no checkpoint."""
    lines = (SHARED_DATA / "sst2" / "sentiment-train").read_text().splitlines()[:6]
    lines[2] = lines[2].rpartition("\t")[0] + "\t7"
    bad = tmp_path / "my-train.tsv"
    bad.write_text("\n".join(lines) + "\n")
    r = run_cli(
        ["+arch=encoder_only", f"data.train_file={bad}", "logger=csv", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"zoo: error: {bad}, line 3: label '7' is not 0 or 1" in r.stderr and "Fix: write 0 or 1" in r.stderr
    assert "Traceback" not in r.stderr and not list(tmp_path.rglob("*.ckpt"))


def test_sst2_user_files_in_data_info(tmp_path):
    from zoo.data.sst2 import SST2

    mine = tmp_path / "train.tsv"
    mine.write_text("\n".join((SHARED_DATA / "sst2" / "sentiment-train").read_text().splitlines()[:200]) + "\n")
    dm = SST2(vocab_size=200, train_file=str(mine), mirror=str(SHARED_DATA), data_dir=tmp_path / "data")
    info = dm.data_info()
    assert info["dataset"] == f"{mine}, sst2" and info["builtin"] is False
    assert info["files"] == {"train": str(mine), "val": "sst2/sentiment-dev", "test": "sst2/sentiment-test"}
    assert len(dm.train_set) == 200 and info["tokenizer"] == {"kind": "bpe", "file": None, "vocab_size": dm.vocab_size}


@pytest.mark.e2e
def test_translation_checkpoint_keeps_its_languages_and_the_report_follows(tmp_path, monkeypatch):
    """An en -> de run (Multi30k has en, de, fr, cs): its checkpoint stores the pair, the report's attention map
    reads an English sentence (never the German default), its table names the dataset, and a source
    language without a default sentence is said so in report.md instead of failing the report."""
    from zoo.report import build as rep
    from zoo.report.attention import DEFAULT_SENTENCE

    out = tmp_path / "sweep" / "en-de"
    run(
        make_cfg(
            out,
            [
                "data.src_lang=en",
                "data.tgt_lang=de",
                "data.limit=200",
                "data.vocab_size=200",
                "data.max_tokens=1024",
                "model.d_model=32",
                "model.n_heads=2",
                "model.d_ff=64",
                "model.n_layers=1",
                "logger=csv",
                "trainer.max_steps=3",
                "trainer.limit_val_batches=1",
                "trainer.limit_test_batches=1",
                "trainer.enable_model_summary=false",
            ],
            arch="encoder_decoder",
        )
    )
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    data = ckpt[CHECKPOINT_KEY]
    assert (data["dataset"], data["src_lang"], data["tgt_lang"]) == ("multi30k", "en", "de")
    assert data["files"]["train.en"] == "multi30k/train.en.gz" and data["tokenizer"]["joint"] is True
    tok_file = Path(data["tokenizer"]["file"])  # the run dir's tokenizer, named by a digest of its data
    assert tok_file.parent == out.resolve() and tok_file.name.startswith("tokenizer.joint.") and tok_file.is_file()
    seen, cross_attention = [], rep.cross_attention

    def spy(model, src_tok, tgt_tok, sentence, *args):
        seen.append(sentence)
        return cross_attention(model, src_tok, tgt_tok, sentence, *args)

    monkeypatch.setattr(rep, "cross_attention", spy)
    got = rep.report(tmp_path / "sweep", tmp_path / "report")
    # the default sentence is the run's own first tested source (English), from its examples.json
    ex = json.loads((out / "examples.json").read_text())
    with gzip.open(SHARED_DATA / "multi30k" / "test_2016_flickr.en.gz", "rt") as f:
        assert ex["src"][0] == f.read().splitlines()[ex["ids"][0]]
    assert seen == [ex["src"][0]] and [p.name for p in got["attention"]] == ["attention_encoder_decoder.png"]
    assert got["table"] and all(r["dataset"] == "multi30k" for r in got["table"])
    assert "| translation / encoder_decoder | multi30k |" in got["report"].read_text()
    # an examples.json from before the sources were kept: the first test_2016_flickr sentence in English
    (out / "examples.json").write_text(json.dumps({k: v for k, v in ex.items() if k != "src"}))
    rep.report(tmp_path / "sweep", tmp_path / "report1")
    assert seen[1:] == [DEFAULT_SENTENCE["en"]]
    monkeypatch.setitem(DEFAULT_SENTENCE, "en", None)
    got = rep.report(tmp_path / "sweep", tmp_path / "report2")
    assert got["attention"] == [] and "no source sentence of its own test set" in got["report"].read_text()
    assert len(seen) == 2  # nothing translated the third time
    # an old checkpoint: the languages come from its datamodule hyperparameters, else de -> en, said so
    del ckpt[CHECKPOINT_KEY]
    assert from_checkpoint(ckpt)["src_lang"] == "en"
    del ckpt["datamodule_hyper_parameters"]
    legacy = from_checkpoint(ckpt)
    assert (legacy["src_lang"], legacy["tgt_lang"], legacy["stored"]) == ("de", "en", False)
    assert "languages assumed: de->en" in legacy["note"]


def test_too_long_translation_pair_names_its_file_and_line(tmp_path):
    """truncate=false: the first too-long pair is named by the user's file and 1-based line (blank pairs and
    carved splits do not shift it): two line-aligned files, or a table (after its header line)."""
    src = [f"s{i}" for i in range(30)]
    tgt = [f"t{i}" for i in range(30)]
    src[4], tgt[4] = "", ""  # a blank pair, dropped (line 5)
    src[20] = "a source sentence far longer than max_len"  # line 21
    (tmp_path / "train.src").write_text("\n".join(src) + "\n")
    (tmp_path / "train.tgt").write_text("\n".join(tgt) + "\n")
    kw = dict(tokenizer="char", max_len=8, truncate=False, val_fraction=0.2, test_fraction=0.2)
    with pytest.raises(
        DataError,
        match=rf"1 (train|val|test) pairs are longer than data.max_len=8 tokens, the first "
        rf"at {tmp_path / 'train.src'} and {tmp_path / 'train.tgt'}, line 21 "
        rf"\('a source sentence",
    ):
        ParallelText(train={"src": str(tmp_path / "train.src"), "tgt": str(tmp_path / "train.tgt")}, **kw).setup()
    (tmp_path / "train.tsv").write_text("src\ttgt\n" + "".join(f"{a}\t{b}\n" for a, b in zip(src, tgt)))
    with pytest.raises(DataError, match=rf"the first at {tmp_path / 'train.tsv'}, line 22 "):  # the header: line 1
        ParallelText(train=str(tmp_path / "train.tsv"), **kw).setup()


def test_text_corpus_logs_its_splits(tmp_path, caplog):
    """The setup line, as text_classification's and parallel_text's: documents and tokens per split, the
    tokenizer's kind and vocabulary size."""
    docs = tmp_path / "plays"
    docs.mkdir()
    for i in range(4):
        (docs / f"play{i}.txt").write_text(f"ACT {i}. " + "to be or not to be, that is the question.\n" * 20)
    lightning_log = logging.getLogger("lightning.pytorch")  # rank_zero_info's; it does not propagate to root
    lightning_log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="lightning.pytorch"):
            dm = TextCorpus(file=str(docs), val_fraction=0.25, block_size=8, token_dir=str(tmp_path / "tokens"))
            dm.setup()
    finally:
        lightning_log.removeHandler(caplog.handler)
    n = {s: len(d) for s, d in (("train", dm.train_data), ("val", dm.val_data))}
    assert (
        f"plays: train 3 documents, {n['train']} tokens; val 1 document, {n['val']} tokens; tokenizer char, "
        f"vocab {dm.vocab_size}"
    ) in caplog.text
