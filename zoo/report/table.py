"""The table of zoo.report: one row per (group of runs, metric), mean +- std over seeds with a 95% Student-t
interval, and each group's cost (parameters, training FLOPs, tokens, training seconds, inference cost)."""

import math

from zoo.report.formats import fmt_ci, fmt_mean_std, fmt_num, fmt_seconds
from zoo.report.grouping import fmt_budget, seeds_text
from zoo.report.runs import first_line, read_examples
from zoo.report.stats import t_interval

# (metric, where in results.json): "final" = the last value / the test split on the best checkpoint,
# "best" = the best validation value of the run
METRICS = {
    "classification": [("test/acc", "final"), ("test/f1", "final")],
    "lm": [("val/loss", "best"), ("val/cont_loss", "best")],
    "translation": [("test/bleu", "final"), ("test/chrf", "final"), ("test/bleu_beam", "final")],
}
# an experiment=scaling cell (results.json "scaling"): its largest budget's loss, results.json's "final"
# (zoo.run.scaling_cell); its other budgets are in the Scaling section
CELL_METRICS = [("val/cont_loss", "final")]
PRIMARY = {"classification": "test/acc", "lm": "val/cont_loss (best)", "translation": "test/bleu"}  # ranked by
# the objectives whose losses compare (nats per token on the same continuation tokens, zoo.tasks.lm); the
# masked LM (encoder_only's alternative) is scored on other tokens
STANDARD_OBJECTIVE = {"lm": ("causal_lm", "prefix_lm", "entp", "prefix_continuation")}
DIFFERENT = "different objective, not comparable"  # the mark of the other objectives in the table and the plots
NOTES = {  # printed under the table
    "masked_lm": "encoder_only's masked LM: val/loss is the loss on the 15% masked characters, which the model "
    "sees both sides of; not comparable with the causal numbers",
    "prefix_continuation": "encoder_decoder reads the first half of each window and predicts the second: its "
    "val/loss is comparable with decoder_only's val/cont_loss (the same tokens)",
    "entp": "encoder_only predicts the next token as ENTP (Ewer et al. 2024): the bidirectional encoder re-reads "
    "each prefix, no KV reuse; its val/cont_loss is on the same tokens as the others'",
    "prefix_lm": "decoder_only with model.mask=prefix (T5's prefix LM): bidirectional over the first half of each "
    "window, causal after; its val/cont_loss is on the same tokens as the others'",
    "encoder_ar": "encoder_only translates autoregressively as ENTP: the encoder re-reads source + target prefix at "
    "every step; its BLEU / chrF and val/loss compare with the others'",
    "cmlm_mask_predict": "encoder_only translates non-autoregressively (conditional masked LM, mask-predict "
    "decoding): its BLEU / chrF compare with the others', its val/loss (masked-token loss) "
    "does not",
}
MIN_BLEU = 1.0  # a translation run below this test BLEU (0-100) is flagged: its ranking would be noise
COST_KEYS = ("train_flops", "tokens", "train_seconds", "inference_flops_per_token", "ms_per_example")
LOWER_IS_BETTER = ("loss", "ppl", "bpc")  # metric name endings (zoo.tasks.base's rule); others: higher is better


def lower_is_better(metric: str) -> bool:
    """True for a loss-like metric name ("val/cont_loss (best)" included)."""
    return metric.replace(" (best)", "").endswith(LOWER_IS_BETTER)


def objective_note(task: str, objective: str) -> str:
    """DIFFERENT for an objective outside the task's comparable ones (STANDARD_OBJECTIVE), else ""."""
    return DIFFERENT if task in STANDARD_OBJECTIVE and objective not in STANDARD_OBJECTIVE[task] else ""


def run_flag(run: dict, task: str) -> str:
    """Why a finished run's outputs are unusable for a ranking, "" when they are usable. Translation only: all
    of its test hypotheses empty (examples.json's "hyp", blank after stripping), or its test/bleu below
    MIN_BLEU (a run without examples.json is judged on its BLEU alone)."""
    if task != "translation":
        return ""
    ex, _ = read_examples(run)
    if ex is not None and all(not str(h).strip() for h in ex["hyp"]):
        return "all hypotheses empty"
    bleu = run["final"].get("test/bleu")
    if bleu is not None and float(bleu) < MIN_BLEU:
        return f"test/bleu {float(bleu):.2f} < {MIN_BLEU:g}"
    return ""


