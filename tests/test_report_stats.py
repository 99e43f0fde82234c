"""zoo.report as a research instrument, on synthetic multiruns (results.json + examples.json + CSV logs written
here, following zoo.run.train's contract): grouping by swept keys and seeds, Student-t intervals, paired tests
(McNemar, token-weighted bootstrap, sacreBLEU's paired bootstrap), failed runs, mixed datasets / budgets, the
ranking against T5, and the curves' seed bands."""

import csv
import json
import math
import random
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from zoo.report.build import main, report
from zoo.report.formats import fmt_ci, fmt_mean_std
from zoo.report.grouping import group_runs, parse_overrides, swept_keys
from zoo.report.literature import T5_STD, T5_TABLE2, t5_claim, t5_threshold
from zoo.report.pairing import NotPaired, paired_data
from zoo.report.plots import band
from zoo.report.runs import find_runs
from zoo.report.significance_rule import fmt_p, ordering, overlap
from zoo.report.stats import mcnemar_exact, paired_bootstrap, randomization_floor, sacrebleu_paired, t_interval
from zoo.report.table import rows

T_975 = {1: 12.706204736174707, 2: 4.302652729749464, 3: 3.182446305284263}  # Student t quantiles, printed tables

WORDS = "a man woman dog child runs sits stands on the beach in park with red blue hat street near water".split()
_rng = random.Random(0)
REFS = [" ".join(_rng.choice(WORDS) for _ in range(9)) for _ in range(80)]


def write_run(
    root: Path,
    name: str,
    *,
    task="translation",
    arch="encoder_decoder",
    arch_config=None,
    seed=1,
    overrides=None,
    final=None,
    best=None,
    examples=None,
    status="ok",
    error=None,
    dataset="multi30k",
    budget=("steps", 900),
    cost=True,
    curve=None,
    legacy=False,
    data=None,
) -> Path:
    """One run dir: results.json (zoo.run.train's keys; legacy=True: only those of before seeds; `data`: its
    "data" record, the datamodule's data_info), examples.json when `examples` is given, and csv/metrics.csv
    when `curve` {metric: [(step, value, flops, seconds)]} is."""
    d = Path(root) / name
    d.mkdir(parents=True)
    objective = (
        {"decoder_only": "causal_lm", "encoder_decoder": "prefix_continuation"}.get(arch, "masked_lm")
        if task == "lm"
        else task
    )  # the task's objective (zoo.tasks.objectives.of_arch)
    res = {
        "arch": arch,
        "task": task,
        "dataset": dataset,
        "objective": objective,
        "final": final or {},
        "best": best or {},
        "params": 1_000_000,
        "flops_per_token": 2.0e6,
        "steps": 900,
        "wall_seconds": 120.0,
    }
    if not legacy:
        res.update(
            {
                "status": status,
                "seed": seed,
                "arch_config": arch_config or arch,
                "overrides": overrides if overrides is not None else [f"+arch={arch_config or arch}", f"seed={seed}"],
                "budget": {"kind": budget[0], "value": budget[1]},
                "examples": None,
            }
        )
        if cost:
            res["cost"] = {
                "train_flops": 3.0e15,
                "tokens": 250_000,
                "train_seconds": 100.0,
                "inference_flops_per_token": 2.5e6,
                "ms_per_example": 4.0,
            }
        if status == "failed":  # as zoo.run.results.failed_record: what the run knew before failing
            res.update(
                {
                    "error": error or "RuntimeError: CUDA out of memory\nTraceback ...",
                    "final": {},
                    "best": {},
                    "dataset": "?",
                    "params": 0,
                    "flops_per_token": 0.0,
                    "steps": 0,
                    "wall_seconds": 0.0,
                }
            )
            for k in ("budget", "cost", "objective"):
                res.pop(k, None)
    if data is not None:
        res["data"] = data
    if examples is not None:
        (d / "examples.json").write_text(json.dumps(examples))
        res["examples"] = "examples.json"
    (d / "results.json").write_text(json.dumps(res))
    if curve:
        (d / "csv").mkdir()
        with open(d / "csv" / "metrics.csv", "w", newline="") as f:
            w = csv.writer(f)
            names = sorted(curve)
            w.writerow(["step", "epoch", *names, "cost/flops", "cost/seconds", "cost/tokens"])
            for k in range(len(curve[names[0]])):
                step, _, flops, seconds = curve[names[0]][k]
                w.writerow([step, 0, *[curve[n][k][1] for n in names], flops, seconds, step * 100])
    return d


def translation_examples(hyps, ids=None, beam=None):
    ids = list(range(len(hyps))) if ids is None else ids
    ex = {"task": "translation", "split": "test", "ids": ids, "hyp": list(hyps), "ref": [REFS[i] for i in ids]}
    if beam is not None:
        ex["hyp_beam"] = list(beam)
    return ex


