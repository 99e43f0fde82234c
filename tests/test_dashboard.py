"""python -m zoo.dashboard, offline: the workspace object it builds (sections, panels, axes, grouping, filter,
columns) and its wire form, main with W&B's save and API replaced, bad input exiting 2, wandb-workspaces' own load
giving back the same workspace, and every config name it uses being one under which a run logs the value."""

import json
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest
import wandb
import yaml
from omegaconf import OmegaConf

with warnings.catch_warnings():  # the library's pydantic v1-style validators
    warnings.simplefilter("ignore", DeprecationWarning)
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

from wandb_workspaces.workspaces import internal

from zoo.report.dashboard import BY, KEYS, DashboardError, build_workspace, load_workspace, main

GROUP = "outputs/compare/2026-01-02_03-04-05"
STEP, FLOPS, SECONDS = "trainer/global_step", "cost/flops", "cost/seconds"
VAL = {
    "classification": ["val/acc", "val/f1"],
    "lm": ["val/cont_loss", "val/bpc"],
    "translation": ["val/bleu", "val/chrf"],
}
BEST = {"classification": "best/val/acc", "lm": "best/val/cont_loss", "translation": "best/val/bleu"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")


@pytest.fixture
def workspace():
    return build_workspace("zoo", "team", GROUP)


def names(metrics):
    """(type, name) pairs: the library's metric classes overload ==."""
    return [(type(m).__name__, m.name) for m in metrics]


def spec(workspace):
    return workspace._spec["spec"]["section"]


def test_one_section_per_task(workspace):
    assert (workspace.entity, workspace.project, workspace.name) == ("team", "zoo", f"zoo comparison ({GROUP})")
    assert [s.name for s in workspace.sections] == ["classification", "lm", "translation", "scaling"]
    for section in workspace.sections[:3]:
        assert [type(p).__name__ for p in section.panels] == ["LinePlot"] * 6 + ["ScatterPlot"] * 2 + [
            "ParallelCoordinatesPlot"
        ]
        assert section.is_open and (section.layout_settings.columns, section.layout_settings.rows) == (2, 4)
    assert workspace.auto_generate_panels is False


def test_line_plots_against_step_flops_and_seconds(workspace):
    for section in workspace.sections[:3]:  # the task sections
        lines = [p for p in section.panels if isinstance(p, wr.LinePlot)]
        a, b = VAL[section.name]
        assert [(p.x, p.y) for p in lines] == [
            (STEP, [a]),
            (FLOPS, [a]),
            (SECONDS, [a]),
            (STEP, [b]),
            (FLOPS, [b]),
            (SECONDS, [b]),
        ]
        assert [p.title for p in lines] == [
            f"{a} vs step",
            f"{a} vs training FLOPs",
            f"{a} vs training seconds",
            f"{b} vs step",
            f"{b} vs training FLOPs",
            f"{b} vs training seconds",
        ]
        assert {(p.groupby_aggfunc, p.groupby_rangefunc) for p in lines} == {("mean", "stddev")}
    wire = spec(workspace)["panelBankConfig"]["sections"][2]["panels"][1]["config"]
    assert (wire["xAxis"], wire["metrics"], wire["groupArea"]) == (FLOPS, ["val/bleu"], "stddev")


def test_runs_grouped_by_arch_in_the_group(workspace):
    rs = workspace.runset_settings
    assert names(rs.groupby) == [("Config", "arch"), ("Config", "arch_config")]
    assert rs.filters == f"Metric(\"Group\") == '{GROUP}'"
    runset = spec(workspace)["runSets"][0]
    assert runset["grouping"] == [
        {"section": "config", "name": "arch.value"},
        {"section": "config", "name": "arch_config.value"},
    ]
    assert runset["filters"]["filters"] == [
        {"key": {"section": "run", "name": "group"}, "op": "=", "value": GROUP, "disabled": False}
    ]


def test_no_group_no_filter_and_nested_groupby_keys():
    workspace = build_workspace("zoo", by=["arch", "arch_config", "model.position"])
    assert (workspace.entity, workspace.name, workspace.runset_settings.filters) == ("", "zoo comparison", "")
    runset = spec(workspace)["runSets"][0]
    assert runset["filters"]["filters"] == []
    assert runset["grouping"] == [
        {"section": "config", "name": "arch.value"},
        {"section": "config", "name": "arch_config.value"},
        {"section": "config", "name": "model.value.position"},  # W&B's name of the nested key
    ]


def test_group_with_a_quote():
    workspace = build_workspace("zoo", "team", "runs/it's")
    assert spec(workspace)["runSets"][0]["filters"]["filters"][0]["value"] == "runs/it's"


def test_parallel_coordinates_over_the_keys(workspace):
    assert KEYS == ("arch", "seed", "model.d_model", "model.n_layers", "task.optimizer.lr", "params")
    for i, section in enumerate(workspace.sections[:3]):
        pc = section.panels[-1]
        assert names(c.metric for c in pc.columns) == [("Config", k) for k in KEYS] + [
            ("SummaryMetric", BEST[section.name])
        ]
        wire = spec(workspace)["panelBankConfig"]["sections"][i]["panels"][-1]["config"]["columns"]
        assert [c["accessor"] for c in wire] == [  # W&B's names of nested keys: .value after the group
            "config:arch.value",
            "config:seed.value",
            "config:model.value.d_model",
            "config:model.value.n_layers",
            "config:task.value.optimizer.lr",
            "config:params.value",
            f"summary:{BEST[section.name]}",
        ]


def test_scatter_of_params_and_flops_against_the_best_metric(workspace):
    for i, section in enumerate(workspace.sections[:3]):
        params, flops = (p for p in section.panels if isinstance(p, wr.ScatterPlot))
        best = BEST[section.name]
        assert names([params.x, params.y, flops.x, flops.y]) == [
            ("Config", "params"),
            ("SummaryMetric", best),
            ("SummaryMetric", "cost/train_flops"),
            ("SummaryMetric", best),
        ]
        wire = [p["config"] for p in spec(workspace)["panelBankConfig"]["sections"][i]["panels"][6:8]]
        assert [(c["xAxis"], c["yAxis"]) for c in wire] == [
            ("config:params.value", f"summary:{best}"),
            ("summary:cost/train_flops", f"summary:{best}"),
        ]


@pytest.fixture
def logged_in(monkeypatch):
    """wandb.Api replaced by a logged-in API whose default entity is "me"."""
    monkeypatch.setattr(wandb, "Api", lambda: types.SimpleNamespace(default_entity="me"))


@pytest.fixture
def saved(monkeypatch, logged_in):
    """Workspace.save replaced: the workspaces main would save."""
    out = []
    monkeypatch.setattr(ws.Workspace, "save", lambda self: out.append(self) or self)
    return out


def test_main_saves_with_keys_and_entity(saved, capsys):
    assert main(["--project", "zoo", "--entity", "team", "--group", GROUP, "--keys", "arch, model.activation"]) == 0
    (workspace,) = saved
    assert (workspace.entity, workspace.project, workspace.runset_settings.filters) == (
        "team",
        "zoo",
        f"Metric(\"Group\") == '{GROUP}'",
    )
    assert names(c.metric for c in workspace.sections[1].panels[-1].columns) == [
        ("Config", "arch"),
        ("Config", "model.activation"),
        ("SummaryMetric", "best/val/cont_loss"),
    ]
    assert capsys.readouterr().out == f"saved 'zoo comparison ({GROUP})' in team/zoo\n"


def test_main_takes_the_default_entity(saved):
    assert main(["--project", "zoo"]) == 0
    assert saved[0].entity == "me"


NO_LOGIN = (
    "zoo.dashboard: error: no W&B login (No API key configured. Use `wandb login` to log in.): "
    "log in with `wandb login` (or set WANDB_API_KEY)\n"
)


@pytest.mark.parametrize("entity", [[], ["--entity", "team"]])
def test_main_without_a_login_exits_2_with_or_without_an_entity(entity, saved, monkeypatch, capsys):
    """No API key is one cause whether or not --entity is given: exit 2, the same message, nothing saved."""

    def no_key():
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "Api", no_key)
    assert main(["--project", "zoo", *entity]) == 2
    assert capsys.readouterr().err == NO_LOGIN
    assert saved == []


