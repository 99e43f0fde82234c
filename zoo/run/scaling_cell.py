"""One cell of experiment=scaling (an architecture at a size and seed): a constant-rate trunk and, at each budget,
a cool-down branch from the trunk's checkpoint (Hägele et al. 2024), each branch scored on the validation
windows; or, for a SIZE_seedN_cosine cell, each budget trained alone with a cosine schedule (the check of the
cool-down points). Every segment is a Lightning fit that resumes a checkpoint (exactly: zoo's RNG state and
data stream travel with it).

Rerunning the command continues the cell: the points already in its points.csv are kept and skipped, and the
trunk resumes from its last checkpoint (trunk/step{K}.ckpt, written atomically at every branch start and at most
scaling.checkpoint_every steps apart), so an interrupted study gives the points of an uninterrupted one. A cell
folder that holds a cell of another design is refused (cell.json: zoo.run.scaling_identity)."""

import logging
import time
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.model.cost import non_embedding_param_count
from zoo.run import scaling_translation as translation
from zoo.run.cell_lock import release_lock, take_lock
from zoo.run.cell_points import point_kind, read_points, same_point, write_points
from zoo.run.cell_segments import Cell
from zoo.run.cell_wandb import CellRun, segment_name
from zoo.run.conf import TASK_OF_BATCH
from zoo.run.job import build_data, checked_config
from zoo.run.loggers import data_tag
from zoo.run.results import arch_config, job_overrides, write_json
from zoo.run.scaling_data import is_translation, set_step_tokens, train_tokens
from zoo.run.scaling_identity import check_same_design, design, family_label, legacy_design
from zoo.run.scaling_table import imported_row, table_point
from zoo.scaling.carry import finished
from zoo.scaling.design import check_design, check_lr_grid
from zoo.scaling.grid import cell_branches, cell_is_check, cell_is_tune, cell_size, rate_name, tune_seed_range
from zoo.scaling.sizes import Branch
from zoo.scaling.tune import (
    COSINE_TUNE_KIND,
    TUNE_KIND,
    tune_rows,
    tuned_rate,
)

log = logging.getLogger("zoo")

CHECK_MIN_LR = 0.0  # the cosine check decays to this share of the peak rate: 0, where a cool-down ends too


def set_tuned_rate(cfg: DictConfig, sweep_dir: Path | None = None) -> None:
    """For a cell of a size with lr: tuned (not a tuning cell), set task.optimizer.lr to its family's tuned rate for
    its schedule (a cosine check cell: the cosine tuning runs'), read from the points of the tuning cells of seeds
    tune_seed_start .. + tune_seeds - 1 in `sweep_dir` (default: the folder of its run directory), at the tuning
    budget of today's budgets and cool-down (a row left by an earlier budget is not read). ConfigError
    (zoo.scaling.tune.tuned_rate) when the tuning stage is not done or its best rate is an edge of the grid."""
    s = cfg.scaling
    seeds = tuned_from(cfg)
    if seeds is None:
        return
    name = cell_size(s.cell, s.sizes)
    grid = check_lr_grid(name, s.sizes[name], s.get("tune_seeds", 0))
    label = family_label(cfg)
    sweep_dir = Path(cfg.paths.output_dir).parent if sweep_dir is None else Path(sweep_dir)
    kind = COSINE_TUNE_KIND if cell_is_check(s.cell) else TUNE_KIND
    tuning = f"{name}_seed{seeds[0]}_{'cosine_' if cell_is_check(s.cell) else ''}lr{rate_name(grid[0])}"
    branch = cell_branches(tuning, s.sizes[name], s)[0]  # the tuning budget under today's budgets and cool-down
    rows = [  # this design's tuning seeds and budget only: a row of an earlier budget is not today's tuning
        r for r in tune_rows(sweep_dir, kind) if r["seed"] in seeds and _at(r, branch, kind, float(s.cooldown))
    ]
    rate = tuned_rate(rows, label, name, grid, int(s.tune_seeds))
    with open_dict(cfg):
        cfg.task.optimizer.lr = rate
    log.info("scaling cell %s %s: tuned peak rate %g", label, s.cell, rate)


