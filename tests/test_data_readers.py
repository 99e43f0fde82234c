"""The data readers lose nothing silently: header rows, one class per whole-number label, quoting with a tab,
one line-break rule for every reader, blank lines counted, a pretrained tokenizer.json's padding and normalizer,
and typos in a YAML data config.

Fixtures are written into tmp_path from the shared datasets (SST-2 sentences and labels, Multi30k pairs)."""

import gzip
import json
import logging
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
from zoo_run import SHARED_DATA, make_cfg, multi30k_pairs, needs_shared, run_cli, sst2_rows

from zoo.data import text_corpus
from zoo.data.bpe import SubwordTokenizer
from zoo.data.files.lines import text_chunks, text_lines
from zoo.data.labels import class_label
from zoo.data.multi30k import read_gz_lines
from zoo.data.parallel_text import ParallelText
from zoo.data.resolver import DataError
from zoo.data.sst2 import SST2
from zoo.data.text_classification import TextClassification
from zoo.data.text_corpus import TextCorpus
from zoo.errors import ConfigError
from zoo.run.checks.config import check_config
from zoo.run.cli_overrides import typos
from zoo.run.conf import CONF_DIR

pytestmark = needs_shared

CLASSES = [0, 1, 2, 10]  # 10 sorts after 2 as a number, before it as text
FORMATS = ("csv", "tsv", "jsonl", "parquet", "lf.txt")  # lf.txt: format=label_first
TABLES = FORMATS[:4]


def common(tmp_path, **kw):
    return dict(vocab_size=200, data_dir=str(tmp_path / "data"), mirror=str(SHARED_DATA), **kw)


def write(path: Path, rows, header=True, breaks=("\n",)):
    """rows (text, label value) as the file's format (its suffix); csv / tsv / label-first lines end with
    breaks[i % len(breaks)]; the label is written as Python writes the value (1 or 1.0)."""
    fmt = "lf.txt" if path.name.endswith(".lf.txt") else path.suffix[1:]
    if fmt == "parquet":
        labels = [lab for _, lab in rows]
        kind = pa.float64() if any(isinstance(x, float) for x in labels) else pa.int64()
        pq.write_table(pa.table({"text": [t for t, _ in rows], "label": pa.array(labels, kind)}), str(path))
        return path
    if fmt == "jsonl":
        lines = [json.dumps({"text": t, "label": lab}, ensure_ascii=False) for t, lab in rows]
    elif fmt == "lf.txt":
        lines = [f"{lab} {t}" for t, lab in rows]
    else:
        sep = "," if fmt == "csv" else "\t"
        quote = q if fmt == "csv" else (lambda t: t)  # noqa: E731
        lines = ([f"text{sep}label"] if header else []) + [f"{quote(t)}{sep}{lab}" for t, lab in rows]
    path.write_text("".join(ln + breaks[i % len(breaks)] for i, ln in enumerate(lines)), encoding="utf-8", newline="")
    return path


def splits(dm):
    dm.setup()
    return {s: getattr(dm, f"{s}_set").labels for s in ("train", "val", "test")}


def q(text: str) -> str:
    """A CSV field, quoted."""
    return '"' + text.replace('"', '""') + '"'


class SetupLog:
    """The setup lines (rank_zero_info's logger, which does not propagate to root) in caplog."""

    def __init__(self, caplog):
        self.caplog, self.log = caplog, logging.getLogger("lightning.pytorch")

    def __enter__(self):
        self.log.addHandler(self.caplog.handler)
        self.level = self.log.level
        self.log.setLevel(logging.INFO)
        self.caplog.clear()
        return self

    def __exit__(self, *exc):
        self.log.removeHandler(self.caplog.handler)
        self.log.setLevel(self.level)


