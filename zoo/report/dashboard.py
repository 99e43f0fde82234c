"""`python -m zoo.dashboard --project P [--entity E] [--group G] [--keys K,...] [--by K,...]`: save the W&B
workspace that compares zoo's runs, built with wandb-workspaces (`pip install 'zoo[dashboard]'`).

One section per task; runs grouped by `arch` and `arch_config`; the task's validation metrics against step,
training FLOPs and training seconds,
its best metric against params and training FLOPs, parallel coordinates over --keys; and a scaling section
(experiment=scaling's cells, zoo.run.cell_wandb): the LM loss against training FLOPs and non-embedding parameters,
log-log, and each cell's trunk and cool-down curves. --group keeps one W&B
group (a multirun's sweep dir). `build_workspace` needs no network; `main` saves (needs `wandb login`);
`load_workspace(url)` (wandb-workspaces' `Workspace.from_url`) loads a saved one back, the same workspace.
Config keys are named as W&B nests them (zoo.run.loggers.run_config): `Config("model.d_model")`, stored
`config:model.value.d_model`, the form wandb-workspaces writes and reads back unchanged.
Bad input exits 2 with a one-line message, before any network; so does no W&B login (with or without --entity,
the same message); a save that fails otherwise (network, permissions) exits 1.
"""

import argparse
import re
import sys
from collections.abc import Sequence
from urllib.parse import parse_qs, urlparse

KEYS = ("arch", "seed", "model.d_model", "model.n_layers", "task.optimizer.lr", "params")
BY = ("arch", "arch_config")  # arch_config keeps prefix_lm (arch decoder_only, mask prefix) its own group
STEP = "trainer/global_step"
FLOPS = "cost/flops"
SECONDS = "cost/seconds"
# task -> (validation metrics, the summary's best metric)
TASKS = {
    "classification": (("val/acc", "val/f1"), "best/val/acc"),
    "lm": (("val/cont_loss", "val/bpc"), "best/val/cont_loss"),
    "translation": (("val/bleu", "val/chrf"), "best/val/bleu"),
}
INSTALL = "pip install 'zoo[dashboard]' (or pip install wandb-workspaces==0.4.13)"


class DashboardError(ValueError):
    """Bad input; the message names the fix."""


def _libs():
    try:
        import wandb_workspaces.reports.v2 as wr
        import wandb_workspaces.workspaces as ws
    except ImportError as e:
        raise DashboardError(f"wandb-workspaces is not installed ({e}): {INSTALL}") from None
    return ws, wr


def _keys(keys: Sequence[str], option: str) -> list:
    keys = [k.strip() for k in keys]
    if not keys or not all(keys):
        raise DashboardError(f"{option}: give run config keys separated by commas, e.g. {option} arch,seed")
    return keys


def build_workspace(
    project: str,
    entity: str | None = None,
    group: str | None = None,
    keys: Sequence[str] = KEYS,
    by: Sequence[str] = BY,
):
    """The comparison workspace (a wandb_workspaces.workspaces.Workspace), built offline.

    keys: the config keys of the parallel coordinates; by: the config keys the runs are grouped by;
    entity None leaves it empty, for main to fill in from the W&B default."""
    if not project or not project.strip():
        raise DashboardError("no W&B project: pass --project P (the logger's project, `zoo` by default)")
    keys, by = _keys(keys, "--keys"), _keys(by, "--by")
    ws, wr = _libs()
    sections = [_task_section(ws, wr, task, metrics, best, keys) for task, (metrics, best) in TASKS.items()]
    sections.append(_scaling_section(ws, wr))
    groupby = [ws.Config(k) for k in by]
    filters = f'Metric("Group") == {group!r}' if group else ""
    return ws.Workspace(
        entity=entity or "",
        project=project,
        name=f"zoo comparison ({group})" if group else "zoo comparison",
        sections=sections,
        runset_settings=ws.RunsetSettings(groupby=groupby, filters=filters),
    )


def load_workspace(url: str):
    """The workspace saved at `url` (the URL `main` prints), loaded by wandb-workspaces (needs the network).

    Raises DashboardError if `url` is not a saved workspace's URL (https://wandb.ai/ENTITY/PROJECT?nw=ID)."""
    ws, _ = _libs()
    parts = urlparse(url or "")
    view_id = parse_qs(parts.query).get("nw", [""])[0]
    path = parts.path.split("/")  # "", ENTITY, PROJECT
    if not view_id or len(path) != 3 or path[0] or not all(path[1:]):
        raise DashboardError(f"{url!r} is not a saved workspace: give its URL, https://wandb.ai/ENTITY/PROJECT?nw=ID")
    return ws.Workspace.from_url(url)


