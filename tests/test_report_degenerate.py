"""zoo.report never crashes and never overstates: McNemar's exact test at any n (against scipy and exact integer
arithmetic), every paired test on degenerate inputs (no difference, different outputs with the same scores, all
differences one way, one example, very large N), the counts each p-value rests on, flagged translation runs,
the literature section only for T5's setup, figures that name their data, and the attention map's default
sentence from the run's own test set."""

import json
import math

import matplotlib.figure
import numpy as np
import pytest
import sacrebleu
import torch
from scipy.stats import binomtest, norm, permutation_test
from test_report_stats import REFS, translation_examples, write_run
from test_translation_metrics import run_test_epoch

import zoo.report.attention as report_attention
from zoo.report.attention import DEFAULT_SENTENCE, attention_maps, default_sentence
from zoo.report.build import report
from zoo.report.grouping import group_runs
from zoo.report.literature import t5_setup
from zoo.report.p_values import counts_text
from zoo.report.runs import find_runs
from zoo.report.significance_rule import DEGENERATE, fmt_p
from zoo.report.stats import (
    ALPHA,
    mcnemar_exact,
    paired_bootstrap,
    randomization_floor,
    sacrebleu_paired,
)
from zoo.run.results import write_examples


def exact_mcnemar(b: int, c: int) -> float:
    """min(1, 2 * sum_{i <= min(b, c)} C(n, i) / 2^n) in integers; Python's int / int is correctly rounded."""
    n, k = b + c, min(b, c)
    term, tail = 1, 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, 2 * tail / 2**n)


def pairs_of(b: int, c: int, same: int = 0) -> tuple[list[bool], list[bool]]:
    """Correctness of A and B: b examples A right and B wrong, c the other way, `same` both right."""
    return [True] * b + [False] * c + [True] * same, [False] * b + [True] * c + [True] * same


# ---- McNemar at any n ----------------------------------------------------------------------------------
@pytest.mark.parametrize("b, c", [(7, 3), (530, 470), (50_500, 49_500)])  # n = 10, 1,000, 100,000 discordant
def test_mcnemar_matches_scipy_and_exact_arithmetic(b, c):
    m = mcnemar_exact(*pairs_of(b, c, same=17))
    assert (m["b"], m["c"], m["n_diff"], m["n"]) == (b, c, b + c, b + c + 17)
    assert m["p"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)
    assert m["p"] == pytest.approx(exact_mcnemar(b, c), rel=1e-9)


def test_mcnemar_never_overflows():
    """2.0 * tail / 2**n raised OverflowError beyond 1,023 discordant examples; all one way, p = 2 / 2^n."""
    for n in (1_024, 1_100, 5_000):
        m = mcnemar_exact(*pairs_of(n, 0))
        assert m["p"] == exact_mcnemar(n, 0)  # 2^(1-n): 2^-1023 is a double; beyond ~1,075 it rounds to 0.0
    assert mcnemar_exact(*pairs_of(1_024, 0))["p"] == 2.0**-1023
    assert fmt_p(mcnemar_exact(*pairs_of(5_000, 0))["p"]) == "<1e-300*"


@pytest.mark.parametrize(
    "a, b_, p",
    [
        ([True, False, True, True], [True, False, True, True], 1.0),  # no difference at all
        ([True], [False], 1.0),  # a single example: 2 * P(X <= 0 | n=1) = 1
        ([True] * 5, [False] * 5, 2 / 2**5),  # all one way, n = 5: 0.0625, not significant
        ([True] * 6, [False] * 6, 2 / 2**6),  # n = 6: 0.03125
    ],
)
def test_mcnemar_degenerate_inputs(a, b_, p):
    assert mcnemar_exact(a, b_)["p"] == pytest.approx(p, rel=1e-12)


