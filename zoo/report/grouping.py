"""The grouping of a multirun's runs into table rows by the keys the multirun swept (seeds averaged over), and
the texts of a group's budget and seeds."""

import re
from pathlib import Path

from zoo.report.runs import ARCH_ORDER, TASK_ORDER, arch_label, seed_key
from zoo.scaling.grid import CELL

ABSENT = "(default)"  # the value of a swept key that a run did not override
NOT_GROUPING = ("seed", "arch")  # seeds are averaged over; arch is in every label (arch_config or arch)
# experiment=scaling's keys that choose which cells a sweep runs or how long it may plan, not what a cell trains
SWEEP_ONLY = re.compile(r"scaling\.(sizes\.[^.]+\.seeds|seeds|seed_size|check_sizes|time_budget_s|job_overhead_s)")


def parse_overrides(overrides) -> dict[str, str | None]:
    """Hydra overrides ["+arch=decoder_only", "seed=2", "~key"] as {key without +/~ prefixes: value (None for a
    deletion)}."""
    out: dict[str, str | None] = {}
    for o in overrides or []:
        key, sep, value = str(o).partition("=")
        out[key.lstrip("+~")] = value if sep else None
    return out


def swept_keys(runs: list[dict]) -> list[str]:
    """The override keys whose value differs between the runs that record overrides (a key some of them lack
    counts as differing), in order of first appearance; seed included."""
    parsed = [parse_overrides(r["overrides"]) for r in runs if r.get("overrides") is not None]
    keys = list(dict.fromkeys(k for p in parsed for k in p))
    return [k for k in keys if len({p.get(k, "\0absent") for p in parsed}) > 1]


def budget_of(run: dict) -> tuple[str, float] | None:
    """The run's training budget (kind, value) from results.json's budget; None when it names none."""
    b = run.get("budget")
    if not isinstance(b, dict) or "kind" not in b:
        return None
    try:
        return str(b["kind"]), float(b.get("value"))
    except (TypeError, ValueError):
        return str(b["kind"]), float("nan")


def fmt_budget(budget: tuple[str, float] | None) -> str:
    """A budget as text: "steps 900", "flops 1.2e+15", "time 600 s", "tokens 1e+06"; "?" when unknown; steps -1
    (zoo.run.budget: epochs bound the run) "epochs (no step bound)"."""
    if budget is None:
        return "?"
    kind, value = budget
    if kind == "steps":
        return f"steps {value:.0f}" if not value < 0 else "epochs (no step bound)"
    return f"{kind} {value:.3g}" + (" s" if kind == "time" else "")


def group_runs(runs: list[dict]) -> list[dict]:
    """Runs grouped into table rows: one group per (task, dataset, budget, objective, architecture label and
    the values of the keys swept within the task other than seed and arch), in run order.

    Each group: {"task", "label" (arch label, then "key=value" of the swept keys the runs override), "arch",
    "arch_config",
    "dataset", "budget", "objective", "settings" {swept key: value}, "runs" (all, by seed), "ok", "failed"}.
    Runs that record no overrides (results.json from before they were kept) are grouped by task and
    architecture; if two of such a group share a seed (so nothing tells them apart as seeds), each becomes a
    group of its own, labelled with its run dir's name."""
    groups: dict[tuple, dict] = {}
    homeless = _group_finished(runs, groups)
    _place_failed(groups, homeless)
    out = _split_repeated_seeds(groups)
    for g in out:
        g["ok"] = [r for r in g["runs"] if r["status"] == "ok"]
        g["failed"] = [r for r in g["runs"] if r["status"] != "ok"]
    return sorted(out, key=_group_order)