def _at(row: dict, branch: Branch, kind: str, cooldown: float) -> bool:
    """Whether a tuning row is `branch`'s point (same_point); a row without steps (written by hand) is not."""
    return row.get("steps") not in (None, "") and same_point(row, branch, kind, cooldown)


def tuned_from(cfg: DictConfig) -> list[int] | None:
    """The seeds of the tuning runs whose best rate a cell runs (scaling.tune_seed_start on), or None for a tuning
    cell or a size with a fixed rate. results.json records them, so the report's tuning table keeps this design's
    tuning runs only (zoo.report.scaling_tune.tune_rows)."""
    s = cfg.scaling
    if s.sizes[cell_size(s.cell, s.sizes)].get("lr") != "tuned" or cell_is_tune(s.cell):
        return None
    return list(tune_seed_range(s.tune_seeds, s.get("tune_seed_start", 1)))


def _budgets_left(cfg: DictConfig, label: str, rows: list[dict], budgets: list[Branch], kind: str):
    """The budgets of the cell without a point in its points.csv (`rows`), and those of them whose point comes from
    scaling.tuning_table ({end step: its row}), logged."""
    s, cooldown = cfg.scaling, float(cfg.scaling.cooldown)
    todo = [br for br in budgets if not any(same_point(r, br, kind, cooldown) for r in rows)]
    imported = {br.end: r for br in todo if (r := table_point(cfg, br)) is not None}  # scaling.tuning_table's
    trained = [br.tokens_per_param for br in todo if br.end not in imported]
    if trained:
        log.info("scaling cell %s %s: budgets %s to train", label, s.cell, trained)
    elif not todo:
        log.info("scaling cell %s %s: every budget is in its points.csv; skipped", label, s.cell)
    return todo, imported


def _train_budget(cell: Cell, br: Branch, kind: str, check: bool):
    """The task trained to budget `br`: alone with the cosine schedule (a check cell), else a cool-down branch from
    the trunk's checkpoint at its start."""
    segment = segment_name(kind, br.tokens_per_param)
    if check:
        lr = float(cell.cfg.task.optimizer.lr)
        sched = {"kind": "cosine", "decay_steps": br.end, "min_lr": CHECK_MIN_LR * lr}
        return cell.fit(br.end, sched, None, segment)[1]
    sched = {"decay_start": br.start, "decay_steps": br.end}
    return cell.fit(br.end, sched, cell.trunk_to(br.start), segment)[1]


def _point_row(cfg: DictConfig, key: dict, task, br: Branch, kind: str, loss: float) -> dict:
    """points.csv's row of a budget trained here; key: its arch (family label), size, seed and n_params."""
    return {
        **key,
        "tokens": int(task.cost.get("target_tokens", task.cost["tokens"])),  # D: translation's target tokens
        "flops": float(task.cost["flops"]),
        "loss": loss,
        "lr": float(cfg.task.optimizer.lr),
        "tokens_per_param": br.tokens_per_param,
        "steps": br.end,
        "kind": kind,
        "cooldown": float(cfg.scaling.cooldown) if not cell_is_check(cfg.scaling.cell) else "",
        "seconds": round(float(task.cost["seconds"]), 3),
    }


def _score_translations(cfg: DictConfig, task, datamodule, out: Path, row: dict) -> None:
    """translations.json at a translation cell's largest budget: what the loss means (BLEU, chrF), the source
    control and the test split (zoo.run.scaling_translation)."""
    n = cfg.scaling.get("bleu_sentences", 200)
    scores = {
        **translation.score_translations(task, datamodule, n),
        **translation.source_control(task, datamodule, n),
        **translation.held_out_scores(task, datamodule, n),
    }
    translation.write_translations(out, row, scores)


