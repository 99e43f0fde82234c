"""experiment=compare's learning rates in the report (zoo.run.compare_tune): the tuning runs are kept out of the
comparison's groups, table, curves and significance tests; a line per task under the main table says whether
its cells were tuned and at what rate, and a Tuning section lists the tuning runs' seed-mean validation metric
per rate."""

from collections import defaultdict

from zoo.report.runs import TASK_ORDER, arch_label


def split_tuning(runs: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the comparison's runs, the tuning runs): a tuning run's results.json has compare.tuning true."""
    tuning = [r for r in runs if (r.get("compare") or {}).get("tuning")]
    return [r for r in runs if not (r.get("compare") or {}).get("tuning")], tuning


def fmt_rates(rates) -> str:
    """Rates as text: [0.001, 0.002] -> "0.001, 0.002"."""
    return ", ".join(f"{float(r):g}" for r in rates)


def _task_order(task: str) -> tuple:
    return (TASK_ORDER.index(task) if task in TASK_ORDER else len(TASK_ORDER), task)


def rate_lines(runs: list[dict], n_tuning: int = 0) -> list[str]:
    """Per task whose finished runs record a compare rate (results.json's "compare"): whether the cells were
    tuned, and each architecture's peak rate; [] when no run records one."""
    by_task = defaultdict(list)
    for r in runs:
        if r["status"] == "ok" and isinstance(r.get("compare"), dict):
            by_task[r["task"]].append(r)
    lines = []
    for task in sorted(by_task, key=_task_order):
        cells = by_task[task]
        rates = {}
        for r in cells:
            rates.setdefault(arch_label(r), set()).add(float(r["compare"]["lr"]))
        ran = ", ".join(f"{a} {fmt_rates(sorted(v))}" for a, v in rates.items())
        tuned = [r for r in cells if r["compare"].get("tuned")]
        if not tuned:
            shared = {lr for v in rates.values() for lr in v}
            how = (
                f"every architecture at the one rate {fmt_rates(shared)}"
                if len(shared) == 1
                else f"the rates of their configs: {ran}"
            )
            lines.append(f"- {task}: NOT tuned (compare.lr_grid=null): {how}")
            continue
        c = tuned[0]["compare"]
        part = "" if len(tuned) == len(cells) else f" ({len(cells) - len(tuned)} of {len(cells)} runs NOT tuned)"
        lines.append(
            f"- {task}: tuned{part}: each architecture at its best rate of compare.lr_grid ({fmt_rates(c['lr_grid'])})"
            f" by the seed-mean final {c['metric']} of {c.get('tune_seeds', 1)} tuning seed(s) on the validation "
            f"split: {ran}"
        )
    if not lines:
        return []
    tail = f" The {n_tuning} tuning runs are not rows of the table (section Tuning)." if n_tuning else ""
    return ["Peak learning rates of the cells (experiment=compare):" + tail, "", *lines, ""]


def tuning_section(tuning: list[dict], runs: list[dict]) -> list[str]:
    """## Tuning: one row per (task, architecture, rate) of the tuning runs: seeds, the seed-mean final
    validation metric, and whether the comparison's cells ran that rate; [] without tuning runs."""
    if not tuning:
        return []
    chosen = {(r["task"], arch_label(r), float(r["compare"]["lr"])) for r in runs if r.get("compare")}
    groups = defaultdict(list)
    for r in tuning:
        groups[(r["task"], arch_label(r), float(r["compare"]["lr"]))].append(r)
    lines = [
        "## Tuning",
        "",
        "The tuning runs of compare.lr_grid: each architecture trained at every rate, scored by its final "
        "validation metric (no test split read); its cells run the best seed-mean rate (zoo.run.compare_tune).",
        "",
        "| task | arch | rate | seeds | metric | seed mean | cells ran it |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=lambda k: (_task_order(k[0]), k[1], k[2])):
        task, arch, lr = key
        ok = [r for r in groups[key] if r["status"] == "ok"]
        metric = groups[key][0]["compare"].get("metric", "?")
        values = [float(r["final"][metric]) for r in ok if metric in r["final"]]
        mean = f"{sum(values) / len(values):.4f}" if values else "-"
        failed = len(groups[key]) - len(ok)
        seeds = f"{len(ok)}" + (f" ({failed} failed)" if failed else "")
        lines.append(f"| {task} | {arch} | {lr:g} | {seeds} | {metric} | {mean} | {'yes' if key in chosen else ''} |")
    return [*lines, ""]
