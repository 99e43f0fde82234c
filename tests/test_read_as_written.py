"""Files are read as written: a byte-order mark is no text in any reader, column types come from the whole file,
a column or key named twice is refused, a long field in a column not read stops nothing, a quoted TSV reads with
data.quoting=csv, and a quote never closed is refused naming the line where it opens.

Fixtures are written into tmp_path from the shared datasets (SST-2 rows, Multi30k pairs, Chinchilla's points)."""

import argparse
import csv
import gzip
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from zoo_run import SHARED_DATA, multi30k_pairs, needs_shared, sst2_rows

from zoo.data import documents
from zoo.data.parallel_text import ParallelText
from zoo.data.resolver import DataError
from zoo.data.sst2 import SST2
from zoo.data.text_classification import TextClassification
from zoo.run import translate
from zoo.scaling.__main__ import main as scaling_main
from zoo.scaling.__main__ import read_points

pytestmark = needs_shared

BOM = "\ufeff"
SUFFIX = {"label_first": "txt", "regex": "txt"}
NAMES = {"0": "neg", "1": "pos"}
CHINCHILLA = SHARED_DATA / "chinchilla_epoch" / "svg_extracted_data.csv"


def common(tmp_path, **kw):
    return dict(vocab_size=200, data_dir=str(tmp_path / "data"), val_fraction=0.2, test_fraction=0.2, **kw)


def examples(dm) -> list[tuple[str, str]]:
    """(text, label) of every example of every split, in file order (file, line)."""
    data = dm.read()
    return [
        (e.text, e.label) for e in sorted((e for v in data.values() for e in v), key=lambda e: (str(e.file), e.line))
    ]


def pairs_of(dm) -> list[tuple[str, str]]:
    """Every (source, target) pair of every split, sorted."""
    return sorted(p for s, t in dm.read().values() for p in zip(s, t))


def csv_text(rows, sep=",", header=("text", "label"), quoting=csv.QUOTE_MINIMAL) -> str:
    """rows as Python's csv writer (pandas' to_csv dialect) writes them: a field holding the delimiter, a quote or a
    line break quoted, quotes doubled."""
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=sep, quoting=quoting, lineterminator="\n")
    if header:
        w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def tsv_text(rows, header=("text", "label")) -> str:
    """rows as tab-separated lines, no quoting (fields hold no tab or line break)."""
    return "".join("\t".join(map(str, r)) + "\n" for r in [header, *rows])


# ---- a byte-order mark ---------------------------------------------------------------------------------------------
def test_a_byte_order_mark_is_no_text_in_any_reader(tmp_path, monkeypatch):
    """Every layout written with a UTF-8 BOM (U+FEFF first) reads exactly as written without it: the classes are
    neg and pos (no '\\ufeffneg'), no text starts with U+FEFF; parallel files, a corpus and zoo.translate's --input
    and stdin the same. A U+FEFF inside a line stays (it is text there)."""
    rows = [(t, NAMES[lab]) for t, lab in sst2_rows("train", 40)]
    rows[5] = (rows[5][0] + " " + BOM + "kept", rows[5][1])  # not at the start of the file: text
    layouts = {
        "label_first": (dict(format="label_first"), [f"{lab} {t}" for t, lab in rows]),
        "regex": (dict(format="regex", pattern=r"(?P<label>\w+): (?P<text>.*)"), [f"{lab}: {t}" for t, lab in rows]),
        "csv": ({}, csv_text(rows).splitlines()),
        "tsv": ({}, tsv_text(rows).splitlines()),
        "jsonl": ({}, [json.dumps({"text": t, "label": lab}, ensure_ascii=False) for t, lab in rows]),
    }
    for name, (kw, lines) in layouts.items():
        body = "".join(ln + "\n" for ln in lines)
        got = {}
        for mark in ("", BOM):
            f = tmp_path / f"{name}{'.bom' if mark else ''}.{SUFFIX.get(name, name)}"
            f.write_text(mark + body, encoding="utf-8")
            got[mark] = examples(TextClassification(train=str(f), **common(tmp_path, **kw)))
        assert got[BOM] == got[""] == rows, name
    per_label = {}
    for lab in ("neg", "pos"):
        per_label[lab] = tmp_path / f"{lab}.txt"
        per_label[lab].write_text(BOM + "".join(t + "\n" for t, la in rows if la == lab), encoding="utf-8")
    got = examples(TextClassification(train={k: str(v) for k, v in per_label.items()}, **common(tmp_path)))
    assert sorted(got) == sorted(rows)
    sst = tmp_path / "sst.tsv"  # SST-2's own reader on a user's file
    sst_rows = sst2_rows("train", 30)
    sst.write_text(BOM + "".join(f"{t} \t{lab}\n" for t, lab in sst_rows), encoding="utf-8")
    data = SST2(train_file=str(sst), val_file=str(sst), test_file=str(sst), vocab_size=200).read()
    assert [(e.text, e.label) for e in data["train"]] == sst_rows

    pairs = multi30k_pairs("train", 30)
    files = {}
    for k, side in enumerate(("src", "tgt")):
        content = BOM + "".join(p[k] + "\n" for p in pairs)
        (tmp_path / f"p.{side}").write_text(content, encoding="utf-8")
        (tmp_path / f"p.{side}.gz").write_bytes(gzip.compress(content.encode()))
        files[side] = tmp_path / f"p.{side}"
    for suffix in ("", ".gz"):
        dm = ParallelText(train={k: f"{v}{suffix}" for k, v in files.items()}, **common(tmp_path))
        assert pairs_of(dm) == sorted(pairs), suffix

    doc = tmp_path / "doc.txt"  # a corpus: the mark is no character of the text (nor of a char vocabulary)
    doc.write_text(BOM + "".join(p[0] + "\n" for p in pairs), encoding="utf-8")
    assert "".join(documents.text_chunks(doc)) == "".join(p[0] + "\n" for p in pairs)

    src = [p[0] for p in pairs[:5]]  # zoo.translate: --input and stdin read as the command line's sentences
    (tmp_path / "in.de").write_text(BOM + "".join(s + "\n" for s in src), encoding="utf-8")
    lines, _ = translate.read_sentences(argparse.Namespace(sentences=[], input=str(tmp_path / "in.de")))
    assert lines == translate.read_sentences(argparse.Namespace(sentences=src, input=None))[0] == src
    monkeypatch.setattr("sys.stdin", io.StringIO(BOM + "".join(s + "\r\n" for s in src)))
    assert translate.read_sentences(argparse.Namespace(sentences=[], input=None))[0] == src