def _start_wandb(cfg: DictConfig, cell: Cell, label: str, facts: dict) -> None:
    """The cell's W&B run (zoo.run.cell_wandb.CellRun), with the model's and data's facts."""
    top = {
        "arch": cfg.arch,
        "arch_config": arch_config(cfg),
        "task": facts["task"],
        "dataset": facts["data"]["dataset"],
    }
    top.update({k: facts[k] for k in ("objective", "params", "params_non_embedding", "flops_per_token")})
    top.update(data_info=facts["data"], scaling_size=facts["size"], scaling_kind=facts["kind"])
    tags = [cfg.arch, facts["task"], data_tag(facts["data"]), *cfg.get("tags", [])]
    cell.wandb = CellRun.start(cfg, f"{label}-{cfg.scaling.cell}", tags, top)


def _record(cfg: DictConfig, facts: dict, mine: list[dict], last: Branch, cell: Cell, datamodule, out: Path) -> dict:
    """results.json of the cell: its points (`mine`, by step), its largest budget `last`, the model's facts."""
    data = facts["data"]
    final_key = "val/loss" if is_translation(cfg) else "val/cont_loss"
    return {
        "status": "ok",
        "arch": cfg.arch,
        "arch_config": arch_config(cfg),
        "task": facts["task"],
        "dataset": data["dataset"],
        "data": data,
        "objective": facts["objective"],
        "seed": cfg.seed,
        "overrides": job_overrides(),
        "budget": {"kind": "steps", "value": last.end},
        "final": {final_key: float(mine[-1]["loss"])} if mine else {},
        "best": {},
        "params": facts["params"],
        "params_non_embedding": facts["params_non_embedding"],
        "flops_per_token": facts["flops_per_token"],
        "cost": {
            "train_flops": float(mine[-1]["flops"]) if mine else 0.0,
            "tokens": int(mine[-1]["tokens"]) if mine else 0,
            "train_seconds": cell.train_seconds,  # this command's training steps (a resumed cell: its own)
        },
        "scaling": {
            "cell": str(cfg.scaling.cell),
            "size": facts["size"],
            "kind": facts["kind"],
            "points": mine,
            "train_tokens": train_tokens(datamodule),  # the largest run reads them tokens / train_tokens times
            "tune_seeds": tuned_from(cfg),  # the tuning runs' seeds its rate came from (None: a fixed rate)
        },
        "translation": translation.read_translations(out),  # None: not a translation cell, or not yet scored
        "steps": last.end,
        "output_dir": str(out.resolve()),
        "best_checkpoint": None,
        "examples": None,
    }


def _model_facts(task, info: dict, task_name: str) -> dict:
    """The model's objective, parameters (all; non-embedding: N) and forward FLOPs per token."""
    return {
        "objective": getattr(task, "objective", task_name),
        "params": task.model.num_params(),
        "params_non_embedding": non_embedding_param_count(task.model),
        "flops_per_token": task.forward_flops_per_token(info["seq_len"], info.get("src_len")),
    }


def _run_budgets(cell: Cell, key: dict, rows, todo, imported, budgets, kind: str) -> list[dict]:
    """Train (or take from scaling.tuning_table: `imported`) each budget of `todo`, writing points.csv after each;
    returns its rows. key: the rows' arch (family label), size, seed and n_params."""
    cfg, s, out = cell.cfg, cell.cfg.scaling, cell.out
    label, cooldown = key["arch"], float(s.cooldown)
    for br in todo:
        trained = br.end not in imported
        if trained:
            task = _train_budget(cell, br, kind, cell_is_check(s.cell))
            row = _point_row(cfg, key, task, br, kind, cell.score(task))
            if is_translation(cfg) and kind == "cooldown" and br is budgets[-1]:
                _score_translations(cfg, task, cell.dm, out, row)
        else:
            row = imported_row(imported[br.end], key["n_params"], br, kind, cooldown)
        rows = [r for r in rows if not same_point(r, br, kind, cooldown)] + [row]
        write_points(out / "points.csv", rows)
        if trained and cell.wandb:
            cell.wandb.point(row)
        source = f"{br.tokens_per_param:g} tokens per parameter" if trained else f"from {s.tuning_table}"
        log.info("scaling cell %s %s: loss %.4f, %s", label, s.cell, row["loss"], source)
    return rows