# ---- statistics ----------------------------------------------------------------------------------------
def test_t_interval_is_the_closed_form():
    ci = t_interval([10.0, 12.0])  # n = 2: s = |a - b| / sqrt(2), half = t_{.975,1} * s / sqrt(2) = t * |a - b| / 2
    assert ci["mean"] == 11.0 and ci["std"] == pytest.approx(math.sqrt(2))
    assert ci["half"] == pytest.approx(T_975[1] * 1.0, rel=1e-9)
    assert (ci["lo"], ci["hi"]) == pytest.approx((11 - 12.706204736174707, 11 + 12.706204736174707), rel=1e-9)
    ci = t_interval([1.0, 2.0, 3.0, 4.0])  # s^2 = 5/3
    assert ci["std"] == pytest.approx(math.sqrt(5 / 3))
    assert ci["half"] == pytest.approx(T_975[3] * math.sqrt(5 / 3) / 2, rel=1e-9)
    one = t_interval([0.81])
    assert one == {"n": 1, "mean": 0.81, "std": None, "half": None, "lo": None, "hi": None}
    row = {"n": 1, "mean": 0.81, "std": None, "lo": None, "hi": None, "status": "ok"}
    assert fmt_ci(row) == "n/a (1 seed)" and fmt_mean_std(row) == "0.8100" and "±" not in fmt_mean_std(row)


def test_mcnemar_exact_known_values():
    # b = 10 (A right, B wrong), c = 2: p = 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 2 * 79 / 4096
    a = [True] * 10 + [False] * 2 + [True] * 30 + [False] * 5
    b = [False] * 10 + [True] * 2 + [True] * 30 + [False] * 5
    m = mcnemar_exact(a, b)
    assert (m["b"], m["c"]) == (10, 2) and m["p"] == pytest.approx(158 / 4096) == pytest.approx(0.03857421875)
    assert mcnemar_exact(a, a)["p"] == 1.0  # no discordant example
    assert mcnemar_exact([True, False, True], [False, True, True])["p"] == 1.0  # b = c = 1: min(1, 2 * 3/4)


def test_paired_bootstrap_weighted_and_seeded():
    assert paired_bootstrap([1.0, 0.0], [3, 1])["delta"] == pytest.approx(0.75)  # sum(w d) / sum(w)
    assert paired_bootstrap([0.0] * 40, [5] * 40)["p"] == 1.0  # identical losses
    d = np.random.default_rng(0).normal(0.5, 0.2, 50)
    clear = paired_bootstrap(d, np.arange(1, 51))
    assert clear["p"] < 0.001 and clear == paired_bootstrap(d, np.arange(1, 51))  # fixed seed: same p
    noise = paired_bootstrap(np.random.default_rng(1).normal(0.0, 0.2, 50))
    assert noise["p"] > 0.05


def test_paired_bootstrap_leaves_out_windows_of_weight_0():
    """Windows that score no token are no units: with d = (3, -1) on two windows of weight 1, delta = 1 and a
    resample of 2 draws star = 3 or -1 (each 1/4: |star - delta| = 2 >= 1) or 1 (1/2): p_bootstrap -> 1/2, and
    two windows differ. Two windows of weight 0 beside them (d = 5) change none of it; drawn as units they would
    give resamples of 4, star = 0 with no weighted window drawn: p = 77/128 (the multinomial sum), 4 windows."""
    two = paired_bootstrap([3.0, -1.0], [1.0, 1.0])
    four = paired_bootstrap([3.0, 5.0, -1.0, 5.0], [1.0, 0.0, 1.0, 0.0])
    for b in (two, four):
        assert b["delta"] == pytest.approx(1.0)
        assert (b["n"], b["n_diff"]) == (2, 2)
        assert b["p_bootstrap"] == pytest.approx(0.5, abs=0.015)  # 10,000 resamples: sd 0.005


def test_sacrebleu_paired_bootstrap():
    worse = [" ".join(r.split()[:4]) for r in REFS]
    clear = sacrebleu_paired(REFS, worse, REFS)
    assert clear["bleu"]["p"] < 0.05 and clear["chrf"]["p"] < 0.05
    assert clear["bleu"]["a"] == pytest.approx(100.0) and clear["bleu"]["b"] < 50
    assert "bs:1000|seed:12345" in clear["bleu"]["signature"] and "nrefs:1" in clear["chrf"]["signature"]
    same = sacrebleu_paired(worse, list(worse), REFS)
    assert same["bleu"]["p"] == 1.0 and same["chrf"]["p"] == 1.0 and same["bleu"]["identical"]
    near = list(REFS)
    near[3] = "a dog"
    close = sacrebleu_paired(REFS, near, REFS)  # one sentence of 80 differs: no evidence
    assert close["bleu"]["p"] >= 0.05 and not close["bleu"]["identical"]


