"""A scaling cell's identity (cell.json): every setting of the composed job config that can change one of its
points, so that a rerun into the same folder with any of them changed is refused instead of mixing points of two
designs. It is the whole config, resolved, minus NOT_IDENTITY: the short list of keys that only choose cells or
budgets, time the plan, or say where and how much is logged. A key zoo adds later is in the identity by
default."""

import json
import logging
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from zoo.errors import ConfigError, listed
from zoo.run.results import write_json
from zoo.scaling.grid import cell_seed, cell_size

log = logging.getLogger("zoo")

# keys (and whole sub-trees) that cannot change a point's value; every other key of the job config is identity
NOT_IDENTITY = (
    "scaling.sizes",  # every size: the cell's own is in model.*, data.batch_size and task.optimizer.lr
    "scaling.budgets",  # which budgets: the trunk's constant rate does not depend on them (a later one may add)
    "scaling.check_sizes",
    "scaling.seed_size",
    "scaling.seeds",
    "scaling.seed_start",  # which seeds: a cell's own is `seed`
    "scaling.trunk_tokens_per_param",  # a check of the design only
    "scaling.cooldown",  # each point records its own (points.csv's cooldown column): a new one is a new point
    "scaling.checkpoint_every",  # where the trunk is saved; a resume is exact (tests/test_scaling_study.py)
    "scaling.time_budget_s",  # the plan's
    "scaling.job_overhead_s",
    "scaling.dry_run",
    "scaling.tune_seeds",  # which tuning cells: a tuned cell's rate is task.optimizer.lr
    "scaling.tune_seed_start",
    "scaling.stage",
    "scaling.tuning_table",  # where a tuning cell's point may come from: its rate is in task.optimizer.lr
    "scaling.check_seeds",
    "trainer.max_steps",  # the largest budget: each segment sets its own
    "trainer.default_root_dir",
    "trainer.log_every_n_steps",
    "trainer.enable_model_summary",
    "trainer.enable_progress_bar",
    "trainer.enable_checkpointing",  # the cell's Trainers set their own checkpoints, validation and sanity steps
    "trainer.num_sanity_val_steps",
    "trainer.limit_val_batches",
    "trainer.check_val_every_n_epoch",
    "trainer.val_check_interval",
    "trainer.limit_test_batches",
    "logger",  # the cell's Trainers log nothing and have their own callbacks
    "callbacks",
    "paths",
    "data.data_dir",  # where the data is read from; data.file names what is read
    "data.mirror",
    "data.token_dir",
    "data.tokenizer_dir",  # where a trained tokenizer is saved (named by a digest of its training text)
    "data.num_workers",
    "scaling.bleu_sentences",  # what a translation cell decodes after its largest budget, not a point
    "data.pin_memory",
    "task.monitor",  # which checkpoint is kept: a cell keeps none
    "task.monitor_mode",
    "experiment_name",
    "tags",
    "threads",  # CPU threads: the same arithmetic (summation order may change the last bits)
    "hydra",
)
LEGACY_KEYS = ("size", "batch_size", "lr", "seed", "block_size", "val_windows", "warmup_tokens_per_param", "data")


def _ignored(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in NOT_IDENTITY)


def _leaves(node, prefix: str = "") -> list[str]:
    """The dotted keys of every leaf of a container (a list is one leaf)."""
    if isinstance(node, dict) and node:
        return [k for key, value in node.items() for k in _leaves(value, f"{prefix}{key}.")]
    return [prefix[:-1]]


def identity(cfg: DictConfig) -> dict:
    """{dotted key: resolved value} of every key of the job config `cfg` but NOT_IDENTITY's (a list or an empty
    mapping is one value), sorted. Raises an OmegaConf error where a kept key does not resolve."""
    out = {}
    for key in _leaves(OmegaConf.to_container(cfg, resolve=False)):
        if _ignored(key):
            continue
        value = OmegaConf.select(cfg, key, throw_on_missing=False)
        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=True)
        out[key] = value
    return dict(sorted(out.items()))


