"""zoo's conf/ directory, the resolvers its YAML files call (${zoo_seeds:...}, ${zoo_benchmarks:...}), and what
a composed config becomes before its checks: +arch and seed present (exit_on_bad_arch_or_seed), the task that
reads the data's batches (task_for_data)."""

import logging
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from zoo.errors import is_whole

_PKG = Path(__file__).resolve().parents[1]  # zoo/
# a wheel installs conf/ as zoo/conf (pyproject.toml); an editable install runs zoo/ from the repo, beside conf/
CONF_DIR = str(_PKG / "conf" if (_PKG / "conf").is_dir() else _PKG.parent / "conf")

NO_ARCH = (
    "zoo needs an architecture. Pick one of the three with +arch=...: "
    "`python -m zoo +arch=encoder_only` (bidirectional encoder, classification), "
    "`python -m zoo +arch=decoder_only` (causal decoder, language modeling on Tiny Shakespeare), or "
    "`python -m zoo +arch=encoder_decoder` (the original Transformer, translation). "
    "Any other option follows as key=value; `python -m zoo --help` lists the config groups."
)

TASK_OF_BATCH = {"lm": "lm", "classification": "classification", "translation": "translation"}  # conf/task/

log = logging.getLogger("zoo")


def seed_list(n) -> str:
    """${zoo_seeds:3} -> "1,2,3": the seeds a sweep runs (conf/experiment/compare.yaml's compare.seeds).
    Prints a message and exits with 2 for an n that is not a positive whole number."""
    if not is_whole(n) or n < 1:
        print(
            f"zoo: error: compare.seeds={n!r} must be a positive whole number: the runs of each cell, seeds "
            f"1 .. N (compare.seeds=1 for one run; seed=5,6,7 picks the seeds themselves)",
            file=sys.stderr,
        )
        sys.exit(2)
    return ",".join(str(i) for i in range(1, n + 1))


OmegaConf.register_new_resolver("zoo_seeds", seed_list, replace=True)


def compare_benchmarks(builtin, data_target, overrides) -> str:
    """${zoo_benchmarks:...} -> the +benchmark values experiment=compare sweeps: `builtin` (compare.benchmarks,
    [classification, lm, translation]) joined by commas; or, when the command line chooses data=<config>
    (`overrides`, Hydra's task overrides), the one benchmark of that data's task (TASK_OF_BATCH of its
    datamodule's BATCH): its budgets, validation interval and recipe on the user's data, which the command
    line's data= keeps. Prints a message and exits with 2 for data whose datamodule gives no task's batches."""
    chosen = [o for o in overrides or () if o.split("=", 1)[0].lstrip("+~") == "data"]
    if not chosen:
        return builtin if isinstance(builtin, str) else ",".join(map(str, builtin))
    kind = getattr(get_class(data_target), "BATCH", None) if data_target else None
    if kind not in TASK_OF_BATCH:
        print(
            f"zoo: error: experiment=compare with {chosen[-1]}: its datamodule ({data_target or 'none'}) gives "
            f"{kind or 'no'} batches, not those of a task ({', '.join(TASK_OF_BATCH)}); choose a data config "
            f"whose defaults are text_classification, text_corpus or parallel_text",
            file=sys.stderr,
        )
        sys.exit(2)
    return TASK_OF_BATCH[kind]


OmegaConf.register_new_resolver("zoo_benchmarks", compare_benchmarks, replace=True)


def exit_on_bad_arch_or_seed(cfg: DictConfig) -> None:
    """No +arch, or a seed that is not a non-negative integer: print the message and exit with 2."""
    if cfg.get("arch") is None:
        print(NO_ARCH, file=sys.stderr)
        sys.exit(2)
    seed = cfg.get("seed")
    if not is_whole(seed) or not 0 <= seed < 2**32:  # numpy's seed range
        print(
            f"zoo: error: seed={seed!r} must be a non-negative integer below 2**32 (e.g. seed=1; a sweep: "
            f"seed=1,2,3 or compare.seeds=3)",
            file=sys.stderr,
        )
        sys.exit(2)


def task_for_data(cfg: DictConfig) -> DictConfig:
    """The config, with the task that reads the data's kind of batch when the command line chose data= but no
    task= (so `+arch=decoder_only data=my_topics` classifies; the arch's natural task reads other batches):
    composed again with task=<that task> added to the same overrides. Any other config is returned as it is,
    and so is one composed outside a Hydra app (nothing to compose with)."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra

    if not (HydraConfig.initialized() and GlobalHydra.instance().is_initialized()) or not cfg.get("data"):
        return cfg
    overrides = list(HydraConfig.get().overrides.task)
    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
    if "task" in keys or "data" not in keys or "+benchmark" in overrides:
        return cfg
    data_kind = getattr(get_class(cfg.data._target_), "BATCH", None)
    task_kind = getattr(get_class(cfg.task._target_), "BATCH", None)
    if data_kind is None or task_kind is None or data_kind == task_kind or data_kind not in TASK_OF_BATCH:
        return cfg
    log.info(
        "task=%s follows data=%s (it gives %s batches); add task=... to choose another",
        TASK_OF_BATCH[data_kind],
        HydraConfig.get().runtime.choices.get("data"),
        data_kind,
    )
    searchpath = [o for o in HydraConfig.get().overrides.hydra if o.startswith("hydra.searchpath")]
    return compose(
        HydraConfig.get().job.config_name, overrides=searchpath + overrides + [f"task={TASK_OF_BATCH[data_kind]}"]
    )
