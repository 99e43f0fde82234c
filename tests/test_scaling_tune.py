"""The scaling study's tuning stage (zoo.scaling.tune, zoo.scaling.grid): its cells, the grid's checks, the rate a
tuned size's cells run (the seed-mean best, never an edge of the grid), and a tuning run that is, to the last bit,
the cool-down point of its budget at its rate."""

import csv
import json

import pytest
from zoo_run import make_cfg, needs_shared

from zoo.errors import ConfigError
from zoo.report.runs import find_runs
from zoo.report.scaling_points import scaling_points
from zoo.report.scaling_tune import tune_section
from zoo.run.job import checked_config
from zoo.run.scaling_cell import point_kind, run_cell
from zoo.run.scaling_plan import job_left
from zoo.run.scaling_table import table_point
from zoo.scaling.design import check_lr_grid
from zoo.scaling.grid import (
    cell_branches,
    cell_is_tune,
    cell_lr,
    cell_seed,
    cell_size,
    cell_size_spec,
    cells,
    rate_name,
)
from zoo.scaling.sizes import middle_budget, size_budgets
from zoo.scaling.tune import best_rate, tuned_rate, tuning_design, within, write_designs

SIZES = {
    "a": {"d_model": 8, "n_heads": 2, "n_layers": 2, "batch_size": 4, "lr": "tuned", "lr_grid": [4e-3, 2e-3, 8e-3]},
    "b": {"d_model": 16, "n_heads": 2, "n_layers": 2, "batch_size": 4, "lr": 1e-3},
}


def test_a_tuning_cell_names_its_size_seed_and_rate():
    assert (cell_size("s2_seed1_lr0.011"), cell_seed("s2_seed1_lr0.011"), cell_lr("s2_seed1_lr0.011")) == (
        "s2",
        1,
        0.011,
    )
    assert cell_lr("s2_seed1_lr2e-05") == 2e-05 and cell_is_tune("s2_seed1_lr2e-05")
    assert cell_lr("s2_seed1") is None and not cell_is_tune("s2_seed1_cosine")
    with pytest.raises(ConfigError, match="must be SIZE_seedN"):
        cell_size("s2_seed1_lr")


def test_the_tuning_stage_comes_first_and_covers_every_rate_and_seed():
    """Size a is tuned (3 rates x 2 seeds, smallest rate first) and checked (its cosine tuned too), b has a fixed
    rate and no tuning cells."""
    tune = [f"a_seed{s}_lr{r}" for s in (1, 2) for r in ("0.002", "0.004", "0.008")]
    cosine = [f"a_seed{s}_cosine_lr{r}" for s in (1, 2) for r in ("0.002", "0.004", "0.008")]
    study = ["a_seed1", "b_seed1", "b_seed2"]
    checks = ["a_seed1_cosine", "a_seed2_cosine"]
    assert cells(SIZES, "b", 2, ["a"], 2, "all", 2).split(",") == tune + cosine + study + checks
    assert cells(SIZES, "b", 2, ["a"], 2, "tune", 2).split(",") == tune + cosine
    assert cells(SIZES, "b", 2, ["a"], 2, "check", 2).split(",") == cosine + checks
    assert cells(SIZES, "b", 2, [], 2, "all").split(",") == tune + study
    with pytest.raises(ConfigError, match="scaling.stage='both' must be one of all, tune, check"):
        cells(SIZES, "b", 2, [], tune_seeds=2, stage="both")
    with pytest.raises(ConfigError, match="scaling.check_seeds=0 must be a positive whole number"):
        cells(SIZES, "b", 2, ["a"], 2, "all", 0)


def test_each_cell_trains_its_own_budgets():
    """Budgets 1, 2, 4, 8: the study's cells all four, a check the smallest three alone, a tuning run the middle
    one (2), a cosine tuning run the middle of the check's (2 of 1, 2, 4)."""
    size = {**SIZES["b"], "budgets": [8, 1, 4, 2]}
    got = {c: size_budgets(cell_size_spec(c, size, [5]), [5]) for c in ("b_seed1", "b_seed1_cosine")}
    assert got == {"b_seed1": [1, 2, 4, 8], "b_seed1_cosine": [1, 2, 4]}
    assert size_budgets(cell_size_spec("b_seed1_lr0.1", size, [5]), [5]) == [2]
    assert size_budgets(cell_size_spec("b_seed1_cosine_lr0.1", {**size, "budgets": [8, 1, 4, 6]}, [5]), [5]) == [4]
    kinds = [point_kind(c) for c in ("b_seed1", "b_seed1_cosine", "b_seed1_lr0.1", "b_seed1_cosine_lr0.1")]
    assert kinds == ["cooldown", "cosine", "tune", "tune_cosine"]


