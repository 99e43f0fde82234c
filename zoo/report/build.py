"""Report of a sweep: `python -m zoo.report <multirun dir> [--out DIR] [--sentence TEXT] [--layer N]`.

Reads only local files (no network): every `results.json` below the multirun dir (zoo.run.train.run, failed runs
included), each run's Lightning CSV log (`<run dir>/csv/metrics.csv`) and per-example outputs
(`examples.json`), and writes into --out (default: the multirun dir):

- report.md:
  - a table with one row per (group, metric). Runs are grouped by the keys the multirun swept (their Hydra
    overrides that differ between runs), averaging over `seed` (zoo.report.grouping.group_runs); a row gives the
    mean +- std over seeds and its 95% Student-t interval ("n/a (1 seed)" for one seed), the seeds behind it
    (failed ones counted), and the group's cost: parameters, training FLOPs, tokens, training seconds, FLOPs
    per generated token, ms per example (zoo.report.table). Failed runs are listed with their error.
    A translation group with all hypotheses empty or test BLEU below 1 is flagged in a "flag" column.
    Under the table, per task, the cells' peak learning rates: tuned (experiment=compare with compare.lr_grid)
    or not; the tuning runs are not rows, nor in the tests or curves: a Tuning section lists them
    (zoo.report.compare_tune).
  - per task, paired significance tests between groups on the same examples (sacreBLEU's paired bootstrap for
    BLEU / chrF, McNemar's exact test for accuracy, a paired bootstrap over validation windows for LM loss)
    with p-values, the counts each rests on (McNemar's b and c, how many segments / windows differ) and the
    ranking they support, only within one (dataset, budget) (zoo.report.significance); two flagged groups are
    not ranked against each other.
  - for translation on the built-in Multi30k (en-de) and classification on the built-in SST-2, zoo's ordering
    of prefix_lm, decoder_only and encoder_decoder against T5's (Raffel et al. 2020, Table 2): agrees /
    disagrees / not significant, "not judged" with one seed (zoo.report.literature); nothing for other data.
- val_<task>.png: validation curves against step, training FLOPs and training seconds, one line per group,
  min-max band over seeds; titles name the task's datasets (zoo.report.plots).
- attention_<group>.png (translation groups whose model has cross-attention, i.e. encoder_decoder): the
  cross-attention of the best checkpoint of the group's first seed on one sentence, by default the first
  source sentence of the run's own test set (zoo.report.attention; --sentence picks another, --layer the
  decoder layer).

Exit status 2 with a one-line message for bad input (no results.json found, unreadable files).
"""

import argparse
import sys
from pathlib import Path

from zoo.errors import listed
from zoo.report.attention import attention_maps, cross_attention
from zoo.report.compare_tune import rate_lines, split_tuning, tuning_section
from zoo.report.grouping import group_runs, swept_keys
from zoo.report.literature import versus_t5
from zoo.report.plots import plot_curves
from zoo.report.runs import ReportError, find_runs
from zoo.report.scaling import scaling_section
from zoo.report.scaling_points import scaling_points
from zoo.report.scaling_translation import translation_section
from zoo.report.significance import compare_task
from zoo.report.table import NOTES, failed_runs, markdown_table, rows
from zoo.scaling.carry import unfinished


def sweep_summary(runs: list[dict]) -> list[str]:
    """One line per task: its runs, the keys swept within it, and the seeds averaged over."""
    lines = []
    for task in dict.fromkeys(r["task"] for r in runs):
        task_runs = [r for r in runs if r["task"] == task]
        keys = swept_keys(task_runs)
        seeds = sorted({str(r.get("seed")) for r in task_runs if r.get("seed") is not None})
        failed = sum(r["status"] != "ok" for r in task_runs)
        n = len(task_runs)
        lines.append(
            f"- {task}: {n} run{'s' * (n != 1)}"
            + (f" ({failed} failed)" if failed else "")
            + f"; swept: {', '.join(k for k in keys if k != 'seed') or 'nothing'}"
            + (f"; averaged over seed ({', '.join(seeds)})" if len(seeds) > 1 else "")
        )
    return lines


def _unfinished(root: Path) -> list[str]:
    """A paragraph naming the scaling cells below `root` that are not finished (a cell.json without a results.json
    recording every point of its points.csv: still training, or cut off; zoo.scaling.carry.unfinished), whose points
    the Scaling section leaves out; [] when every cell is finished."""
    left = unfinished(root)
    if not left:
        return []
    return [
        f"**{len(left)} scaling cell(s) not finished** (still training, or cut off): {listed(left, 8)}. "
        "Their points are left out of the Scaling section until their command is rerun and they finish.",
        "",
    ]


