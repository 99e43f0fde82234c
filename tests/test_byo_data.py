"""Bring your own data: TextClassification, ParallelText and TextCorpus read the formats a user brings, give
the same examples as the built-in presets, and refuse bad input with the file, the line and the fix.

Fixtures are written into tmp_path from the shared datasets (SST-2, Multi30k, Tiny Shakespeare)."""

import json
import logging
import subprocess
import sys

import pytest
from zoo_run import SHARED_DATA, SMALL_MODEL, multi30k_pairs, run_cli, shakespeare_text, sst2_rows

from zoo.data.parallel_text import ParallelText
from zoo.data.resolver import DataError
from zoo.data.text_classification import TextClassification
from zoo.data.text_corpus import TextCorpus

N = 400  # training examples of the classification / translation fixtures


def common(tmp_path, **kw):
    return dict(vocab_size=300, data_dir=str(tmp_path / "data"), mirror=str(SHARED_DATA), **kw)


def examples(dm):
    dm.setup()
    return {s: (getattr(dm, f"{s}_set").ids, getattr(dm, f"{s}_set").labels) for s in ("train", "val", "test")}


@pytest.fixture(scope="module")
def sst2_files(tmp_path_factory):
    """SST-2's first rows in four formats: tsv (the preset's), csv with a header, JSON Lines, label-first,
    and one file per label."""
    d = tmp_path_factory.mktemp("sst2")
    rows = {s: sst2_rows(s, N if s == "train" else 120) for s in ("train", "val", "test")}
    for s, rs in rows.items():
        (d / f"{s}.tsv").write_text("".join(f"{t} \t{lab}\n" for t, lab in rs), encoding="utf-8")
        with open(d / f"{s}.csv", "w", newline="", encoding="utf-8") as f:
            import csv

            w = csv.writer(f)
            w.writerow(["id", "sentence", "sentiment"])
            w.writerows((i, t, lab) for i, (t, lab) in enumerate(rs))
        (d / f"{s}.jsonl").write_text("".join(json.dumps({"text": t, "label": int(lab)}) + "\n" for t, lab in rs))
        (d / f"{s}.lf.txt").write_text("".join(f"{lab} {t}\n" for t, lab in rs), encoding="utf-8")
        for lab in ("0", "1"):  # one file per label loses the order across labels: compare as sets
            (d / f"{s}.{lab}.txt").write_text("".join(f"{t}\n" for t, la in rs if la == lab), encoding="utf-8")
    return d


@pytest.mark.e2e
def test_classification_formats_give_the_presets_examples(tmp_path, sst2_files):
    d = sst2_files
    splits = lambda ext: {s: str(d / f"{s}.{ext}") for s in ("train", "val", "test")}  # noqa: E731
    preset = examples(
        TextClassification(
            **splits("tsv"), format="tsv", header=False, text_column=0, label_column=1, **common(tmp_path)
        )
    )
    assert len(preset["train"][0]) == N and set(preset["train"][1]) == {0, 1}
    same = [
        TextClassification(**splits("csv"), text_column="sentence", label_column="sentiment", **common(tmp_path)),
        TextClassification(**splits("csv"), text_column=1, label_column=2, **common(tmp_path)),
        TextClassification(**splits("jsonl"), **common(tmp_path)),
        TextClassification(**splits("lf.txt"), format="label_first", **common(tmp_path)),
    ]
    for dm in same:
        assert examples(dm) == preset, dm.sources
    per_label = TextClassification(
        **{s: {lab: str(d / f"{s}.{lab}.txt") for lab in ("0", "1")} for s in ("train", "val", "test")},
        **common(tmp_path),
    )
    got = examples(per_label)
    for s in preset:
        assert sorted(zip(*got[s])) == sorted(zip(*preset[s]))
    info = per_label.data_info()
    assert info["classes"] == ["0", "1"] and info["files"]["train"]["1"] == str(d / "train.1.txt")