# ---- header rows ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_a_headerless_file_read_with_a_header_is_refused(tmp_path, fmt):
    """SST-2 rows written without a header: with the default data.header=true the first row would be lost (train
    or test, columns by index or by name); refused naming the file, line 1 and data.header. With
    data.header=false every row is an example."""
    rows = {s: [(t, int(lab)) for t, lab in sst2_rows(s, n)] for s, n in (("train", 120), ("test", 41))}
    bare = {s: write(tmp_path / f"{s}.{fmt}", r, header=False) for s, r in rows.items()}
    headed = {s: write(tmp_path / f"{s}.h.{fmt}", r) for s, r in rows.items()}
    fixed = dict(format=fmt, **common(tmp_path))
    for train, test in ((bare["train"], headed["test"]), (headed["train"], bare["test"])):
        with pytest.raises(DataError) as e:
            TextClassification(train=str(train), test=str(test), text_column=0, label_column=1, **fixed).setup()
        msg = str(e.value)
        bad = train if train == bare["train"] else test
        assert msg.startswith(f"{bad}, line 1: data.header=true reads this line as the column names") and (
            "Fix: set data.header=false" in msg
        )
    with pytest.raises(DataError, match=r"(?s)no column 'text' .* set data\.header=false"):  # the default names
        TextClassification(train=str(bare["train"]), **fixed).setup()
    got = splits(
        TextClassification(
            train=str(bare["train"]), test=str(bare["test"]), header=False, text_column=0, label_column=1, **fixed
        )
    )
    assert len(got["train"]) + len(got["val"]) == 120 and len(got["test"]) == 41  # no row lost
    assert sorted(got["test"]) == sorted(lab for _, lab in rows["test"])


def test_a_parallel_table_read_with_a_header_by_index_says_so(tmp_path, caplog):
    """A parallel TSV whose columns are given by index: line 1 taken as the header is logged with the file and
    the fix; with header=false it is the first pair."""
    pairs = multi30k_pairs("train", 60)
    f = tmp_path / "pairs.tsv"
    f.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    kw = dict(val_fraction=0.1, test_fraction=0.1, src_column=0, tgt_column=1, **common(tmp_path))
    with caplog.at_level(logging.WARNING, logger="zoo"):
        dm = ParallelText(train=str(f), **kw)
        data = dm.read()
    assert f"{f}, line 1: data.header=true reads it as the column names" in caplog.text
    assert "set data.header=false" in caplog.text and sum(len(s) for s, _ in data.values()) == 59
    data = ParallelText(train=str(f), header=False, **kw).read()
    assert sorted(p for s, t in data.values() for p in zip(s, t)) == sorted(pairs)


def test_a_pair_row_missing_its_tab_is_refused_not_skipped_as_blank(tmp_path):
    """A parallel TSV row whose tab became a space (one field where the header has two) is named with its line and
    the fix, as a row with an extra tab is; pandas would pad it with an empty target and the pair would be dropped
    as blank. A truly blank line and an empty field are still a blank pair, skipped and counted."""
    pairs = multi30k_pairs("train", 60)
    lines = ["en\tde", *(f"{a}\t{b}" for a, b in pairs)]
    f = tmp_path / "pairs.tsv"
    kw = dict(val_fraction=0.1, test_fraction=0.1, **common(tmp_path))
    f.write_text("\n".join([*lines[:10], "", f"{pairs[20][0]}\t", *lines[10:]]) + "\n", encoding="utf-8")
    dm = ParallelText(train=str(f), src_lang="en", tgt_lang="de", **kw)
    assert sum(len(s) for s, _ in dm.read().values()) == 60
    lines[12] = lines[12].replace("\t", " ")
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"(?s)pairs.tsv, line 13: 1 fields where the header has 2 .*put the delimiter"):
        ParallelText(train=str(f), src_lang="en", tgt_lang="de", **kw).read()


# ---- one label type per class -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """{(split, format): file}: SST-2 sentences labelled 0, 1, 2, 10 in turn, in every format; train's labels
    alternate int and float (1, 1.0: one float column in JSON Lines, CSV, TSV and Parquet), val's and
    test's are plain ints. And the expected class index of every row."""
    d = tmp_path_factory.mktemp("labels")
    rows, files = {}, {}
    for split, name, n in (
        ("train", "sentiment-train", 160),
        ("val", "sentiment-dev", 40),
        ("test", "sentiment-test", 40),
    ):
        texts = [t for t, _ in sst2_rows(name, n)]
        labels = [CLASSES[i % 4] for i in range(n)]
        values = [float(x) if split == "train" and i % 2 else x for i, x in enumerate(labels)]
        rows[split] = [CLASSES.index(x) for x in labels]
        for fmt in FORMATS:
            files[split, fmt] = write(d / f"{split}.{fmt}", list(zip(texts, values)))
    return files, rows


