"""A study carried between machines (zoo.scaling.carry, `python -m zoo.scaling pack | unpack`): a finished cell
packed, unpacked into a new sweep folder and rerun trains nothing and gives the same points; a cell still
training is not packed; a user's own cell files are never overwritten; a malformed pack file is named."""

import json
import shutil
import subprocess
import sys

import pytest
from zoo_run import make_cfg, needs_shared

from zoo.report.build import main as report_main
from zoo.report.runs import find_runs
from zoo.report.scaling_points import scaling_points
from zoo.run.scaling_cell import run_cell
from zoo.scaling.carry import pack, read_carry, unpack
from zoo.scaling.law import ScalingError

# s2 at 4 windows of 128 a step, budgets 0.2 and 0.4 tokens per parameter (steps 10, 20), a fixed rate
TINY = [
    "experiment=scaling",
    "+benchmark=scaling",
    "scaling.budgets=[0.2,0.4]",
    "scaling.sizes.s2.budgets=null",
    "scaling.sizes.s2.batch_size=4",
    "scaling.sizes.s2.lr=0.01",
    "scaling.sizes.s2.lr_grid=null",
    "scaling.warmup_tokens_per_param=0.05",
    "scaling.val_windows=8",
    "scaling.checkpoint_every=5",
    "scaling.cell=s2_seed1",
    "threads=1",
]
CELL = "decoder_only-s2_seed1"