def test_mcnemar_report_at_ag_news_size(tmp_path):
    """7,600 test examples, 1,200 discordant (b = 700, c = 500): the report is written, p is scipy's, the counts
    are printed. A third group differs from the first only in *which* wrong label it predicts: p = 1, no star."""
    n = 7600
    labels = [i % 4 for i in range(n)]
    right_a = [not (700 <= i < 1200 or i >= 7000) for i in range(n)]
    right_b = [not (i < 700 or i >= 7000) for i in range(n)]
    preds = {
        "encoder_decoder": [y if r else (y + 1) % 4 for y, r in zip(labels, right_a)],
        "decoder_only": [y if r else (y + 1) % 4 for y, r in zip(labels, right_b)],
        "prefix_lm": [y if r else (y + 2) % 4 for y, r in zip(labels, right_a)],  # other wrong labels than A's
    }
    for arch, pred in preds.items():
        write_run(
            tmp_path,
            arch,
            task="classification",
            arch="decoder_only" if arch == "prefix_lm" else arch,
            arch_config=arch,
            dataset="ag_news",
            final={"test/acc": sum(p == y for p, y in zip(pred, labels)) / n},
            examples={"task": "classification", "split": "test", "ids": list(range(n)), "pred": pred, "label": labels},
        )
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    rec = out["records"]["classification"][0]
    g = {r["label"]: r["group"] for r in rec["order"]}
    p = binomtest(500, 1200, 0.5).pvalue
    sign, _, p_ed_do = rec["pairs"][(g["encoder_decoder"], g["decoder_only"])]
    assert p_ed_do == pytest.approx(p, rel=1e-9) and sign == 1 and fmt_p(p) in md and fmt_p(p).endswith("*")
    sign, why, p_same = rec["pairs"][(g["encoder_decoder"], g["prefix_lm"])]
    assert p_same == 1.0 and sign == 0 and why == "equal means"
    counts = md[md.index("Counts behind the p-values, test/acc:") :]
    assert (
        "- encoder_decoder (A) vs decoder_only (B): b = 700 (A right, B wrong), c = 500 (A wrong, B right): 1200 "
        "discordant of 7600 examples" in counts
    )
    line = next(x for x in counts.splitlines() if "encoder_decoder" in x and "prefix_lm" in x)
    assert line.endswith("b = 0 (A right, B wrong), c = 0 (A wrong, B right): 0 discordant of 7600 examples")
    table = md[md.index("p-values, test/acc") :].splitlines()
    head = [c.strip() for c in table[2].strip("|").split("|")]
    row = next([c.strip() for c in x.strip("|").split("|")] for x in table if x.startswith("| prefix_lm |"))
    assert row[head.index("encoder_decoder")] == "1.0000"  # p = 1, unstarred


# ---- zoo's paired bootstrap (LM windows) ------------------------------------------------------------------
def test_bootstrap_no_difference_and_cancelling_differences():
    same = paired_bootstrap([0.0] * 30, [40] * 30)
    assert (same["p"], same["n_diff"], same["delta"]) == (1.0, 0, 0.0)
    # every window differs, the token-weighted mean difference is 0 (float rounding included): p = 1
    d = [0.1, 0.2, -0.3] * 10
    cancel = paired_bootstrap(d)
    assert abs(cancel["delta"]) < 1e-15 and cancel["p"] == 1.0 and cancel["n_diff"] == 30
    w = [3, 1] * 20
    weighted = paired_bootstrap([0.1, -0.3] * 20, w)  # sum(w d) = 20 * (0.3 - 0.3) = 0
    assert weighted["p"] == 1.0


def test_bootstrap_single_window_and_few_windows_one_way():
    """A bootstrap of one window (or of a few with the same difference) resamples the same value every time: its
    own p would be 1 / (resamples + 1). The reported p is the exact sign-flip test's on those windows."""
    one = paired_bootstrap([0.7], [50])
    assert one["p_bootstrap"] == pytest.approx(1 / 10001) and one["p"] == 1.0
    d = np.full(5, 0.3)
    five = paired_bootstrap(d)
    exact = permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue
    assert five["p"] == pytest.approx(exact) == pytest.approx(2 / 2**5) and five["p"] >= ALPHA
    assert randomization_floor(0) == randomization_floor(1) == 1.0 and randomization_floor(7) == 2 / 2**7


def test_bootstrap_all_one_way_at_large_n():
    d = np.full(1000, 0.05) + np.random.default_rng(0).uniform(0, 0.01, 1000)
    res = paired_bootstrap(d, np.full(1000, 64), n_samples=2000)
    assert res["p"] == pytest.approx(1 / 2001) and res["p"] < ALPHA and res["n_diff"] == 1000


def test_bootstrap_at_very_large_n_matches_the_normal_approximation():
    """N = 100,000 windows: the bootstrap p of a mean difference with z of about 1.5 is the two-sided normal
    p of delta / its standard error, within the Monte Carlo error of 1,000 resamples."""
    rng = np.random.default_rng(3)
    d = rng.normal(0.0, 1.0, 100_000)
    d += 1.5 / math.sqrt(100_000) - d.mean()
    res = paired_bootstrap(d, n_samples=1000)
    z = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    assert res["n"] == 100_000 and res["p"] == pytest.approx(2 * norm.sf(abs(z)), abs=0.03)