def fmt_kw(path: Path) -> dict:
    return {"format": "label_first"} if path.name.endswith(".lf.txt") else {}


@pytest.mark.parametrize("i", range(len(TABLES) + 1))
def test_whole_numbers_are_one_class_in_numeric_order(tmp_path, labelled, i):
    """train in one table format (mixed 1 / 1.0 labels), val and test in two others (plain ints), each format in
    each role once; and label_first throughout ("1.0" is 1): classes 0, 1, 2, 10 in numeric order, the same
    index for 10 and 10.0 in every split."""
    files, rows = labelled
    fmts = [TABLES[(i + k) % len(TABLES)] for k in range(3)] if i < len(TABLES) else ["lf.txt"] * 3
    train, val, test = (files[s, f] for s, f in zip(("train", "val", "test"), fmts))
    dm = TextClassification(train=str(train), val=str(val), test=str(test), **fmt_kw(train), **common(tmp_path))
    assert splits(dm) == rows and dm.classes == ["0", "1", "2", "10"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_label_that_is_not_a_whole_number_is_refused(tmp_path, labelled, fmt):
    files, _ = labelled
    rows = [(t, lab) for t, lab in sst2_rows("test", 6)]
    rows = [(t, 1.7 if i == 2 else int(lab)) for i, (t, lab) in enumerate(rows)]
    bad = write(tmp_path / f"bad.{fmt}", rows)
    where = {"csv": "line 4", "tsv": "line 4", "parquet": "row 3"}.get(fmt, "line 3")
    with pytest.raises(DataError) as e:
        TextClassification(train=str(files["train", fmt]), test=str(bad), **fmt_kw(bad), **common(tmp_path)).setup()
    shown = "'1.7'" if fmt in ("lf.txt", "csv", "tsv") else "1.7"  # text as written, or the number of JSON / Parquet
    assert str(e.value).startswith(f"{bad}, {where}: label {shown} is a number that is not whole"), str(e.value)


def test_class_label_rule():
    from decimal import Decimal

    same = [(1, "1"), (1.0, "1"), ("1", "1"), (" 1.0 ", "1"), ("1e1", "10"), (10.0, "10"), ("-0", "0")]
    for value, want in [*same, (Decimal("3.00"), "3"), (2**70, str(2**70))]:
        assert class_label(value, "x") == want, value
    assert [class_label(v, "x") for v in ("pos", "NaN", "1.7x", True)] == ["pos", "NaN", "1.7x", "True"]
    for value in (1.7, "2.5", float("nan"), float("inf"), "1e-1"):
        with pytest.raises(DataError, match="is a number that is not whole"):
            class_label(value, "f.jsonl, line 3")
    dm = TextClassification(train="x.csv", labels=[1.0, 2])
    assert dm.fixed_labels == ["1", "2"]
    with pytest.raises(DataError, match=r"^data.labels: label 0.5 is a number that is not whole"):
        TextClassification(train="x.csv", labels=[0.5, 1])


# ---- quoting -----------------------------------------------------------------------------------------------------
def test_a_quote_never_merges_rows_with_a_tab_delimiter(tmp_path):
    """format=csv with a tab delimiter, and a hub folder of .tsv files: a field that opens a quote stays one row
    (quotes are text); a hub folder's csv reads "NA" as text."""
    rows = [(t, int(lab)) for t, lab in sst2_rows("train", 40)]
    rows[3] = ('"a quote that never closes ' + rows[3][0], rows[3][1])
    f = write(tmp_path / "q.tsv", rows)
    dm = TextClassification(
        train=str(f), format="csv", delimiter="\t", val_fraction=0.2, test_fraction=0.2, **common(tmp_path)
    )
    data = dm.read()
    texts = sorted(e.text for exs in data.values() for e in exs)
    assert texts == sorted(t for t, _ in rows)
    hub = tmp_path / "hub"
    hub.mkdir()
    for split in ("train", "validation", "test"):
        (hub / f"{split}.tsv").write_bytes(f.read_bytes())
    from_hub = TextClassification(hf_path=str(hub), **common(tmp_path)).read()
    assert [e.text for e in from_hub["test"]] == [t for t, _ in rows]
    hub_csv = tmp_path / "hub_csv"
    hub_csv.mkdir()
    for split in ("train", "validation", "test"):
        write(hub_csv / f"{split}.csv", [("NA", 1), *rows[:10]])
    assert TextClassification(hf_path=str(hub_csv), **common(tmp_path)).read()["val"][0].text == "NA"


def test_a_quoted_field_over_lines_is_reported_and_lines_stay_right(tmp_path, caplog):
    """Comma CSV (quoting on): a field with line breaks inside quotes is reported with its file and lines, and a
    later row's error names its true line."""
    rows = [(t, int(lab)) for t, lab in sst2_rows("train", 8)]
    body = "".join(f"{q(t)},{lab}\n" for t, lab in rows[:2])
    body += f"{q(rows[2][0] + chr(10) + 'still the same field' + chr(13) + chr(10) + 'and more')},{rows[2][1]}\n"
    body += "".join(f"{q(t)},{lab}\n" for t, lab in rows[3:5])  # lines 7, 8
    body += f"{q(rows[5][0])},\n"  # line 9: no label
    f = tmp_path / "multi.csv"
    f.write_text("text,label\n" + body, encoding="utf-8", newline="")
    with caplog.at_level(logging.WARNING, logger="zoo"), pytest.raises(DataError) as e:
        TextClassification(train=str(f), **common(tmp_path)).setup()
    assert str(e.value).startswith(f"{f}, line 9: the label is empty")
    assert f"{f}, lines 4-6: a quoted field runs over 3 lines (1 such rows in the file)" in caplog.text


# ---- line breaks ---------------------------------------------------------------------------------------------------
ODD = ["\u2028", "\u0085", "\u2029", "\x0b", "\x0c", "\x1c"]  # inside a line by the rule
BREAKS = ("\n", "\r\n", "\r")


def odd_texts(n=12, split="train"):
    """SST-2 sentences, each with one of ODD in its middle."""
    out = []
    for i, (t, _) in enumerate(sst2_rows(split, n)):
        k = len(t) // 2
        out.append(t[:k] + ODD[i % len(ODD)] + t[k:])
    return out


def python_lines(path: Path) -> list[str]:
    """The reference: Python's text mode (newline=None) reads the lines."""
    with open(path, encoding="utf-8", newline=None) as f:
        return [ln[:-1] if ln.endswith("\n") else ln for ln in f]


def test_text_lines_follow_pythons_text_mode_plain_and_gz(tmp_path):
    texts = odd_texts()
    content = "".join(t + BREAKS[i % 3] for i, t in enumerate(texts))
    plain = tmp_path / "a.txt"
    plain.write_text(content, encoding="utf-8", newline="")
    gz = tmp_path / "a.txt.gz"
    gz.write_bytes(gzip.compress(content.encode()))
    assert python_lines(plain) == texts and text_lines(plain) == texts and text_lines(gz) == texts
    assert read_gz_lines(gz) == texts  # Multi30k's reader
    assert "".join(text_chunks(plain)) == "".join(t + "\n" for t in texts)
    for chunk in (1, 2, 3, 7):  # a "\r\n" across two chunks is one break
        assert "".join(text_chunks(plain, chunk=chunk)) == "".join(t + "\n" for t in texts)
    bad = tmp_path / "bad.txt"  # an undecodable byte on line 5, lines ended by "\r" and "\r\n"
    bad.write_bytes(b"one\rtwo\r\nthree\rfour\r\n\xff five\n")
    for chunk in (1, 3, 4, 1 << 20):
        with pytest.raises(DataError, match=r"bad.txt, line 5: not valid UTF-8 \(byte offset 21"):
            list(text_chunks(bad, chunk=chunk))


def test_every_reader_splits_lines_by_one_rule(tmp_path):
    """The same texts (with U+2028, U+0085, ... inside), lines ended by "\\n", "\\r\\n" and "\\r" in turn: every
    reader gives exactly the texts (Python's text mode, newline=None, is the reference)."""
    texts = odd_texts(12)
    labels = [i % 2 for i in range(len(texts))]
    kw = dict(val_fraction=0.25, test_fraction=0.25, **common(tmp_path))

    def classification(**files_and_format):
        data = TextClassification(**files_and_format, **kw).read()
        return sorted((e.text, e.label) for exs in data.values() for e in exs)

    want = sorted((t, str(lab)) for t, lab in zip(texts, labels))
    for fmt in ("csv", "tsv", "jsonl", "lf.txt"):
        f = write(tmp_path / f"c.{fmt}", list(zip(texts, labels)), breaks=BREAKS)
        assert classification(train=str(f), **fmt_kw(f)) == want, fmt
    per_label = {}
    for lab in (0, 1):
        per_label[lab] = tmp_path / f"l{lab}.txt"
        mine = [t for t, la in zip(texts, labels) if la == lab]
        per_label[lab].write_text("".join(t + BREAKS[i % 3] for i, t in enumerate(mine)), newline="")
        assert python_lines(per_label[lab]) == mine
    assert classification(train={k: str(v) for k, v in per_label.items()}) == want
    regex = tmp_path / "r.txt"
    regex.write_text("".join(f"L{lab}:x {t}{BREAKS[i % 3]}" for i, (t, lab) in enumerate(zip(texts, labels))))
    got = classification(train=str(regex), format="regex", pattern=r"L(?P<label>\d):\S+ (?P<text>.*)")
    assert got == want
    sst = tmp_path / "sst.tsv"  # SST-2's own reader on a user's file
    sst.write_text("".join(f"{t} \t{lab}{BREAKS[i % 3]}" for i, (t, lab) in enumerate(zip(texts, labels))))
    data = SST2(train_file=str(sst), val_file=str(sst), test_file=str(sst), **common(tmp_path)).read()
    assert sorted((e.text, e.label) for e in data["train"]) == want

    pairs = list(zip(texts, odd_texts(12, "test")))
    src, tgt = ("".join(p[k] + BREAKS[(i + k) % 3] for i, p in enumerate(pairs)) for k in (0, 1))
    two = {}
    for side, content in (("src", src), ("tgt", tgt)):
        (tmp_path / f"p.{side}").write_text(content, newline="")
        (tmp_path / f"p.{side}.gz").write_bytes(gzip.compress(content.encode()))
        two[side] = tmp_path / f"p.{side}"
    for suffix in ("", ".gz"):
        dm = ParallelText(train={k: f"{v}{suffix}" for k, v in two.items()}, **kw)
        assert sorted(p for s, t in dm.read().values() for p in zip(s, t)) == sorted(pairs), suffix
    table = tmp_path / "p.jsonl"
    table.write_text(
        "".join(json.dumps({"src": a, "tgt": b}, ensure_ascii=False) + BREAKS[i % 3] for i, (a, b) in enumerate(pairs)),
        newline="",
    )
    assert "\u2028" in table.read_text() and python_lines(table) != table.read_text().splitlines()
    tsv = tmp_path / "p.tsv"
    tsv.write_text("src\ttgt\n" + "".join(f"{a}\t{b}{BREAKS[i % 3]}" for i, (a, b) in enumerate(pairs)), newline="")
    for f in (table, tsv):
        dm = ParallelText(train=str(f), **kw)
        assert sorted(p for s, t in dm.read().values() for p in zip(s, t)) == sorted(pairs), f.name


def test_the_corpus_reads_line_breaks_as_newlines(tmp_path, monkeypatch):
    """A corpus with "\\r\\n" and "\\r" line breaks gives the tokens of its "\\n" copy (U+2028 and the others are
    characters); a carriage return in a document changes the token-file key (a token file that holds "\\r" tokens,
    from an older reading, is never reused)."""
    texts = odd_texts(40)
    mixed, lf = tmp_path / "mixed" / "doc.txt", tmp_path / "lf" / "doc.txt"
    for path, breaks in ((mixed, BREAKS), (lf, ("\n",))):
        path.parent.mkdir()
        path.write_text("".join(t + breaks[i % len(breaks)] for i, t in enumerate(texts)), newline="")
    kw = dict(block_size=16, batch_size=4, val_windows=4, data_dir=str(tmp_path / "data"))
    a, b = TextCorpus(file=str(mixed), **kw), TextCorpus(file=str(lf), **kw)
    a.setup()
    b.setup()

    def whole(dm):
        return dm.tokenizer.decode(
            dm.train_data[0 : len(dm.train_data)].tolist() + dm.val_data[0 : len(dm.val_data)].tolist()
        )

    assert whole(a) == whole(b) == "".join(t + "\n" for t in texts)
    assert "\r" not in a.tokenizer.chars and set(ODD) <= set(a.tokenizer.chars)
    key = a._key()
    monkeypatch.setattr(text_corpus, "has_cr", lambda path: False)
    assert a._key() != key


# ---- blank lines -----------------------------------------------------------------------------------------------------
def test_blank_lines_are_counted_in_the_summary(tmp_path, caplog):
    """Blank lines in every layout are skipped and counted, per split, in the setup line."""
    rows = [(t, int(lab)) for t, lab in sst2_rows("train", 30)]
    random.Random(0).shuffle(rows)
    files = {}
    for fmt in ("csv", "tsv", "jsonl", "lf.txt"):
        f = write(tmp_path / f"b.{fmt}", rows)
        lines = f.read_text().split("\n")
        lines[5:5] = ["", "  "]  # two blank lines in the middle
        f.write_text("\n".join(lines) + "\n")  # and one at the end
        files[fmt] = f
    for fmt, f in files.items():
        test = f if fmt == "lf.txt" else files["jsonl"]  # data.format is every split's
        dm = TextClassification(train=str(f), test=str(test), **fmt_kw(f), **common(tmp_path))
        with SetupLog(caplog):
            dm.setup()
        assert dm.skipped == {"train": 3, "val": 0, "test": 3} and len(dm.train_set) + len(dm.val_set) == 30, fmt
        assert "skipped (blank lines, rows without text): {'train': 3, 'val': 0, 'test': 3}" in caplog.text
    sst = tmp_path / "sst.tsv"
    sst.write_text("".join(f"{t} \t{lab}\n" for t, lab in rows) + "\n \n")
    dm = SST2(train_file=str(sst), val_file=str(sst), test_file=str(sst), **common(tmp_path))
    with SetupLog(caplog):
        dm.setup()
    assert "skipped (blank lines, rows without text): {'train': 2, 'val': 2, 'test': 2}" in caplog.text
    pairs = multi30k_pairs("train", 40)
    table = tmp_path / "p.jsonl"
    table.write_text(
        "".join(json.dumps({"src": a, "tgt": b}) + ("\n\n" if i == 3 else "\n") for i, (a, b) in enumerate(pairs))
    )
    dm = ParallelText(train=str(table), val=str(table), test=str(table), **common(tmp_path))
    dm.read()
    assert dm.skipped == {"train": 1, "val": 1, "test": 1}


# ---- pretrained tokenizer.json -------------------------------------------------------------------------------------
def word_level(texts, normalizer=None, specials=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")) -> Tokenizer:
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizer or normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=list(specials), show_progress=False))
    return tok