def _group_finished(runs: list[dict], groups: dict) -> list[tuple]:
    """Add each finished run to its group in `groups` ({(core, detail): group}, _new_group), task by task.
    Returns the failed runs as (core, detail, settings, run), in run order, for _place_failed."""
    homeless = []  # failed runs, placed after the finished ones
    for task in dict.fromkeys(r["task"] for r in runs):
        task_runs = [r for r in runs if r["task"] == task]
        keys = [k for k in swept_keys(task_runs) if k not in NOT_GROUPING and not SWEEP_ONLY.fullmatch(k)]
        for r in task_runs:
            ov = parse_overrides(r.get("overrides"))
            settings = (
                {k: _grouping_value(k, ov.get(k, ABSENT)) for k in keys} if r.get("overrides") is not None else {}
            )
            core = (
                task,
                arch_label(r),
                tuple(sorted((k, str(v)) for k, v in settings.items())),
                r.get("overrides") is None,
            )
            detail = (str(r.get("dataset", "?")), budget_of(r), str(r.get("objective", task)))
            if r["status"] != "ok":
                homeless.append((core, detail, settings, r))
                continue
            _new_group(groups, core, detail, settings, r)["runs"].append(r)
    return homeless


def _grouping_value(key: str, value):
    """A swept key's value as it groups runs: experiment=scaling's cell without its seed (SIZE_seedN -> SIZE,
    SIZE_seedN_cosine -> SIZE_cosine, a tuning cell SIZE_seedN_lrR -> SIZE_lrR), so that a size's seeds are one
    row, averaged like any seeds."""
    cell = CELL.match(value) if key == "scaling.cell" and isinstance(value, str) else None
    if cell is None:
        return value
    return cell["size"] + (cell["check"] or "") + (f"_lr{cell['lr']}" if cell["lr"] else "")


def _place_failed(groups: dict, homeless: list[tuple]) -> None:
    """Add each failed run (core, detail, settings, run) to `groups`."""
    for core, detail, settings, r in homeless:
        # a failed run records what it knew before failing (often no dataset, budget or objective): it joins
        # the one group of its architecture and settings whose known details agree, else one of its own
        fits = [
            g
            for (c, d), g in groups.items()
            if c == core
            and (detail[0] == "?" or detail[0] == d[0])
            and (detail[1] is None or detail[1] == d[1])
            and (r.get("objective") is None or detail[2] == d[2])
        ]
        g = fits[0] if len(fits) == 1 else _new_group(groups, core, detail, settings, r)
        g["runs"].append(r)


def _split_repeated_seeds(groups: dict) -> list[dict]:
    """The groups with their runs sorted by seed; a group without overrides whose seeds repeat becomes one
    group per run, labelled with the run dir's name."""
    out = []
    for (core, _), g in groups.items():
        g["runs"].sort(key=lambda r: (*seed_key(r.get("seed")), r["run_dir"]))
        seeds = [r.get("seed") for r in g["runs"]]
        if core[-1] and len(set(map(str, seeds))) < len(seeds):  # no overrides and a repeated seed: split
            for r in g["runs"]:
                out.append({**g, "label": f"{g['label']} ({Path(r['run_dir']).name})", "runs": [r]})
        else:
            out.append(g)
    return out


def _group_order(g: dict) -> tuple:
    """The sort key of a group: TASK_ORDER, task, ARCH_ORDER, label, dataset, budget."""
    task, arch = g["task"], arch_label(g["runs"][0])
    return (
        TASK_ORDER.index(task) if task in TASK_ORDER else len(TASK_ORDER),
        task,
        ARCH_ORDER.index(arch) if arch in ARCH_ORDER else len(ARCH_ORDER),
        g["label"],
        g["dataset"],
        fmt_budget(g["budget"]),
    )


def _new_group(groups: dict, core: tuple, detail: tuple, settings: dict, run: dict) -> dict:
    """The group of (core, detail), created from `run` when new (see group_runs)."""
    dataset, budget, objective = detail
    return groups.setdefault(
        (core, detail),
        {
            "task": core[0],
            "arch": run["arch"],
            "arch_config": run.get("arch_config"),
            "dataset": dataset,
            "budget": budget,
            "objective": objective,
            "settings": settings,
            "label": " ".join([core[1]] + [f"{k}={v}" for k, v in settings.items() if v != ABSENT]),
            "runs": [],
        },
    )


def seeds_text(group: dict) -> str:
    """ "3", or "2 (1 failed)", or "0 (3 failed)": the seeds behind a row."""
    n_ok, n_failed = len(group["ok"]), len(group["failed"])
    return f"{n_ok}" + (f" ({n_failed} failed)" if n_failed else "")