@pytest.mark.e2e
def test_parquet_delimiter_hub_folder_and_char_tokenizer(tmp_path, sst2_files):
    """Parquet (written by `datasets`), a semicolon-delimited file without a header, a Hugging Face dataset
    from a local folder of split files (data.hf_path: its validation split is val), and tokenizer=char."""
    import datasets

    d = sst2_files
    rows = {s: sst2_rows(s, N if s == "train" else 120) for s in ("train", "val", "test")}
    for s, rs in rows.items():
        datasets.Dataset.from_dict({"text": [t for t, _ in rs], "label": [int(lab) for _, lab in rs]}).to_parquet(
            str(tmp_path / f"{s}.parquet")
        )
        (tmp_path / f"{s}.semi").write_text("".join(f"{lab};{t.replace(';', ',')}\n" for t, lab in rs))
    hub = tmp_path / "hub"
    hub.mkdir()
    for s, name in (("train", "train"), ("val", "validation"), ("test", "test")):
        (hub / f"{name}.jsonl").write_bytes((d / f"{s}.jsonl").read_bytes())
    jsonl = examples(TextClassification(**{s: str(d / f"{s}.jsonl") for s in rows}, **common(tmp_path)))
    parquet = examples(TextClassification(**{s: str(tmp_path / f"{s}.parquet") for s in rows}, **common(tmp_path)))
    from_hub = TextClassification(hf_path=str(hub), **common(tmp_path))
    assert parquet == jsonl and examples(from_hub) == jsonl
    assert from_hub.data_info()["files"]["val"] == f"{hub}[val]"
    semi = TextClassification(
        **{s: str(tmp_path / f"{s}.semi") for s in rows},
        format="csv",
        delimiter=";",
        header=False,
        text_column=1,
        label_column=0,
        **common(tmp_path),
    )
    assert examples(semi)["train"][1] == jsonl["train"][1]
    chars = TextClassification(**{s: str(d / f"{s}.jsonl") for s in rows}, tokenizer="char", **common(tmp_path))
    chars.setup()
    text = rows["train"][0][0]
    assert chars.tokenizer.decode(chars.train_set.ids[0]) == text  # one token per character, specials at 0..5
    assert len(chars.train_set.ids[0]) == len(text) + 1 + 2 and chars.data_info()["tokenizer"]["kind"] == "char"


def test_regex_layout_string_labels_and_carved_splits(tmp_path):
    """A TREC-like `COARSE:fine text` file, string labels, no val / test files: both carved out of train,
    stratified by label."""
    rows = sst2_rows("train", 300)
    names = {"0": "NEG", "1": "POS"}
    f = tmp_path / "questions.txt"
    f.write_text("".join(f"{names[lab]}:x {t}\n" for t, lab in rows), encoding="utf-8")
    dm = TextClassification(
        train=str(f),
        format="regex",
        pattern=r"(?P<label>[A-Z]+):\S+ (?P<text>.*)",
        val_fraction=0.2,
        test_fraction=0.1,
        **common(tmp_path),
    )
    dm.setup()
    assert dm.classes == ["NEG", "POS"]
    sizes = {s: len(getattr(dm, f"{s}_set")) for s in ("train", "val", "test")}
    n_pos = sum(lab == "1" for _, lab in rows)
    # each fraction is of the whole file, carved per label: val 0.2 of it, then test 0.1 / 0.8 of what is left
    val_n = [round(n * 0.2) for n in (n_pos, 300 - n_pos)]
    test_n = [round((n - v) * 0.1 / 0.8) for n, v in zip((n_pos, 300 - n_pos), val_n)]
    assert sizes == {"train": 300 - sum(val_n) - sum(test_n), "val": sum(val_n), "test": sum(test_n)}
    assert sum(dm.test_set.labels) == test_n[0]
    # stratified: val holds 20% of each class
    assert sum(dm.val_set.labels) == round(n_pos * 0.2)
    assert "0.2 of train, stratified by label" in dm.data_info()["files"]["val"]


def test_integer_labels_sort_by_value(tmp_path):
    f = tmp_path / "five.jsonl"
    rows = sst2_rows("train", 200)
    f.write_text("".join(json.dumps({"text": t, "label": i % 11}) + "\n" for i, (t, _) in enumerate(rows)))
    dm = TextClassification(train=str(f), **common(tmp_path))
    dm.setup()
    assert dm.classes == [str(i) for i in range(11)]  # 2 before 10, as integers


def bad(tmp_path, **kw):
    dm = TextClassification(**common(tmp_path), **kw)
    dm.setup()


