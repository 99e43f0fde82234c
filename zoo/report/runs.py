"""Reading a multirun for zoo.report: every run's results.json, CSV log and examples.json (their grouping into
table rows: zoo.report.grouping).

results.json (zoo.run.train.run, zoo.run.results) keys read here: arch, task, dataset, objective, final, best, params,
flops_per_token, wall_seconds, and where present status ("ok" | "failed", with error), seed, overrides (the
job's Hydra command-line overrides), arch_config (the +arch choice: prefix_lm is decoder_only with
model.mask=prefix), budget ({"kind", "value"}), cost ({"train_flops", "tokens", "train_seconds",
"inference_flops_per_token", "ms_per_example"}) and examples (examples.json, relative to the run dir). Older
files without them are read as one seed with status "ok".
"""

import csv
import json
import re
from pathlib import Path

TASK_ORDER = ("classification", "lm", "translation")
ARCH_ORDER = ("encoder_only", "decoder_only", "prefix_lm", "encoder_decoder")
REQUIRED = ("arch", "task", "final", "best", "params", "flops_per_token", "wall_seconds")  # of a finished run
REQUIRED_FAILED = ("arch", "task")  # of a failed one (final / best may be empty)


class ReportError(ValueError):
    """Bad input to the report (missing or unreadable run files); main() prints it and exits with 2."""


def arch_label(run: dict) -> str:
    """How a run's architecture is named in rows: its +arch choice (arch_config, e.g. prefix_lm), else arch."""
    return str(run.get("arch_config") or run["arch"])


def first_line(text) -> str:
    """The first non-empty line of an error message ("" for none)."""
    return next((line.strip() for line in str(text or "").splitlines() if line.strip()), "")


def find_runs(root: Path) -> list[dict]:
    """The results.json of every run below root, ordered by task (TASK_ORDER), architecture (ARCH_ORDER of
    arch_label), seed, then path. Each dict gains "run_dir" (its folder) and, when absent, status "ok"; a
    failed run gains empty final / best and an error. Raises ReportError when there is none, or for an
    unreadable file or one that lacks REQUIRED keys (REQUIRED_FAILED for a failed run)."""
    root = Path(root)
    if not root.is_dir():
        raise ReportError(
            f"{root} is not a directory; pass the multirun dir of `python -m zoo -m experiment=compare` "
            f"(outputs/compare/<date>_<time>)"
        )
    runs = []
    for path in sorted(root.rglob("results.json")):
        try:
            res = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ReportError(f"cannot read {path}: {e}") from None
        if not isinstance(res, dict):
            raise ReportError(f"{path} is not a JSON object: not a results.json written by `python -m zoo`")
        status = res.setdefault("status", "ok")
        if status not in ("ok", "failed"):
            raise ReportError(f"{path}: status {status!r} is neither 'ok' nor 'failed'")
        missing = [k for k in (REQUIRED if status == "ok" else REQUIRED_FAILED) if k not in res]
        if missing:
            raise ReportError(f"{path} lacks {missing}: not a results.json written by `python -m zoo`")
        if status == "failed":
            res["final"] = res.get("final") or {}
            res["best"] = res.get("best") or {}
            res["error"] = str(res.get("error") or "failed (no error recorded)")
        res["run_dir"] = str(path.parent)
        runs.append(res)
    if not runs:
        raise ReportError(
            f"no results.json found below {root}; is it a multirun dir whose runs finished? "
            f"(each run writes <run dir>/results.json at its end)"
        )

    def order(r):
        t, a = r["task"], arch_label(r)
        return (
            TASK_ORDER.index(t) if t in TASK_ORDER else len(TASK_ORDER),
            t,
            ARCH_ORDER.index(a) if a in ARCH_ORDER else len(ARCH_ORDER),
            a,
            *seed_key(r.get("seed")),
            r["run_dir"],
        )

    return sorted(runs, key=order)


def read_curves(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every metric of a run's CSV log(s) as {name: [(step, value), ...]} in step order (empty cells skipped);
    step counts the optimizer steps done (the CSV's 0-based step + 1, so a validation after 100 steps is at 100),
    cost/flops, cost/tokens, cost/seconds (cumulative training cost at each validation) included. Reads each
    metrics.csv below run_dir (CSVLogger: <run dir>/csv/metrics.csv); {} when there is none."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(run_dir).rglob("metrics.csv")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                step = row.get("step")
                if not step:
                    continue
                for k, v in row.items():
                    if k in ("step", "epoch") or v in ("", None):
                        continue
                    curves.setdefault(k, []).append((int(float(step)) + 1, float(v)))
    return {k: sorted(v) for k, v in curves.items()}


EXAMPLE_FIELDS = {"classification": ("pred", "label"), "translation": ("hyp", "ref"), "lm": ("loss", "tokens")}


def read_examples(run: dict) -> tuple[dict | None, str]:
    """(examples.json of the run, "") or (None, why not): its per-example outputs for paired tests. Fields by
    task (EXAMPLE_FIELDS; translation may add hyp_beam) must be lists as long as "ids"."""
    rel = run.get("examples")
    if not rel:
        return None, "no examples.json"
    path = Path(run["run_dir"]) / rel
    try:
        ex = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return None, f"cannot read {path}: {e}"
    ids = ex.get("ids") if isinstance(ex, dict) else None
    if not isinstance(ids, list):
        return None, f"{path} has no list of ids"
    fields = EXAMPLE_FIELDS.get(run["task"], ())
    bad = [k for k in fields if not isinstance(ex.get(k), list) or len(ex[k]) != len(ids)]
    if bad:
        return None, f"{path}: {bad} missing or not as long as ids ({len(ids)})"
    if len(set(ids)) != len(ids):
        return None, f"{path}: repeated ids"
    return ex, ""


def seed_key(seed) -> tuple:
    """Sort key of a seed: numbers in order, then anything else, then None (a run that records no seed)."""
    if isinstance(seed, (int, float)) and not isinstance(seed, bool):
        return (0, float(seed), "")
    return (1 if seed is not None else 2, 0.0, str(seed))


def slug(text: str) -> str:
    """A file-name piece of a group label: letters, digits, '.', '_' and '-' kept, '=' as '-', others '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.replace("=", "-")).strip("_") or "run"