# ---- column types ---------------------------------------------------------------------------------------------------
N_TYPED = 10_050  # more than one chunk of the csv builder (10,000 rows), whose first chunk typed each column


@pytest.fixture(scope="module")
def many_rows():
    """N_TYPED SST-2 rows: (text, "0" | "1")."""
    return sst2_rows("train", N_TYPED)


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_column_types_come_from_the_whole_file(tmp_path, many_rows, fmt):
    """Labels that are numbers for 10,000 rows and then names (neg, pos) are four classes by zoo's rule, not a
    pandas type error blamed on the delimiter; a text column of numbers for 10,000 rows, then sentences, is every
    text as written (a classification file, a parallel table, a Hugging Face folder)."""
    sep = "," if fmt == "csv" else "\t"
    rows = [(t, lab if i < 10_000 else NAMES[lab]) for i, (t, lab) in enumerate(many_rows)]
    f = tmp_path / f"labels.{fmt}"
    f.write_text(csv_text(rows, sep), encoding="utf-8")
    assert examples(TextClassification(train=str(f), **common(tmp_path))) == rows
    numbered = [(str(i) if i < 10_000 else t, lab) for i, (t, lab) in enumerate(many_rows)]
    g = tmp_path / f"texts.{fmt}"
    g.write_text(csv_text(numbered, sep), encoding="utf-8")
    assert examples(TextClassification(train=str(g), **common(tmp_path))) == numbered
    p = tmp_path / f"pairs.{fmt}"
    pairs = [(s, t) for s, (t, _) in zip((s for s, _ in numbered), many_rows)]
    p.write_text(csv_text(pairs, sep, header=("src", "tgt")), encoding="utf-8")
    assert pairs_of(ParallelText(train=str(p), **common(tmp_path))) == sorted(pairs)
    hub = tmp_path / "hub"
    hub.mkdir()
    for split in ("train", "validation", "test"):
        (hub / f"{split}.{fmt}").write_bytes(f.read_bytes())
    got = TextClassification(hf_path=str(hub), **common(tmp_path)).read()
    assert [(e.text, e.label) for e in got["test"]] == rows