def test_a_tokenizer_files_padding_and_truncation_never_reach_the_batches(tmp_path):
    """A tokenizer.json that pads to the longest text and truncates at 6 tokens: each example is exactly
    [CLS] + the text's own ids + [SEP], each translation target its ids + [SEP] (the reference: the same file
    with padding and truncation off); no [PAD] inside any row."""
    rows = [(t, int(lab)) for t, lab in sst2_rows("train", 120)]
    tok = word_level([t for t, _ in rows] + [t for p in multi30k_pairs("train", 60) for t in p])
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(max_length=6)
    path = tmp_path / "padded" / "tokenizer.json"
    path.parent.mkdir()
    tok.save(str(path))
    ref = Tokenizer.from_file(str(path))
    ref.no_padding()
    ref.no_truncation()
    own = lambda t: ref.encode(t, add_special_tokens=False).ids  # noqa: E731
    train = write(tmp_path / "train.jsonl", rows)
    dm = TextClassification(
        train=str(train), val=str(train), test=str(train), tokenizer=str(path), max_len=128, **common(tmp_path)
    )
    dm.setup()
    assert dm.train_set.ids == [[2] + own(t) + [3] for t, _ in rows]
    assert max(dm.train_set.lengths) > 8 and len(set(dm.train_set.lengths)) > 5
    assert not any(0 in r for r in dm.train_set.ids)
    pairs = multi30k_pairs("train", 60)
    f = tmp_path / "pairs.tsv"
    f.write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    mt = ParallelText(train=str(f), val=str(f), test=str(f), src_lang="de", tgt_lang="en", tokenizer=str(path))
    mt.setup()
    assert mt.train_set.tgt_out == [own(b) + [3] for _, b in pairs] and mt.pad_id == 0
    assert mt.train_set.src == [own(a) + [3] for a, _ in pairs]