def test_classification_bad_input(tmp_path, sst2_files, caplog):
    d = sst2_files
    with pytest.raises(DataError, match=r"not found: .*nope\.csv"):
        bad(tmp_path, train=str(tmp_path / "nope.csv"))
    with pytest.raises(
        DataError, match=r"no column 'review' for data.text_column; the columns are: id, sentence, sentiment"
    ):
        bad(tmp_path, train=str(d / "train.csv"), text_column="review")
    with pytest.raises(DataError, match="data.val_fraction=1.5 must be in"):
        bad(tmp_path, train=str(d / "train.csv"), val_fraction=1.5)
    latin = tmp_path / "latin.tsv"
    latin.write_bytes(b"good one \t1\nbad \xe9t\xe9 \t0\n")
    with pytest.raises(DataError, match=r"latin.tsv, line 2: not valid UTF-8"):
        bad(tmp_path, train=str(latin), format="tsv", header=False, text_column=0, label_column=1)
    one = tmp_path / "one.jsonl"
    one.write_text("".join(json.dumps({"text": t, "label": 1}) + "\n" for t, _ in sst2_rows("train", 30)))
    with pytest.raises(DataError, match="has a single class"):
        bad(tmp_path, train=str(one))
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"text": " ", "label": 1}) + "\n")
    with pytest.raises(DataError, match=r"the test split .*empty.jsonl.* has no examples"):
        bad(tmp_path, train=str(d / "train.jsonl"), val=str(d / "val.jsonl"), test=str(empty))
    for content, what in ((b"", "empty.jsonl"), (b"sentence,label\n", "header.csv")):  # no rows at all
        f = tmp_path / what
        f.write_bytes(content)
        with pytest.raises(DataError, match=rf"{what} has no rows \(the file is empty"):
            bad(tmp_path, train=str(d / "train.jsonl"), test=str(f), text_column="text")
    blanks = tmp_path / "blanks.csv"
    blanks.write_text("text,label\ngood film,pos\n,neg\nbad film,\n")
    with pytest.raises(DataError, match=r"blanks.csv, line 4: the label is empty"):
        bad(tmp_path, train=str(blanks))
    unseen = tmp_path / "test.jsonl"
    unseen.write_text(
        "".join(
            json.dumps({"text": t, "label": 7 if i == 2 else 0}) + "\n" for i, (t, _) in enumerate(sst2_rows("test", 5))
        )
    )
    with pytest.raises(
        DataError, match=r"test.jsonl, line 3: label '7' is not one of the classes of the training split"
    ):
        bad(tmp_path, train=str(d / "train.jsonl"), test=str(unseen))
    with pytest.raises(DataError, match=r"longer than data.max_len=8 tokens, the first at .*train.jsonl, line \d+"):
        bad(tmp_path, train=str(d / "train.jsonl"), max_len=8, truncate=False)
    with caplog.at_level(logging.WARNING, logger="zoo"):
        bad(tmp_path, train=str(d / "train.jsonl"), val=str(d / "val.jsonl"), test=str(d / "train.jsonl"))
    shared = len({t for t, _ in sst2_rows("train", N)})  # test = train: every distinct text is shared
    assert f"{shared} test texts also appear in train" in caplog.text


@pytest.fixture(scope="module")
def multi30k_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("m30k")
    for split, n in (("train", N), ("val", 100), ("test_2016_flickr", 100)):
        pairs = multi30k_pairs(split, n)
        (d / f"{split}.tsv").write_text(
            "id\tgerman\tenglish\n" + "".join(f"{i}\t{a}\t{b}\n" for i, (a, b) in enumerate(pairs)), encoding="utf-8"
        )
        (d / f"{split}.de").write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
        (d / f"{split}.en").write_text("".join(b + "\n" for _, b in pairs), encoding="utf-8")
    return d


def pairs(dm):
    dm.setup()
    return {s: (getattr(dm, f"{s}_set").src, getattr(dm, f"{s}_set").tgt_out) for s in ("train", "val", "test")}