# ---- sacreBLEU's paired bootstrap -------------------------------------------------------------------------
def test_sacrebleu_same_scores_different_outputs():
    """Different words that match no reference n-gram: every segment's statistics are equal. sacreBLEU's own
    rule counts resampled differences strictly greater than the observed 0, +1: 1 / 1001, starred."""
    a, b = [r + " zzz" for r in REFS], [r + " qqq" for r in REFS]
    res = sacrebleu_paired(a, b, REFS)
    for key in ("bleu", "chrf"):
        assert res[key]["a"] == res[key]["b"] and res[key]["n_diff"] == 0 and not res[key]["identical"]
        assert res[key]["p_sacrebleu"] == pytest.approx(1 / 1001) and res[key]["p"] == 1.0
    same = sacrebleu_paired(REFS, list(REFS), REFS)
    assert same["bleu"]["p"] == same["chrf"]["p"] == 1.0 and same["bleu"]["n_diff"] == 0


def test_sacrebleu_single_example_and_few_segments():
    one = sacrebleu_paired(["a man sits on the beach"], ["a dog"], ["a man sits on the beach"])
    assert one["chrf"]["a"] > one["chrf"]["b"] and one["chrf"]["p_sacrebleu"] == pytest.approx(1 / 1001)
    assert one["bleu"]["p"] == one["chrf"]["p"] == 1.0 and one["chrf"]["n_diff"] == 1
    three = sacrebleu_paired(REFS[:3], [r.split()[0] for r in REFS[:3]], REFS[:3])
    assert three["chrf"]["n_diff"] == 3 and three["chrf"]["p"] == pytest.approx(2 / 2**3)


def test_sacrebleu_all_one_way_at_large_n():
    rng = np.random.default_rng(5)
    words = np.array(REFS[0].split() + REFS[1].split())
    refs = [" ".join(rng.choice(words, 9)) for _ in range(2000)]
    worse = [" ".join(r.split()[:6]) for r in refs]
    res = sacrebleu_paired(refs, worse, refs, n_samples=200)
    assert res["bleu"]["b"] == pytest.approx(sacrebleu.corpus_bleu(worse, [refs]).score)
    for key in ("bleu", "chrf"):
        assert res[key]["n"] == res[key]["n_diff"] == 2000
        assert res[key]["p"] == res[key]["p_sacrebleu"] == pytest.approx(1 / 201)  # no resample reaches it


def test_counts_text():
    assert counts_text({"test": "McNemar exact", "b": 3, "c": 1, "n": 9, "seeds": 2}, "test/acc") == (
        "b = 3 (A right, B wrong), c = 1 (A wrong, B right): 4 discordant of 9 examples, 2 seeds pooled"
    )
    seg = {"test": "sacreBLEU paired bootstrap", "n": 80, "n_diff": 0, "unit": "segments", "identical": True}
    assert counts_text(seg, "test/bleu") == "0 of 80 segments differ in their test/bleu statistics (identical outputs)"
    win = {"test": "paired bootstrap (token-weighted windows)", "n": 40, "n_diff": 39, "unit": "windows"}
    assert counts_text(win, "val/cont_loss (best)") == "39 of 40 windows differ in loss"


# ---- flagged translation runs -----------------------------------------------------------------------------
def test_empty_and_sub_1_bleu_runs_are_flagged_and_not_ranked_against_each_other(tmp_path):
    partial = [r if i < 3 else r.split()[0] for i, r in enumerate(REFS)]  # BLEU 0.27
    for arch, hyps in (("decoder_only", [""] * len(REFS)), ("encoder_only", partial), ("encoder_decoder", REFS)):
        write_run(
            tmp_path,
            arch,
            arch=arch,
            final={
                "test/bleu": sacrebleu.corpus_bleu(hyps, [REFS]).score,
                "test/chrf": sacrebleu.corpus_chrf(hyps, [REFS]).score,
            },
            examples=translation_examples(hyps),
        )
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    header = next(x for x in md.splitlines() if x.startswith("| cell |"))
    assert header.endswith("| flag |")
    flags = {r["label"]: r["flag"] for r in out["table"] if r["metric"] == "test/bleu"}
    assert flags == {
        "decoder_only": "all hypotheses empty",
        "encoder_only": "test/bleu 0.27 < 1",
        "encoder_decoder": "",
    }
    rec = out["records"]["translation"][0]
    g = {r["label"]: r["group"] for r in rec["order"]}
    assert rec["pairs"][(g["encoder_only"], g["decoder_only"])][:2] == (0, DEGENERATE)
    for bad in ("encoder_only", "decoder_only"):  # a usable run is still ranked ahead of a flagged one
        assert rec["pairs"][(g["encoder_decoder"], g[bad])][0] == 1
    # the chrF difference of the two flagged runs has a small p (6.0 vs 0.0), printed without a star
    chrf = md[md.index("p-values, test/chrf") :]
    row = next(x for x in chrf.splitlines() if x.startswith("| encoder_only |"))
    cell = [c.strip() for c in row.strip("|").split("|")][3]  # columns: encoder_decoder, encoder_only, decoder_only
    p = float(cell.split()[0])
    assert p < ALPHA and cell.endswith("†") and "*" not in cell
    assert f"†: {DEGENERATE}." in md and "Flagged (the table's flag column): " in md
    assert "Significantly behind it: encoder_only, decoder_only." in md
    assert "## Against the literature" not in md  # decoder_only is flagged: encoder_decoder has nothing to face