# ---- grouping ------------------------------------------------------------------------------------------
def test_activation_sweep_groups_into_two_rows_of_three_seeds(tmp_path):
    """python -m zoo -m +arch=decoder_only model.activation=gelu,swiglu seed=1,2,3: 2 rows of 3 seeds."""
    values = {
        ("gelu", 1): 2.10,
        ("gelu", 2): 2.12,
        ("gelu", 3): 2.14,
        ("swiglu", 1): 2.00,
        ("swiglu", 2): 2.05,
        ("swiglu", 3): 2.03,
    }
    for (act, seed), v in values.items():
        write_run(
            tmp_path,
            f"{act}-{seed}",
            task="lm",
            arch="decoder_only",
            seed=seed,
            dataset="tiny_shakespeare",
            budget=("steps", 400),
            best={"val/loss": v + 0.1, "val/cont_loss": v},
            overrides=["+arch=decoder_only", "+benchmark=lm", f"model.activation={act}", f"seed={seed}"],
        )
    runs = find_runs(tmp_path)
    assert swept_keys(runs) == ["model.activation", "seed"]
    groups = group_runs(runs)
    assert [g["label"] for g in groups] == [
        "decoder_only model.activation=gelu",
        "decoder_only model.activation=swiglu",
    ]
    assert [[r["seed"] for r in g["runs"]] for g in groups] == [[1, 2, 3], [1, 2, 3]]
    table = rows(groups)
    cont = [r for r in table if r["metric"] == "val/cont_loss (best)"]
    assert [r["seeds"] for r in cont] == ["3", "3"]
    for r, act in zip(cont, ("gelu", "swiglu")):
        x = [values[(act, s)] for s in (1, 2, 3)]
        mean, s = sum(x) / 3, math.sqrt(sum((v - sum(x) / 3) ** 2 for v in x) / 2)
        assert r["mean"] == pytest.approx(mean) and r["std"] == pytest.approx(s)
        assert (r["lo"], r["hi"]) == pytest.approx(
            (mean - T_975[2] * s / math.sqrt(3), mean + T_975[2] * s / math.sqrt(3))
        )
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    line = next(
        x
        for x in md.splitlines()
        if x.startswith("| lm / decoder_only model.activation=gelu |") and "val/cont_loss" in x
    )
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[5] == "3" and cells[6] == "2.1200 ± 0.0200"
    assert cells[7] == f"[{2.12 - T_975[2] * 0.02 / math.sqrt(3):.4f}, {2.12 + T_975[2] * 0.02 / math.sqrt(3):.4f}]"
    assert cells[8] == "1,000,000" and cells[9] == "3e+15" and cells[10] == "2.5e+05" and cells[11] == "100 (120)"
    assert cells[12] == "2.50 M" and cells[13] == "4.00"
    assert "swept: model.activation; averaged over seed (1, 2, 3)" in md


def test_compare_sweep_keys_and_parse_overrides():
    assert parse_overrides(["+arch=prefix_lm", "++model.mask=prefix", "~foo", "seed=2"]) == {
        "arch": "prefix_lm",
        "model.mask": "prefix",
        "foo": None,
        "seed": "2",
    }
    runs = [
        {"overrides": [f"+arch={a}", f"+cell={c}", f"seed={s}"]}
        for a in ("decoder_only", "prefix_lm")
        for c in ("lm", "translation")
        for s in (1, 2)
    ]
    assert swept_keys(runs) == ["arch", "cell", "seed"]


def test_single_seed_prints_na_never_pm0(tmp_path):
    write_run(
        tmp_path,
        "one",
        task="classification",
        arch="encoder_only",
        final={"test/acc": 0.8, "test/f1": 0.79},
        dataset="sst2",
        budget=("steps", 1000),
    )
    md = report(tmp_path)["report"].read_text()
    lines = [x for x in md.splitlines() if x.startswith("| classification / encoder_only |")]
    assert len(lines) == 2 and all("n/a (1 seed)" in x for x in lines)
    assert "± 0" not in md and "±0" not in md


def test_legacy_results_are_reported_as_one_seed(tmp_path):
    for arch, acc in (("encoder_only", 0.8), ("decoder_only", 0.7)):
        write_run(
            tmp_path, arch, task="classification", arch=arch, final={"test/acc": acc}, dataset="sst2", legacy=True
        )
    out = report(tmp_path)
    acc = [r for r in out["table"] if r["metric"] == "test/acc"]
    assert [(r["label"], r["seeds"], r["value"], r["budget"]) for r in acc] == [
        ("encoder_only", "1", 0.8, "?"),
        ("decoder_only", "1", 0.7, "?"),
    ]
    md = out["report"].read_text()
    assert "2.00 M†" in md and "- (120)" in md  # forward FLOPs/token, no measured training seconds
    assert "untested (no paired examples, one seed)" in md