def test_parallel_formats_give_the_same_pairs(tmp_path, multi30k_files):
    d = multi30k_files
    names = {"train": "train", "val": "val", "test": "test_2016_flickr"}
    two = ParallelText(
        **{s: {"src": str(d / f"{n}.de"), "tgt": str(d / f"{n}.en")} for s, n in names.items()},
        src_lang="de",
        tgt_lang="en",
        **common(tmp_path),
    )
    table = ParallelText(
        **{s: str(d / f"{n}.tsv") for s, n in names.items()},
        src_lang="de",
        tgt_lang="en",
        src_column="german",
        tgt_column="english",
        **common(tmp_path),
    )
    assert pairs(two) == pairs(table)
    assert len(two.train_set) == N and two.train_batches(1) == table.train_batches(1)
    info = table.data_info()
    assert (info["src_lang"], info["tgt_lang"]) == ("de", "en") and info["files"]["val"] == str(d / "val.tsv")
    hub = tmp_path / "hub"  # a Hugging Face dataset folder: train / validation / test files
    hub.mkdir()
    for s, n in names.items():
        (hub / f"{'validation' if s == 'val' else s}.tsv").write_bytes((d / f"{n}.tsv").read_bytes())
    from_hub = ParallelText(
        hf_path=str(hub), src_lang="de", tgt_lang="en", src_column="german", tgt_column="english", **common(tmp_path)
    )
    assert pairs(from_hub) == pairs(table) and from_hub.data_info()["files"]["test"] == f"{hub}[test]"


def test_parallel_bad_input(tmp_path, multi30k_files):
    d = multi30k_files
    short = tmp_path / "short.en"
    short.write_text("one line\n")
    with pytest.raises(DataError, match="parallel files differ in length"):
        ParallelText(train={"src": str(d / "val.de"), "tgt": str(short)}, **common(tmp_path)).setup()
    with pytest.raises(DataError, match="no column 'src' for data.src_column; the columns are: id, german, english"):
        ParallelText(train=str(d / "train.tsv"), **common(tmp_path)).setup()
    ragged = tmp_path / "ragged.tsv"
    ragged.write_text("id\tgerman\tenglish\n0\tein hund\ta dog\n1\tzwei\thunde\ttwo dogs\n")
    with pytest.raises(
        DataError,
        match=r"ragged.tsv, line 3: 4 fields where the header has 3 \(delimiter '\\t'\)",
    ):
        ParallelText(train=str(ragged), src_column="german", tgt_column="english", **common(tmp_path)).setup()
    with pytest.raises(DataError, match="both 'en'"):
        ParallelText(train=str(d / "train.tsv"), src_lang="en", tgt_lang="en")


def write_plays(root, n=12):
    """Tiny Shakespeare cut into n documents in a folder tree (every third one a level down), plus a
    README.md to exclude."""
    text = shakespeare_text(240_000)
    step = len(text) // n
    (root / "act").mkdir(parents=True)
    docs = {}
    for i in range(n):
        p = (root / "act" if i % 3 == 0 else root) / f"play{i:02d}.txt"
        p.write_text(text[i * step : (i + 1) * step], encoding="utf-8")
        docs[p.resolve()] = text[i * step : (i + 1) * step]
    (root / "README.md").write_text("notes, not a play")
    return docs


@pytest.mark.parametrize("tokenizer", ["char", "bpe"])
def test_corpus_folder_splits_by_document(tmp_path, tokenizer):
    docs = write_plays(tmp_path / "plays")
    kw = dict(
        block_size=32,
        batch_size=4,
        batches_per_epoch=2,
        val_windows=8,
        data_dir=str(tmp_path / "data"),
        mirror=str(SHARED_DATA),
    )
    dm = TextCorpus(
        file=str(tmp_path / "plays"), exclude=["*.md"], tokenizer=tokenizer, vocab_size=300, val_fraction=0.25, **kw
    )
    dm.setup()
    train, val = dm.docs["train"], dm.docs["val"]
    assert len(val) == 3 and len(train) == 9 and not set(train) & set(val) and set(train) | set(val) == set(docs)
    joined = lambda ds: "".join(docs[p] if docs[p].endswith("\n") else docs[p] + "\n" for p in ds)  # noqa: E731
    if tokenizer == "char":  # the token file holds exactly the train documents, then (its own file) the val ones
        assert dm.tokenizer.decode(dm.train_data[0 : len(dm.train_data)].tolist()) == joined(train)
        assert dm.tokenizer.decode(dm.val_data[0 : len(dm.val_data)].tolist()) == joined(val)
    else:
        assert dm.vocab_size == 300 and 0 < len(dm.train_data) < len(joined(train))
    same = TextCorpus(
        file=str(tmp_path / "plays/**/*.txt"), tokenizer=tokenizer, vocab_size=300, val_fraction=0.25, **kw
    )
    same.setup()
    assert same.docs == dm.docs and same.token_path == dm.token_path  # the same key: tokenized once


