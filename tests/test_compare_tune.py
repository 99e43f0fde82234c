"""experiment=compare's tuning (compare.lr_grid, zoo.run.compare_tune): without a grid the sweep is today's; with
one, each (arch, benchmark) runs its tuning runs before its cells, a cell runs the best seed-mean rate of its own
tuning runs, refuses a best rate at an edge of the grid and missing tuning runs, a tuning run never reads the test
split, and the report says whether the cells were tuned and keeps the tuning runs out of the comparison."""

import json

import lightning.pytorch as pl
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from zoo_run import SHORT_RUN, make_cfg, needs_shared, run_cli

from zoo.errors import ConfigError, DataError
from zoo.report.build import report
from zoo.run.compare_tune import begin, check_grid, sweep_seeds
from zoo.run.conf import CONF_DIR
from zoo.run.train import run

ARCHS = "decoder_only,prefix_lm,encoder_decoder,encoder_only"


def sweep_config(extra):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=["experiment=compare", *extra], return_hydra_config=True)


def jobs(extra) -> list[tuple[str, ...]]:
    """The overrides of every job of `python -m zoo -m experiment=compare <extra>`, in the order Hydra's basic
    sweeper runs them."""
    params = sweep_config(extra).hydra.sweeper.params
    overrides = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    return [tuple(job) for job in BasicSweeper.split_arguments(overrides, None)[0]]


def test_without_a_grid_the_sweep_and_its_cells_are_todays(tmp_path):
    """compare.lr_grid=null: the sweep's params and run dirs are those of the untuned comparison, and a cell keeps
    its config (its task's rate, conf/task/<task>.yaml) and is recorded as not tuned."""
    cfg = sweep_config([])
    assert dict(cfg.hydra.sweeper.params) == {
        "+arch": ARCHS,
        "+benchmark": "classification,lm,translation",
        "seed": "1,2,3",
    }
    subdir = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)["subdir"]
    assert subdir == "${hydra:runtime.choices.benchmark}-${hydra:runtime.choices.arch}-seed${seed}"
    assert len(jobs([])) == 4 * 3 * 3
    for bench in ("classification", "lm", "translation"):
        cfg = make_cfg(tmp_path / bench, ["experiment=compare", f"+benchmark={bench}", "seed=2"], arch="prefix_lm")
        before = OmegaConf.to_yaml(cfg)
        record = begin(cfg)
        assert OmegaConf.to_yaml(cfg) == before
        rate = OmegaConf.load(f"{CONF_DIR}/task/{bench}.yaml").task.optimizer.lr
        assert record == {"tuning": False, "tuned": False, "benchmark": bench, "arch": "prefix_lm", "lr": rate}


def test_a_grid_runs_each_pairs_tuning_runs_before_its_cells():
    """Rates 1e-2, 1e-4, 3 with 2 tune seeds and 2 seeds: per pair, 6 tuning runs (smallest rate first, seed by
    seed), then seeds 1 and 2; the arch and the benchmark are the outer loops, so a pair's runs are consecutive."""
    grid = ["compare.lr_grid=[1e-2,1e-4,3.0]", "compare.tune_seeds=2", "compare.seeds=2"]
    got = jobs([*grid, "compare.benchmarks=[lm,translation]"])
    assert len(got) == 4 * 2 * 8
    want = [f"seed={s}_tune_lr{r}" for s in (1, 2) for r in ("0.0001", "0.01", "3.0")] + ["seed=1", "seed=2"]
    assert [j[2] for j in got[:8]] == want
    assert all(j[:2] == ("+arch=decoder_only", "+benchmark=lm") for j in got[:8])
    assert got[8][:2] == ("+arch=decoder_only", "+benchmark=translation")


