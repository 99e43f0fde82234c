"""python -m zoo.report over a tiny real comparison sweep: the table equals the runs' results.json, the curves
come from their CSV logs, the PNGs are images, the cross-attention rows are distributions."""

import csv
import json
import os
from pathlib import Path

import matplotlib.image as mpimg
import pytest
import torch
from zoo_run import SHORT_RUN, TINY, make_cfg, run_cli

from zoo.report.attention import cross_attention, load_translation_model
from zoo.report.build import main, report
from zoo.report.runs import ReportError, find_runs, read_curves
from zoo.report.table import METRICS
from zoo.run.train import run
from zoo.tasks.objectives import of_arch

LM_ARCHS = ("decoder_only", "encoder_decoder", "encoder_only")  # sorted
SMALL = [*SHORT_RUN, "trainer.val_check_interval=6"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A small sweep dir: the three lm cells from the real `python -m zoo -m experiment=compare` command line
    with two seeds each (tiny models, 10 steps), plus classification / encoder_only and translation /
    encoder_decoder run in-process into the same dir (one seed each)."""
    root = tmp_path_factory.mktemp("multirun")
    lm = [a for a in TINY if not a.startswith("trainer.max_steps")] + ["trainer.max_steps=10"]
    proc = run_cli(
        [
            "-m",
            "experiment=compare",
            "compare.budget=steps",
            "+arch=encoder_only,decoder_only,encoder_decoder",
            "+benchmark=lm",
            "compare.seeds=2",
            f"hydra.sweep.dir={root}",
            "logger=csv",
            "trainer.val_check_interval=5",
            *lm,
        ],
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run(
        make_cfg(
            root / "classification-encoder_only",
            [
                "experiment=compare",
                "compare.budget=steps",
                "+benchmark=classification",
                *SMALL,
                "data.limit=320",
                "data.vocab_size=300",
                "data.batch_size=32",
                "model.max_len=128",
            ],
            arch="encoder_only",
        )
    )
    run(
        make_cfg(
            root / "translation-encoder_decoder",
            [
                "experiment=compare",
                "compare.budget=steps",
                "+benchmark=translation",
                *SMALL,
                "data.limit=300",
                "data.vocab_size=300",
                "data.max_tokens=1024",
                "trainer.limit_val_batches=2",
                "trainer.limit_test_batches=2",
                "task.optimizer.lr=3e-3",
            ],
            arch="encoder_decoder",
        )
    )
    return root


@pytest.fixture(scope="module")
def reported(sweep, tmp_path_factory):
    """report() of the sweep, written into its own dir."""
    return report(sweep, tmp_path_factory.mktemp("report"))


@pytest.mark.e2e
def test_sweep_dirs(sweep):
    names = sorted(p.parent.name for p in sweep.rglob("results.json"))
    assert names == [
        "classification-encoder_only",
        *[f"lm-{a}-seed{s}" for a in LM_ARCHS for s in (1, 2)],
        "translation-encoder_decoder",
    ]


@pytest.mark.e2e
def test_table_equals_results_json(sweep, reported):
    """One row per (cell, metric): the mean of its seeds' results.json values with a Student-t interval (the lm
    cells have two seeds), the others one seed ("n/a (1 seed)")."""
    out = reported
    table = out["table"]
    expected = {}  # (task, arch, objective, metric) -> per-seed values, params, FLOPs/token, wall seconds
    for path in sorted(sweep.rglob("results.json")):
        res = json.loads(path.read_text())
        for metric, where in METRICS[res["task"]]:
            if metric in res[where]:
                e = expected.setdefault((res["task"], res["arch"], res["objective"], metric), ([], [], [], []))
                for lst, v in zip(e, (res[where][metric], res["params"], res["flops_per_token"], res["wall_seconds"])):
                    lst.append(v)
    assert sorted((r["task"], r["arch"], r["objective"], r["metric"].replace(" (best)", "")) for r in table) == sorted(
        expected
    )
    for r in table:
        values, params, fpt, wall = expected[(r["task"], r["arch"], r["objective"], r["metric"].replace(" (best)", ""))]
        assert r["n"] == len(values) == (2 if r["task"] == "lm" else 1) and r["values"] == values
        assert r["mean"] == pytest.approx(sum(values) / len(values))
        assert r["params"] == pytest.approx(sum(params) / len(params))
        assert r["flops_per_token"] == pytest.approx(sum(fpt) / len(fpt))
        assert r["wall_seconds"] == pytest.approx(sum(wall) / len(wall))
        if len(values) == 2:  # t_{.975,1} = 12.7062: half-width t * |a - b| / 2
            assert r["half"] == pytest.approx(12.706204736174707 * abs(values[0] - values[1]) / 2, rel=1e-6)
        else:
            assert r["std"] is None and r["lo"] is None
    # every lm cell reports its best val/loss; test metrics of the other tasks are there
    assert {(r["task"], r["arch"]) for r in table if r["metric"] == "val/loss (best)"} == {
        ("lm", "encoder_only"),
        ("lm", "decoder_only"),
        ("lm", "encoder_decoder"),
    }
    assert {r["metric"] for r in table if r["task"] != "lm"} == {"test/acc", "test/f1", "test/bleu", "test/chrf"}
    # the Markdown: one line per row with the formatted value; a masked LM marked as a different objective
    md = out["report"].read_text().splitlines()
    start = md.index(next(line for line in md if line.startswith("| cell |")))
    body = md[start + 2 : start + 2 + len(table)]
    assert all(line.startswith("| ") for line in body) and not md[start + 2 + len(table)].startswith("|")
    runs = {r["run_dir"]: r for r in find_runs(sweep)}
    for r, line in zip(table, body):
        cells = [c.strip() for c in line.strip("|").split("|")]
        seeds = [runs[d] for d in r["run_dirs"]]
        assert cells[0] == r["cell"] == f"{r['task']} / {r['arch']}" and cells[4] == r["metric"]
        assert (
            cells[1]
            == r["dataset"]
            == {"lm": "tiny_shakespeare", "classification": "sst2", "translation": "multi30k"}[r["task"]]
        )
        assert cells[2] == f"steps {seeds[0]['budget']['value']}"
        assert cells[5] == str(r["n"])
        if r["n"] == 1:
            assert float(cells[6]) == pytest.approx(r["value"], abs=5e-5) and cells[7] == "n/a (1 seed)"
        else:
            mean, std = cells[6].split(" ± ")
            assert float(mean) == pytest.approx(r["mean"], abs=5e-5) and float(std) == pytest.approx(r["std"], abs=5e-5)
            lo, hi = cells[7].strip("[]").split(", ")
            assert (float(lo), float(hi)) == pytest.approx((r["lo"], r["hi"]), abs=5e-5)
        assert int(cells[8].replace(",", "")) == r["params"] == seeds[0]["params"]
        cost = [s["cost"] for s in seeds]

        def mean_cost(key, scale=1.0):  # "-" where the runs recorded none
            values = [c[key] for c in cost if c.get(key) is not None]
            return sum(values) / len(values) / scale if values else None

        for cell, key in ((cells[9], "train_flops"), (cells[10], "tokens")):
            assert float(cell) == pytest.approx(mean_cost(key), rel=6e-3)  # 3 significant digits
        train_s, wall_s = cells[11].rstrip(")").split(" (")
        assert float(train_s) == pytest.approx(mean_cost("train_seconds"), abs=0.01, rel=0.01)
        assert float(wall_s) == pytest.approx(r["wall_seconds"], abs=0.01, rel=0.01)
        assert float(cells[12].split()[0]) == pytest.approx(mean_cost("inference_flops_per_token", 1e6), abs=0.005)
        ms = mean_cost("ms_per_example")
        assert cells[13] == "-" if ms is None else float(cells[13]) == pytest.approx(ms, abs=0.005)
        assert cells[3].startswith(r["objective"])
        assert ("not comparable" in cells[3]) == (r["objective"] == "masked_lm")
    assert {(r["arch"], r["objective"]) for r in table if r["task"] == "lm"} == {
        (a, of_arch("lm", a)[0].NAME) for a in LM_ARCHS
    }  # each arch's default objective
    # the lm cells: a paired bootstrap over the same validation windows, each pair of the three
    text = out["report"].read_text()
    lm = text[text.index("### lm") :]
    assert "paired bootstrap over the same validation windows" in lm
    assert "p-values, val/cont_loss (best) (paired bootstrap (token-weighted windows))" in lm
    rec = out["records"]["lm"][0]
    assert len(rec["order"]) == 3 and all(p is not None for _, _, p in rec["pairs"].values())


@pytest.mark.e2e
def test_curves_come_from_the_csv_logs(sweep):
    runs = find_runs(sweep)
    assert sorted(Path(r["run_dir"]).name for r in runs) == [
        "classification-encoder_only",
        *[f"lm-{a}-seed{s}" for a in LM_ARCHS for s in (1, 2)],
        "translation-encoder_decoder",
    ]
    for res in runs:
        curves = read_curves(Path(res["run_dir"]))
        rows = list(csv.DictReader(open(Path(res["run_dir"]) / "csv" / "metrics.csv")))
        for name, best in res["best"].items():
            values = [v for _, v in curves[name]]
            assert len(values) == sum(1 for r in rows if r.get(name)) >= 2  # at least two validations
            better = min if name.endswith(("loss", "ppl", "bpc")) else max
            assert better(values) == pytest.approx(best, rel=1e-6)
            steps = [s for s, _ in curves[name]]
            assert steps == sorted(steps) and steps[-1] <= res["steps"]
            if Path(res["run_dir"]).name.startswith("lm-"):  # val_check_interval=5 of 10 steps: after 5 and 10
                assert steps == [5, 10]


@pytest.mark.e2e
def test_pngs_are_images(reported):
    out = reported
    assert sorted(p.name for p in out["curves"]) == ["val_classification.png", "val_lm.png", "val_translation.png"]
    assert [p.name for p in out["attention"]] == ["attention_encoder_decoder.png"]  # only it has cross-attention
    for path in [*out["curves"], *out["attention"]]:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(path)
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
        assert img[..., :3].std() > 0.01  # not a blank canvas


@pytest.mark.e2e
def test_cross_attention_rows_are_distributions(sweep):
    res = next(r for r in find_runs(sweep) if r["task"] == "translation")
    model, src_tok, tgt_tok, _, hp = load_translation_model(res)
    assert hp["arch"] == "encoder_decoder"
    sentence = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."
    w, src_pieces, tgt_pieces = cross_attention(model, src_tok, tgt_tok, sentence)
    ids = src_tok.encode(sentence)
    assert src_pieces == [src_tok.tokenizer.id_to_token(i) for i in ids] + ["</s>"]
    assert tgt_pieces[-1] == "</s>" and w.shape == (len(tgt_pieces), len(src_pieces))
    assert torch.allclose(w.sum(1), torch.ones(len(tgt_pieces)), atol=1e-5)
    assert bool((w >= 0).all())
    # the same weights as the model's own return_attention on (source, BOS + translation), last layer, head mean
    hyp = [tgt_tok.tokenizer.token_to_id(p) for p in tgt_pieces[:-1]]
    cfg = model.cfg
    with torch.no_grad():
        _, attn = model(torch.tensor([ids + [cfg.eos_id]]), torch.tensor([[cfg.bos_id] + hyp]), return_attention=True)
    assert torch.allclose(w, attn["decoder"][-1][1][0].mean(0), atol=1e-6)
    with pytest.raises(ReportError, match="out of range"):
        cross_attention(model, src_tok, tgt_tok, sentence, layer=len(model.decoder.layers))
    # a model without cross-attention has no map (its checkpoint is not loaded)
    assert load_translation_model(next(r for r in find_runs(sweep) if r["arch"] == "decoder_only")) is None


@pytest.mark.e2e
def test_attention_defaults_to_a_sentence_of_the_runs_own_test_set(sweep, tmp_path, monkeypatch):
    """examples.json keeps the tested source sentences (the lines of multi30k test_2016_flickr.de at its ids);
    the attention map reads the first of them, and its title names the dataset and where the sentence is from."""
    import gzip

    import zoo.report.attention as report_attention
    from zoo.report.grouping import group_runs

    res = next(r for r in find_runs(sweep) if r["task"] == "translation")
    ex = json.loads((Path(res["run_dir"]) / "examples.json").read_text())
    with gzip.open(Path(os.environ["ZOO_DATA_MIRROR"]) / "multi30k" / "test_2016_flickr.de.gz", "rt") as f:
        lines = f.read().splitlines()
    assert ex["src"] == [lines[i] for i in ex["ids"]] and len(ex["src"]) == len(ex["hyp"]) > 0
    titles, plot = [], report_attention.plot_attention
    monkeypatch.setattr(
        report_attention,
        "plot_attention",
        lambda w, s, t, title, path: titles.append(title) or plot(w, s, t, title, path),
    )
    groups = [g for g in group_runs(find_runs(sweep)) if g["task"] == "translation"]
    assert len(report_attention.attention_maps(groups, tmp_path)) == 1
    assert titles[0].startswith("encoder_decoder") and "(multi30k, de->en): cross-attention" in titles[0]
    assert f"\nmulti30k test example {ex['ids'][0]}: {report_attention._clip(ex['src'][0])}\n" in titles[0]


def test_bad_input_exits_2(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no results.json found below" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text("{not json")
    assert main([str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main([str(tmp_path / "run" / "results.json")]) == 2  # a file for the runs' folder: named as such
    assert "is not a directory; pass the multirun dir" in capsys.readouterr().err
    (tmp_path / "report.md").write_text("my notes")  # --out naming a file: refused before reading any run
    assert main([str(tmp_path), "--out", str(tmp_path / "report.md")]) == 2
    assert f"--out {tmp_path / 'report.md'} is a file; --out names a folder" in capsys.readouterr().err
    assert (tmp_path / "report.md").read_text() == "my notes"


@pytest.mark.parametrize(
    "series, drawn, lines",
    [
        ([([1, 2], [3.0, 2.0])], "curve", 1),
        ([([1, 2, 3], [3.0, 2.0, 1.0]), ([1, 3], [2.0, 1.0])], "band", 1),
        ([([119], [2.52]), ([118], [2.57]), ([113], [2.51])], "points", 3),  # one validation each, other steps
    ],
)
def test_every_group_is_drawn(series, drawn, lines):
    """draw_group: a group whose seeds share no x range (each validated once, at different steps) is drawn as its
    seeds' points, not left out; the legend names it once."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.report.plots import draw_group

    fig, ax = plt.subplots()
    assert draw_group(ax, series, "C0", "g") == drawn
    assert len(ax.lines) == lines
    assert len(ax.get_legend_handles_labels()[1]) == 1
    plt.close(fig)
