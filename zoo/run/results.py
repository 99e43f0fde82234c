"""What a run leaves for zoo.report: results.json (one record per run, failed runs included) and
examples.json (per-example outputs for paired significance tests between runs)."""

import json
import traceback
from pathlib import Path

from omegaconf import DictConfig

from zoo.data.atomic import atomic_file

EXAMPLES = "examples.json"


def job_overrides() -> list:
    """The command-line overrides of this Hydra job (e.g. ["+arch=decoder_only", "seed=2"]); [] outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def arch_config(cfg: DictConfig) -> str | None:
    """The +arch choice (a conf/arch/ file name, e.g. prefix_lm); the arch itself outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return HydraConfig.get().runtime.choices.get("arch") or cfg.get("arch")
    return cfg.get("arch")


def write_text(path: Path, text: str) -> Path:
    """Write text (UTF-8) to path atomically (zoo.data.atomic: a temp file in the same folder, then os.replace):
    an interrupted write leaves the previous file; the file gets the mode open() gives."""
    path = Path(path)
    with atomic_file(path, "w") as f:
        f.write(text)
    return path


def write_json(path: Path, record: dict) -> Path:
    """Write record as JSON to path atomically (write_text)."""
    return write_text(path, json.dumps(record, indent=2))


FAILED = "failed.json"


def write_failure(output_dir: str, record: dict) -> Path:
    """Write a failed run's record (failed_record) to <output_dir>/results.json, or to failed.json beside it when
    results.json already records a finished run (status "ok"): a later command that fails in the same folder (a
    refused or crashed extension of a scaling cell) never replaces the points a finished run recorded."""
    path = Path(output_dir) / "results.json"
    try:
        finished = json.loads(path.read_text(encoding="utf-8")).get("status", "ok") == "ok"
    except (OSError, ValueError, AttributeError):
        finished = False
    return write_json(path.with_name(FAILED) if finished else path, record)


def write_examples(output_dir: str, task) -> str | None:
    """Write the task's `examples` (per-example outputs of its test, or of its best validation for lm) to
    <output_dir>/examples.json; returns the file name (relative to output_dir), None when it has none."""
    examples = getattr(task, "examples", None)
    if not examples:
        return None
    write_json(Path(output_dir) / EXAMPLES, examples)
    return EXAMPLES


def save_tokenizers(output_dir: str, state: dict) -> list:
    """Write the run's tokenizer(s) into its run dir: tokenizer.json (a subword or pretrained tokenizer, the
    Hugging Face tokenizers format), tokenizer.chars.json (zoo's character table), or tokenizer.src.json and
    tokenizer.tgt.json for a translation state {"src", "tgt"} (one tokenizer.json when both are the same).
    Returns the paths written."""
    out = Path(output_dir)
    if "src" in state and "tgt" in state:
        if state["src"] == state["tgt"]:
            return save_tokenizers(output_dir, state["src"])
        return [p for side in ("src", "tgt") for p in _save_one(out, state[side], f"tokenizer.{side}")]
    return _save_one(out, state, "tokenizer")


def _save_one(out: Path, state: dict, stem: str) -> list:
    if "json" in state:
        path = out / f"{stem}.json"
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(state["json"])
        return [path]
    return [write_json(out / f"{stem}.chars.json", state)]


def keep_csv_history(logger, ckpt_path: str) -> int:
    """A run resumed into the run dir that wrote ckpt_path keeps its CSV log: Lightning's CSV writer deletes an
    existing metrics.csv when it starts, so the rows the checkpoint had seen (step < its global_step) are read
    first and handed back to the writer, which saves them ahead of the resumed run's. Rows after the
    checkpoint (logged by the interrupted run past its last save) are dropped: the resumed run logs those
    steps again. Returns the number of rows kept."""
    import csv

    import torch

    path = Path(logger.log_dir) / "metrics.csv"
    if not path.is_file():
        return 0
    resumed_at = int(torch.load(ckpt_path, map_location="cpu", weights_only=True).get("global_step", 0))
    with open(path, newline="") as f:
        rows = [
            {k: (int(float(v)) if k in ("step", "epoch") else float(v)) for k, v in row.items() if v not in ("", None)}
            for row in csv.DictReader(f)
        ]
    rows = [r for r in rows if "step" in r and r["step"] < resumed_at]
    logger.experiment.metrics = rows + logger.experiment.metrics  # the writer exists now: the old file is gone
    return len(rows)


def failed_record(cfg: DictConfig, error: BaseException, task_name: str | None = None) -> dict:
    """The results.json of a run that raised: status "failed", its error, and what identifies the run (arch,
    task, seed, overrides), so that zoo.report lists it instead of dropping it; steps: the step a diverged run
    stopped at (zoo.errors.TrainingDiverged), else 0."""
    from hydra.core.hydra_config import HydraConfig

    if task_name is None:
        choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
        task_name = choices.get("task") or choices.get("benchmark") or "?"
    lines = traceback.format_exception_only(type(error), error)
    return {
        "status": "failed",
        "error": "".join(lines).strip(),
        "arch": cfg.get("arch"),
        "arch_config": arch_config(cfg),
        "task": task_name,
        "dataset": "?",
        "seed": cfg.get("seed"),
        "overrides": job_overrides(),
        "final": {},
        "best": {},
        "params": 0,
        "flops_per_token": 0.0,
        "steps": getattr(error, "step", 0),
        "wall_seconds": 0.0,
    }