@pytest.mark.parametrize(
    "grid, seeds, match",
    [
        ([1e-3, 2e-3], 1, r"compare.lr_grid=\[0.001, 0.002\] must be null \(no tuning\) or a list of at least 3"),
        ([1e-3, -2e-3, 4e-3], 1, r"at least 3 positive peak rates"),
        ([1e-3, 1e-3, 4e-3], 1, r"names a rate twice"),
        (1e-3, 1, r"compare.lr_grid=0.001 must be null"),
        ([1e-3, 2e-3, 4e-3], 0, r"compare.tune_seeds=0 must be a positive whole number"),
    ],
)
def test_a_grid_the_tuning_cannot_use_is_refused(grid, seeds, match, capsys):
    with pytest.raises(ConfigError, match=match):
        check_grid(grid, seeds)
    with pytest.raises(SystemExit) as e:
        sweep_seeds(3, grid, seeds)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and err.startswith("zoo: error: compare.") and "\n" not in err


def fake_tuning(sweep, arch, bench, metric, table, status="ok"):
    """Tuning runs' results.json as zoo.run.train writes them: {rate: [final metric of seed 1, seed 2, ...]}."""
    for lr, values in table.items():
        for seed, v in enumerate(values, 1):
            d = sweep / f"{bench}-{arch}-seed{seed}_tune_lr{lr!r}"
            d.mkdir(parents=True)
            record = {"tuning": True, "tuned": False, "benchmark": bench, "arch": arch, "lr": lr, "metric": metric}
            (d / "results.json").write_text(
                json.dumps({"status": status, "seed": seed, "final": {metric: v}, "compare": record})
            )


LM_GRID = ["compare.lr_grid=[1.0e-3,2.0e-3,4.0e-3]", "compare.tune_seeds=2"]


def lm_cell(sweep, arch="decoder_only"):
    return make_cfg(sweep / f"lm-{arch}-seed1", ["experiment=compare", "+benchmark=lm", "seed=1", *LM_GRID], arch)


def test_a_tuning_run_takes_its_seed_and_rate_from_its_name(tmp_path):
    """seed=2_tune_lr0.004: seed 2 at rate 0.004, in the cells' W&B group + /tune (compare: experiment_name, out of
    a sweep); a rate outside the grid, a tuning seed without a grid, or a test metric are refused."""
    cfg = make_cfg(tmp_path / "t", ["experiment=compare", "+benchmark=lm", "seed=2_tune_lr0.004", *LM_GRID])
    record = begin(cfg)
    assert (cfg.seed, cfg.task.optimizer.lr, cfg.logger.wandb.group) == (2, 4e-3, "compare/tune")
    assert record["tuning"] and not record["tuned"] and record["lr"] == 4e-3
    assert make_cfg(tmp_path / "c", ["experiment=compare", "+benchmark=lm", "seed=2"]).logger.wandb.group is None
    for extra, match in (
        (["seed=1_tune_lr0.003", *LM_GRID], r"rate 0.003 is not in compare.lr_grid \(0.001, 0.002, 0.004\)"),
        (["seed=1_tune_lr0.002"], r"seed=1_tune_lr0.002 names a tuning run, but compare.lr_grid is null"),
        (["seed=1", *LM_GRID, "compare.tune_metric.lm=test/loss"], r"compare.tune_metric.lm='test/loss' must name"),
    ):
        with pytest.raises(ConfigError, match=match):
            begin(make_cfg(tmp_path / "x", ["experiment=compare", "+benchmark=lm", *extra]))


def test_a_cell_runs_the_best_seed_mean_rate_of_its_own_tuning_runs(tmp_path):
    """decoder_only's seed means: 1e-3 -> 2.0, 2e-3 -> 1.9, 4e-3 -> 1.95 (seed 1 alone would pick 4e-3); prefix_lm's
    runs in the same folder (best 1e-3) do not count. Classification maximises val/acc: 1e-3 (0.8)."""
    fake_tuning(tmp_path, "decoder_only", "lm", "val/cont_loss", {1e-3: [2.0, 2.0], 2e-3: [1.7, 2.1], 4e-3: [1.6, 2.3]})
    fake_tuning(tmp_path, "prefix_lm", "lm", "val/cont_loss", {1e-3: [1.0, 1.0], 2e-3: [3.0, 3.0], 4e-3: [3.0, 3.0]})
    cfg = lm_cell(tmp_path)
    record = begin(cfg)
    assert cfg.task.optimizer.lr == 2e-3 and cfg.seed == 1
    assert record["tuned"] and not record["tuning"] and record["lr"] == 2e-3 and record["metric"] == "val/cont_loss"
    assert record["scores"] == {"0.001": 2.0, "0.002": pytest.approx(1.9), "0.004": pytest.approx(1.95)}
    fake_tuning(tmp_path, "encoder_only", "classification", "val/acc", {1e-4: [0.6], 1e-3: [0.8], 1e-2: [0.7]})
    grid = ["compare.lr_grid=[1e-4,1e-3,1e-2]", "compare.tune_seeds=1", "seed=1"]
    cfg = make_cfg(tmp_path / "c-seed1", ["experiment=compare", "+benchmark=classification", *grid], "encoder_only")
    assert begin(cfg)["lr"] == 1e-3 and cfg.task.optimizer.lr == 1e-3