@pytest.mark.parametrize(
    "size, seeds, match",
    [
        ({"lr": 1e-3, "lr_grid": [1e-3, 2e-3, 4e-3]}, 2, r"lr_grid is set but scaling.sizes.x.lr=0.001 is a fixed"),
        ({"lr": "tuned"}, 2, r"lr_grid=None: lr: tuned needs a list of at least 3 positive"),
        ({"lr": "tuned", "lr_grid": [1e-3, 2e-3]}, 2, r"needs a list of at least 3"),
        ({"lr": "tuned", "lr_grid": [1e-3, -2e-3, 4e-3]}, 2, r"needs a list of at least 3 positive"),
        ({"lr": "tuned", "lr_grid": [1e-3, 1e-3, 4e-3]}, 2, r"names a rate twice"),
        ({"lr": "tuned", "lr_grid": [1e-3, 2e-3, 4e-3]}, 0, r"scaling.tune_seeds=0 must be a positive whole number"),
    ],
)
def test_a_grid_the_stage_cannot_use_is_refused(size, seeds, match):
    with pytest.raises(ConfigError, match=match):
        check_lr_grid("x", size, seeds)


def test_the_middle_budget_is_the_lower_middle():
    assert middle_budget({}, [20, 5, 10]) == 10
    assert middle_budget({"budgets": [400, 50, 100, 200]}, [5]) == 100


def rows(arch, size, table):
    return [{"arch": arch, "size": size, "seed": s, "lr": r, "loss": v} for r, ls in table.items() for s, v in ls]


def test_the_tuned_rate_is_the_seed_mean_best_inside_the_grid():
    """Seed means: 1e-3 -> 2.0, 2e-3 -> 1.9 (one seed alone would pick 4e-3), 4e-3 -> 1.95."""
    table = {1e-3: [(1, 2.0), (2, 2.0)], 2e-3: [(1, 1.7), (2, 2.1)], 4e-3: [(1, 1.8), (2, 2.1)]}
    assert best_rate({r: [v for _, v in ls] for r, ls in table.items()}) == 2e-3
    assert tuned_rate(rows("decoder_only", "s1", table), "decoder_only", "s1", [4e-3, 1e-3, 2e-3], 2) == 2e-3
    other = rows("prefix_lm", "s1", table)  # another family's runs do not count
    with pytest.raises(ConfigError, match=r"6 of its 6 tuning runs are not done"):
        tuned_rate(other, "decoder_only", "s1", [1e-3, 2e-3, 4e-3], 2)
    with pytest.raises(ConfigError, match=r"1 of its 6 tuning runs are not done \(rates 0.004\)"):
        tuned_rate(rows("decoder_only", "s1", table)[:-1], "decoder_only", "s1", [1e-3, 2e-3, 4e-3], 2)


def test_a_best_rate_at_an_edge_is_refused_naming_the_rate_to_add():
    up = {1e-3: [(1, 2.0)], 2e-3: [(1, 1.9)], 4e-3: [(1, 1.8)]}
    with pytest.raises(ConfigError, match=r"best tuning rate 0.004 is an edge .* add 0.008 to the grid"):
        tuned_rate(rows("d", "s1", up), "d", "s1", [1e-3, 2e-3, 4e-3], 1)
    down = {1e-3: [(1, 1.7)], 2e-3: [(1, 1.9)], 4e-3: [(1, 1.8)]}
    with pytest.raises(ConfigError, match=r"best tuning rate 0.001 is an edge .* add 0.0005 to the grid"):
        tuned_rate(rows("d", "s1", down), "d", "s1", [1e-3, 2e-3, 4e-3], 1)


# s2 at 4 windows of 128 a step (512 tokens) and budgets 0.2, 0.4, 0.6 tokens per parameter (steps 10, 20, 30):
# tuned at the middle budget, 0.4, over three rates with one seed
TINY = [
    "experiment=scaling",
    "+benchmark=scaling",
    "scaling.budgets=[0.2,0.4,0.6]",
    "scaling.sizes.s2.budgets=null",
    "scaling.sizes.s2.batch_size=4",
    "scaling.warmup_tokens_per_param=0.05",
    "scaling.val_windows=8",
    "scaling.checkpoint_every=5",
    "scaling.tune_seeds=1",
    "threads=1",
]


