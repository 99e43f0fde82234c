"""Pretrained tokenizer.json files (data.tokenizer=<file>): their special tokens keep their own ids, found by
name (zoo.data.bpe.special_roles) or set by data.special_tokens; batches, the model config and the checks
before training use them.

The files are built here with Hugging Face `tokenizers` on SST-2 sentences, in the layouts of real ones: a BERT
WordPiece ([PAD]=0, [unused0..98], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103), a RoBERTa byte-level BPE
(<s>=0, <pad>=1, </s>=2, <unk>=3, <mask> last) and a GPT-2 one (a single <|endoftext|>, last)."""

import csv
import json
import shutil

import pytest
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from zoo_run import (
    SMALL_MODEL,
    make_cfg,
    multi30k_lines,
    multi30k_pairs,
    needs_shared,
    run_cli,
    shakespeare_text,
    sst2_rows,
)

from zoo.data.bpe import FIXED_IDS, SubwordTokenizer, train_bpe
from zoo.data.parallel_text import ParallelText
from zoo.data.resolver import DataError
from zoo.data.text_classification import TextClassification
from zoo.data.text_corpus import TextCorpus
from zoo.errors import ConfigError
from zoo.run.checks.config import check_config
from zoo.run.train import run

pytestmark = needs_shared


def bert_like(texts) -> Tokenizer:
    """A WordPiece with bert-base-uncased's layout: normalizer, pre-tokenizer, decoder, [CLS] $A [SEP], and
    its five special tokens at BERT's ids (the [unusedN] ones are plain vocabulary, as in BERT)."""
    specials = ["[PAD]", *[f"[unused{i}]" for i in range(99)], "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.train_from_iterator(
        texts, trainers.WordPieceTrainer(vocab_size=800, special_tokens=specials, show_progress=False)
    )
    tok = Tokenizer(models.WordPiece(wp.get_vocab(with_added_tokens=False), unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = wp.normalizer, wp.pre_tokenizer, decoders.WordPiece()
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 101), ("[SEP]", 102)]
    )
    return tok


def byte_level(texts, specials, last=()) -> Tokenizer:
    """A byte-level BPE (GPT-2 / RoBERTa): `specials` first, `last` added after the vocabulary."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=600,
            special_tokens=list(specials),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok.add_special_tokens([AddedToken(t, lstrip=t == "<mask>", special=True) for t in last])
    return tok


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{name: path} of the three tokenizer.json files, and of a zoo-trained one ("zoo")."""
    d = tmp_path_factory.mktemp("tokenizers")
    texts = [t for t, _ in sst2_rows("sentiment-train", 3000)]
    roberta = byte_level(texts, ["<s>", "<pad>", "</s>", "<unk>"], ["<mask>"])
    roberta.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    toks = {
        "bert": bert_like(texts),
        "roberta": roberta,
        "gpt2": byte_level(texts, [], ["<|endoftext|>"]),
        "zoo": train_bpe(texts, 500),
    }
    out = {}
    for name, tok in toks.items():
        (d / name).mkdir()
        tok.save(str(d / name / "tokenizer.json"))
        out[name] = d / name / "tokenizer.json"
    return out