def test_a_best_rate_at_an_edge_of_the_grid_is_refused_naming_the_rate_to_add(tmp_path):
    up = {1e-3: [2, 2], 2e-3: [1.9, 1.9], 4e-3: [1.8, 1.8]}
    fake_tuning(tmp_path / "up", "decoder_only", "lm", "val/cont_loss", up)
    with pytest.raises(ConfigError, match=r"best tuning rate 0.004 .* is an edge of compare.lr_grid .* add 0.008"):
        begin(lm_cell(tmp_path / "up"))
    down = {1e-3: [1, 1], 2e-3: [1.9, 1.9], 4e-3: [2, 2]}
    fake_tuning(tmp_path / "down", "decoder_only", "lm", "val/cont_loss", down)
    with pytest.raises(ConfigError, match=r"best tuning rate 0.001 .* add 0.0005 to the grid"):
        begin(lm_cell(tmp_path / "down"))
    tied = {1e-3: [2, 2], 2e-3: [1.9, 1.9], 4e-3: [1.9, 1.9]}  # an upper edge tied with the best: maybe beyond
    fake_tuning(tmp_path / "tied", "decoder_only", "lm", "val/cont_loss", tied)
    with pytest.raises(ConfigError, match=r"best tuning rate 0.004 .* add 0.008 to the grid"):
        begin(lm_cell(tmp_path / "tied"))
    acc = {1e-4: [0.8], 1e-3: [0.8], 1e-2: [0.7]}  # val/acc is maximised: a lower edge tied with the best
    fake_tuning(tmp_path / "acc", "encoder_only", "classification", "val/acc", acc)
    grid = ["compare.lr_grid=[1e-4,1e-3,1e-2]", "compare.tune_seeds=1", "seed=1"]
    overrides = ["experiment=compare", "+benchmark=classification", *grid]
    cfg = make_cfg(tmp_path / "acc" / "c-seed1", overrides, "encoder_only")
    with pytest.raises(ConfigError, match=r"best tuning rate 0.0001 .* add 1e-05 to the grid"):
        begin(cfg)
    nan = {1e-3: [2.0, 2.0], 2e-3: [1.9, 1.9], 4e-3: [float("nan"), 1.0]}  # a diverged run is the worst
    fake_tuning(tmp_path / "nan", "decoder_only", "lm", "val/cont_loss", nan)
    assert begin(lm_cell(tmp_path / "nan"))["lr"] == 2e-3


def test_a_cell_without_its_tuning_runs_is_refused(tmp_path):
    table = {1e-3: [2.0, 2.0], 2e-3: [1.9, 1.9], 4e-3: [1.95, 1.95]}
    fake_tuning(tmp_path, "decoder_only", "lm", "val/cont_loss", table)
    (tmp_path / "lm-decoder_only-seed2_tune_lr0.004" / "results.json").unlink()
    with pytest.raises(ConfigError, match=r"1 of its 6 tuning runs are not done \(seed=2_tune_lr0.004\)"):
        begin(lm_cell(tmp_path))
    with pytest.raises(ConfigError, match=r"6 of its 6 tuning runs are not done"):
        begin(lm_cell(tmp_path, "encoder_only"))
    fake_tuning(tmp_path / "f", "decoder_only", "lm", "val/cont_loss", {4e-3: [1.0, 1.0]}, status="failed")
    fake_tuning(tmp_path / "f", "decoder_only", "lm", "val/cont_loss", {1e-3: [2.0, 2.0], 2e-3: [1.9, 1.9]})
    with pytest.raises(ConfigError, match=r"2 of its 6 .* failed: .*seed1_tune_lr0.004"):
        begin(lm_cell(tmp_path / "f"))