def run(sweep, cell, grid, extra=()):
    out = sweep / f"decoder_only-{cell}"
    run_cell(make_cfg(out, [*TINY, f"scaling.cell={cell}", f"scaling.sizes.s2.lr_grid={grid}", *extra]))
    with open(out / "points.csv", newline="") as f:
        return list(csv.DictReader(f))


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_a_tuned_cell_runs_its_best_rate_and_its_tuning_run_is_its_point(tmp_path):
    """Rates 1e-4, 1e-2, 3: 20 steps at 1e-4 barely move, 3 diverges, so 1e-2 is the best and inside the grid. The
    study's cell then runs at 1e-2, and its 0.4 point (trunk to step 16, resumed, cooled down to 20) equals the
    tuning run at 1e-2 to the last bit: a tuning run is the cool-down point of its budget at its rate."""
    grid = "[1.0e-4,1.0e-2,3.0]"
    tune = {r: run(tmp_path, f"s2_seed1_lr{r}", grid) for r in ("0.0001", "0.01", "3.0")}
    assert all(len(v) == 1 and v[0]["kind"] == "tune" and v[0]["tokens_per_param"] == "0.4" for v in tune.values())
    losses = {r: float(v[0]["loss"]) for r, v in tune.items()}
    assert min(losses, key=losses.get) == "0.01"
    study = run(tmp_path, "s2_seed1", grid)
    assert [r["lr"] for r in study] == ["0.01"] * 3 and [r["kind"] for r in study] == ["cooldown"] * 3
    assert study[1]["loss"] == tune["0.01"][0]["loss"] and study[1]["steps"] == tune["0.01"][0]["steps"] == "20"
    points = [
        {**r, "tokens": int(r["tokens"]), "lr": float(r["lr"]), "loss": float(r["loss"]), "seed": 1}
        for r in [*study, *(v[0] for v in tune.values())]
    ]
    fitted = [p for p in points if p["kind"] == "cooldown"]
    text, figures = tune_section(points, fitted, tmp_path)
    with open(tmp_path / "lr_sweep.csv", newline="") as f:
        sweep = list(csv.DictReader(f))
    assert list(sweep[0]) == ["arch", "size", "seed", "lr", "tokens", "loss"] and len(sweep) == 3
    assert "| decoder_only | s2 | 0.0001, 0.01, 3 | 1 | 0.01 |" in "\n".join(text)
    assert text[-2].endswith("| yes | 0.01 | yes |") and figures[0].is_file()


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_tuning_seeds_from_tune_seed_start_are_apart_from_the_cells(tmp_path):
    """scaling.tune_seed_start=101: the tuning runs are seed 101, the study cell of seed 1 runs their best rate
    (0.01) and its 0.4 point is a new draw, not the winning tuning run. A seed-1 tuning point left in the folder (at
    0.01, loss 99) is not this design's and does not count: with it the best rate would be an edge."""
    grid, start = "[1.0e-4,1.0e-2,3.0]", ["scaling.tune_seed_start=101"]
    assert cells(SIZES, "b", 1, [], tune_seeds=1, tune_seed_start=101).startswith("a_seed101_lr0.002,")
    tune = {r: run(tmp_path, f"s2_seed101_lr{r}", grid, start)[0] for r in ("0.0001", "0.01", "3.0")}
    assert {t["seed"] for t in tune.values()} == {"101"} and min(tune, key=lambda r: float(tune[r]["loss"])) == "0.01"
    stale = tmp_path / "decoder_only-s2_seed1_lr0.01"
    stale.mkdir()
    (stale / "points.csv").write_text(
        "arch,size,seed,n_params,tokens,flops,loss,lr,kind\ndecoder_only,s2,1,1,1,1,99.0,0.01,tune\n"
    )
    study = run(tmp_path, "s2_seed1", grid, start)
    assert [r["lr"] for r in study] == ["0.01"] * 3 and study[1]["steps"] == tune["0.01"]["steps"] == "20"
    assert abs(float(study[1]["loss"]) - float(tune["0.01"]["loss"])) > 1e-4
    # the report's tuning table: the stale seed-1 tuning run (a run of its own) is left out, seed 101's are kept
    points = scaling_points(find_runs(tmp_path))
    assert {p["kind"] for p in points} == {"tune", "cooldown"}
    stale_run = {**next(p for p in points if p["kind"] == "tune"), "seed": 1, "lr": 0.01, "loss": 99.0}
    text, _ = tune_section([*points, stale_run], [p for p in points if p["kind"] == "cooldown"], tmp_path)
    with open(tmp_path / "lr_sweep.csv", newline="") as f:
        sweep = list(csv.DictReader(f))
    assert sorted((r["seed"], r["lr"]) for r in sweep) == [("101", "0.0001"), ("101", "0.01"), ("101", "3")]
    assert "| decoder_only | s2 | 0.0001, 0.01, 3 | 1 | 0.01 |" in "\n".join(text)


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_a_tuned_check_cell_runs_the_cosine_schedules_own_best_rate(tmp_path):
    """The check's cosine tuning runs train the middle of its budgets (0.4) alone; the check cell runs their best
    rate, and its 0.4 point is the best tuning run, to the last bit (both train 20 steps from scratch)."""
    grid = "[1.0e-4,1.0e-2,3.0]"
    tune = {r: run(tmp_path, f"s2_seed1_cosine_lr{r}", grid) for r in ("0.0001", "0.01", "3.0")}
    assert {v[0]["kind"] for v in tune.values()} == {"tune_cosine"}
    best = min(tune, key=lambda r: float(tune[r][0]["loss"]))
    check = run(tmp_path, "s2_seed1_cosine", grid)
    assert [r["kind"] for r in check] == ["cosine"] * 3 and {r["lr"] for r in check} == {best}
    assert check[1]["loss"] == tune[best][0]["loss"] and check[1]["steps"] == "20"


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_a_tuned_cell_before_its_tuning_stage_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"3 of its 3 tuning runs are not done"):
        run(tmp_path, "s2_seed1", "[1.0e-4,1.0e-2,3.0]")
    assert not (tmp_path / "decoder_only-s2_seed1" / "points.csv").exists()