def family_label(cfg: DictConfig) -> str:
    """The family a job's points are labelled with: prefix_lm for decoder_only with model.mask=prefix, else arch."""
    return "prefix_lm" if cfg.model.get("mask") == "prefix" else str(cfg.arch)


def design(cfg: DictConfig, arch_label: str) -> dict:
    """cell.json of a job: its architecture label (prefix_lm for decoder_only with a prefix mask) and identity."""
    return {"arch": arch_label, "config": identity(cfg)}


def legacy_design(cfg: DictConfig, arch_label: str) -> dict:
    """The cell.json an earlier zoo wrote (no "config"): shape, batch, rate, seed, block, validation, warm-up, data."""
    s = cfg.scaling
    size = OmegaConf.to_container(s.sizes[cell_size(s.cell, s.sizes)], resolve=True)
    return {
        "arch": arch_label,
        "size": {k: size[k] for k in ("d_model", "n_heads", "n_layers")},
        "batch_size": int(size["batch_size"]),
        "lr": float(cfg.task.optimizer.lr),
        "seed": cell_seed(s.cell),
        "block_size": int(s.block_size),
        "val_windows": None if s.get("val_windows") is None else int(s.val_windows),  # translation: none
        "warmup_tokens_per_param": float(s.get("warmup_tokens_per_param", 1.0)),
        "data": str(cfg.data.get("file")),
    }


ABSENT = "absent"


def differences(have: dict, want: dict) -> tuple[list[str], list[str]]:
    """(the keys whose values differ or that `want` no longer has, the keys `want` adds) of two cell.json's."""
    if have.get("arch") != want["arch"]:
        return ["arch"], []
    old, new = have["config"], want["config"]
    return [k for k in old if new.get(k, ABSENT) != old[k]], [k for k in new if k not in old]


def check_same_design(cell_dir: Path, want: dict, legacy: dict | None = None, write: bool = True) -> None:
    """Compare the cell folder's cell.json with `want` (design): raise ConfigError naming the first keys that
    differ. No cell.json: write `want` (write=False: nothing). A cell.json of an earlier zoo (without "config") is
    compared on its own keys (`legacy`: legacy_design of this job); a key added to zoo's config since the cell was
    written is taken to be this command's value, with a warning. Either is rewritten as `want` when write."""
    path = cell_dir / "cell.json"
    if not path.is_file():
        if write:
            write_json(path, want)
        return
    try:
        have = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{path} is not JSON ({e}): the file was cut off or edited; move the cell's folder aside to train the "
            "cell anew, or give another hydra.sweep.dir"
        ) from None
    if not isinstance(have, dict):
        raise ConfigError(f"{path} holds {type(have).__name__}, not a cell's design: move the cell's folder aside")
    if "config" not in have:
        diff = [k for k in ("arch", *LEGACY_KEYS) if legacy is not None and have.get(k) != legacy[k]]
        shown = [(k, have.get(k), legacy[k]) for k in diff] if legacy else []
        added = list(want["config"])
    else:
        diff, added = differences(have, want)
        shown = [(k, have["config"].get(k, ABSENT), want["config"].get(k, ABSENT)) for k in diff if k != "arch"]
        shown += [(k, have[k], want[k]) for k in diff if k == "arch"]
    if diff:
        text = listed([f"{k}: {a!r} there, {b!r} now" for k, a, b in shown], 3, sep="; ")
        raise ConfigError(
            f"{cell_dir} holds a scaling cell of another design ({text}), so its points and checkpoints "
            "cannot be continued; give this study its own folder with hydra.sweep.dir=outputs/scaling/NAME (or put "
            "the settings back)"
        )
    if added and write:
        log.warning(
            "%s: cell.json did not record %d setting(s) (%s%s): taken to be this command's",
            cell_dir,
            len(added),
            ", ".join(added[:5]),
            ", ..." if len(added) > 5 else "",
        )
        write_json(path, want)
