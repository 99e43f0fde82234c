"""A scaling cell's W&B run (zoo.run.cell_wandb) and the dashboard's scaling panels on it: a tiny cell trained
offline writes one W&B run whose records hold its config, its points and its trunk and branch curves; each scaling
panel of `python -m zoo.dashboard`'s workspace, read from the wire form it saves as W&B reads it (its x and y keys
in the run's history, config and summary), shows the cell's points.csv."""

import csv
import json
import re
import warnings

import pytest
from test_dashboard import config_names, stored_names
from test_sweeps import finished_wandb_records
from zoo_run import make_cfg, needs_shared

from zoo.report.dashboard import BY, KEYS, build_workspace
from zoo.run.scaling_cell import run_cell

with warnings.catch_warnings():  # the library's pydantic v1-style validators, at import
    warnings.simplefilter("ignore", DeprecationWarning)
    import wandb_workspaces.reports.v2  # noqa: F401

pytestmark = [pytest.mark.usefixtures("one_thread"), needs_shared, pytest.mark.e2e]

# s2 (25,408 non-embedding parameters, 512 tokens a step): budgets 0.2 and 0.4 tokens per parameter end at steps 10
# and 20 and cool down from steps 8 and 16; the trunk runs to step 16
CELL = [
    "experiment=scaling",
    "+benchmark=scaling",
    "scaling.cell=s2_seed1",
    "scaling.budgets=[0.2,0.4]",
    "scaling.sizes.s2.budgets=null",
    "scaling.sizes.s2.batch_size=4",
    "scaling.sizes.s2.lr=8.0e-3",  # a fixed rate (tests/test_scaling_tune.py: the tuned one)
    "scaling.sizes.s2.lr_grid=null",
    "scaling.warmup_tokens_per_param=0.05",
    "scaling.val_windows=8",
    "scaling.checkpoint_every=0",
    "trainer.log_every_n_steps=1",
    "threads=1",
]
PEAK_LR = 8.0e-3  # the cell's fixed rate


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    """The cell's folder, its points.csv rows and its W&B run's records (wandb_records), read once the offline file
    holds its exit record (in-process, the writer may lag finish())."""
    out = tmp_path_factory.mktemp("cell")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_DIR", str(out))
        run_cell(make_cfg(out, CELL))
    with open(out / "points.csv", newline="") as f:
        points = list(csv.DictReader(f))
    return out, points, finished_wandb_records(out)


def test_a_cell_logs_its_config_points_and_curves_to_one_run(cell):
    out, points, w = cell
    assert [(p["tokens_per_param"], p["steps"]) for p in points] == [("0.2", "10"), ("0.4", "20")]
    c = w["config"]
    assert (c["arch"], c["scaling"]["cell"], c["scaling_size"], c["scaling_kind"]) == (
        "decoder_only",
        "s2_seed1",
        "s2",
        "cooldown",
    )
    assert c["params_non_embedding"] == int(points[0]["n_params"]) and c["model"]["d_model"] == 32
    assert (
        w["run"].display_name == "decoder_only-s2_seed1" and w["run"].run_id == (out / "wandb_id").read_text().strip()
    )
    steps = {}
    for row in w["history"]:
        for k in row:
            if k.endswith("/train/loss"):
                steps.setdefault(k.split("/")[0], []).append(row["trainer/global_step"])
    # every step of each segment (log_every_n_steps=1): Lightning logs step k after k + 1 optimizer steps
    assert steps == {"trunk": list(range(16)), "cooldown_0_2": [8, 9], "cooldown_0_4": [16, 17, 18, 19]}
    (table,) = out.glob("wandb/offline-run-*/files/media/table/scaling/points_*.table.json")
    data = json.loads(table.read_text())
    assert [dict(zip(data["columns"], r))["loss"] for r in data["data"]] == [float(p["loss"]) for p in points]


def panel_data(panel: dict, run: dict) -> dict:
    """What a panel of the saved workspace (its wire config) shows for one run, as W&B reads its keys: a line plot
    {metric: [(x, y) of each history row holding both]} (its metrics, or the history keys its metric regex
    matches); a scatter plot [(x, y)] from "config:KEY.value" (the run's config) and "summary:KEY"."""
    config = panel["config"]
    if panel["viewType"] == "Scatter Plot":

        def value(accessor: str):
            section, _, key = accessor.partition(":")
            return run["config"][key.removesuffix(".value")] if section == "config" else run["summary"][key]

        return {"scatter": [(value(config["xAxis"]), value(config["yAxis"]))]}
    x = config["xAxis"]
    keys = config["metrics"] or sorted(k for k in run["history_keys"] if re.search(config["metricRegex"], k))
    return {m: [(row[x], row[m]) for row in run["history"] if x in row and m in row] for m in keys}


def test_the_dashboards_scaling_panels_show_the_cells_run(cell):
    _, points, w = cell
    spec = json.loads(build_workspace("zoo", "team")._to_model().model_dump_json(by_alias=True, exclude_none=True))
    (section,) = [s for s in spec["spec"]["section"]["panelBankConfig"]["sections"] if s["name"] == "scaling"]
    loss_flops, loss_params, loss_train_flops, train_loss, lr = (panel_data(p, w) for p in section["panels"])
    # points.csv and the W&B records both hold the floats' shortest repr: equal to the bit
    assert loss_flops == {"val/cont_loss": [(float(p["flops"]), float(p["loss"])) for p in points]}
    last = points[-1]
    assert loss_params == {"scatter": [(int(last["n_params"]), float(last["loss"]))]}
    assert loss_train_flops == {"scatter": [(float(last["flops"]), float(last["loss"]))]}
    assert sorted(train_loss) == ["cooldown_0_2/train/loss", "cooldown_0_4/train/loss", "trunk/train/loss"]
    assert sorted(lr) == ["cooldown_0_2/lr", "cooldown_0_4/lr", "trunk/lr"]
    trunk = dict(lr["trunk/lr"])
    assert trunk[15] == pytest.approx(PEAK_LR)  # constant after the warm-up (to 0.05 tokens per parameter)
    for name in ("cooldown_0_2/lr", "cooldown_0_4/lr"):
        rates = [y for _, y in lr[name]]
        assert rates == sorted(rates, reverse=True) and rates[-1] < PEAK_LR / 2  # cooling down to 0


def test_the_dashboards_config_names_are_the_cells_run_config(cell):
    """Every config name of the workspace (columns, scatter axes, grouping keys) is one under which the cell's W&B run
    stores a value, and the parallel coordinates' columns and grouping keys name the cell's values."""
    _, points, w = cell
    named, every = config_names(build_workspace("zoo", "team"), KEYS, BY)
    stored = stored_names(w["config"])
    assert every <= set(stored), every - set(stored)
    assert [stored[named[k]] for k in (*KEYS, *BY)] == [
        "decoder_only",
        int(points[0]["seed"]),
        32,  # s2's shape
        2,
        PEAK_LR,
        w["summary"]["params"],
        "decoder_only",
        "decoder_only",
    ]