def test_corpus_bad_input(tmp_path):
    kw = dict(block_size=32, batch_size=4, data_dir=str(tmp_path / "data"))
    with pytest.raises(DataError, match="not found: .*missing.txt"):
        TextCorpus(file=str(tmp_path / "missing.txt"), **kw).setup()
    with pytest.raises(DataError, match="the glob matches no file"):
        TextCorpus(file=str(tmp_path / "*.nothing"), **kw).setup()
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no files"):
        TextCorpus(file=str(tmp_path / "empty"), **kw).setup()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("to be or not to be\n" * 50)
    (docs / "b.txt").write_bytes(b"fine\nfine\n\xff broken\n")
    with pytest.raises(DataError, match=r"b.txt, line 3: not valid UTF-8"):
        TextCorpus(file=str(docs), **kw).setup()
    with pytest.raises(DataError, match="leaves none of its 2 files"):
        TextCorpus(file=str(docs), exclude=["*.txt"], **kw).setup()
    with pytest.raises(DataError, match="data.val_fraction=0 must be in"):
        TextCorpus(file=str(docs), val_fraction=0, **kw)


MEMORY_SCRIPT = """
import resource, sys
from zoo.data.text_corpus import TextCorpus
dm = TextCorpus(file=sys.argv[1], block_size=32, batch_size=4, data_dir=sys.argv[2])
dm.setup()
print(len(dm.train_data) + len(dm.val_data), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


@pytest.mark.slow  # about 30 s: writes and tokenizes 280 MB of text
def test_corpus_tokenizing_memory_does_not_grow_with_its_size(tmp_path):
    """Peak resident memory (MB) tokenizing a 40 MB and a 240 MB corpus (each in a fresh process) differs by
    less than a tenth of the size difference: the pass is streaming."""
    text = shakespeare_text()
    peaks = {}
    for mb in (40, 240):
        d = tmp_path / f"c{mb}"
        d.mkdir()
        reps = mb * 1_000_000 // len(text) + 1
        with open(d / "corpus.txt", "w", encoding="utf-8") as f:
            for _ in range(reps):
                f.write(text)
        out = subprocess.run(
            [sys.executable, "-c", MEMORY_SCRIPT, str(d / "corpus.txt"), str(tmp_path / "data")],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        tokens, peak = map(int, out.stdout.split())
        assert tokens == reps * len(text)
        peaks[mb] = peak
        (d / "corpus.txt").unlink()
    assert peaks[240] - peaks[40] < 20, peaks  # 200 MB more text, < 20 MB more memory


# ---- by config alone, through the main job -------------------------------------------------------------------
def user_conf(root, name: str, text: str):
    """A data config of the user's own, in root/conf/data/<name>.yaml (outside the repo)."""
    (root / "conf" / "data").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "data" / f"{name}.yaml").write_text(text)
    return f"hydra.searchpath=[file://{root / 'conf'}]"