# ---- literature only for T5's setup -------------------------------------------------------------------------
def _classification_pair(root, dataset, data, seeds=(1, 2)):
    labels = [i % 2 for i in range(200)]
    for arch, wrong, acc in (("encoder_decoder", 10, 0.95), ("decoder_only", 60, 0.70)):
        pred = [1 - y if i < wrong else y for i, y in enumerate(labels)]
        for seed in seeds:
            write_run(
                root,
                f"{arch}-{seed}",
                task="classification",
                arch=arch,
                seed=seed,
                dataset=dataset,
                data=data,
                final={"test/acc": acc + 0.001 * seed},
                examples={
                    "task": "classification",
                    "split": "test",
                    "ids": list(range(200)),
                    "pred": pred,
                    "label": labels,
                },
            )


@pytest.mark.parametrize(
    "dataset, data, seeds, shown",
    [
        ("trec", {"dataset": "trec", "builtin": False}, (1, 2), False),  # a user's dataset
        ("sst2", {"dataset": "sst2", "builtin": False}, (1, 2), False),  # a user's files, named sst2
        ("sst2", {"dataset": "sst2", "builtin": True}, (1, 2), True),
        ("sst2", {"dataset": "sst2", "builtin": True}, (1,), True),  # one seed: shown, not judged
    ],
)
def test_literature_only_for_the_builtin_benchmarks(tmp_path, dataset, data, seeds, shown):
    _classification_pair(tmp_path, dataset, data, seeds)
    md = report(tmp_path, tmp_path / "out")["report"].read_text()
    assert "Significantly behind it: decoder_only." in md  # the significance section is there in every case
    assert ("## Against the literature" in md) == shown
    if shown:
        line = next(x for x in md.splitlines() if x.startswith("- decoder_only vs encoder_decoder"))
        verdict = "**agrees**" if len(seeds) > 1 else "**not judged (one seed: a verdict needs several seeds per "
        assert verdict in line


def test_t5_setup_of_translation_groups():
    def group(**data):
        return {"label": "encoder_decoder", "ok": [{"dataset": data.get("dataset"), "data": data}]}

    assert t5_setup("translation", group(dataset="multi30k", builtin=True, src_lang="de", tgt_lang="en")) == ""
    assert "fr->en" in t5_setup("translation", group(dataset="multi30k", builtin=True, src_lang="fr", tgt_lang="en"))
    assert "'wmt_mine'" in t5_setup("translation", group(dataset="wmt_mine", builtin=False, src_lang="en"))
    legacy = {"label": "encoder_decoder", "ok": [{"dataset": "multi30k"}]}  # results.json without "data"
    assert t5_setup("translation", legacy) == "" and t5_setup("lm", legacy).startswith("T5's Table 2 has no lm")


# ---- figures name their data ----------------------------------------------------------------------------------
def test_curve_titles_name_the_datasets(tmp_path, monkeypatch):
    for dataset in ("sst2", "trec"):
        curve = {"val/acc": [(s, 0.5 + s / 1000, s * 1e12, s * 0.1) for s in (50, 100)]}
        write_run(
            tmp_path,
            dataset,
            task="classification",
            arch="encoder_only",
            dataset=dataset,
            final={"test/acc": 0.8},
            curve=curve,
            overrides=["+arch=encoder_only", f"data={dataset}"],
        )
    seen = []
    save = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):
        legends = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        seen.append((fig._suptitle.get_text() if fig._suptitle else "", [ax.get_title() for ax in fig.axes], legends))
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    out = report(tmp_path, tmp_path / "out")
    assert [p.name for p in out["curves"]] == ["val_classification.png"]
    ((suptitle, titles, legends),) = seen
    assert suptitle == "Validation curves, classification on sst2, trec"
    assert len(titles) == 3 and all(t.startswith("classification on sst2, trec: val/acc") for t in titles)
    assert any("[trec]" in x for x in legends) and any("[sst2]" in x for x in legends)