def test_a_token_the_normalizer_writes_is_one_id_or_refused(tmp_path):
    """Replace(\\d+ -> " <num> ") writes the special token <num>: it is that one id (not "<", "num", ">"), in
    encode and in the batches; a normalizer that writes <NUM> and then lowercases it is refused by name."""
    texts = [f"{t} {i}" for i, (t, _) in enumerate(sst2_rows("train", 80))]
    seq = normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace(Regex(r"\d+"), " <num> ")])
    tok = word_level(texts, seq, ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "<num>"))
    path = tmp_path / "num.json"
    tok.save(str(path))
    assert Tokenizer.from_file(str(path)).encode("the film 12").tokens[-3:] == ["<", "num", ">"]  # as the file does
    loaded = SubwordTokenizer.load(path)
    v = tok.get_vocab()
    assert loaded.encode("the film 12") == [v["the"], v["film"], v["<num>"]]
    train = write(tmp_path / "train.jsonl", [(t, i % 2) for i, t in enumerate(texts)])
    dm = TextClassification(train=str(train), val=str(train), test=str(train), tokenizer=str(path), **common(tmp_path))
    dm.setup()
    numbers = [len(re.findall(r"\d+", t)) for t in texts]  # each run of digits: one <num>
    assert [r.count(v["<num>"]) for r in dm.train_set.ids] == numbers and min(numbers) >= 1
    assert not any(v["<"] in r for r in dm.train_set.ids)
    upper = word_level(
        texts,
        normalizers.Sequence([normalizers.Replace(Regex(r"\d+"), " <NUM> "), normalizers.Lowercase()]),
        ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "<NUM>"),
    )
    upper.save(str(tmp_path / "upper.json"))
    with pytest.raises(DataError, match=r"upper.json: its normalizer writes the token '<NUM>' \(a Replace\), then"):
        SubwordTokenizer.load(tmp_path / "upper.json")