def write_sweep(path, rows, header="arch,size,seed,lr,tokens,loss"):
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_a_tuning_table_gives_the_tuning_points_without_training_them(tmp_path):
    """scaling.tuning_table: a second study reads the first one's lr_sweep.csv (as zoo.report writes it): its
    tuning cells take each run's loss from the table and train nothing, and its study cell runs the same best
    rate (0.01) and reaches the first study's points to the last bit."""
    grid = "[1.0e-4,1.0e-2,3.0]"
    first, second = tmp_path / "first", tmp_path / "second"
    tune = {r: run(first, f"s2_seed1_lr{r}", grid) for r in ("0.0001", "0.01", "3.0")}
    tune_section(scaling_points(find_runs(first)), [], tmp_path)  # lr_sweep.csv and lr_sweep.design.json
    table = tmp_path / "lr_sweep.csv"
    with open(table, newline="") as f:
        expected = {r["lr"]: float(r["loss"]) for r in csv.DictReader(f)}

    def run2(cell):
        out = second / f"decoder_only-{cell}"
        cfg = [*TINY, f"scaling.cell={cell}", f"scaling.sizes.s2.lr_grid={grid}", f"scaling.tuning_table={table}"]
        run_cell(make_cfg(out, cfg))
        with open(out / "points.csv", newline="") as f:
            return out, list(csv.DictReader(f))

    for r in ("0.0001", "0.01", "3.0"):
        out, rows = run2(f"s2_seed1_lr{r}")
        assert len(rows) == 1 and rows[0]["kind"] == "tune" and rows[0]["steps"] == tune[r][0]["steps"]
        assert float(rows[0]["loss"]) == expected[f"{float(r):g}"] and rows[0]["tokens"] == tune[r][0]["tokens"]
        assert rows[0]["flops"] == rows[0]["seconds"] == "nan" and not (out / "trunk").exists()
    study = run2("s2_seed1")[1]
    assert {r["lr"] for r in study} == {"0.01"}
    assert [r["loss"] for r in study] == [r["loss"] for r in run(first, "s2_seed1", grid)]


