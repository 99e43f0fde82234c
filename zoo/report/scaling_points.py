"""A scaling study's points from its runs, and its points.csv (zoo.report.scaling's Scaling section fits them).

A point is one budget of a run: N = its non-embedding parameters (Kaplan et al. 2020), D = the training tokens,
C = the measured training FLOPs (zoo.model.cost through the objective, so ENTP's re-reading and the encoder's
source tokens count) and the continuation loss (val/cont_loss, the tokens every architecture predicts alike).
experiment=scaling's cells carry their points in results.json (zoo.run.scaling_cell: each a cool-down branch,
or a budget trained alone in a SIZE_seedN_cosine check cell); other LM runs give one point per validation of
their CSV log."""

import csv
import json
from pathlib import Path

from zoo.report.runs import ReportError, arch_label, read_curves
from zoo.scaling.conventions import STUDY_OBJECTIVES
from zoo.scaling.refit import number
from zoo.scaling.tune import TUNE_KIND, tuning_design

LOSS = ("val/cont_loss", "val/loss")  # the metric fitted: the first a run logs
POINTS_CSV = ("arch", "size", "seed", "n_params", "tokens", "flops", "loss", "lr")


def scaling_points(runs: list[dict], task: str = "lm") -> list[dict]:
    """Every point of every finished run of `task` (lm; translation, D its target tokens) that records
    params_non_embedding, as {arch, size, seed, run (the group a bootstrap draws whole: a trunk and its branches,
    or a run's evaluations), N, D (tokens), C, tokens, seconds, loss, lr, kind (cooldown, cosine or curve),
    tokens_per_param, steps, train_tokens, objective (other_objective)}. ReportError naming both folders when
    two runs give the same point (a copied cell) or two cells of one family and size differ in design
    (one_design): one law is never fitted to two studies."""
    points, seen, designs = [], {}, {}
    for i, run in enumerate(runs):
        if run.get("status", "ok") != "ok" or run.get("task") != task or not run.get("params_non_embedding"):
            continue
        cell = run.get("scaling")
        found = _cell_points(run, cell) if cell and cell.get("points") is not None else _curve_points(run)
        about = {"arch": arch_label(run), "objective": other_objective(run, task)}  # one run's, once
        where = run.get("run_dir") or f"run {i + 1}"
        for p in found:
            key = (about["arch"], about["objective"], p["size"], p["seed"], p["kind"], p["steps"], str(p["lr"]))
            if seen.setdefault(key, where) != where:
                raise ReportError(
                    f"{seen[key]} and {where} give the same point ({about['arch']} {p['size']} seed "
                    f"{p['seed']}, {p['kind']} at step {p['steps']}): a copied cell or two studies in one folder; "
                    "report each study's own sweep folder, or move the copy out"
                )
        if cell and cell.get("points"):
            one_design(run, about["arch"], designs)
        points += [{**p, **about} for p in found]
    return points


SEED_KEYS = ("seed", "data.seed", "scaling.cell")  # what differs between two seeds' cells of one design


def one_design(run: dict, arch: str, designs: dict) -> None:
    """ReportError when this cell's cell.json (its trunk's config, less SEED_KEYS) differs from an
    earlier cell of the same family and size in `designs` ({(arch, size, objective): (run_dir, config)})."""
    path = Path(run.get("run_dir", "")) / "cell.json"
    cell = json.loads(path.read_text()) if path.is_file() else None
    points = run["scaling"]["points"]
    if not cell or "config" not in cell or any(p["kind"] != "cooldown" for p in points):
        return  # a tuning run (its own rate) or a cosine check cell (its own schedule)
    config = {k: v for k, v in cell["config"].items() if k not in SEED_KEYS}
    key = (arch, str(points[0]["size"]), run.get("objective"))
    first, theirs = designs.setdefault(key, (run["run_dir"], config))
    if theirs != config:
        diff = sorted(k for k in set(theirs) | set(config) if theirs.get(k) != config.get(k))
        raise ReportError(
            f"{first} and {run['run_dir']} are cells of {arch} {key[1]} under two designs ({', '.join(diff[:3])} "
            "differ): two studies in one folder; report each study's own sweep folder"
        )