def test_legacy_runs_sharing_an_arch_are_not_averaged(tmp_path):
    """Old results.json record no overrides nor seed: two decoder_only runs could differ in anything."""
    for name, acc in (("a", 0.8), ("b", 0.6)):
        write_run(tmp_path, name, task="classification", arch="decoder_only", final={"test/acc": acc}, legacy=True)
    groups = group_runs(find_runs(tmp_path))
    assert [g["label"] for g in groups] == ["decoder_only (a)", "decoder_only (b)"]


# ---- failed runs ---------------------------------------------------------------------------------------
def test_failed_runs_are_listed_not_dropped(tmp_path):
    for seed in (1, 2, 3):
        write_run(
            tmp_path,
            f"ed-{seed}",
            seed=seed,
            final={"test/bleu": 20.0 + seed, "test/chrf": 40.0},
            status="failed" if seed == 2 else "ok",
        )
    write_run(
        tmp_path,
        "do-1",
        arch="decoder_only",
        seed=1,
        status="failed",
        error="ValueError: data.max_len too small\n  at ...",
    )
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    ed = next(r for r in out["table"] if r["label"] == "encoder_decoder" and r["metric"] == "test/bleu")
    assert ed["seeds"] == "2 (1 failed)" and ed["values"] == [21.0, 23.0]
    do = [r for r in out["table"] if r["label"] == "decoder_only"]
    assert len(do) == 1 and do[0]["status"] == "failed" and do[0]["seeds"] == "0 (1 failed)"
    assert "| translation / decoder_only | ? |" in md and "failed: ValueError: data.max_len too small |" in md
    assert "Failed runs (listed, not dropped):" in md
    assert f"- translation / encoder_decoder, seed 2 (`{tmp_path / 'ed-2'}`): RuntimeError: CUDA out of memory" in md
    assert f"- translation / decoder_only, seed 1 (`{tmp_path / 'do-1'}`): ValueError: data.max_len too small" in md
    assert "Traceback" not in md and "at ..." not in md  # the first line only
    assert "10 runs" not in md and "4 runs (2 failed) in 2 groups" in md


# ---- paired tests --------------------------------------------------------------------------------------
def test_translation_paired_tests_pool_seeds_and_match_ids(tmp_path):
    worse = [" ".join(r.split()[:5]) for r in REFS]
    order = list(range(len(REFS)))[::-1]
    for seed in (1, 2):
        write_run(
            tmp_path,
            f"ed-{seed}",
            seed=seed,
            final={"test/bleu": 90.0 + seed, "test/chrf": 95.0, "test/bleu_beam": 91.0},
            examples=translation_examples([REFS[i] for i in order], ids=order, beam=[REFS[i] for i in order]),
        )
        write_run(
            tmp_path,
            f"do-{seed}",
            arch="decoder_only",
            seed=seed,
            final={"test/bleu": 30.0 + seed, "test/chrf": 50.0, "test/bleu_beam": 31.0},
            examples=translation_examples(worse, beam=worse),
        )
    groups = group_runs(find_runs(tmp_path))
    assert [g["label"] for g in groups] == ["decoder_only", "encoder_decoder"]
    data = paired_data(groups[1], groups[0], "translation")  # A = encoder_decoder, its ids in reverse order
    assert data["seeds"] == 2  # seed 1 with seed 1, seed 2 with seed 2, concatenated
    assert data["ref"] == ([REFS[i] for i in order] * 2,) * 2  # A's order, repeated once per seed
    assert data["hyp"] == ([REFS[i] for i in order] * 2, [worse[i] for i in order] * 2)  # B realigned by ids
    assert data["hyp_beam"][1] == [worse[i] for i in order] * 2
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    assert "sacreBLEU signatures: BLEU `nrefs:1|bs:1000|seed:12345" in md and "chrF2 `nrefs:1|bs:1000" in md
    assert "p-values, test/bleu (sacreBLEU paired bootstrap)" in md and "p-values, test/bleu_beam" in md
    rec = out["records"]["translation"][0]
    (sign, why, p) = rec["pairs"][(1, 0)]
    assert sign == 1 and p < 0.05 and "95% seed intervals disjoint" in why
    assert "Significantly behind it: decoder_only." in md


def test_pairing_is_refused_when_ids_differ(tmp_path):
    write_run(tmp_path, "ed", final={"test/bleu": 30.0}, examples=translation_examples(REFS[:40]))
    write_run(
        tmp_path,
        "do",
        arch="decoder_only",
        final={"test/bleu": 20.0},
        examples=translation_examples(REFS[10:50], ids=list(range(10, 50))),
    )
    groups = group_runs(find_runs(tmp_path))
    with pytest.raises(NotPaired, match="their example ids differ"):
        paired_data(groups[0], groups[1], "translation")
    md = report(tmp_path, tmp_path / "out")["report"].read_text()
    assert (
        "- encoder_decoder vs decoder_only: not paired: encoder_decoder (seed 1) and decoder_only (seed 1): their "
        "example ids differ (40 and 40 ids, 30 in common)" in md
    )
    assert "untested (no paired examples, one seed)" in md