@needs_shared
@pytest.mark.usefixtures("one_thread")
def recorded_table(tmp_path, rows, change=None):
    """An lr_sweep.csv of `rows` with its design record, taken from the cell.json of decoder_only's s2 tuning cell at
    0.01 as a first study wrote it; change: {key: value} set in that record (a table of another design)."""
    out = tmp_path / "first" / "decoder_only-s2_seed1_lr0.01"
    if not (out / "cell.json").is_file():
        run_cell(make_cfg(out, [*TINY, "scaling.cell=s2_seed1_lr0.01", "scaling.sizes.s2.lr_grid=[1.0e-4,1.0e-2,3.0]"]))
    record = tuning_design(json.loads((out / "cell.json").read_text()))
    record["config"].update(change or {})
    table = write_sweep(tmp_path / f"t{len(list(tmp_path.glob('t*.csv')))}.csv", rows)
    write_designs({("decoder_only", "s2"): record}, table)
    return table


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_a_tuning_table_of_another_design_or_shape_is_refused(tmp_path):
    """A table tuned under another design (its record differs: here the weight decay), a row whose tokens are not
    this design's tuning budget (20 steps of 512 tokens at s2), a table without its design record, a file that is
    not there, a header that is not lr_sweep.csv's and a value that is not a number are refused, before anything
    trains."""
    grid = "[1.0e-4,1.0e-2,3.0]"
    row = ("decoder_only", "s2", 1, 0.01, 10240, 2.5)
    cases = {
        "tuned under another design for decoder_only at s2: task.optimizer.weight_decay=0.5 there, 0.1 here": (
            recorded_table(tmp_path, [row], {"task.optimizer.weight_decay": 0.5})
        ),
        "trained 20,480 tokens, but this design's tuning budget at s2 trains 10,240": recorded_table(
            tmp_path, [(*row[:4], 20480, 2.5)]
        ),
        "a.design.json is missing": write_sweep(tmp_path / "a.csv", [row]),
        "is not a file": tmp_path / "missing.csv",
        "not arch,size,seed,lr,tokens,loss": write_sweep(tmp_path / "b.csv", [], header="arch,size,lr,loss"),
        "line 2: .* not a number": write_sweep(tmp_path / "c.csv", [(*row[:5], "x")]),
    }
    for match, table in cases.items():
        out = tmp_path / "sweep" / "decoder_only-s2_seed1_lr0.01"
        cfg = [*TINY, "scaling.cell=s2_seed1_lr0.01", f"scaling.sizes.s2.lr_grid={grid}"]
        cfg.append(f"scaling.tuning_table={table}")
        with pytest.raises(ConfigError, match=match):
            run_cell(make_cfg(out, cfg))
        assert not (out / "points.csv").exists() and not (out / "trunk").exists()


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_the_plan_counts_a_tuning_run_of_the_table_as_done(tmp_path):
    """The plan (zoo.run.scaling_plan.job_left, on the job config the plan checks) leaves out what the table gives:
    the tuning run at 0.01 is done (its budget, 0.4, ends at step 20), the one at 3.0 has no row and is left; a study
    cell's budgets are left."""
    table = recorded_table(tmp_path, [("decoder_only", "s2", 1, 0.01, 10240, 2.5)])

    def left(cell):
        grid = "scaling.sizes.s2.lr_grid=[1.0e-4,1.0e-2,3.0]"
        cfg = make_cfg(tmp_path / cell, [*TINY, f"scaling.cell={cell}", grid, f"scaling.tuning_table={table}"])
        return job_left(checked_config(cfg)[0], tmp_path / cell)[0]

    assert left("s2_seed1_lr0.01") == {20} and left("s2_seed1_lr3.0") == set() and left("s2_seed1") == set()


def test_a_diverged_tuning_run_ranks_last_wherever_it_lies():
    """A NaN at the smallest rate (first in the grid) was the minimum of min() and so the best; it ranks last, the
    best is 5.7e-3, inside the grid, and within() judges against it. Every rate diverged: refused, naming the fix."""
    nan = float("nan")
    losses = {0.004: [nan], 0.0057: [2.8], 0.008: [3.0]}
    assert best_rate(losses) == 0.0057 and within(losses, 0.0057) and not within(losses, 0.004)
    assert (
        tuned_rate(rows("d", "s1", {r: [(1, v[0])] for r, v in losses.items()}), "d", "s1", list(losses), 1) == 0.0057
    )
    with pytest.raises(ConfigError, match=r"every tuning rate \(0.004, 0.0057, 0.008\) diverged .* lower the grid"):
        best_rate({0.004: [nan], 0.0057: [float("inf")], 0.008: [nan]})