# ---- typos in a data config file ------------------------------------------------------------------------------------
@pytest.fixture
def my_conf(tmp_path):
    """A user's config folder: data/mine.yaml with the typo text_colum (and SST-2 rows as its train.csv)."""
    train = write(tmp_path / "train.csv", [(t, int(lab)) for t, lab in sst2_rows("train", 60)])
    (tmp_path / "conf" / "data").mkdir(parents=True)
    mine = tmp_path / "conf" / "data" / "mine.yaml"
    mine.write_text(f"defaults: [text_classification]\ntrain: {train}\ntext_colum: text\n")
    return mine


def test_a_typo_in_a_yaml_data_config_names_the_file_and_the_key(tmp_path, my_conf):
    search = f"hydra.searchpath=[file://{my_conf.parent.parent}]"
    want = (
        f"data.text_colum (in {my_conf}) is not a key of data (mine: TextClassification); did you mean "
        f"data.text_column?\nFix: rename it to text_column in {my_conf}"
    )
    assert typos(["+arch=encoder_only", "data=mine", search], CONF_DIR) == [want]  # before Hydra runs a job
    assert typos(["-m", "+arch=encoder_only,decoder_only", "data=mine", search], CONF_DIR) == [want]
    with pytest.raises(ConfigError) as e:  # in-process runs: the config check
        check_config(make_cfg(tmp_path / "run", ["data=mine", search], arch="encoder_only"))
    assert str(e.value) == want
    got = typos(["+arch=encoder_only", "data=text_classification", "+data.labl=[a,b]"], CONF_DIR)
    assert got == [
        "data.labl (set on the command line: +data.labl=[a,b]) is not a key of data (text_classification: "
        "TextClassification); did you mean data.labels?\nFix: rename it to labels on the command line"
    ]


@pytest.mark.e2e
def test_a_typo_in_a_yaml_data_config_exits_2(tmp_path, my_conf):
    r = run_cli(
        [
            "+arch=encoder_only",
            "data=mine",
            f"hydra.searchpath=[file://{my_conf.parent.parent}]",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"zoo: error: data.text_colum (in {my_conf}) is not a key of data" in r.stderr
    assert "did you mean data.text_column?" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()  # refused before Hydra made a run dir