def test_main_with_a_login_but_no_default_entity_exits_2(saved, monkeypatch, capsys):
    monkeypatch.setattr(wandb, "Api", lambda: types.SimpleNamespace(default_entity=None))
    assert main(["--project", "zoo"]) == 2
    assert capsys.readouterr().err == "zoo.dashboard: error: no W&B entity: pass --entity E\n"
    assert saved == []


def test_bad_input_exits_2(saved, monkeypatch, capsys):
    for args, why in (
        ([], "--project is required"),
        (["--project", " "], "no W&B project: pass --project P"),
        (["--project", "zoo", "--keys", "arch,,seed"], "--keys: give run config keys"),
        (["--project", "zoo", "--by", ""], "--by: give run config keys"),
        (["--project", "zoo", "--nope"], "unrecognized arguments: --nope"),
    ):
        assert main(args) == 2, args
        captured = capsys.readouterr()
        assert why in captured.err and captured.err.count("\n") == 1 and not captured.out, args
    monkeypatch.setitem(sys.modules, "wandb_workspaces", None)  # import fails as if not installed
    assert main(["--project", "zoo", "--entity", "team"]) == 2
    assert "wandb-workspaces is not installed" in capsys.readouterr().err
    assert saved == []


@pytest.mark.e2e
def test_cli_bad_input_exit_code():
    proc = subprocess.run(
        [sys.executable, "-m", "zoo.dashboard", "--entity", "team"], capture_output=True, text=True, timeout=120
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert (
        proc.stderr == "zoo.dashboard: error: --project is required: python -m zoo.dashboard --project P [--entity E]\n"
    )


def test_scaling_section_plots_the_lm_loss_against_compute_and_size_log_log(workspace):
    """The loss against FLOPs (a cell's points, a run's validations), the final loss against N and FLOPs, log-log;
    the trunk's and branches' training curves of each cell (zoo.run.cell_wandb's keys); tests/test_cell_wandb.py
    reads these panels off a real cell's run."""
    section = workspace.sections[-1]
    line, size, flops, train_loss, lr = section.panels
    assert (line.x, line.y, line.log_x, line.log_y) == ("cost/flops", ["val/cont_loss"], True, True)
    assert names([size.x, size.y, flops.x, flops.y]) == [
        ("Config", "params_non_embedding"),
        ("SummaryMetric", "val/cont_loss"),
        ("SummaryMetric", "cost/train_flops"),
        ("SummaryMetric", "val/cont_loss"),
    ]
    assert all(p.log_x and p.log_y for p in (size, flops))
    segments = r"^(trunk|cooldown_[0-9_]+|cosine_[0-9_]+)/"
    assert [(p.x, p.metric_regex) for p in (train_loss, lr)] == [
        (STEP, segments + r"train/loss$"),
        (STEP, segments + r"lr$"),
    ]
    keys = ["trunk/train/loss", "cooldown_5/train/loss", "cooldown_0_2/train/loss", "cosine_10/train/loss"]
    assert [bool(re.search(train_loss.metric_regex, k)) for k in [*keys, "train/loss", "cooldown_5/lr"]] == [
        *[True] * 4,
        False,
        False,
    ]


def test_the_saved_workspace_parses_back_to_the_same_wire_form():
    """Every section, the scaling panels' metric regexes included: the wire form the workspace saves, parsed by the
    library (internal.View) and loaded by it (Workspace._from_model, what Workspace.from_url does), saves the same
    wire form."""
    workspace = build_workspace("zoo", "team", GROUP, by=["arch", "arch_config", "model.pe"])
    wire = workspace._to_model().model_dump_json(by_alias=True, exclude_none=True)
    again = ws.Workspace._from_model(internal.View.model_validate_json(wire))._to_model()
    assert json.loads(again.model_dump_json(by_alias=True, exclude_none=True)) == json.loads(wire)


@pytest.fixture
def server(monkeypatch, logged_in):
    """W&B's view API replaced by a dict: save stores the spec's JSON string as the server does, from_name reads it
    back."""
    views = {}

    def upsert(view):
        name = view.name if view.id else "nw-abc123-v"  # a new view's name is random
        views[(view.entity, view.project, name)] = view.spec.model_dump_json(by_alias=True, exclude_none=True)
        return {"upsertView": {"view": {"name": name, "id": f"id-{name}"}}}

    def get_view_dict(entity, project, view_name):
        return {"spec": views[(entity, project, f"nw-{view_name}-v")], "displayName": "shown", "id": "id-nw-abc123-v"}

    monkeypatch.setattr(internal, "upsert_view2", upsert)
    monkeypatch.setattr(internal, "get_view_dict", get_view_dict)
    monkeypatch.setattr(
        ws.Workspace, "url", property(lambda self: f"https://wandb.ai/{self.entity}/{self.project}?nw=abc123")
    )
    return views


def test_load_workspace_loads_back_the_same(server, capsys):
    keys = "arch,model.d_model,task.optimizer.lr"
    assert (
        main(["--project", "zoo", "--entity", "team", "--group", GROUP, "--keys", keys, "--by", "arch,model.pe"]) == 0
    )
    url = capsys.readouterr().out.strip()
    assert url == "https://wandb.ai/team/zoo?nw=abc123"
    (saved,) = server.values()

    loaded = load_workspace(url)
    columns = loaded.sections[1].panels[-1].columns
    assert names(c.metric for c in columns) == [
        ("Config", "arch"),
        ("Config", "model.d_model"),
        ("Config", "task.optimizer.lr"),
        ("SummaryMetric", "best/val/cont_loss"),
    ]
    assert names(loaded.runset_settings.groupby) == [("Config", "arch"), ("Config", "model.pe")]
    loaded.save()  # saved back over the same view: the same wire form, keys in the same order
    (again,) = server.values()
    assert again == saved


def test_load_a_bad_url():
    for url in ("", "https://wandb.ai/team/zoo", "https://wandb.ai/team?nw=abc", "https://wandb.ai/team/zoo/x?nw=abc"):
        with pytest.raises(DashboardError, match="is not a saved workspace: give its URL"):
            load_workspace(url)


def column_names(workspace) -> list:
    """(section, [(type, name)] of its parallel-coordinates columns) of each task section."""
    return [(s.name, names(c.metric for c in s.panels[-1].columns)) for s in workspace.sections[:3]]


def test_the_librarys_own_load_gives_back_the_same_workspace(server, capsys):
    """main saves; wandb-workspaces' own Workspace.from_url loads it (no zoo code between) and saves it again: every
    column, grouping key and panel key is what main saved, and names the same config keys."""
    by = "arch,arch_config,model.position"
    assert main(["--project", "zoo", "--entity", "team", "--group", GROUP, "--by", by]) == 0
    url = capsys.readouterr().out.strip()
    (saved,) = server.values()
    loaded = ws.Workspace.from_url(url)
    assert column_names(loaded) == [
        (task, [*(("Config", k) for k in KEYS), ("SummaryMetric", BEST[task])]) for task in VAL
    ]
    assert names(loaded.runset_settings.groupby) == [("Config", k) for k in by.split(",")]
    loaded.save()
    (again,) = server.values()
    assert json.loads(again) == json.loads(saved)


SWEEP = Path(__file__).resolve().parents[1] / "experiments" / "sweeps" / "decoder_only_lm.yaml"


def stored_names(config: dict) -> dict:
    """{W&B's name: value} of a run config `config`: W&B stores it as {key: {"value": value}} and names a value by
    its dotted path through that (`model.value.d_model` for {"model": {"d_model": 32}}, `model.d_model.value`
    for {"model.d_model": 32}); a list is one value."""
    out = {}

    def walk(prefix: str, node) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(f"{prefix}{k}.", v)
        else:
            out[prefix[:-1]] = node

    walk("", {k: {"value": v} for k, v in config.items()})
    return out


def config_names(workspace, keys, by) -> tuple[dict, set]:
    """From the workspace's wire form: {config key: W&B name} of each parallel-coordinates column (`keys`, in
    order) and grouping key (`by`), and the set of every config name its panels hold (columns, scatter axes)."""
    wire = json.loads(workspace._to_model().model_dump_json(by_alias=True, exclude_none=True))["spec"]
    named, every = {}, set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and node.startswith("config:"):
            every.add(node.removeprefix("config:"))

    for section in wire["section"]["panelBankConfig"]["sections"]:
        walk(section["panels"])
        for panel in section["panels"]:
            for key, column in zip(keys, panel["config"].get("columns", []), strict=False):
                assert named.setdefault(key, column["accessor"].removeprefix("config:")) == named[key]
    for key, group in zip(by, wire["section"]["runSets"][0]["grouping"], strict=True):
        assert group["section"] == "config"
        named[key] = group["name"]
    return named, every


def test_every_config_name_of_the_workspace_is_one_a_run_logs(tmp_path):
    """The config a run logs (zoo.run.loggers.run_config, as W&B stores it) holds a value under every config name
    the workspace's panels and grouping use: each parallel-coordinates column and grouping key names the value of
    its key, the swept parameters of experiments/sweeps/decoder_only_lm.yaml (Hydra overrides on the agent's
    command line) included. In a W&B sweep run, beside the parameters the agent sets flat and locked, the same
    names still hold the swept values, and the sweep's own names keep them."""
    from wandb.sdk.wandb_config import Config

    from zoo.run.job import compose_job
    from zoo.run.loggers import run_config

    sweep = yaml.safe_load(SWEEP.read_text())["parameters"]
    swept = {k: p["values"][-1] if "values" in p else p["min"] for k, p in sweep.items()}
    assert swept["model.position"] == "rope" and swept["task.optimizer.lr"] == 1.0e-4
    cfg = compose_job(["+arch=decoder_only", *(f"{k}={v}" for k, v in swept.items())], tmp_path)
    top = {"arch": "decoder_only", "arch_config": "decoder_only", "task": "lm", "dataset": "tiny_shakespeare"}
    top |= {"objective": "causal_lm", "params": 1234, "params_non_embedding": 567, "flops_per_token": 8.5}
    top |= {"data_info": {"dataset": "tiny_shakespeare", "tokenizer": {"kind": "char"}}}
    keys, by = [*KEYS, *swept], [*BY, "model.position", "task.name"]
    named, every = config_names(build_workspace("zoo", keys=keys, by=by), keys, by)
    assert set(named) == {*keys, *by}

    sweep_run = Config()  # a sweep run's config: the agent's parameters, flat and locked, then zoo's
    sweep_run.update_locked(swept, user="sweep")
    sweep_run.update(run_config(cfg, top), allow_val_change=True)
    for config in (run_config(cfg, top), dict(sweep_run.items())):
        stored = stored_names(config)
        assert every <= set(stored), every - set(stored)
        assert {k: stored[named[k]] for k in swept} == swept
        assert [stored[named[k]] for k in (*KEYS, *BY, "task.name")] == [
            "decoder_only",
            1337,
            OmegaConf.select(cfg, "model.d_model"),
            OmegaConf.select(cfg, "model.n_layers"),
            1.0e-4,
            1234,
            "decoder_only",
            "decoder_only",
            "lm",
        ]
        assert (stored["params_non_embedding.value"], stored["data_info.value.tokenizer.kind"]) == (567, "char")
    assert {k: stored[f"{k}.value"] for k in swept} == swept  # the sweep's own, flat names