@pytest.mark.parametrize(
    "losses, edge, beyond", [((2.8, 2.8, 3.0), "0.001", "0.0005"), ((3.0, 2.8, 2.8), "0.004", "0.008")]
)
def test_an_edge_tied_with_the_best_is_refused_at_either_end(losses, edge, beyond):
    """A tie between an edge and its neighbour leaves the best possibly beyond the edge, at the bottom as at the
    top (the top was accepted: a tie took the smaller rate)."""
    table = {r: [(1, v)] for r, v in zip((1e-3, 2e-3, 4e-3), losses)}
    with pytest.raises(ConfigError, match=rf"best tuning rate {edge} is an edge .* add {beyond} to the grid"):
        tuned_rate(rows("d", "s1", table), "d", "s1", [1e-3, 2e-3, 4e-3], 1)


def test_a_seeds_repeated_row_counts_once():
    """Two rows of seed 1 at each rate are one seed, not two: with tune_seeds 2, seed 2 is still to run."""
    table = {r: [(1, 2.0 + r), (1, 2.0 + r)] for r in (1e-3, 2e-3, 4e-3)}
    with pytest.raises(ConfigError, match=r"3 of its 6 tuning runs are not done"):
        tuned_rate(rows("d", "s1", table), "d", "s1", [1e-3, 2e-3, 4e-3], 2)


def test_the_check_stage_without_check_sizes_is_refused():
    with pytest.raises(ConfigError, match=r"scaling.stage=check, but scaling.check_sizes is empty"):
        cells(SIZES, "b", 2, [], tune_seeds=2, stage="check")


@needs_shared
def test_a_tuning_row_of_an_earlier_budget_is_not_read(tmp_path):
    """Rows at today's tuning budget (0.4: step 20) make 1e-2 the best; rows left in the same cells by an earlier
    design's budget (0.6: step 30; budgets and cool-down may change between commands) would make 1e-4, an edge,
    the best. The cell runs 1e-2."""
    from zoo.run.scaling_cell import set_tuned_rate

    header = "arch,size,seed,n_params,tokens,flops,loss,lr,tokens_per_param,steps,kind,cooldown,seconds\n"
    for r, today, earlier in (("0.0001", 3.0, 1.0), ("0.01", 2.0, 9.0), ("3.0", 4.0, 9.0)):
        cell = tmp_path / f"decoder_only-s2_seed1_lr{r}"
        cell.mkdir()
        row = "decoder_only,s2,1,1,1,1,{},{},{},{},tune,0.2,1\n"
        (cell / "points.csv").write_text(header + row.format(today, r, 0.4, 20) + row.format(earlier, r, 0.6, 30))
    cfg = make_cfg(
        tmp_path / "decoder_only-s2_seed1",
        [*TINY, "scaling.cell=s2_seed1", "scaling.sizes.s2.lr_grid=[1.0e-4,1.0e-2,3.0]"],
    )
    set_tuned_rate(cfg, tmp_path)
    assert cfg.task.optimizer.lr == 0.01


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_a_table_rows_rate_is_the_cells_own_not_its_six_digits(tmp_path):
    """lr_sweep.csv keeps 6 significant digits: a grid rate of 4e-3 x sqrt(2) is 0.00565685 there. The point taken
    from the table carries the cell's own rate, so that tuned_rate finds every rate of the grid done."""
    rate = 4e-3 * 2**0.5
    table = recorded_table(tmp_path, [("decoder_only", "s2", 1, f"{rate:g}", 10240, 2.5)])
    cell = f"s2_seed1_lr{rate_name(rate)}"
    over = [
        *TINY,
        f"scaling.cell={cell}",
        "scaling.sizes.s2.lr_grid=[1.0e-4,1.0e-2,3.0]",
        f"scaling.tuning_table={table}",
    ]
    cfg = make_cfg(tmp_path / f"decoder_only-{cell}", over)
    row = table_point(cfg, cell_branches(cell, cfg.scaling.sizes.s2, cfg.scaling)[0])
    assert f"{rate:g}" == "0.00565685" and (row["lr"], row["loss"]) == (rate, 2.5)