@pytest.fixture(scope="module")
def sst2_csv(tmp_path_factory):
    """SST-2's first 400 training rows (train.csv) and 120 test rows (test.csv), columns text, label."""
    d = tmp_path_factory.mktemp("sst2csv")
    for split, name, n in (("train", "sentiment-train", 400), ("test", "sentiment-test", 120)):
        with open(d / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows(sst2_rows(name, n))
    return d


def test_roles_come_from_the_file(files):
    """Every role's id, by name; vocab size from the file; decode skips the special tokens; overrides."""
    bert, roberta, gpt2, zoo = (SubwordTokenizer.load(files[k]) for k in ("bert", "roberta", "gpt2", "zoo"))
    assert bert.special_ids == {"pad": 0, "bos": 101, "eos": 102, "unk": 100, "mask": 103, "cls": 101}
    assert roberta.special_ids == {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 600, "cls": 0}
    assert gpt2.special_ids == {"bos": 600, "eos": 600}
    assert zoo.special_ids == FIXED_IDS
    assert (bert.vocab_size, roberta.vocab_size, gpt2.vocab_size) == (800, 601, 601)
    assert (bert.pad_id, roberta.pad_id, roberta.bos_id, roberta.eos_id) == (0, 1, 0, 2)
    # model ids: needed roles first; a missing or shared one gets a placeholder no other key has
    assert bert.model_ids(("cls", "eos", "pad")) == {"pad_id": 0, "bos_id": 101, "eos_id": 102}
    assert roberta.model_ids(("pad", "bos", "eos"), ("pad", "bos", "eos")) == {"pad_id": 1, "bos_id": 0, "eos_id": 2}
    assert gpt2.model_ids() == {"pad_id": 0, "bos_id": 1, "eos_id": 600}
    text = "the movie is funny and sad"
    ids = bert.encode(text)
    assert 101 not in ids and bert.decode([101, *ids, 102, 0, 0]) == text  # encode adds none, decode skips them
    ids = roberta.encode("Ünïcode, it 's a gorgeous film")
    assert roberta.decode(torch.tensor([0, *ids, 2, 1, 1, 600])) == "Ünïcode, it 's a gorgeous film"
    padded = SubwordTokenizer.load(files["gpt2"], {"pad": "<|endoftext|>", "cls": "Ġthe"})
    assert (padded.pad_id, padded.special_ids["cls"]) == (600, padded.tokenizer.token_to_id("Ġthe"))
    assert padded.decode(padded.encode(" the end")) == " end"  # a role's token is skipped, special or not
    again = SubwordTokenizer.from_state_dict(padded.state_dict())  # the overrides travel with the state
    assert again.special_ids == padded.special_ids and set(zoo.state_dict()) == {"json"}
    with pytest.raises(DataError, match=r"data.special_tokens.pad='<nope>' is not a token of the tokenizer .*gpt2"):
        SubwordTokenizer.load(files["gpt2"], {"pad": "<nope>"})
    with pytest.raises(DataError, match="data.special_tokens.sep: no such role; the roles are pad, bos"):
        SubwordTokenizer.load(files["gpt2"], {"sep": "<|endoftext|>"})


def test_batches_use_the_files_ids(tmp_path, files, sst2_csv):
    """Classification rows are cls text eos, padded with the file's pad id; translation rows bos / eos."""
    dm = TextClassification(
        train=str(sst2_csv / "train.csv"),
        test=str(sst2_csv / "test.csv"),
        tokenizer=str(files["roberta"].parent),
        batch_size=16,
        data_dir=str(tmp_path),
    )
    dm.setup()
    assert (dm.vocab_size, dm.pad_id, dm.data_info()["tokenizer"]["kind"]) == (601, 1, "pretrained")
    assert {k: dm.model_info()[k] for k in ("pad_id", "bos_id", "eos_id")} == {"pad_id": 1, "bos_id": 0, "eos_id": 2}
    batch = next(iter(dm.val_dataloader()))
    ids, kpm = batch["ids"], batch["key_padding_mask"]
    assert kpm.any() and (ids[kpm] == 1).all() and (ids[:, 0] == 0).all()  # padded with <pad>=1, <s> first
    last = (~kpm).sum(1) - 1
    assert (ids[torch.arange(len(ids)), last] == 2).all() and not (ids[~kpm] == 1).any()
    bert = TextClassification(train=str(sst2_csv / "train.csv"), tokenizer=str(files["bert"]), data_dir=str(tmp_path))
    bert.setup()
    row = bert.train_set.ids[0]
    assert row[0] == 101 and row[-1] == 102 and bert.tokenizer.decode(row) == bert.tokenizer.decode(row[1:-1])
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("de\ten\n" + "".join(f"{a.strip()}\t{b.strip()}\n" for a, b in multi30k_pairs("train", 60)))
    mt = ParallelText(train=str(pairs), src_lang="de", tgt_lang="en", tokenizer=str(files["bert"]), max_tokens=4096)
    mt.setup()
    s = mt.train_set
    assert s.src[0][-1] == 102 and s.tgt_in[0][0] == 101 and s.tgt_out[0][-1] == 102 and mt.pad_id == 0
    b = next(iter(mt.val_dataloader()))
    assert (b["tgt_in"][b["tgt_key_padding_mask"]] == 0).all() and (b["tgt_in"][:, 0] == 101).all()


def test_a_missing_role_is_named_with_the_fix(tmp_path, files, sst2_csv):
    train = str(sst2_csv / "train.csv")
    with pytest.raises(
        DataError,
        match=r"the tokenizer .*gpt2/tokenizer.json has no cls token \(looked for <cls>, "
        r"\[CLS\], <s> among its special tokens: <\|endoftext\|>\); "
        r"data=TextClassification needs one to start every example.*\nFix: set "
        r"data.special_tokens.cls",
    ):
        TextClassification(train=train, tokenizer=str(files["gpt2"]), data_dir=str(tmp_path)).setup()
    with pytest.raises(DataError, match="has no pad token"):
        TextClassification(
            train=train, tokenizer=str(files["gpt2"]), special_tokens={"cls": "<|endoftext|>"}, data_dir=str(tmp_path)
        ).setup()
    ok = TextClassification(
        train=train,
        tokenizer=str(files["gpt2"]),
        data_dir=str(tmp_path),
        special_tokens={"cls": "<|endoftext|>", "pad": "<|endoftext|>"},
    )
    ok.setup()
    assert ok.pad_id == 600 and ok.train_set.ids[0][0] == 600 and ok.train_set.ids[0][-1] == 600
    with pytest.raises(
        DataError,
        match=r"gives bos and eos the same token '<\|endoftext\|>' \(id 600\), but "
        r"data=ParallelText needs distinct pad, bos and eos ids.\nFix: set "
        r"data.special_tokens.eos",
    ):
        ParallelText.config_ids({"tokenizer": str(files["gpt2"]), "special_tokens": {"pad": "Ġthe"}})
    with pytest.raises(DataError, match="data.special_tokens applies to a pretrained tokenizer.json"):
        TextClassification(train=train, tokenizer="bpe", special_tokens={"pad": "<pad>"})
    with pytest.raises(DataError, match=r"data.tokenizer='bpee' is not char, bpe, or a tokenizer.json file"):
        TextCorpus(file=train, tokenizer="bpee", data_dir=str(tmp_path)).setup()


@pytest.mark.e2e
def test_config_check_refuses_contradictions_before_training(tmp_path, files, sst2_csv):
    """model.pad_id set against the file, a missing role, and encoder_only translation with other ids than zoo's
    fixed ones: refused by check_config (nothing trained, no data read)."""
    cls_data = ["data=text_classification", f"data.train={sst2_csv / 'train.csv'}"]
    cfg = make_cfg(tmp_path, [*cls_data, f"data.tokenizer={files['roberta']}", "model.pad_id=0"], arch="encoder_only")
    with pytest.raises(
        ConfigError,
        match=r"model.pad_id=0, but the tokenizer .*roberta/tokenizer.json puts that "
        r"token at 1; set model.pad_id=1",
    ):
        check_config(cfg)
    check_config(make_cfg(tmp_path, [*cls_data, f"data.tokenizer={files['roberta']}"], arch="encoder_only"))
    check_config(
        make_cfg(tmp_path, [*cls_data, f"data.tokenizer={files['roberta']}", "model.pad_id=1"], arch="encoder_only")
    )
    with pytest.raises(DataError, match="has no cls token"):
        check_config(make_cfg(tmp_path, [*cls_data, f"data.tokenizer={files['gpt2']}"], arch="encoder_only"))
    with pytest.raises(ConfigError, match=r"model.bos_id=3, but data=SST2's tokenizer puts that token at 1"):
        check_config(make_cfg(tmp_path, ["model.bos_id=3"], arch="encoder_only"))  # zoo's own: any other value
    nat = ["task=translation", "data=parallel_text", f"data.train={sst2_csv / 'train.csv'}", "data.max_len=64"]
    with pytest.raises(
        ConfigError,
        match=r"\+arch=encoder_only translation \(non-autoregressive\) needs zoo's fixed "
        r"special ids \(pad=0, bos=1, mask=4, cls=5\), but the tokenizer "
        r".*roberta/tokenizer.json has pad=1, bos=0, mask=600, cls=0; use "
        r"data.tokenizer=bpe",
    ):
        check_config(make_cfg(tmp_path, [*nat, f"data.tokenizer={files['roberta']}"], arch="encoder_only"))
    check_config(make_cfg(tmp_path, [*nat, f"data.tokenizer={files['zoo']}"], arch="encoder_only"))  # zoo's ids
    check_config(make_cfg(tmp_path, [*nat, f"data.tokenizer={files['roberta']}"], arch="encoder_decoder"))


@pytest.mark.e2e
def test_short_runs_train_on_pretrained_files(tmp_path, files, sst2_csv):
    """+arch=encoder_only classification (BERT) and LM on a text corpus (RoBERTa) train 5 steps through
    zoo.run.train; the model config and the checkpoint hold the file's ids and tokenizer."""
    out = tmp_path / "cls"
    run(
        make_cfg(
            out,
            [
                "data=text_classification",
                f"data.train={sst2_csv / 'train.csv'}",
                f"data.test={sst2_csv / 'test.csv'}",
                f"data.tokenizer={files['bert']}",
                "data.batch_size=72",
                "trainer.max_steps=5",
                *SMALL_MODEL,
            ],
            arch="encoder_only",
        )
    )
    r = json.loads((out / "results.json").read_text())
    assert r["steps"] == 5 and 0 <= r["final"]["test/acc"] <= 1 and r["data"]["tokenizer"]["kind"] == "pretrained"
    ckpt = torch.load(r["best_checkpoint"], map_location="cpu", weights_only=True)
    hp = ckpt["hyper_parameters"]
    assert {k: hp["model"][k] for k in ("vocab_size", "pad_id", "bos_id", "eos_id")} == {
        "vocab_size": 800,
        "pad_id": 0,
        "bos_id": 101,
        "eos_id": 102,
    }
    assert hp["tokenizer"]["json"] == Tokenizer.from_file(str(files["bert"])).to_str()

    plays = tmp_path / "plays"
    plays.mkdir()
    text = shakespeare_text(60_000)
    for i in range(6):
        (plays / f"play{i}.txt").write_text(text[i * 10_000 : (i + 1) * 10_000], encoding="utf-8")
    out = tmp_path / "lm"
    run(
        make_cfg(
            out,
            [
                "task=lm",
                "data=text_corpus",
                f"data.file={plays}",
                f"data.tokenizer={files['roberta']}",
                f"data.token_dir={tmp_path / 'tokens'}",
                "data.block_size=32",
                "data.batch_size=8",
                "data.batches_per_epoch=5",
                "data.val_windows=16",
                "trainer.max_steps=5",
                *SMALL_MODEL,
            ],
            arch="encoder_only",
        )
    )
    r = json.loads((out / "results.json").read_text())
    assert (r["arch"], r["task"], r["steps"]) == ("encoder_only", "lm", 5) and r["final"]["val/loss"] > 0
    assert (r["data"]["tokenizer"]["kind"], r["data"]["tokenizer"]["vocab_size"]) == ("pretrained", 601)
    ckpt = torch.load(r["best_checkpoint"], map_location="cpu", weights_only=True)
    assert {k: ckpt["hyper_parameters"]["model"][k] for k in ("pad_id", "bos_id", "eos_id", "vocab_size")} == {
        "pad_id": 1,
        "bos_id": 0,
        "eos_id": 2,
        "vocab_size": 601,
    }


def test_corpus_token_file_is_keyed_by_the_tokenizers_content(tmp_path, files):
    """The same file elsewhere reuses the token file; another tokenizer never does. Byte-level ids decode back
    to the documents exactly."""
    docs = tmp_path / "docs"
    docs.mkdir()
    text = shakespeare_text(20_000)
    for i in range(4):
        (docs / f"d{i}.txt").write_text(text[i * 5000 : (i + 1) * 5000], encoding="utf-8")
    kw = dict(file=str(docs), block_size=16, batch_size=4, val_fraction=0.25, data_dir=str(tmp_path / "data"))
    copy = tmp_path / "copy.json"
    shutil.copy(files["roberta"], copy)
    a, b = TextCorpus(tokenizer=str(files["roberta"]), **kw), TextCorpus(tokenizer=str(copy), **kw)
    gpt2 = TextCorpus(tokenizer=str(files["gpt2"]), **kw)
    for dm in (a, b, gpt2):
        dm.setup()
    assert a.token_path == b.token_path and ".pretrained." in a.token_path.name and a.token_path != gpt2.token_path
    train = "".join(t if t.endswith("\n") else t + "\n" for t in (p.read_text() for p in a.docs["train"]))
    assert len(a.docs["train"]) == 3 and a.tokenizer.decode(a.train_data[0 : len(a.train_data)].tolist()) == train
    assert a.model_info()["pad_id"] == 1 and gpt2.model_info()["eos_id"] == 600
    zoo_bpe = TextCorpus(tokenizer="bpe", vocab_size=300, **kw)
    zoo_bpe.setup()
    assert ".bpe." in zoo_bpe.token_path.name and zoo_bpe.model_info()["pad_id"] == 0


@pytest.mark.slow  # an end-to-end run; `pytest -m slow` runs it
@pytest.mark.e2e
def test_translation_decodes_with_the_files_ids(tmp_path, files):
    """encoder_decoder translation with the BERT file: the decoder starts at [CLS] (bos 101) and stops at [SEP]
    (eos 102); a one-epoch run validates and tests (greedy and beam decoding) with those ids."""
    d = tmp_path / "pairs"
    d.mkdir()
    for lang in ("de", "en"):
        (d / f"train.{lang}").write_text("".join(multi30k_lines("train", lang, 200)), encoding="utf-8")
    out = tmp_path / "run"
    run(
        make_cfg(
            out,
            [
                "task=translation",
                "data=parallel_text",
                f"data.train={{src: {d / 'train.de'}, tgt: {d / 'train.en'}}}",
                "data.src_lang=de",
                "data.tgt_lang=en",
                f"data.tokenizer={files['bert']}",
                "data.max_len=48",
                "data.max_tokens=4096",
                "trainer.max_epochs=1",
                "task.beam_size=2",
                *SMALL_MODEL,
            ],
            arch="encoder_decoder",
        )
    )
    r = json.loads((out / "results.json").read_text())
    assert 1 <= r["steps"] <= 5 and "val/bleu" in r["final"] and "test/bleu_beam" in r["final"]
    ckpt = torch.load(r["best_checkpoint"], map_location="cpu", weights_only=True)
    assert {k: ckpt["hyper_parameters"]["model"][k] for k in ("pad_id", "bos_id", "eos_id")} == {
        "pad_id": 0,
        "bos_id": 101,
        "eos_id": 102,
    }


@pytest.mark.e2e
def test_cli_names_the_missing_role(tmp_path, files, sst2_csv):
    """`python -m zoo` stops before any data work with the missing role, the file and the fix, exit status 2."""
    out = run_cli(
        [
            "+arch=encoder_only",
            "data=text_classification",
            f"data.train={sst2_csv / 'train.csv'}",
            f"data.tokenizer={files['gpt2']}",
            "logger=csv",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"zoo: error: the tokenizer {files['gpt2']} has no cls token" in out.stderr
    assert "Fix: set data.special_tokens.cls" in out.stderr and not (tmp_path / "run" / "checkpoints").exists()