# ---- the attention map's sentence ------------------------------------------------------------------------------
class _Decoder:
    layers = [None, None]


class _Model:
    decoder = _Decoder()


def _attention_groups(root, src=None):
    ex = translation_examples(REFS[:3])
    if src is not None:
        ex["src"] = src
    write_run(root, "ed", final={"test/bleu": 30.0}, examples=ex)
    return group_runs(find_runs(root))


@pytest.mark.parametrize(
    "src, data, sentence, expected, where",
    [
        (
            ["Ein Hund rennt.", "Zwei", "Drei"],
            {"dataset": "my_pairs", "builtin": False},
            None,
            "Ein Hund rennt.",
            "my_pairs test example 0",
        ),
        (
            None,
            {"dataset": "multi30k", "builtin": True, "test_split": "test_2016_flickr"},
            None,
            DEFAULT_SENTENCE["de"],
            "multi30k test_2016_flickr sentence 1",
        ),
        (None, {"dataset": "my_pairs", "builtin": False}, None, None, None),
        (None, {"dataset": "my_pairs", "builtin": False}, "Guten Tag.", "Guten Tag.", "--sentence"),
    ],
)
def test_attention_sentence_comes_from_the_runs_test_set(tmp_path, monkeypatch, src, data, sentence, expected, where):
    data = {**data, "src_lang": "de", "tgt_lang": "en", "stored": True}
    groups = _attention_groups(tmp_path, src)
    monkeypatch.setattr(report_attention, "load_translation_model", lambda run: (_Model(), None, None, data, {}))
    asked, titles = [], []

    def attend(model, src_tok, tgt_tok, text, layer, max_len_b):
        asked.append(text)
        return torch.full((2, 3), 1 / 3), ["\u2581Ein", "\u2581Hund", "</s>"], ["\u2581A", "</s>"]

    plot = report_attention.plot_attention
    monkeypatch.setattr(
        report_attention,
        "plot_attention",
        lambda w, s, t, title, path: titles.append(title) or plot(w, s, t, title, path),
    )
    skipped = []
    paths = attention_maps(groups, tmp_path, sentence, -1, skipped, attend=attend)
    if expected is None:
        assert paths == [] and asked == [] and len(skipped) == 1
        assert "no source sentence of its own test set (my_pairs)" in skipped[0] and "--sentence" in skipped[0]
        assert default_sentence(groups[0]["ok"][0], data)[0] is None
        return
    assert asked == [expected] and skipped == [] and [p.name for p in paths] == ["attention_encoder_decoder.png"]
    assert titles[0].startswith(f"encoder_decoder, seed 1 ({data['dataset']}, de->en): cross-attention")
    assert f"\n{where}: {expected}\n-> A" in titles[0]


def test_translation_writes_its_test_sources(tmp_path):
    """The translation task's test epoch (zoo.tasks.translation) keeps each example's source sentence, by id, in
    the examples zoo.run.results.write_examples writes to examples.json; the report's attention map defaults to
    the one of the lowest id."""
    srcs = ["eins", "zwei", "drei"]
    task, _ = run_test_epoch(["one", "two", "three"], ["one .", "two .", "three ."], srcs)
    run_dir = write_run(tmp_path, "ed", final={"test/bleu": 1.0})
    results = json.loads((run_dir / "results.json").read_text())
    results["examples"] = write_examples(str(run_dir), task)  # as zoo.run.train records it
    (run_dir / "results.json").write_text(json.dumps(results))
    written = json.loads((run_dir / "examples.json").read_text())
    assert written["src"] == srcs and written["ids"] == [0, 1, 2]
    run = find_runs(tmp_path)[0]
    assert default_sentence(run, {"stored": True, "dataset": "x"}) == ("eins", "x test example 0")


def test_a_scaling_cell_is_not_listed_as_a_map_not_drawn(tmp_path):
    """A translation run without a checkpoint is named under "Cross-attention not drawn"; a scaling study's cell
    (results.json with a "scaling" record), which keeps none by design, is passed over without a line."""
    groups = _attention_groups(tmp_path)
    skipped = []
    assert attention_maps(groups, tmp_path, "Guten Tag.", -1, skipped) == [] and len(skipped) == 1
    assert "no checkpoint" in skipped[0]
    groups[0]["ok"][0]["scaling"] = {"cell": "s1_seed1", "points": []}
    skipped = []
    assert attention_maps(groups, tmp_path, "Guten Tag.", -1, skipped) == [] and skipped == []