def test_classification_mcnemar_in_the_report(tmp_path):
    labels = [i % 2 for i in range(60)]
    # A right on all; B wrong on 10 of them and right elsewhere: b = 10, c = 0, p = 2 / 2^10
    pred_b = [1 - y if i < 10 else y for i, y in enumerate(labels)]
    for name, arch, pred in (("ed", "encoder_decoder", labels), ("do", "decoder_only", pred_b)):
        acc = sum(p == y for p, y in zip(pred, labels)) / 60
        write_run(
            tmp_path,
            name,
            task="classification",
            arch=arch,
            dataset="sst2",
            final={"test/acc": acc},
            examples={"task": "classification", "split": "test", "ids": list(range(60)), "pred": pred, "label": labels},
        )
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    assert "McNemar's exact test" in md and "p-values, test/acc (McNemar exact)" in md
    sign, why, p = out["records"]["classification"][0]["pairs"][(1, 0)]
    assert p == pytest.approx(2 / 2**10) and sign == 1
    assert f"{2 / 2**10:.4f}*" in md


def test_lm_paired_bootstrap_over_windows(tmp_path):
    rng = np.random.default_rng(0)
    tokens = [int(t) for t in rng.integers(50, 65, 40)]
    base = rng.normal(2.2, 0.1, 40)
    for name, arch, shift in (("do", "decoder_only", 0.0), ("ed", "encoder_decoder", 0.2), ("same", "prefix_lm", 0.0)):
        loss = [float(x + shift) for x in base]
        mean = sum(x * t for x, t in zip(loss, tokens)) / sum(tokens)
        write_run(
            tmp_path,
            name,
            task="lm",
            arch=arch if arch != "prefix_lm" else "decoder_only",
            arch_config=arch,
            dataset="tiny_shakespeare",
            best={"val/loss": mean, "val/cont_loss": mean},
            examples={
                "task": "lm",
                "split": "val",
                "ids": list(range(40)),
                "metric": "val/cont_loss",
                "loss": loss,
                "tokens": tokens,
            },
        )
    out = report(tmp_path, tmp_path / "out")
    rec = out["records"]["lm"][0]
    assert rec["metric"] == "val/cont_loss (best)"
    labels = [r["label"] for r in rec["order"]]
    assert labels[-1] == "encoder_decoder"  # the highest loss last
    g = {r["label"]: r["group"] for r in rec["order"]}
    assert rec["pairs"][(g["decoder_only"], g["encoder_decoder"])][2] < 0.001  # 0.2 nats on every window
    assert rec["pairs"][(g["decoder_only"], g["prefix_lm"])][2] == 1.0  # the same losses
    assert "paired bootstrap over the same validation windows" in out["report"].read_text()


def test_ordering_needs_p_and_disjoint_intervals():
    a = {"metric": "test/bleu", "mean": 30.0, "lo": 29.0, "hi": 31.0}
    b = {"metric": "test/bleu", "mean": 28.0, "lo": 27.0, "hi": 29.5}
    assert ordering(a, b, 0.001)[0] == 0  # significant p but overlapping seed intervals: within the intervals
    assert ordering(a, {**b, "hi": 28.5}, 0.001)[0] == 1
    assert ordering(a, {**b, "hi": 28.5}, 0.2)[0] == 0
    one = {"metric": "val/loss (best)", "mean": 2.0, "lo": None, "hi": None}
    assert ordering(one, {**one, "mean": 2.5}, 0.01)[0] == 1  # lower loss ahead, one seed: p decides
    assert ordering(one, {**one, "mean": 2.5}, None)[0] == 0


def test_the_p_value_table_stars_only_what_the_ranking_calls_different(tmp_path):
    """One rule for "significantly different", in the ranking and in the p-value table: p < 0.05 and, where both
    groups have several seeds, disjoint 95% seed intervals. McNemar on two pooled seeds: B wrong on 10 of 60
    examples in each seed where A is right, so b = 20, c = 0 and p = 2 / 2^20; but A's test/acc over its seeds
    (1.0, 0.5) has a 95% interval around B's (0.84, 0.82): not ahead, so the p is printed without a star, marked."""
    labels = [i % 2 for i in range(60)]
    wrong = [1 - y if i < 10 else y for i, y in enumerate(labels)]
    for seed, acc_a, acc_b in ((1, 1.0, 0.84), (2, 0.5, 0.82)):
        for name, arch, pred, acc in (("eo", "encoder_only", labels, acc_a), ("do", "decoder_only", wrong, acc_b)):
            write_run(
                tmp_path,
                f"{name}{seed}",
                task="classification",
                arch=arch,
                seed=seed,
                dataset="sst2",
                final={"test/acc": acc},
                examples={
                    "task": "classification",
                    "split": "test",
                    "ids": list(range(60)),
                    "pred": pred,
                    "label": labels,
                },
            )
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    p = 2 / 2**20
    (sign, why, got) = out["records"]["classification"][0]["pairs"][(0, 1)]
    assert (sign, got) == (0, pytest.approx(p)) and why == f"p = {p:.3g}, but the 95% seed intervals overlap"
    assert f"{p:.1e}*" not in md  # no star beside the tie
    row = next(line for line in md.splitlines() if line.startswith("| encoder_only |"))
    assert row == f"| encoder_only | {p:.1e} ° | - |"
    assert "°: p < 0.05, but the 95% seed intervals overlap: not significantly different" in md