def carry(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.scaling", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A sweep folder holding one finished tiny cell."""
    sweep = tmp_path_factory.mktemp("a")
    run_cell(make_cfg(sweep / CELL, TINY))
    return sweep


@needs_shared
@pytest.mark.usefixtures("one_thread")
def test_an_unpacked_cell_is_skipped_by_the_rerun_and_reports_the_same_points(trained, tmp_path):
    """The rerun in the new folder writes no trunk checkpoint (it trains nothing), returns the largest budget's
    loss without reading the data (its results.json is left as packed), and the report reads the same two points,
    loss for loss, as in the folder that trained them, and gives the study its Scaling section with no plan.json."""
    results = (trained / CELL / "results.json").read_text()
    got = carry("pack", trained, tmp_path / "cells.jsonl")
    assert got.returncode == 0 and "1 finished cells" in got.stdout, got.stderr
    assert carry("unpack", tmp_path / "cells.jsonl", tmp_path / "b").returncode == 0
    assert run_cell(make_cfg(tmp_path / "b" / CELL, TINY)) == [*json.loads(results)["final"].values()][0]
    assert not (tmp_path / "b" / CELL / "trunk").exists()
    assert (tmp_path / "b" / CELL / "results.json").read_text() == results  # skipped before its data: not rewritten
    a, b = (scaling_points(find_runs(d)) for d in (trained, tmp_path / "b"))
    assert len(a) == 2 and [(p["steps"], p["loss"]) for p in b] == [(p["steps"], p["loss"]) for p in a]
    assert report_main([str(tmp_path / "b")]) == 0 and not (tmp_path / "b" / "plan.json").exists()
    assert "## Scaling\n\nNo fit: every run has N = 25,408" in (tmp_path / "b" / "report.md").read_text()


@needs_shared
def test_a_cell_still_training_is_not_packed_and_the_files_cells_are_kept(trained, tmp_path):
    """A folder whose points.csv has a point its results.json lacks (a command stopped after that point) is not
    packed; packing a folder without the file's cell keeps that cell."""
    pack(trained, tmp_path / "cells.jsonl")
    sweep = tmp_path / "sweep"
    shutil.copytree(trained / CELL, sweep / "decoder_only-s2_seed2")
    results = json.loads((sweep / "decoder_only-s2_seed2" / "results.json").read_text())
    results["scaling"]["points"] = results["scaling"]["points"][:1]
    (sweep / "decoder_only-s2_seed2" / "results.json").write_text(json.dumps(results))
    assert pack(sweep, tmp_path / "cells.jsonl") == (0, 1, ["decoder_only-s2_seed2"])
    assert list(read_carry(tmp_path / "cells.jsonl")) == [CELL]


@needs_shared
def test_a_folders_own_points_are_never_overwritten(trained, tmp_path):
    pack(trained, tmp_path / "cells.jsonl")
    mine = tmp_path / "b" / CELL
    mine.mkdir(parents=True)
    (mine / "points.csv").write_text("arch,size,seed,n_params,tokens,flops,loss\n")
    with pytest.raises(ScalingError, match=f"{CELL}/points.csv; unpack into another folder"):
        unpack(tmp_path / "cells.jsonl", tmp_path / "b")
    assert (mine / "points.csv").read_text() == "arch,size,seed,n_params,tokens,flops,loss\n"
    assert not (mine / "cell.json").exists()


def test_a_malformed_or_missing_pack_file_is_named(tmp_path):
    bad = tmp_path / "cells.jsonl"
    bad.write_text(json.dumps({"folder": "x", "files": {"cell.json": "{}", "points.csv": ""}}) + "\n")
    got = carry("unpack", bad, tmp_path / "b")
    assert got.returncode == 2 and "line 1: not a finished cell" in got.stderr and "zoo.scaling pack" in got.stderr
    files = {n: "" for n in ("cell.json", "points.csv", "results.json")}
    bad.write_text(json.dumps({"folder": "../x", "files": files}))
    with pytest.raises(ScalingError, match="line 1"):
        read_carry(bad)
    got = carry("unpack", tmp_path / "none.jsonl", tmp_path / "b")
    assert got.returncode == 2 and "none.jsonl is not a file" in got.stderr
    assert not (tmp_path / "b").exists()


@needs_shared
def test_a_pack_never_replaces_another_design_or_a_point_it_holds(trained, tmp_path):
    """Packing a folder over a file whose copy of a cell has another cell.json (another study), or a point the
    folder's copy lacks (an older folder), is refused and the file is left as it was; the same cell, or one with
    more points, packs."""
    file = tmp_path / "cells.jsonl"
    pack(trained, file)
    before = file.read_text()
    other = tmp_path / "other"
    shutil.copytree(trained / CELL, other / CELL)
    design = json.loads((other / CELL / "cell.json").read_text())
    design["config"]["model.activation"] = "gelu"
    (other / CELL / "cell.json").write_text(json.dumps(design))
    with pytest.raises(ScalingError, match=f"{CELL}/cell.json .*another file"):
        pack(other, file)
    older = tmp_path / "older"
    shutil.copytree(trained / CELL, older / CELL)
    rows = (older / CELL / "points.csv").read_text().splitlines()
    (older / CELL / "points.csv").write_text("\n".join(rows[:-1]) + "\n")
    with pytest.raises(ScalingError, match=f"{CELL}/points.csv"):
        pack(older, file)
    assert file.read_text() == before
    assert pack(trained, file) == (1, 1, []) and file.read_text() == before


@needs_shared
def test_a_cut_off_or_unreadable_pack_file_is_refused_before_unpacking(trained, tmp_path):
    """A pack line whose cell.json is cut off, an empty file and one that is not UTF-8 are named in one line
    (exit 2) and nothing is unpacked; pack into a folder, unpack into a file: the same."""
    pack(trained, tmp_path / "cells.jsonl")
    entry = json.loads((tmp_path / "cells.jsonl").read_text())
    entry["files"]["cell.json"] = entry["files"]["cell.json"][:100]
    cut = tmp_path / "cut.jsonl"
    cut.write_text(json.dumps(entry) + "\n")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    for name, says in [("cut", "line 1: not a finished cell"), ("empty", "holds no cells"), ("binary", "not UTF-8")]:
        got = carry("unpack", tmp_path / f"{name}.jsonl", tmp_path / "b")
        assert got.returncode == 2 and says in got.stderr and "Traceback" not in got.stderr, got.stderr
    assert not (tmp_path / "b").exists()
    got = carry("pack", trained, tmp_path)
    assert got.returncode == 2 and "is a folder" in got.stderr and "Traceback" not in got.stderr
    got = carry("unpack", tmp_path / "cells.jsonl", tmp_path / "cut.jsonl")
    assert got.returncode == 2 and "is a file" in got.stderr and "Traceback" not in got.stderr


@needs_shared
def test_pack_of_a_folder_without_cells_is_refused_and_unfinished_cells_are_named(trained, tmp_path):
    """pack of a study's parent folder (no cell.json in its folders) is an error, not an empty file; a cell not
    finished is named in pack's output, not left out in silence."""
    (tmp_path / "parent" / "study").mkdir(parents=True)
    got = carry("pack", tmp_path / "parent", tmp_path / "p.jsonl")
    assert got.returncode == 2 and "holds no cell folder" in got.stderr and not (tmp_path / "p.jsonl").exists()
    sweep = tmp_path / "sweep"
    shutil.copytree(trained / CELL, sweep / CELL)
    shutil.copytree(trained / CELL, sweep / "decoder_only-s2_seed2")
    (sweep / "decoder_only-s2_seed2" / "results.json").write_text("{")
    got = carry("pack", sweep, tmp_path / "p.jsonl")
    assert got.returncode == 0 and "1 finished cells" in got.stdout
    assert "not packed, not finished (training, cut off or damaged): decoder_only-s2_seed2" in got.stdout


def test_rows_of_an_earlier_cooldown_do_not_keep_a_cell_unfinished():
    """points.csv keeps a cool-down of 0.2 beside today's 0.3 (a new scaling.cooldown trains new points from the
    same trunk, in the same folder); results.json records today's: finished. A point of today's schedule that
    results.json does not record (a command stopped before its end) still makes it unfinished."""
    from zoo.scaling.carry import complete

    header = "arch,size,seed,n_params,tokens,flops,loss,lr,tokens_per_param,steps,kind,cooldown,seconds\n"
    row = "decoder_only,s1,1,10,100,1.0,{loss},0.01,5.0,{steps},cooldown,{cooldown},1.0\n"
    old = row.format(loss=2.5, steps=10, cooldown=0.2)
    today = [{"steps": 10, "loss": 2.4, "kind": "cooldown", "cooldown": 0.3}]
    files = {
        "cell.json": '{"arch": "decoder_only", "config": {}}',
        "results.json": json.dumps({"scaling": {"points": today}}),
        "points.csv": header + old + row.format(loss=2.4, steps=10, cooldown=0.3),
    }
    assert complete(files)
    files["points.csv"] += row.format(loss=2.2, steps=20, cooldown=0.3)
    assert not complete(files)


def test_a_cut_off_cell_json_or_points_csv_is_named_with_the_fix(tmp_path):
    """zoo writes both atomically; a copy cut off or edited by hand was a bare JSONDecodeError or ValueError."""
    from zoo.errors import ConfigError
    from zoo.run.cell_points import read_points
    from zoo.run.scaling_identity import check_same_design

    (tmp_path / "cell.json").write_text('{"arch": "decoder_only", "conf')
    with pytest.raises(ConfigError, match=r"cell.json is not JSON .* move the cell's folder aside"):
        check_same_design(tmp_path, {"arch": "decoder_only", "config": {}})
    (tmp_path / "points.csv").write_text("arch,size,seed,loss,steps\ndecoder_only,s1,1,2.5,10\ndecoder_only,s1,1,1e,2")
    with pytest.raises(ConfigError, match=r"points.csv, line 3: a value that is not a number"):
        read_points(tmp_path / "points.csv")