def flag_group(group: dict) -> str:
    """Set group["flags"] (one "seed S: why" per flagged finished run, run_flag) and group["degenerate"] (True
    when every finished run is flagged: zoo.report.significance does not rank two such groups against each
    other). Returns the flag text of the group's table rows ("" for none)."""
    flags = []
    for r in group["ok"]:
        why = run_flag(r, group["task"])
        if why:
            flags.append(f"seed {r.get('seed', '?')}: {why}" if len(group["ok"]) > 1 else why)
    group["flags"] = flags
    group["degenerate"] = bool(group["ok"]) and len(flags) == len(group["ok"])
    return "; ".join(flags)


def is_cell(run: dict) -> bool:
    """Whether a run is an experiment=scaling cell (its results.json has the cell's points under "scaling")."""
    return isinstance(run.get("scaling"), dict)


def metric_spec(task: str, runs: list[dict]) -> list:
    """[(metric, where)] of a task's runs: CELL_METRICS for scaling cells, METRICS, or for another task every
    test/ metric of "final" and every metric of "best" that some run recorded."""
    if runs and all(is_cell(r) for r in runs):
        return CELL_METRICS
    if task in METRICS:
        return METRICS[task]
    final = sorted({k for r in runs for k in r["final"] if k.startswith("test/")})
    best = sorted({k for r in runs for k in r["best"]})
    return [(k, "final") for k in final] + [(k, "best") for k in best]


def _mean(values) -> float | None:
    values = [float(v) for v in values if v is not None]
    return sum(values) / len(values) if values else None


def group_cost(group: dict) -> dict:
    """The group's cost, means over its finished runs: params, flops_per_token (forward, results.json),
    wall_seconds (the whole run: data setup, training, validation, test), and COST_KEYS from results.json's cost:
    train_flops (3 x forward FLOPs of the training batches), tokens (training tokens read), train_seconds (time in
    training steps), inference_flops_per_token (FLOPs per generated token), ms_per_example (ms per test
    sentence / example, per validation window for lm); None where no run recorded it."""
    ok = group["ok"]
    out = {
        "params": _mean(r.get("params") for r in ok),
        "flops_per_token": _mean(r.get("flops_per_token") for r in ok),
        "wall_seconds": _mean(r.get("wall_seconds") for r in ok),
    }
    for k in COST_KEYS:
        out[k] = _mean((r.get("cost") or {}).get(k) for r in ok)
    return out


def rows(groups: list[dict]) -> list[dict]:
    """Table rows: one per (group, metric some finished run of it recorded), and one row for a group whose runs
    all failed. Keys: cell ("task / label"), task, label, arch, arch_config, dataset, budget (text), objective,
    note (objective_note), metric (" (best)" for the best validation value), seeds (text: "3", "2 (1 failed)"),
    n (values averaged), n_failed, values / seeds_list (per seed), mean, std, half, lo, hi (t_interval; None for
    one seed), value (= mean), status ("ok" | "failed"), error (first line of the first failure), group (its index
    in groups), run_dirs, flag (flag_group: the group's unusable runs, "" for none), scaling_cell (its runs are
    experiment=scaling cells: metric_spec's CELL_METRICS), and group_cost's keys (train_seconds: the cost's, else
    the run's wall_seconds)."""
    out = []
    for gi, g in enumerate(groups):
        base = _row_base(gi, g)
        made = _metric_rows(g, base)
        out += made or [_empty_row(g, base)]
    return out


def _row_base(gi: int, g: dict) -> dict:
    """The keys every row of group g (index gi) shares: its labels, seeds text, first error, run_dirs, flag
    (flag_group, which also sets g["flags"] and g["degenerate"]) and group_cost's keys."""
    cost = group_cost(g)
    flag = flag_group(g)
    base = {
        "cell": f"{g['task']} / {g['label']}",
        "task": g["task"],
        "label": g["label"],
        "arch": g["arch"],
        "arch_config": g.get("arch_config"),
        "dataset": g["dataset"],
        "budget": fmt_budget(g["budget"]),
        "objective": g["objective"],
        "note": objective_note(g["task"], g["objective"]),
        "seeds": seeds_text(g),
        "n_failed": len(g["failed"]),
        "group": gi,
        "error": first_line(g["failed"][0]["error"]) if g["failed"] else "",
        "run_dirs": [r["run_dir"] for r in g["runs"]],
        "flag": flag,
        "scaling_cell": bool(g["ok"]) and all(is_cell(r) for r in g["ok"]),
        **cost,
        "train_seconds_measured": cost["train_seconds"] is not None,
    }
    if base["train_seconds"] is None:
        base["train_seconds"] = cost["wall_seconds"]
    return base