@pytest.mark.e2e
def test_user_classification_config_compares_the_three_archs(tmp_path, sst2_files):
    """The README's workflow: a data config in the user's folder, `~` in its paths, -m over the three archs; each
    run classifies (the task follows the data) and results.json and the report name the dataset."""
    home = tmp_path / "home"
    (home / "corpora").mkdir(parents=True)
    for split in ("train", "test"):
        (home / "corpora" / f"{split}.csv").write_bytes((sst2_files / f"{split}.csv").read_bytes())
    searchpath = user_conf(
        home / "exp",
        "my_topics",
        "defaults: [text_classification]\ntrain: ~/corpora/train.csv\n"
        "test: ~/corpora/test.csv\ntext_column: sentence\nlabel_column: sentiment\n"
        "name: my_topics\nvocab_size: 300\n",
    )
    sweep = tmp_path / "sweep"
    out = run_cli(
        [
            "-m",
            "+arch=encoder_only,decoder_only,encoder_decoder",
            "data=my_topics",
            searchpath,
            "trainer.max_epochs=1",
            *SMALL_MODEL,
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"zoo: multirun dir: {sweep}" in out.stdout and f"python -m zoo.report {sweep}" in out.stdout
    results = [json.loads((sweep / str(i) / "results.json").read_text()) for i in range(3)]
    assert [r["arch"] for r in results] == ["encoder_only", "decoder_only", "encoder_decoder"]
    for r in results:
        assert (r["task"], r["dataset"]) == ("classification", "my_topics") and 0 <= r["final"]["test/acc"] <= 1
        assert r["data"]["files"]["train"] == str(home / "corpora" / "train.csv")  # "~" expanded
        labels = [lab for _, lab in sst2_rows("train", N)]
        kept = N - sum(round(labels.count(c) * 0.1) for c in ("0", "1"))  # val: 0.1 of each class carved out
        assert r["data"]["classes"] == ["0", "1"] and r["steps"] == -(-kept // 64)  # one epoch of batch 64
    rep = subprocess.run([sys.executable, "-m", "zoo.report", str(sweep)], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    table = (sweep / "report.md").read_text()
    assert all(f"| classification / {a} | my_topics |" in table for a in ("encoder_only", "decoder_only"))


@pytest.mark.slow
@pytest.mark.e2e
def test_user_parallel_and_corpus_configs_train(tmp_path, multi30k_files):
    """--config-dir with two aligned files, -m over the three archs (the task follows the data to translation),
    and a folder of plays as a corpus."""
    d = multi30k_files
    user_conf(
        tmp_path / "exp",
        "my_pairs",
        f"defaults: [parallel_text]\ntrain: {{src: {d / 'train.de'}, tgt: "
        f"{d / 'train.en'}}}\nval: {{src: {d / 'val.de'}, tgt: {d / 'val.en'}}}\nsrc_lang: de\ntgt_lang: en\n"
        f"vocab_size: 300\nmax_tokens: 1024\nmax_len: 48\n",
    )
    sweep = tmp_path / "pairs"
    out = run_cli(
        [
            "--config-dir",
            str(tmp_path / "exp" / "conf"),
            "-m",
            "+arch=encoder_decoder,decoder_only,encoder_only",
            "data=my_pairs",
            "trainer.max_steps=6",
            *SMALL_MODEL,
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for i in range(3):
        r = json.loads((sweep / str(i) / "results.json").read_text())
        assert r["task"] == "translation" and (r["data"]["src_lang"], r["data"]["tgt_lang"]) == ("de", "en")
        assert r["data"]["files"]["test"] == "0.05 of train, seed 0" and "test/bleu" in r["final"]
        assert r["dataset"] == f"{d / 'train.de'}, {d / 'train.en'}, {d / 'val.de'}, {d / 'val.en'}"
    write_plays(tmp_path / "plays")
    searchpath = user_conf(
        tmp_path / "exp",
        "my_plays",
        f"defaults: [text_corpus]\nfile: {tmp_path / 'plays'}\n"
        f"exclude: ['*.md']\nname: plays\nblock_size: 32\nbatch_size: 8\nval_windows: 16\n",
    )
    run_dir = tmp_path / "plays_run"
    out = run_cli(
        [
            "+arch=encoder_decoder",
            "task=lm",
            "data=my_plays",
            searchpath,
            "trainer.max_steps=6",
            *SMALL_MODEL,
            "task.sample.max_new_tokens=8",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads((run_dir / "results.json").read_text())
    assert (r["task"], r["dataset"], r["data"]["documents"]) == ("lm", "plays", {"train": 11, "val": 1})


class NoLabels(TextClassification):
    """A user's datamodule whose batches lack the labels Classification reads."""

    @staticmethod
    def collate(items, pad_id):
        batch = TextClassification.collate(items, pad_id)
        del batch["labels"]
        return batch


@pytest.mark.e2e
def test_a_batch_that_breaks_the_contract_is_refused_at_the_first_step(tmp_path, sst2_files):
    import lightning.pytorch as pl

    from zoo.tasks.classification import Classification

    dm = NoLabels(train=str(sst2_files / "train.jsonl"), **common(tmp_path))
    info = dm.model_info()
    task = Classification(
        "encoder_only",
        dict(vocab_size=info["vocab_size"], num_classes=2, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=128),
        info["tokenizer"],
        {"lr": 1e-3},
        {"warmup_steps": 1},
    )
    trainer = pl.Trainer(
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    with pytest.raises(
        ValueError,
        match=r"Classification needs batch\['labels'\] as torch.int64 with 1 dims, but "
        r"NoLabels gives missing",
    ):
        trainer.fit(task, datamodule=dm)
    assert trainer.global_step == 0