def _cell_points(rows: list[dict], budgets: list[Branch], kind: str, cooldown: float) -> list[dict]:
    """The rows of points.csv that are this cell's budgets, by step."""
    mine = (r for r in rows if any(same_point(r, br, kind, cooldown) for br in budgets))
    return sorted(mine, key=lambda r: int(r["steps"]))


def run_cell(cfg: DictConfig) -> float:
    """Train one experiment=scaling cell (zoo.run.train.main runs this when cfg has a scaling node); returns its
    largest budget's loss. Raises ConfigError for a bad design (zoo.scaling.design.check_design) or a folder of
    another design, before any data is read."""
    start = time.time()
    set_step_tokens(cfg)  # a translation study's steps: the data's target tokens a batch
    set_tuned_rate(cfg)
    cfg, _, _, run_plan = checked_config(cfg)
    s = cfg.scaling
    size_name = cell_size(s.cell, s.sizes)
    check_design(s, [size_name])
    choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
    label = family_label(cfg)
    out = Path(cfg.paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    holder = take_lock(out)
    if holder is not None:
        log.warning("scaling cell %s %s: process %d trains it in this folder; skipped here", label, s.cell, holder)
        return float("nan")
    try:  # released on every path: a cell that fails must not keep the other process away while this one lives
        return _train_cell(cfg, run_plan, label, out, size_name, choices, start)
    finally:
        release_lock(out)


def _train_cell(cfg: DictConfig, run_plan, label: str, out: Path, size_name: str, choices, start: float) -> float:
    """run_cell's work under the cell's lock: the design checked against the folder's, each budget left trained
    (or taken from scaling.tuning_table), results.json written; the largest budget's loss."""
    s = cfg.scaling
    check_same_design(out, design(cfg, label), legacy_design(cfg, label))
    size = OmegaConf.to_container(s.sizes[size_name], resolve=True)
    cooldown, kind = float(s.cooldown), point_kind(s.cell)
    budgets = cell_branches(s.cell, size, s)
    rows = read_points(out / "points.csv")
    todo, imported = _budgets_left(cfg, label, rows, budgets, kind)
    if not todo and finished(out) is not None:  # its results.json records every point: no data read, no rewrite
        mine = _cell_points(rows, budgets, kind, cooldown)
        return float(mine[-1]["loss"]) if mine else float("nan")
    task_name = TASK_OF_BATCH.get(get_class(cfg.task._target_).BATCH, choices.get("task", "lm"))
    datamodule, info, data = build_data(cfg, choices)
    run_plan = run_plan.with_data(cfg, info, None, data["dataset"])
    cell = Cell(cfg, info, run_plan, datamodule, out)
    task = run_plan.build_task(cfg, info)  # the model every segment trains: its N and cost per token
    facts = {"task": task_name, "data": data, "size": size_name, "kind": kind, **_model_facts(task, info, task_name)}
    if len(imported) < len(todo):
        _start_wandb(cfg, cell, label, facts)
    key = {"arch": label, "size": size_name, "seed": int(cfg.seed), "n_params": facts["params_non_embedding"]}
    rows = _run_budgets(cell, key, rows, todo, imported, budgets, kind)
    mine = _cell_points(rows, budgets, kind, cooldown)
    record = {**_record(cfg, facts, mine, budgets[-1], cell, datamodule, out), "wall_seconds": time.time() - start}
    path = write_json(out / "results.json", record)
    if cell.wandb:
        cell.wandb.finish(mine, record["wall_seconds"])
    print(path.resolve())
    return float(mine[-1]["loss"]) if mine else float("nan")