def _task_section(ws, wr, task: str, metrics, best: str, keys: list):
    """The open ws.Section of one task: each validation metric against step, training FLOPs and training seconds,
    `best` (a summary metric) against params and training FLOPs, and parallel coordinates over `keys` (config
    keys) and `best`."""
    panels = []
    for metric in metrics:
        for x, x_title in ((STEP, "step"), (FLOPS, "training FLOPs"), (SECONDS, "training seconds")):
            panels.append(
                wr.LinePlot(
                    title=f"{metric} vs {x_title}",
                    x=x,
                    y=[metric],
                    title_x=x_title,
                    title_y=metric,
                    groupby_aggfunc="mean",
                    groupby_rangefunc="stddev",
                )
            )
    panels.append(wr.ScatterPlot(title=f"{best} vs params", x=wr.Config("params"), y=wr.SummaryMetric(best)))
    panels.append(
        wr.ScatterPlot(
            title=f"{best} vs training FLOPs", x=wr.SummaryMetric("cost/train_flops"), y=wr.SummaryMetric(best)
        )
    )
    panels.append(
        wr.ParallelCoordinatesPlot(
            title=f"swept keys vs {best}",
            columns=[
                *(wr.ParallelCoordinatesPlotColumn(wr.Config(k)) for k in keys),
                wr.ParallelCoordinatesPlotColumn(wr.SummaryMetric(best)),
            ],
        )
    )
    return ws.Section(
        name=task, panels=panels, is_open=True, layout_settings=ws.SectionLayoutSettings(columns=2, rows=4)
    )


SEGMENTS = r"^(trunk|cooldown_[0-9_]+|cosine_[0-9_]+)/"  # a scaling cell's segments (zoo.run.cell_wandb)


def _scaling_section(ws, wr):
    """The scaling panels (experiment=scaling's cells, zoo.run.cell_wandb, and LM runs of several sizes): the LM's
    continuation loss against training FLOPs, log-log (a cell's points, a run's validations); the final loss (a
    cell's largest budget, a run's last validation) against non-embedding parameters and against training FLOPs,
    log-log, one point a run; the training loss and learning rate of each cell's trunk and cool-down branches
    against step."""
    metric = "val/cont_loss"
    panels = [
        wr.LinePlot(
            title=f"scaling: {metric} vs training FLOPs",
            x=FLOPS,
            y=[metric],
            log_x=True,
            log_y=True,
            title_x="training FLOPs",
            title_y=metric,
        ),
        *(
            wr.ScatterPlot(
                title=f"scaling: final {metric} vs {x_title}",
                x=x,
                y=wr.SummaryMetric(metric),
                log_x=True,
                log_y=True,
            )
            for x, x_title in (
                (wr.Config("params_non_embedding"), "non-embedding params"),
                (wr.SummaryMetric("cost/train_flops"), "training FLOPs"),
            )
        ),
        *(
            wr.LinePlot(
                title=f"scaling: {name} of the trunk and branches vs step",
                x=STEP,
                metric_regex=SEGMENTS + re.escape(name) + "$",
                log_y=log_y,
                title_x="step",
                title_y=name,
            )
            for name, log_y in (("train/loss", True), ("lr", False))
        ),
    ]
    return ws.Section(
        name="scaling", panels=panels, is_open=False, layout_settings=ws.SectionLayoutSettings(columns=3, rows=2)
    )


def _login():
    """The W&B API (wandb.Api) of the user's login. Raises DashboardError when there is none (no API key, no
    network): the one cause of every "not logged in" failure, with or without --entity."""
    import wandb

    try:
        return wandb.Api()
    except Exception as e:  # no API key, no network
        raise DashboardError(
            f"no W&B login ({str(e).splitlines()[0] if str(e) else type(e).__name__}): "
            "log in with `wandb login` (or set WANDB_API_KEY)"
        ) from None


def _default_entity(api) -> str:
    """The default entity of `api` (a wandb.Api). Raises DashboardError when the login names none."""
    entity = getattr(api, "default_entity", None)
    if not entity:
        raise DashboardError("no W&B entity: pass --entity E")
    return entity


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise DashboardError(f"{message} (python -m zoo.dashboard --help)")


def main(argv=None) -> int:
    parser = _Parser(prog="python -m zoo.dashboard", description="Save the W&B workspace that compares zoo's runs.")
    parser.add_argument("--project", help="the W&B project of the runs (required)")
    parser.add_argument("--entity", default=None, help="the W&B entity (default: the API's default entity)")
    parser.add_argument("--group", default=None, help="keep one W&B group: a multirun's sweep dir")
    parser.add_argument(
        "--keys", default=",".join(KEYS), help=f"parallel-coordinates columns, config keys (default: {','.join(KEYS)})"
    )
    parser.add_argument(
        "--by",
        default=",".join(BY),
        help="config keys the runs are grouped by (default: arch; "
        "arch,arch_config splits decoder_only's prefix LM from its causal LM)",
    )
    try:
        args = parser.parse_args(argv)
        if args.project is None:
            raise DashboardError("--project is required: python -m zoo.dashboard --project P [--entity E]")
        workspace = build_workspace(args.project, args.entity, args.group, args.keys.split(","), args.by.split(","))
        api = _login()  # before saving: without a login, save fails as "no login" whatever the entity
        if not workspace.entity:
            workspace.entity = _default_entity(api)
    except DashboardError as e:
        print(f"zoo.dashboard: error: {e}", file=sys.stderr)
        return 2
    try:
        workspace.save()
    except Exception as e:  # network, login, permissions
        print(
            f"zoo.dashboard: error: saving to {workspace.entity}/{workspace.project} failed "
            f"({str(e).splitlines()[0] if str(e) else type(e).__name__}): check `wandb login` and --entity",
            file=sys.stderr,
        )
        return 1
    try:
        print(workspace.url)
    except Exception:
        print(f"saved {workspace.name!r} in {workspace.entity}/{workspace.project}")
    return 0