def _is_scaling_sweep(root: Path, runs: list[dict]) -> bool:
    """A scaling study's folder: its plan's record (plan.json), or cells that record a scaling point (a folder
    unpacked from a pack file, zoo.scaling.carry, has no plan.json until its command reruns)."""
    return (root / "plan.json").is_file() or any((r.get("scaling") or {}).get("points") for r in runs)


def report(root: Path, out_dir: Path | None = None, sentence: str | None = None, layer: int = -1) -> dict:
    """Write report.md, val_<task>.png and attention_<group>.png into out_dir (default root).
    Returns {"runs", "groups", "table": rows, "records": {task: ranking records}, "report": path, "curves":
    [paths], "attention": [paths], "skipped": [attention maps not drawn, why], "scaling": [the Scaling section's
    figures], "tuning": [experiment=compare's tuning runs, kept out of the groups]}; runs of several sizes add
    the Scaling section (zoo.report.scaling). Raises ReportError for an out_dir that is a file, or no runs under
    root."""
    root = Path(root)
    out_dir = Path(out_dir) if out_dir is not None else root
    if out_dir is not root and out_dir.exists() and not out_dir.is_dir():
        raise ReportError(
            f"--out {out_dir} is a file; --out names a folder for report.md and its PNGs (e.g. {out_dir.parent})"
        )
    runs, tuning = split_tuning(find_runs(root))  # experiment=compare's tuning runs: not rows of the comparison
    groups = group_runs(runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = rows(groups)
    curves = plot_curves(groups, out_dir)
    skipped: list[str] = []
    attention = attention_maps(groups, out_dir, sentence, layer, skipped, attend=cross_attention)
    text = _summary(root, runs, groups, table, len(tuning))
    significance, literature, records = _comparisons(groups, table)
    if significance:
        text += ["## Significance", "", *significance]
    if literature:
        text += ["## Against the literature", "", *literature]
    scaling_sweep = _is_scaling_sweep(root, runs)
    scaling, scaling_figures = [], []
    if scaling_sweep or sizes_swept(runs):  # a comparison at one size per architecture: no empty section
        scaling, scaling_figures = scaling_section(runs, out_dir, scaling_sweep)
    translation, translation_figures = translation_section(runs, out_dir, scaling_sweep)
    scaling_figures += translation_figures
    text += _unfinished(root) + scaling + translation
    text += tuning_section(tuning, runs)
    text += _figures(curves, attention, skipped)
    path = out_dir / "report.md"
    path.write_text("\n".join(text) + "\n")
    return {
        "runs": runs,
        "groups": groups,
        "table": table,
        "records": records,
        "report": path,
        "curves": curves,
        "attention": attention,
        "skipped": skipped,
        "scaling": scaling_figures,
        "tuning": tuning,
    }


def _summary(root: Path, runs: list[dict], groups: list[dict], table: list[dict], n_tuning: int = 0) -> list[str]:
    """report.md's lines up to the significance section: the title, the sweep summary, how to read the table,
    the table, the cells' learning rates (tuned or not: zoo.report.compare_tune), the failed runs and the notes on
    the objectives present."""
    notes = [f"- {o}: {NOTES[o]}" for o in dict.fromkeys(r["objective"] for r in table) if o in NOTES]
    n_failed = sum(r["status"] != "ok" for r in runs)
    text = [
        f"# Comparison report: {root}",
        "",
        f"{len(runs)} runs" + (f" ({n_failed} failed)" if n_failed else "") + f" in {len(groups)} groups:",
        "",
        *sweep_summary(runs),
        "",
        "A row is a group of runs that differ only in seed: mean ± std over its seeds, 95% CI: Student t over "
        "seeds (n/a for one seed). Values: test metrics on the checkpoint with the best validation score "
        "(classification, translation) or the best validation value (lm, marked `(best)`); a scaling cell's "
        "val/cont_loss at its largest budget (the others are in the Scaling section). Cost, mean over "
        "seeds: train FLOPs (forward + backward, 3 x forward FLOPs of the training batches), tokens (training "
        "tokens read), train s (time in training steps; in parentheses the run's whole wall seconds: data setup, "
        "training, validation, test), FLOPs/token (FLOPs per generated token; † forward FLOPs per token, "
        "zoo.model.cost, for runs that recorded no inference cost), ms/example (per test sentence or example, "
        "per validation window for lm). `-`: not recorded.",
        "",
        markdown_table(table),
        "",
        *rate_lines(runs, n_tuning),
    ]
    text += unequal_sizes(table, groups)
    failed = failed_runs(groups)
    if failed:
        text += ["Failed runs (listed, not dropped):", "", *failed, ""]
    if notes:
        text += ["Objectives:", "", *notes, ""]
    return text


SIZE_TOLERANCE = 0.10  # groups ranked together whose mean parameter counts differ by more are flagged
SIZE_KEYS = ("model.", "+model.", "scaling.")  # swept keys that change a model's size on purpose


def sizes_swept(runs: list[dict]) -> bool:
    """Whether some architecture has LM evaluation points at two or more sizes (zoo.report.scaling's N), the
    least a Scaling section fits."""
    sizes: dict[str, set] = {}
    for p in scaling_points(runs):
        sizes.setdefault(p["arch"], set()).add(p["N"])
    return any(len(n) > 1 for n in sizes.values())


def unequal_sizes(table: list[dict], groups: list[dict]) -> list[str]:
    """One warning line per (task, dataset, budget) whose groups, ranked against each other, differ in mean
    parameter count by more than SIZE_TOLERANCE (largest / smallest - 1): a ranking of unequal models (e.g.
    `+arch=encoder_only,decoder_only,encoder_decoder` at one model config). Groups that sweep a size key
    (SIZE_KEYS: model.*, a scaling cell) differ on purpose and are not flagged."""
    parts: dict[tuple, dict[int, float]] = {}
    for r in table:
        if r["n"] > 0 and r.get("params"):
            parts.setdefault((r["task"], r["dataset"], r["budget"]), {})[r["group"]] = r["params"]
    lines = []
    for (task, dataset, budget), sizes in parts.items():
        swept = any(k.startswith(SIZE_KEYS) for g in sizes for k in groups[g].get("settings") or {})
        small, large = min(sizes.values()), max(sizes.values())
        if swept or len(sizes) < 2 or large <= (1 + SIZE_TOLERANCE) * small:
            continue
        counts = ", ".join(f"{groups[g]['label']} {round(n):,}" for g, n in sizes.items())
        lines.append(
            f"**Warning: parameter counts differ** by {large / small - 1:.0%} among the {task} groups ranked on "
            f"{dataset} ({budget}): {counts}. Part of any difference is size, not architecture; "
            "`python -m zoo -m experiment=compare` matches the architectures' parameter counts (within 10%)."
        )
    return [*lines, ""] if lines else []


def _comparisons(groups: list[dict], table: list[dict]) -> tuple[list[str], list[str], dict]:
    """Per task (in group order): compare_task's significance lines and ranking records, and versus_t5's lines.
    Returns (significance lines, literature lines, {task: ranking records})."""
    significance, literature = [], []
    records = {}
    for task in dict.fromkeys(g["task"] for g in groups):
        lines, recs = compare_task(task, table, groups)
        significance += lines
        literature += versus_t5(task, recs, groups)
        records[task] = recs
    return significance, literature, records


def _figures(curves: list[Path], attention: list[Path], skipped: list[str]) -> list[str]:
    """report.md's closing lines: links to the curve and attention PNGs, and why attention maps were skipped."""
    text = [
        "Validation curves (x: step, training FLOPs, training seconds; several seeds: mean and min-max band "
        "at the common x points): "
        + (", ".join(f"[{p.name}]({p.name})" for p in curves) or "none (no run has a CSV log with validation metrics)")
    ]
    if attention:
        text += ["", "Cross-attention: " + ", ".join(f"[{p.name}]({p.name})" for p in attention)]
    if skipped:
        text += ["", "Cross-attention not drawn:", "", *(f"- {line}" for line in skipped)]
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.report", description=__doc__.split("\n")[0])
    parser.add_argument("multirun_dir", help="a dir with runs' results.json below it (outputs/compare/<date>_<time>)")
    parser.add_argument("--out", default=None, help="where to write report.md and the PNGs (default: multirun_dir)")
    parser.add_argument(
        "--sentence",
        default=None,
        help="source sentence of the attention maps "
        "(default: the first source sentence of each run's own test set, from its examples.json)",
    )
    parser.add_argument("--layer", type=int, default=-1, help="decoder layer of the attention maps (default -1: last)")
    args = parser.parse_args(argv)
    try:
        out = report(Path(args.multirun_dir), args.out, args.sentence, args.layer)
    except ReportError as e:
        print(f"zoo.report: error: {e}", file=sys.stderr)
        return 2
    print(out["report"].read_text())
    for p in [*out["curves"], *out["attention"]]:
        print(p)
    return 0