# ---- bad input: mixed datasets / budgets -----------------------------------------------------------------
def test_mixed_datasets_and_budgets_are_not_ranked_across(tmp_path):
    labels = [i % 2 for i in range(30)]
    ex = {"task": "classification", "split": "test", "ids": list(range(30)), "pred": labels, "label": labels}
    write_run(
        tmp_path,
        "eo-sst2",
        task="classification",
        arch="encoder_only",
        dataset="sst2",
        final={"test/acc": 0.9},
        examples=ex,
    )
    write_run(
        tmp_path,
        "do-sst2",
        task="classification",
        arch="decoder_only",
        dataset="sst2",
        final={"test/acc": 0.7},
        examples=ex,
    )
    write_run(
        tmp_path,
        "eo-mine",
        task="classification",
        arch="encoder_only",
        dataset="my_topics",
        final={"test/acc": 0.5},
        examples=ex,
        overrides=["+arch=encoder_only", "data=my_topics"],
    )
    write_run(
        tmp_path,
        "do-flops",
        task="classification",
        arch="decoder_only",
        dataset="sst2",
        budget=("flops", 1e15),
        final={"test/acc": 0.95},
        examples=ex,
        overrides=["+arch=decoder_only", "compare.budget=flops"],
    )
    out = report(tmp_path, tmp_path / "out")
    md = out["report"].read_text()
    assert "**Not ranked across datasets / budgets**: the classification runs mix" in md
    assert (
        "(sst2, steps 900): encoder_only, decoder_only; (my_topics, steps 900): encoder_only data=my_topics; "
        "(sst2, flops 1e+15): decoder_only compare.budget=flops." in md
    )
    recs = out["records"]["classification"]
    assert sorted((r["dataset"], r["budget"], len(r["order"])) for r in recs) == [
        ("my_topics", "steps 900", 1),
        ("sst2", "flops 1e+15", 1),
        ("sst2", "steps 900", 2),
    ]
    # the only pair tested is within (sst2, steps 900)
    pairs = {k for r in recs for k in r["pairs"]}
    sst2 = next(r for r in recs if r["dataset"] == "sst2" and r["budget"] == "steps 900")
    assert pairs == set(sst2["pairs"]) and len(pairs) == 2


# ---- literature ----------------------------------------------------------------------------------------
def test_t5_claims_follow_the_table():
    assert {row[0] for row in T5_TABLE2} == {"prefix_lm", "decoder_only", "encoder_decoder"}
    assert t5_threshold("EnDe") == pytest.approx(1.96 * math.sqrt(2) * 0.112) and T5_STD["EnDe"] == 0.112
    assert t5_claim("prefix_lm", "decoder_only", "EnDe")[0] == 1  # 26.43 / 26.28 vs 25.09 / 25.23
    assert t5_claim("decoder_only", "encoder_decoder", "EnDe")[0] == -1  # 25.09 vs 26.38 (both P)
    claim = t5_claim("prefix_lm", "encoder_decoder", "EnDe")  # 26.43 vs 26.38 at P: within T5's noise
    assert claim[0] == 0 and "26.38" in claim[1]
    assert t5_claim("encoder_decoder", "decoder_only", "GLUE")[0] == 1  # 83.28 vs 74.70
    assert t5_claim("prefix_lm", "decoder_only", "GLUE")[0] == 1  # 81.82 vs 74.70


def _translation_sweep(root, bleu, worse_of):
    """3 seeds of prefix_lm, decoder_only and encoder_decoder; bleu: {arch: per-seed BLEU}; worse_of: the archs
    whose outputs are truncated (clearly worse on the paired test)."""
    worse = [" ".join(r.split()[:4]) for r in REFS]
    for arch, values in bleu.items():
        for seed, v in zip((1, 2, 3), values):
            write_run(
                root,
                f"{arch}-{seed}",
                arch="decoder_only" if arch == "prefix_lm" else arch,
                arch_config=arch,
                seed=seed,
                final={"test/bleu": v, "test/chrf": v + 20},
                overrides=[f"+arch={arch}", "+benchmark=translation", f"seed={seed}"],
                examples=translation_examples(worse if arch in worse_of else REFS),
            )