# ---- names given twice ----------------------------------------------------------------------------------------------
def test_a_column_or_key_named_twice_is_refused_naming_it(tmp_path, capsys):
    """A csv / tsv header, a Parquet schema, a JSON Lines record or a JSON array's record with a name twice is refused,
    naming the column and the line (pandas kept the first as 'label' and renamed the second 'label.1'; ujson kept
    the last; pyarrow's error was blamed on the delimiter); the scaling CLI too (csv.DictReader fitted the last)."""
    rows = [(t, int(lab)) for t, lab in sst2_rows("train", 30)]
    flipped = [(t, lab, 1 - lab) for t, lab in rows]
    files = {
        "a.csv": csv_text(flipped, header=("text", "label", "label")),
        "a.tsv": tsv_text(flipped, header=("text", "label", "label")),
    }
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        with pytest.raises(DataError) as e:
            TextClassification(train=str(tmp_path / name), **common(tmp_path)).read()
        assert str(e.value).startswith(f"{tmp_path / name}, line 1: the column 'label' is named twice"), str(e.value)
    records = [f'{{"text": {json.dumps(t)}, "label": {lab}}}' for t, lab in rows]
    t, lab = rows[2]
    records[2] = f'{{"text": {json.dumps(t)}, "label": {lab}, "label": {1 - lab}}}'
    jl = tmp_path / "a.jsonl"
    jl.write_text("\n".join(records) + "\n", encoding="utf-8")
    arr = tmp_path / "a.json"
    arr.write_text("[\n" + ",\n".join(records) + "\n]\n", encoding="utf-8")
    for f, where in ((jl, "line 3"), (arr, "record 3 (line 4)")):
        with pytest.raises(DataError) as e:
            TextClassification(train=str(f), **common(tmp_path)).read()
        assert str(e.value).startswith(f"{f}, {where}: the key 'label' is given twice in one record"), str(e.value)
    pq_file = tmp_path / "a.parquet"
    columns = [pa.array([t for t, _ in rows]), pa.array([lab for _, lab in rows]), pa.array([1 - x for _, x in rows])]
    pq.write_table(pa.table(columns, names=["text", "label", "label"]), str(pq_file))
    with pytest.raises(DataError, match=r"a\.parquet: the column 'label' is named twice"):
        TextClassification(train=str(pq_file), **common(tmp_path)).read()
    par = tmp_path / "p.csv"
    par.write_text(csv_text([(a, b, b) for a, b in multi30k_pairs("train", 20)], header=("src", "tgt", "tgt")))
    with pytest.raises(DataError, match=r"p\.csv, line 1: the column 'tgt' is named twice"):
        ParallelText(train=str(par), **common(tmp_path)).read()

    lines = CHINCHILLA.read_text(encoding="utf-8").splitlines()
    twice = tmp_path / "chinchilla.csv"  # a second loss column: the fit must not pick one silently
    twice.write_text("\n".join([lines[0] + ",loss"] + [ln + ",1.0" for ln in lines[1:]]) + "\n", encoding="utf-8")
    code = scaling_main(["fit", str(twice), "--params", "Model Size", "--flops", "Training FLOP", "--loss", "loss"])
    err = capsys.readouterr().err
    assert code == 2 and f"{twice}, line 1: the column 'loss' is named twice in the header row" in err, err