def _metric_rows(g: dict, base: dict) -> list[dict]:
    """One row per metric (metric_spec) some finished run of g recorded: values per seed and their t_interval."""
    out = []
    for metric, where in metric_spec(g["task"], g["ok"]):
        present = [r for r in g["ok"] if r[where].get(metric) is not None]
        if not present:
            continue
        values = [float(r[where][metric]) for r in present]
        if all(math.isfinite(v) for v in values):
            ci = t_interval(values)
        else:  # a diverged seed (NaN / inf): the mean shows it, no interval
            ci = dict.fromkeys(("std", "half", "lo", "hi"))
            ci.update(n=len(values), mean=sum(values) / len(values))
        out.append(
            {
                **base,
                "metric": metric + (" (best)" if where == "best" else ""),
                "status": "ok",
                "n": ci["n"],
                "values": values,
                "seeds_list": [r.get("seed") for r in present],
                "mean": ci["mean"],
                "std": ci["std"],
                "half": ci["half"],
                "lo": ci["lo"],
                "hi": ci["hi"],
                "value": ci["mean"],
            }
        )
    return out


def _empty_row(g: dict, base: dict) -> dict:
    """The row of a group without a recorded metric: status "failed" when all its runs failed, value NaN."""
    return {
        **base,
        "metric": "-",
        "status": "failed" if g["failed"] and not g["ok"] else "ok",
        "n": 0,
        "values": [],
        "seeds_list": [],
        "mean": None,
        "std": None,
        "half": None,
        "lo": None,
        "hi": None,
        "value": float("nan"),
    }


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")  # a user's file path may hold a pipe


HEADER = [
    "cell",
    "dataset",
    "budget",
    "objective",
    "metric",
    "seeds",
    "mean ± std",
    "95% CI",
    "params",
    "train FLOPs",
    "tokens",
    "train s (run s)",
    "FLOPs/token",
    "ms/example",
]


def markdown_table(table: list[dict]) -> str:
    """The rows as a Markdown table (HEADER): values with 4 decimals; params; training FLOPs and tokens (3
    significant digits); training seconds with the run's whole wall seconds in parentheses; FLOPs per generated
    token in millions (cost.inference_flops_per_token; results.json's forward flops_per_token, marked with †, for
    a run that recorded no inference cost); ms per example. "-": not recorded. When some row is flagged
    (flag_group), a last column "flag" says why."""
    flagged = any(r.get("flag") for r in table)
    header = HEADER + ["flag"] * flagged
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in table:
        obj = r["objective"] + (f" ({r['note']})" if r["note"] else "")
        train_s = (
            fmt_seconds(r["train_seconds"]) if r["train_seconds_measured"] else "-"
        ) + f" ({fmt_seconds(r['wall_seconds'])})"
        if r["inference_flops_per_token"] is not None:
            flops_per_token = fmt_num(r["inference_flops_per_token"], " M", 1e6, ".2f")
        else:
            flops_per_token = fmt_num(r["flops_per_token"], " M†", 1e6, ".2f")
        params = "-" if r["params"] is None else f"{round(r['params']):,}"
        cells = [
            r["cell"],
            r["dataset"],
            r["budget"],
            obj,
            r["metric"],
            r["seeds"],
            fmt_mean_std(r),
            fmt_ci(r),
            params,
            fmt_num(r["train_flops"]),
            fmt_num(r["tokens"]),
            train_s,
            flops_per_token,
            fmt_num(r["ms_per_example"], digits=".2f"),
        ] + [r.get("flag") or ""] * flagged
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def failed_runs(groups: list[dict]) -> list[str]:
    """One line per failed run: "- task / label, seed S (run dir): the error's first line"."""
    lines = []
    for g in groups:
        for r in g["failed"]:
            lines.append(
                f"- {g['task']} / {g['label']}, seed {r.get('seed', '?')} (`{r['run_dir']}`): {first_line(r['error'])}"
            )
    return lines