@pytest.mark.e2e
def test_translation_ranking_against_t5(tmp_path):
    _translation_sweep(
        tmp_path / "a",
        {"prefix_lm": [30.0, 30.5, 31.0], "encoder_decoder": [30.2, 30.4, 30.9], "decoder_only": [20.0, 20.5, 21.0]},
        worse_of={"decoder_only"},
    )
    md = report(tmp_path / "a", tmp_path / "out_a")["report"].read_text()
    lit = md[md.index("## Against the literature") :]
    assert "against T5 (EnDe, test/bleu)" in lit and "Raffel et al. 2020" in lit and "26.43" in lit
    assert "- prefix_lm vs decoder_only: T5 prefix_lm ahead" in lit
    line = next(x for x in lit.splitlines() if x.startswith("- prefix_lm vs decoder_only"))
    assert line.endswith("**agrees**")
    line = next(x for x in lit.splitlines() if x.startswith("- prefix_lm vs encoder_decoder"))
    assert "T5 no ordering" in line and line.endswith("**agrees (neither orders them)**")
    line = next(x for x in lit.splitlines() if x.startswith("- decoder_only vs encoder_decoder"))
    assert line.endswith("**agrees**")
    # a causal LM clearly ahead of the encoder-decoder: disagrees; within the intervals: not significant
    _translation_sweep(
        tmp_path / "b",
        {"prefix_lm": [25.0, 26.0, 27.0], "encoder_decoder": [10.0, 10.5, 11.0], "decoder_only": [24.0, 26.5, 27.5]},
        worse_of={"encoder_decoder"},
    )
    lit = report(tmp_path / "b", tmp_path / "out_b")["report"].read_text().split("## Against the literature")[1]
    line = next(x for x in lit.splitlines() if x.startswith("- decoder_only vs encoder_decoder"))
    assert "T5 encoder_decoder ahead" in line and "zoo decoder_only ahead" in line and line.endswith("**disagrees**")
    line = next(x for x in lit.splitlines() if x.startswith("- prefix_lm vs decoder_only"))
    assert "zoo no significant ordering" in line and line.endswith("**not significant**")


def test_classification_ranking_against_t5(tmp_path):
    labels = [i % 2 for i in range(200)]
    for arch, wrong, accs in (("encoder_decoder", 10, [0.95, 0.95]), ("decoder_only", 60, [0.70, 0.71])):
        pred = [1 - y if i < wrong else y for i, y in enumerate(labels)]
        for seed, acc in zip((1, 2), accs):
            write_run(
                tmp_path,
                f"{arch}-{seed}",
                task="classification",
                arch=arch,
                seed=seed,
                dataset="sst2",
                final={"test/acc": acc},
                examples={
                    "task": "classification",
                    "split": "test",
                    "ids": list(range(200)),
                    "pred": pred,
                    "label": labels,
                },
            )
    lit = report(tmp_path, tmp_path / "out")["report"].read_text().split("## Against the literature")[1]
    assert "against T5 (GLUE, test/acc)" in lit and "83.28" in lit and "74.70" in lit
    line = next(x for x in lit.splitlines() if x.startswith("- decoder_only vs encoder_decoder"))
    assert "T5 encoder_decoder ahead" in line and line.endswith("**agrees**")


# ---- curves ----------------------------------------------------------------------------------------------
def test_band_at_common_x_points():
    x, mean, lo, hi = band([([0, 1, 2], [0, 1, 2]), ([0.5, 1.5, 2.5], [1, 2, 3])])
    assert list(x) == [0.5, 1.0, 1.5, 2.0]  # inside the range both seeds cover
    assert list(mean) == pytest.approx([0.75, 1.25, 1.75, 2.25])
    assert list(lo) == pytest.approx([0.5, 1.0, 1.5, 2.0]) and list(hi) == pytest.approx([1.0, 1.5, 2.0, 2.5])
    assert band([([0, 1], [0, 1]), ([2, 3], [0, 1])]) is None


def test_curves_against_step_flops_and_seconds(tmp_path):
    for seed in (1, 2, 3):
        curve = {
            "val/bleu": [(s, 5 + s / 50 + seed, s * 1e12, s * 0.2 + seed) for s in (50, 100, 150)],
            "val/loss": [(s, 4 - s / 100, s * 1e12, s * 0.2 + seed) for s in (50, 100, 150)],
        }
        write_run(tmp_path, f"ed-{seed}", seed=seed, final={"test/bleu": 10.0}, curve=curve)
    out = report(tmp_path, tmp_path / "out")
    assert [p.name for p in out["curves"]] == ["val_translation.png"]
    img = mpimg.imread(out["curves"][0])
    assert img.shape[0] / img.shape[1] == pytest.approx(3 * 4 / (2 * 5.5), rel=0.02)  # 3 rows (x axes) x 2 metrics
    assert "mean and min-max band" in out["report"].read_text()