# ---- long fields ----------------------------------------------------------------------------------------------------
def test_a_long_field_in_a_column_not_read_stops_nothing(tmp_path):
    """A 300,000-character field in a column no reader uses: every table layout reads its rows, and the scaling CLI
    reads Chinchilla's points as the file without it (Python's csv module stopped at 131,072 characters, and the CLI
    called that 'not a UTF-8 CSV file'). A file that is not UTF-8 is still called so."""
    rows = [(t, lab) for t, lab in sst2_rows("train", 30)]
    long = "x" * 300_000
    noted = [(t, lab, long if i == 4 else "n") for i, (t, lab) in enumerate(rows)]
    (tmp_path / "a.csv").write_text(csv_text(noted, header=("text", "label", "note")))
    (tmp_path / "a.tsv").write_text(tsv_text(noted, header=("text", "label", "note")))
    (tmp_path / "a.jsonl").write_text(
        "".join(json.dumps(dict(zip(("text", "label", "note"), r))) + "\n" for r in noted)
    )
    for name in ("a.csv", "a.tsv", "a.jsonl"):
        assert examples(TextClassification(train=str(tmp_path / name), **common(tmp_path))) == rows, name

    reference = read_points(CHINCHILLA, "Model Size", "loss", flops="Training FLOP")
    lines = CHINCHILLA.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    at = header.index("color")  # a column the fit does not read
    cells = lines[1].split(",")
    cells[at] = long
    f = tmp_path / "chinchilla.csv"
    f.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n", encoding="utf-8")
    got = read_points(f, "Model Size", "loss", flops="Training FLOP")
    assert got[:3] == reference[:3] and len(got[0]) == len(lines) - 1 == 245
    latin = tmp_path / "latin.csv"
    latin.write_bytes(("params,tokens,loss,note\n1,2,3,caf\u00e9\n").encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.csv: not a UTF-8 CSV file"):
        read_points(latin, "params", "loss", tokens="tokens")


# ---- quoting --------------------------------------------------------------------------------------------------------
def test_a_quoted_tsv_reads_with_quoting_csv_and_the_default_keeps_quotes_as_text(tmp_path, caplog):
    """A TSV as pandas' to_csv(sep="\\t") and spreadsheets write it: a field with a tab, a line break or a quote is
    quoted. data.quoting=csv reads every text as written (classification and a parallel table), and a later row's
    line number counts the break; the default (quotes are text) keeps the quotes of a quoted field as its text, with
    a warning naming its line and data.quoting=csv, and a row split by a tab or cut by a line break names the option
    too.
    data.quoting takes csv, none or null only."""
    rows = [(t, lab) for t, lab in sst2_rows("train", 30)]
    rows[3] = (rows[3][0].replace(" ", "\t", 1), rows[3][1])  # a tab inside a text
    rows[7] = (rows[7][0].replace(" ", "\n", 1), rows[7][1])  # a line break inside a text
    rows[9] = ('he said "' + rows[9][0] + '"', rows[9][1])  # quotes inside a text
    f = tmp_path / "quoted.tsv"
    f.write_text(csv_text(rows, "\t"), encoding="utf-8")
    dm = TextClassification(train=str(f), quoting="csv", **common(tmp_path))
    data = dm.read()
    by_line = {e.line: (e.text, e.label) for v in data.values() for e in v}
    assert sorted(by_line.values()) == sorted(rows)
    assert by_line[9] == rows[7] and by_line[12] == rows[9]  # row 7 runs over lines 9-10: row 9 is on line 12
    pairs = [(a.replace(" ", "\t", 1) if i == 2 else a, b) for i, (a, b) in enumerate(multi30k_pairs("train", 20))]
    p = tmp_path / "pairs.tsv"
    p.write_text(csv_text(pairs, "\t", header=("src", "tgt")), encoding="utf-8")
    assert pairs_of(ParallelText(train=str(p), quoting="csv", **common(tmp_path))) == sorted(pairs)

    plain = [(t, lab) for t, lab in rows if "\t" not in t and "\n" not in t]  # the default: a quote is text
    g = tmp_path / "plain.tsv"
    g.write_text(csv_text(plain, "\t"), encoding="utf-8")
    with caplog.at_level("WARNING", logger="zoo"):
        got = examples(TextClassification(train=str(g), **common(tmp_path)))
    written = [(t if '"' not in t else '"' + t.replace('"', '""') + '"', lab) for t, lab in plain]
    assert got == written and sum('"' in t for t, _ in got) == 1
    line = 2 + next(i for i, (t, _) in enumerate(plain) if '"' in t)
    assert f'{g}, line {line}: a field starts with a quote ("), read as text' in caplog.text, caplog.text
    with pytest.raises(DataError) as e:  # the default on the quoted file: its tab splits line 5, said with the fix
        TextClassification(train=str(f), **common(tmp_path)).read()
    assert str(e.value).startswith(f"{f}, line 5: 3 fields where the header has 2 (delimiter '\\t')"), str(e.value)
    assert "set data.quoting=csv" in str(e.value)
    del rows[3]  # and its line break cuts row 7 (now on line 8) in two
    f.write_text(csv_text(rows, "\t"), encoding="utf-8")
    with pytest.raises(DataError) as e:
        TextClassification(train=str(f), **common(tmp_path)).read()
    assert str(e.value).startswith(f"{f}, line 8: 1 fields where the header has 2 (delimiter '\\t')")
    assert "set data.quoting=csv" in str(e.value)
    with pytest.raises(DataError, match=r"data\.quoting='tsv' is unknown; allowed: csv .*, none .*, or null"):
        TextClassification(train=str(g), quoting="tsv", **common(tmp_path))


def test_a_quote_never_closed_is_refused_or_reported_naming_the_line_where_it_opens(tmp_path, capfd, caplog):
    """A comma CSV (every text quoted) whose row 5 (line 7) opens a quote and never closes it: the merged row has
    3 fields (the next text holds a comma), so it is refused naming line 7, the lines the row runs over and the
    fix, with no raw pandas line before it. A quote opened in a label near the end runs to the end of the file:
    refused naming its line too. When the merged row still has the header's fields, it is the warning of a field
    over several lines, naming the line where the quote opens (test_data_readers: the lines after it stay right)."""
    rows = [(t, lab) for t, lab in sst2_rows("train", 40)]
    lines = ["text,label"] + [f'"{t}",{lab}' for t, lab in rows]
    t, lab = rows[5]
    lines[6] = f'"{t},{lab}'  # the text's closing quote is gone
    f = tmp_path / "open.csv"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        TextClassification(train=str(f), **common(tmp_path)).read()
    msg = str(e.value)
    assert msg.startswith(f'{f}, line 7: a quote (") opens a field here and runs over lines 7-8, making a row of 3'), (
        msg
    )
    assert "Fix: close the quote" in msg and "data.quoting=none" in msg
    assert "Failed to read file" not in capfd.readouterr().err
    lines = csv_text(rows).splitlines()
    lines[38] = lines[38][:-1] + '"' + lines[38][-1]  # the label opens a quote: the rest of the file is one field
    g = tmp_path / "eof.csv"
    g.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        TextClassification(train=str(g), **common(tmp_path)).read()
    assert str(e.value).startswith(f'{g}, line 39: a quote (") opens a field here and is never closed'), str(e.value)
    lines = ["text,label"] + [f'"{t}",{lab}' for t, lab in rows]
    t, lab = rows[19]
    lines[20] = f'"{t},{lab}'  # merges line 22 into row 19, which keeps 2 fields (the next text has no comma)
    h = tmp_path / "fits.csv"
    h.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="zoo"):
        assert len(examples(TextClassification(train=str(h), **common(tmp_path)))) == len(rows) - 1
    assert f"{h}, lines 21-22: a quoted field runs over 2 lines" in caplog.text