@pytest.mark.slow
@needs_shared
def test_a_refused_cell_exits_2_with_one_line(tmp_path):
    fake_tuning(tmp_path, "decoder_only", "lm", "val/cont_loss", {1e-3: [2, 2], 2e-3: [1.9, 1.9], 4e-3: [1.8, 1.8]})
    args = ["experiment=compare", "+arch=decoder_only", "+benchmark=lm", "seed=1", *LM_GRID]
    out = run_cli([*args, f"hydra.run.dir={tmp_path / 'lm-decoder_only-seed1'}"], cwd=tmp_path)
    err = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(err) == 1 and err[0].startswith("zoo: error: decoder_only on lm: the best")


@pytest.mark.slow
@needs_shared
def test_one_command_tunes_and_runs_the_cell_at_the_obviously_best_rate(tmp_path):
    """The real sweep on a tiny lm cell, rates 1e-4, 1e-2, 3 for 30 steps: 1e-4 barely moves, 3 diverges, so 1e-2
    is best and inside the grid. The tuning runs run first, the cell runs 1e-2 and is, to the last bit, the
    tuning run at 1e-2 (no test split in lm: the same run); the report says the cell was tuned."""
    tiny = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_layers=2", "data.block_size=32"]
    tiny += ["data.batch_size=8", "data.val_windows=16", "trainer.max_steps=30", "trainer.val_check_interval=10"]
    sweep = tmp_path / "sweep"
    args = ["-m", "experiment=compare", "compare.budget=steps", "+arch=decoder_only", "+benchmark=lm"]
    args += ["compare.seeds=1", "compare.lr_grid=[1e-4,1e-2,3.0]", f"hydra.sweep.dir={sweep}", "logger=csv"]
    out = run_cli([*args, "threads=1", "task.sample.max_new_tokens=8", *tiny], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    order = [
        line.split("seed=")[1].split()[0] for line in out.stdout.splitlines() + out.stderr.splitlines() if "\t#" in line
    ]
    assert order == ["1_tune_lr0.0001", "1_tune_lr0.01", "1_tune_lr3.0", "1"]
    res = {d.name: json.loads((d / "results.json").read_text()) for d in sweep.iterdir() if d.is_dir()}
    cell, tuned = res["lm-decoder_only-seed1"], res["lm-decoder_only-seed1_tune_lr0.01"]
    assert cell["compare"]["tuned"] and cell["compare"]["lr"] == 1e-2
    assert cell["final"]["val/cont_loss"] == tuned["final"]["val/cont_loss"]
    text = report(sweep)["report"].read_text()
    assert "- lm: tuned: each architecture at its best rate of compare.lr_grid (0.0001, 0.01, 3)" in text


# a tiny SST-2 cell: 4 steps of 32 examples, validated every 2 steps
TINY_SST2 = [
    "experiment=compare",
    "compare.budget=steps",
    "+benchmark=classification",
    *SHORT_RUN,
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "data.limit=320",
    "data.vocab_size=300",
    "data.batch_size=32",
    "model.max_len=128",
    "threads=1",
]


@needs_shared
def test_a_tuning_run_never_reads_the_test_split(tmp_path, monkeypatch):
    """data.test_file names no file: a cell refuses it (it reads the test split), a tuning run trains and validates
    without finding, reading or scoring it (Trainer.test would raise)."""
    torch.set_num_threads(1)
    no_test = [*TINY_SST2, f"data.test_file={tmp_path / 'missing.txt'}", "compare.lr_grid=[1e-4,1e-3,1e-2]"]
    with pytest.raises(DataError, match="missing.txt"):
        run(make_cfg(tmp_path / "cell", [*TINY_SST2, f"data.test_file={tmp_path / 'missing.txt'}"], "encoder_only"))

    def no_testing(*args, **kwargs):
        raise AssertionError("a tuning run called Trainer.test")

    monkeypatch.setattr(pl.Trainer, "test", no_testing)
    out = tmp_path / "classification-encoder_only-seed1_tune_lr0.001"
    run(make_cfg(out, [*no_test, "seed=1_tune_lr0.001"], "encoder_only"))
    res = json.loads((out / "results.json").read_text())
    assert res["status"] == "ok" and res["seed"] == 1 and res["steps"] == 4
    assert res["compare"]["tuning"] and res["compare"]["lr"] == 1e-3 and "val/acc" in res["final"]
    assert not [k for k in res["final"] if k.startswith("test/")]
    assert res["data"]["files"]["test"] == "not read (read_test=false)"
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["hyper_parameters"]["optimizer"]["lr"] == 1e-3


@needs_shared
def test_a_tuned_cell_trains_at_its_tuned_rate(tmp_path):
    """Faked tuning runs make 1e-2 the best of [1e-4, 1e-2, 3]; the real cell trains at 1e-2 (its checkpoint's
    optimizer) and records it, tested as any cell."""
    torch.set_num_threads(1)
    fake_tuning(tmp_path, "encoder_only", "classification", "val/acc", {1e-4: [0.55], 1e-2: [0.7], 3.0: [0.5]})
    grid = ["compare.lr_grid=[1e-4,1e-2,3.0]", "seed=1"]
    out = tmp_path / "classification-encoder_only-seed1"
    run(make_cfg(out, [*TINY_SST2, *grid], "encoder_only"))
    res = json.loads((out / "results.json").read_text())
    assert (res["compare"]["tuned"], res["compare"]["lr"], res["compare"]["lr_grid"]) == (True, 1e-2, [1e-4, 1e-2, 3.0])
    assert "test/acc" in res["final"]
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["hyper_parameters"]["optimizer"]["lr"] == 1e-2


def write_pairs(d, name, pairs):
    (d / f"{name}.de").write_text("".join(p[0] + "\n" for p in pairs), encoding="utf-8")
    (d / f"{name}.en").write_text("".join(p[1] + "\n" for p in pairs), encoding="utf-8")


@pytest.mark.parametrize("test_given", [True, False])
def test_parallel_text_with_read_test_false_reads_no_test_split(tmp_path, test_given):
    """A test given as files that do not exist, or carved from train: read_test=False sets up train and val (the
    same train pairs as a module that reads its test split carves) and never builds a test loader."""
    from zoo.data.parallel_text import ParallelText

    pairs = [(f"satz {i} " * (1 + i % 3), f"sentence {i}") for i in range(60)]
    write_pairs(tmp_path, "train", pairs[:50])
    write_pairs(tmp_path, "val", pairs[50:])
    files = {s: {"src": str(tmp_path / f"{s}.de"), "tgt": str(tmp_path / f"{s}.en")} for s in ("train", "val", "test")}
    if not test_given:
        files["test"] = None
    kw = dict(**files, src_lang="de", tgt_lang="en", tokenizer="char", test_fraction=0.2)
    dm = ParallelText(**kw, read_test=False)
    dm.setup()
    assert dm.test_set is None and len(dm.val_set) == 10 and len(dm.train_set) == (50 if test_given else 40)
    with pytest.raises(DataError, match="read_test=False"):
        dm.test_dataloader()
    if test_given:
        with pytest.raises(DataError, match="test.de"):
            ParallelText(**kw).setup()
    else:
        full = ParallelText(**kw)
        full.setup()
        assert dm.train_set.srcs == full.train_set.srcs and len(full.train_set) == 40 and len(full.test_set) == 10


@pytest.mark.parametrize("test_given", [True, False])
def test_text_classification_with_read_test_false_reads_no_test_split(tmp_path, test_given):
    """TextClassification as ParallelText above: 100 training rows, 20 val rows; a test file that does not exist
    is never opened (train keeps its 100 rows), a carved test split is cut from train as in a module that reads
    it (the same 80 rows) and dropped."""
    from zoo.data.text_classification import TextClassification

    rows = [(f"text number {i} " + "good " * (i % 2), i % 2) for i in range(120)]
    for name, part in (("train", rows[:100]), ("val", rows[100:])):
        (tmp_path / f"{name}.csv").write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in part))
    test = str(tmp_path / "missing.csv") if test_given else None
    kw = dict(train=str(tmp_path / "train.csv"), val=str(tmp_path / "val.csv"), test=test, tokenizer="char")
    dm = TextClassification(**kw, test_fraction=0.2, read_test=False)
    dm.setup()
    assert dm.test_set is None and len(dm.val_set) == 20 and len(dm.train_set) == (100 if test_given else 80)
    with pytest.raises(DataError, match="read_test=False"):
        dm.test_dataloader()
    full = TextClassification(**kw, test_fraction=0.2)
    if test_given:
        with pytest.raises(DataError, match="missing.csv"):
            full.setup()
    else:
        full.setup()
        assert dm.train_set.ids == full.train_set.ids and len(full.test_set) == 20