def test_bad_input_still_exits_2(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.json").write_text(json.dumps({"status": "weird", "arch": "x", "task": "y"}))
    assert main([str(tmp_path)]) == 2
    assert "neither 'ok' nor 'failed'" in capsys.readouterr().err
    (tmp_path / "r" / "results.json").write_text(json.dumps({"status": "failed", "arch": "x"}))
    assert main([str(tmp_path)]) == 2
    assert "lacks ['task']" in capsys.readouterr().err


# ---- bad input to the statistics: a ValueError naming the value ----------------------------------------------
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: t_interval([1.0, float("nan"), 3.0]), r"t_interval: values\[1\] = nan is not finite"),
        (lambda: t_interval([[1.0, 2.0], [3.0, 4.0]]), r"t_interval: values must be a non-empty 1-d .* shape \(2, 2\)"),
        (lambda: t_interval([]), r"t_interval: values must be a non-empty 1-d sequence, got shape \(0,\)"),
        (lambda: t_interval([1.0, 2.0], confidence=95), r"confidence must be in \(0, 1\), e.g. 0.95, got 95"),
        (lambda: mcnemar_exact([], []), r"mcnemar_exact: correct_a must be a non-empty 1-d sequence"),
        (lambda: mcnemar_exact([True, 0.5], [True, False]), r"mcnemar_exact: correct_a\[1\] = 0.5: give True / False"),
        (lambda: mcnemar_exact([True, False], [float("nan"), True]), r"correct_b\[0\] = nan"),
        (lambda: mcnemar_exact([True, False], [True]), r"mcnemar_exact: \(2,\) vs \(1,\) examples"),
        (lambda: paired_bootstrap([0.1, float("inf")]), r"paired_bootstrap: diff\[1\] = inf is not finite"),
        (lambda: paired_bootstrap([0.1, 0.2], [1.0, -2.0]), r"weights\[1\] = -2.0"),
        (
            lambda: paired_bootstrap([0.1, 0.2], n_samples=0),
            r"paired_bootstrap: n_samples must be an integer >= 1, got 0",
        ),
        (lambda: randomization_floor(-1), r"randomization_floor: n_diff must be an integer >= 0, got -1"),
        (lambda: sacrebleu_paired(["a b", None], ["a b", "c"], ["a b", "c"]), r"hyps_a\[1\] = None: give one string"),
        (lambda: sacrebleu_paired(["a"], ["b"], ["a"], n_samples=0), r"sacrebleu_paired: n_samples must be an int"),
    ],
)
def test_statistics_refuse_bad_input_naming_the_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_significance_refuses_a_p_that_is_not_a_p_value():
    """A NaN p compares False with ALPHA: it would rank A ahead and print as "<1e-300"."""
    a = {"metric": "test/bleu", "mean": 30.0, "lo": 29.0, "hi": 29.5}
    b = {"metric": "test/bleu", "mean": 28.0, "lo": 27.0, "hi": 28.5}
    for p in (float("nan"), -0.1, 1.5, "0.01"):
        with pytest.raises(ValueError, match=r"ordering: p = .* is not a p-value"):
            ordering(a, b, p)
        with pytest.raises(ValueError, match=r"fmt_p: p = .* is not a p-value"):
            fmt_p(p)
    with pytest.raises(ValueError, match=r"overlap: rb's interval \(lo 28.5, hi 27.0\) is not finite with lo <= hi"):
        overlap(a, {**b, "lo": 28.5, "hi": 27.0})
    with pytest.raises(ValueError, match=r"overlap: ra's interval \(lo nan, hi 29.5\)"):
        overlap({**a, "lo": float("nan")}, b)
    assert (ordering(a, b, 0.01)[0], fmt_p(0.01), fmt_p(None), overlap(a, b)) == (1, "0.0100*", "-", False)


def test_a_diverged_seed_shows_nan_with_no_interval(tmp_path):
    """t_interval refuses NaN; the report's table gives a group with a NaN seed the NaN mean and no interval."""
    for seed, acc in ((1, 0.8), (2, float("nan"))):
        write_run(
            tmp_path,
            f"s{seed}",
            task="classification",
            arch="encoder_only",
            seed=seed,
            final={"test/acc": acc, "test/f1": 0.7},
            dataset="sst2",
            budget=("steps", 1000),
        )
    table = {r["metric"]: r for r in rows(group_runs(find_runs(tmp_path)))}
    assert math.isnan(table["test/acc"]["mean"]) and table["test/acc"]["lo"] is None and table["test/acc"]["n"] == 2
    assert table["test/f1"]["mean"] == pytest.approx(0.7) and table["test/f1"]["lo"] is not None