# ---- every layout at once -------------------------------------------------------------------------------------------
LAYOUTS = ("csv", "tsv", "jsonl", "json", "label_first", "regex", "lines", "src_tgt", "pairs.tsv")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_with_a_bom_crlf_and_a_blank_last_line_reads_as_written(tmp_path, layout):
    """Each layout of the docs (classification: CSV, TSV, JSON Lines, a JSON array, label_first, regex, {label: file};
    translation: {src, tgt} files and a table) saved with a BOM, "\\r\\n" line breaks and a blank last line: the
    examples are the rows written, in order, and the blank line is counted (a JSON array has no lines to count)."""
    rows = [(t, NAMES[lab]) for t, lab in sst2_rows("train", 40)]

    def save(name, lines):
        path = tmp_path / name
        path.write_text(BOM + "".join(ln + "\r\n" for ln in lines) + "\r\n", encoding="utf-8", newline="")
        return str(path)

    if layout in ("src_tgt", "pairs.tsv"):
        pairs = multi30k_pairs("train", 40)
        if layout == "src_tgt":
            train = {side: save(f"p.{side}", [p[k] for p in pairs]) for k, side in enumerate(("src", "tgt"))}
        else:
            train = save("p.tsv", tsv_text(pairs, header=("src", "tgt")).splitlines())
        dm = ParallelText(train=train, **common(tmp_path))
        assert pairs_of(dm) == sorted(pairs) and dm.skipped == {"train": 1}  # val and test are carved
        return
    kw, blank = {}, 1
    if layout == "csv":
        train = save("a.csv", csv_text(rows).splitlines())
    elif layout == "tsv":
        train = save("a.tsv", tsv_text(rows).splitlines())
    elif layout == "jsonl":
        train = save("a.jsonl", [json.dumps({"text": t, "label": lab}) for t, lab in rows])
    elif layout == "json":
        records = [json.dumps({"text": t, "label": lab}) for t, lab in rows]
        train, blank = save("a.json", ["[", ",\r\n".join(records), "]"]), 0
    elif layout == "label_first":
        train, kw = save("a.txt", [f"{lab} {t}" for t, lab in rows]), dict(format="label_first")
    elif layout == "regex":
        train = save("a.txt", [f"{lab}: {t}" for t, lab in rows])
        kw = dict(format="regex", pattern=r"(?P<label>\w+): (?P<text>.*)")
    else:
        train = {lab: save(f"{lab}.txt", [t for t, la in rows if la == lab]) for lab in ("neg", "pos")}
        rows, blank = sorted(rows, key=lambda r: r[1] == "pos"), 2  # file by file
    dm = TextClassification(train=train, **common(tmp_path, **kw))
    assert examples(dm) == rows and dm.skipped == {"train": blank, "val": 0, "test": 0}
