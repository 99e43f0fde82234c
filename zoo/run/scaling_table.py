"""A scaling study's tuning stage taken from an earlier study's table (scaling.tuning_table: its lr_sweep.csv and
the lr_sweep.design.json beside it, zoo.scaling.tune): a tuning cell whose family, size, seed and rate have a row
there takes that row as its point instead of training, once its design is checked against the record."""

import logging

from omegaconf import DictConfig

from zoo.errors import ConfigError
from zoo.run.scaling_identity import ABSENT, design, differences, family_label
from zoo.scaling.grid import cell_is_check, cell_is_tune, cell_lr, cell_size
from zoo.scaling.sizes import Branch, step_tokens
from zoo.scaling.tune import read_sweep_table, table_design, table_row, tuning_design

log = logging.getLogger("zoo")

TABLE_TOKENS_TOLERANCE = 0.05  # a row's tokens within this of the design's (translation batches vary by seed)


def table_point(cfg: DictConfig, br: Branch) -> dict | None:
    """A tuning cell's point from scaling.tuning_table (an earlier study's lr_sweep.csv), taken instead of trained:
    the row of this family, size, seed and rate, or None (no table, not a tuning cell, or no such row). ConfigError
    when the design recorded beside the table is not this cell's (check_table_design), or the row's tokens are not
    the tokens this design's tuning budget `br` trains (within TABLE_TOKENS_TOLERANCE). Its lr is the cell's own
    rate (the table keeps 6 digits, which the grid's rates must match exactly in zoo.scaling.tune.tuned_rate)."""
    s = cfg.scaling
    if not s.get("tuning_table") or not cell_is_tune(s.cell) or cell_is_check(s.cell):
        return None
    name = cell_size(s.cell, s.sizes)
    label = family_label(cfg)
    row = table_row(read_sweep_table(s.tuning_table), label, name, int(cfg.seed), cell_lr(s.cell))
    if row is None:
        log.info("scaling cell %s %s: no row in scaling.tuning_table; trained here", label, s.cell)
        return None
    check_table_design(s.tuning_table, tuning_design(design(cfg, label)), label, name)
    expected = br.end * step_tokens(s.sizes[name], s.block_size)
    if abs(row["tokens"] - expected) > TABLE_TOKENS_TOLERANCE * expected:
        raise ConfigError(
            f"scaling.tuning_table={s.tuning_table!r}: {row['arch']} {name} seed {row['seed']} at rate {row['lr']:g} "
            f"trained {row['tokens']:,} tokens, but this design's tuning budget at {name} trains {expected:,}: the "
            "table comes from another design; set scaling.tuning_table=null to tune here"
        )
    return {**row, "lr": cell_lr(s.cell)}  # the grid's rate, not the table's 6 digits


def check_table_design(table, want: dict, label: str, size: str) -> None:
    """ConfigError naming the settings in which the tuning design recorded beside `table` (zoo.scaling.tune
    .table_design) differs from this cell's (`want`: tuning_design of its cell.json)."""
    have = table_design(table, label, size)
    changed, added = differences(have, want)
    if changed or added:
        shown = ", ".join(
            f"{k}={have['config'].get(k, ABSENT)!r} there, {want['config'].get(k, ABSENT)!r} here"
            for k in [*changed, *added][:3]
        )
        raise ConfigError(
            f"scaling.tuning_table={str(table)!r} was tuned under another design for {label} at {size}: {shown}; "
            "set scaling.tuning_table=null to tune here"
        )


def imported_row(table: dict, n_params: int, br: Branch, kind: str, cooldown: float) -> dict:
    """A points.csv row of a tuning run taken from scaling.tuning_table: its tokens, loss and rate; its FLOPs and
    seconds, which lr_sweep.csv does not keep, are NaN."""
    nan = float("nan")
    row = {"arch": table["arch"], "size": table["size"], "seed": table["seed"], "n_params": n_params}
    row.update(tokens=table["tokens"], flops=nan, loss=table["loss"], lr=table["lr"])
    row.update(tokens_per_param=br.tokens_per_param, steps=br.end, kind=kind, cooldown=cooldown, seconds=nan)
    return row
