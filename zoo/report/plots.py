"""Validation curves of zoo.report: per task, one panel per (x axis, metric), one line per group of runs.

x axes: the optimizer step, the cumulative training FLOPs (the CSV log's cost/flops) and the training wall
seconds (cost/seconds) at each validation, the latter two when the runs logged them. A group with several
seeds is drawn as the mean over seeds with a min-max band: each seed's curve is linearly interpolated
(numpy.interp) onto the union of the seeds' x values inside the range every seed covers (the common x
points), so the band spans the seeds at the same x. One seed: its curve, no band.
"""

from pathlib import Path

import numpy as np

from zoo.report.runs import read_curves
from zoo.report.table import DIFFERENT, STANDARD_OBJECTIVE

CURVES = {
    "classification": ["val/acc", "val/loss"],
    "lm": ["val/loss", "val/cont_loss"],
    "translation": ["val/bleu", "val/loss"],
}
X_AXES = (
    ("step", None, "optimizer step"),
    ("flops", "cost/flops", "training FLOPs"),
    ("seconds", "cost/seconds", "training wall seconds"),
)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_xy(curves: dict[str, list[tuple[int, float]]], name: str, x_key: str | None) -> tuple[list, list]:
    """(x, y) of metric `name` against the step (x_key None) or a cost column (its value logged at the same step;
    points whose step has no cost value are left out)."""
    points = curves.get(name, [])
    if x_key is None:
        return [s for s, _ in points], [v for _, v in points]
    cost = dict(curves.get(x_key, []))
    kept = [(cost[s], v) for s, v in points if s in cost]
    return [x for x, _ in kept], [v for _, v in kept]


def band(series: list[tuple[list, list]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(x, mean, min, max) of several seeds' (x, y) curves at their common x points (module docstring); None when
    their x ranges do not overlap."""
    series = [(np.asarray(x, float), np.asarray(y, float)) for x, y in series if len(x)]
    if not series:
        return None
    series = [(x[np.argsort(x, kind="stable")], y[np.argsort(x, kind="stable")]) for x, y in series]
    lo, hi = max(x[0] for x, _ in series), min(x[-1] for x, _ in series)
    if lo > hi:
        return None
    grid = np.unique(np.concatenate([x[(x >= lo) & (x <= hi)] for x, _ in series]))
    ys = np.stack([np.interp(grid, x, y) for x, y in series])
    return grid, ys.mean(0), ys.min(0), ys.max(0)


def group_label(group: dict) -> str:
    """A group's legend entry: its label, plus its objective when that is not the task's standard one."""
    task, objective = group["task"], group["objective"]
    label = group["label"]
    if task in STANDARD_OBJECTIVE and objective not in STANDARD_OBJECTIVE[task]:
        label += f" ({objective}: {DIFFERENT})"
    elif objective not in (task, *STANDARD_OBJECTIVE.get(task, ())):
        label += f" ({objective})"
    n = len(group["ok"])
    return label + (f", {n} seeds" if n > 1 else "")


def draw_group(ax, series: list[tuple[list, list]], color: str, label: str) -> str:
    """Draw one group's seeds on ax: one seed as its curve; several as the mean and min-max band at their common
    x points; several whose x ranges do not overlap (e.g. one validation each, at different steps) as every
    seed's points, so that no group is left out. Returns "curve", "band" or "points"."""
    if len(series) == 1:
        ax.plot(*series[0], marker="o", markersize=3, color=color, label=label)
        return "curve"
    b = band(series)
    if b is None:
        for i, (x, y) in enumerate(series):
            ax.plot(
                x,
                y,
                marker="o",
                markersize=4,
                linestyle=":",
                color=color,
                label=f"{label} (each seed)" if i == 0 else None,
            )
        return "points"
    x, mean, lo, hi = b
    ax.plot(x, mean, marker="o", markersize=3, color=color, label=label + " (mean, min-max)")
    ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
    return "band"


def curves_title(task: str, datasets: list[str], name: str | None = None) -> str:
    """The title of a task's curves (name None: the figure's) or of one metric's panel: it names the datasets."""
    on = f"{task} on {', '.join(datasets) or '?'}"
    return f"{on}: {name}" if name else f"Validation curves, {on}"


def plot_curves(groups: list[dict], out_dir: Path) -> list[Path]:
    """val_<task>.png per task: a grid of panels, rows = the x axes of X_AXES some run logged, columns = the
    metrics of CURVES[task] (every val/ metric for another task) some run logged; one line per group (mean over
    seeds, min-max band). The figure's and every panel's title name the task's datasets (curves_title); where
    a task's groups are on several datasets, each legend entry names its own. Returns the paths."""
    plt = _plt()
    written = []
    for task in dict.fromkeys(g["task"] for g in groups):
        task_groups = [
            (g, [read_curves(Path(r["run_dir"])) for r in g["ok"]]) for g in groups if g["task"] == task and g["ok"]
        ]
        all_curves = [c for _, cs in task_groups for c in cs]
        names = CURVES.get(task) or sorted({k for c in all_curves for k in c if k.startswith("val/")})
        names = [n for n in names if any(n in c for c in all_curves)]
        axes_ = [ax for ax in X_AXES if ax[1] is None or any(ax[1] in c for c in all_curves)]
        if not names:
            continue
        datasets = list(dict.fromkeys(str(g["dataset"]) for g, _ in task_groups))
        fig, axes = plt.subplots(len(axes_), len(names), figsize=(5.5 * len(names), 4 * len(axes_)), squeeze=False)
        for row, (_, x_key, x_label) in zip(axes, axes_):
            for ax, name in zip(row, names):
                for k, (g, cs) in enumerate(task_groups):
                    series = [curve_xy(c, name, x_key) for c in cs]
                    series = [s for s in series if s[0]]
                    if not series:
                        continue
                    label = group_label(g) + (f" [{g['dataset']}]" if len(datasets) > 1 else "")
                    draw_group(ax, series, f"C{k % 10}", label)
                if x_key is not None:
                    ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
                ax.set_xlabel(x_label)
                ax.set_ylabel(name)
                ax.set_title(curves_title(task, datasets, name))
                ax.grid(alpha=0.3)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=7)
        fig.suptitle(curves_title(task, datasets))
        fig.tight_layout()
        path = out_dir / f"val_{task}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