def fake_run(root, name, task, arch, seed, lr, value, tuned=None, tuning=False):
    """A finished run's results.json with the keys zoo.report reads."""
    d = root / name
    d.mkdir(parents=True)
    metric = {"lm": "val/cont_loss", "classification": "val/acc"}[task]
    final = {metric: value} if tuning else {"test/acc": value} if task == "classification" else {}
    compare = {"tuning": tuning, "tuned": bool(tuned), "benchmark": task, "arch": arch, "lr": lr}
    if tuned or tuning:
        compare.update(lr_grid=tuned or [1e-3, 2e-3, 4e-3], metric=metric, tune_seeds=1)
    (d / "results.json").write_text(
        json.dumps(
            {
                "arch": arch,
                "arch_config": arch,
                "task": task,
                "dataset": "d",
                "objective": {"encoder_only": "entp", "decoder_only": "causal_lm"}[arch] if task == "lm" else task,
                "seed": seed,
                "overrides": [f"+arch={arch}", f"+benchmark={task}", f"seed={seed}"],
                "final": final,
                "best": {metric: value} if task == "lm" else {},
                "params": 1000,
                "flops_per_token": 1.0,
                "wall_seconds": 1.0,
                "compare": compare,
            }
        )
    )


def test_the_report_says_whether_the_cells_were_tuned_and_keeps_tuning_runs_out(tmp_path):
    """lm tuned (decoder_only at 0.002, encoder_only at 0.004 of [0.001, 0.002, 0.004]), classification not (one
    rate, 0.0005): the table has the 2 + 1 cells' groups only; the lines under it and the Tuning section say so."""
    grid = [1e-3, 2e-3, 4e-3]
    for arch, best in (("decoder_only", 2e-3), ("encoder_only", 4e-3)):
        for s in (1, 2):
            fake_run(tmp_path, f"lm-{arch}-seed{s}", "lm", arch, s, best, 1.5 + s / 10, tuned=grid)
        for lr in grid:
            fake_run(tmp_path, f"lm-{arch}-seed1_tune_lr{lr!r}", "lm", arch, 1, lr, 2.0 - (lr == best), tuning=True)
    fake_run(tmp_path, "classification-encoder_only-seed1", "classification", "encoder_only", 1, 5e-4, 0.8)
    out = report(tmp_path)
    assert len(out["tuning"]) == 6 and len(out["runs"]) == 5 and len(out["groups"]) == 3
    text = out["report"].read_text()
    assert "- classification: NOT tuned (compare.lr_grid=null): every architecture at the one rate 0.0005" in text
    assert (
        "- lm: tuned: each architecture at its best rate of compare.lr_grid (0.001, 0.002, 0.004) by the seed-mean "
        "final val/cont_loss of 1 tuning seed(s) on the validation split: encoder_only 0.004, decoder_only 0.002"
    ) in text
    assert "The 6 tuning runs are not rows of the table" in text
    assert "| lm | decoder_only | 0.002 | 1 | val/cont_loss | 1.0000 | yes |" in text
    assert "| lm | decoder_only | 0.004 | 1 | val/cont_loss | 2.0000 |  |" in text
    assert "tune_lr" not in "".join(r["cell"] for r in out["table"])