def _cell_points(run: dict, cell: dict) -> list[dict]:
    """A scaling cell's points, from its results.json (zoo.run.scaling_cell)."""
    return [
        {
            "size": str(p["size"]),
            "seed": int(p["seed"]),
            "run": f"{arch_label(run)}|{p['size']}|{p['seed']}|{p['kind']}",
            "N": float(p["n_params"]),
            "C": float(p["flops"]),
            "D": float(p["tokens"]),
            "tokens": float(p["tokens"]),
            "seconds": float(p["seconds"]),
            "loss": float(p["loss"]),
            "lr": p.get("lr", ""),
            "kind": p["kind"],
            "design": _tuning_design(run) if p["kind"] == TUNE_KIND else None,
            "tokens_per_param": float(p["tokens_per_param"]),
            "steps": int(p["steps"]),
            "train_tokens": cell.get("train_tokens"),
            "tune_seeds": cell.get("tune_seeds"),  # a tuned cell's: the seeds of the tuning runs it chose from
        }
        for p in cell["points"]
    ]


def _tuning_design(run: dict) -> dict | None:
    """The tuning design (zoo.scaling.tune.tuning_design) of a tuning cell's run, from its cell.json; None without."""
    path = Path(run.get("run_dir", "")) / "cell.json"
    cell = json.loads(path.read_text()) if path.is_file() else None
    return tuning_design(cell) if cell and "config" in cell else None


def _curve_points(run: dict) -> list[dict]:
    """Another LM run's points: one per validation of its CSV log that has the FLOPs and tokens trained."""
    N, curves = float(run["params_non_embedding"]), read_curves(Path(run["run_dir"]))
    metric = next((m for m in LOSS if m in curves), None)
    if metric is None or "cost/flops" not in curves or "cost/tokens" not in curves:
        return []
    cost = {k: dict(curves.get(f"cost/{k}", [])) for k in ("flops", "tokens", "seconds")}
    rows = [(step, loss, cost["flops"].get(step), cost["tokens"].get(step)) for step, loss in curves[metric]]
    return [
        {
            "size": f"N{int(N)}",
            "seed": run.get("seed"),
            "run": run["run_dir"],
            "N": N,
            "C": C,
            "D": tokens,
            "tokens": tokens,
            "seconds": cost["seconds"].get(step),
            "loss": loss,
            "lr": "",
            "kind": "curve",
            "tokens_per_param": tokens / N,
            "steps": int(step) + 1,
            "train_tokens": None,
        }
        for step, loss, C, tokens in rows
        if C and tokens
    ]


def other_objective(run: dict, task: str) -> str | None:
    """A language-model run's task.objective where it is not its family's in the LM study (STUDY_OBJECTIVES; e.g.
    decoder_only's causal_continuation), else None."""
    objective = run.get("objective")
    return objective if task == "lm" and objective and objective != STUDY_OBJECTIVES.get(arch_label(run)) else None


def write_points_csv(points: list[dict], path: Path) -> Path:
    """points.csv: one row per fitted point (FITTED_KINDS), header POINTS_CSV (lr: the peak rate the point's run
    ran, empty where a run does not record it), and a last column objective where a point's is not its family's
    study objective (other_objective), numbers as fitted (zoo.scaling.refit.number); refit one architecture with
    zoo.scaling.refit.refit_command."""
    other = any(p.get("objective") for p in points)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(POINTS_CSV + (("objective",) if other else ()))
        for p in points:
            w.writerow(
                [
                    p["arch"],
                    p["size"],
                    p["seed"],
                    number(p["N"]),
                    number(p["tokens"]),
                    f"{p['C']:.6g}",
                    number(p["loss"]),
                    f"{float(p['lr']):g}" if p.get("lr") not in (None, "") else "",
                    *([p.get("objective") or STUDY_OBJECTIVES.get(p["arch"], "")] if other else []),
                ]
            )
    return path
