"""Checks of a composed config, before any data is read or a model built: each raises ConfigError with the
key at fault and the fix. Also the config normalisation that picks the task from the data (task_for_data)."""

import logging
import math
import re
import sys
from dataclasses import fields
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from zoo.errors import ConfigError, check_z_loss, is_number, is_whole
from zoo.model import ModelConfig
from zoo.model.checkpoint_file import read_checkpoint_file
from zoo.model.decoding.beam_search import check_early_stopping
from zoo.run.model_config import FROM_DATA, RUNTIME, model_dict
from zoo.run.plan import RunPlan
from zoo.run.results import job_overrides
from zoo.run.settings_read import check_settings_read
from zoo.tasks.base import metric_mode
from zoo.tasks.objectives import arch_rules
from zoo.training.optim_config import check_optimizer_and_scheduler

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


def check_monitors(cfg: DictConfig, metrics, task_name: str) -> None:
    """Every metric that picks something (task.monitor: the best checkpoint; optimized_metric: a sweep's
    objective, whose direction a sweeper such as Optuna's also sets; a callback's own `monitor`, e.g.
    callbacks.model_checkpoint.monitor) must be one the task logs
    (`metrics`; empty: unchecked), and its direction must be its mode's: min for a loss, max for an accuracy
    or BLEU (zoo.tasks.base.metric_mode, the rule of results.json's `best`). A contradiction would keep the
    worst checkpoint, or sweep toward the worst run. Raises ConfigError naming the key and the fix."""
    mode = cfg.task.get("monitor_mode", "min")
    if mode not in ("min", "max"):
        raise ConfigError(f"task.monitor_mode={mode!r} is unknown; allowed: min, max")
    picks = [
        ("task.monitor", cfg.task.get("monitor"), "task.monitor_mode", mode),
        ("optimized_metric", cfg.get("optimized_metric"), "task.monitor_mode", mode),
    ]
    for name, cb in (cfg.get("callbacks") or {}).items():
        if isinstance(cb, DictConfig) and cb.get("monitor") is not None:
            picks.append((f"callbacks.{name}.monitor", cb.monitor, f"callbacks.{name}.mode", cb.get("mode", "min")))
    for key, name, _, _ in picks:
        if metrics and name is not None and name not in metrics:
            raise ConfigError(
                f"{key}={name} is not a validation metric of {task_name} with +arch={cfg.arch}; it "
                f"logs {', '.join(metrics)}"
            )
    monitor, optimized = cfg.task.get("monitor"), cfg.get("optimized_metric")
    if monitor is not None and optimized is not None and metric_mode(monitor) != metric_mode(optimized):
        raise ConfigError(
            f"task.monitor={monitor} and optimized_metric={optimized} point in opposite directions "
            f"(one is better lower, one higher), and task.monitor_mode serves both; choose metrics "
            f"that agree (optimized_metric defaults to task.monitor)"
        )

    def better(name: str) -> str:
        return "lower" if metric_mode(name) == "min" else "higher"

    for key, name, mode_key, its_mode in picks:
        if name is not None and metric_mode(name) != its_mode:  # the best checkpoint (or a sweep) would be the worst
            raise ConfigError(
                f"{key}={name} is better {better(name)}, but {mode_key}={its_mode}; add {mode_key}={metric_mode(name)}"
            )
    direction = HydraConfig.get().sweeper.get("direction") if HydraConfig.initialized() else None
    if isinstance(direction, str) and direction in ("minimize", "maximize") and optimized is not None:
        if direction != metric_mode(optimized) + "imize":  # a sweep (Optuna) toward the worst runs
            raise ConfigError(
                f"hydra.sweeper.direction={direction}, but optimized_metric={optimized} is better "
                f"{better(optimized)}; leave the direction to hparams_search (it follows "
                f"task.monitor_mode)"
            )


# the values lightning.pytorch.Trainer(precision=...) accepts (Lightning 2.x), as a command line spells them
PRECISIONS = (
    "32-true",
    "bf16-mixed",
    "16-mixed",
    "bf16-true",
    "16-true",
    "64-true",
    "32",
    "16",
    "bf16",
    "64",
    "transformer-engine",
    "transformer-engine-float16",
)


def check_missing(cfg: DictConfig) -> None:
    """Raise ConfigError naming every key the composed config leaves unset (??? in its YAML, e.g. data.file of
    data=text_corpus), before anything reads one and fails with OmegaConf's MissingMandatoryValue."""

    def walk(node, prefix):  # the unresolved config: interpolations (e.g. into hydra's runtime keys) stay text
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if value == "???":
                yield f"{prefix}{key}"
            else:
                yield from walk(value, f"{prefix}{key}.")

    plain = OmegaConf.to_container(cfg, resolve=False)
    missing = sorted(m for k, v in plain.items() if k != "hydra" for m in walk({k: v}, ""))
    if missing:
        keys = ", ".join(missing)
        raise ConfigError(
            f"{keys} {'is' if len(missing) == 1 else 'are'} not set (??? in the config): give "
            f"{' '.join(f'{k}=...' for k in missing)} on the command line (e.g. data.file=PATH for "
            f"data=text_corpus) or in your config"
        )


def check_run_length(cfg: DictConfig) -> None:
    """trainer.max_epochs is -1 (none), null or a positive whole number; accumulate_grad_batches >= 1;
    val_check_interval > 0; ConfigError otherwise. The schedule's own values: zoo.training.optim_config."""
    epochs = cfg.trainer.get("max_epochs")
    if epochs is not None and (not is_whole(epochs) or epochs == 0 or epochs < -1):
        raise ConfigError(
            f"trainer.max_epochs={epochs!r} must be a positive whole number, or -1 to leave the run to "
            f"trainer.max_steps or a budget"
        )
    accumulate = cfg.trainer.get("accumulate_grad_batches")
    if accumulate is not None and (not is_whole(accumulate) or accumulate < 1):
        raise ConfigError(
            f"trainer.accumulate_grad_batches={accumulate!r} must be a whole number >= 1 (batches per optimizer step)"
        )
    every = cfg.trainer.get("val_check_interval")
    if every is not None and (not is_number(every) or not every > 0):
        raise ConfigError(
            f"trainer.val_check_interval={every!r} must be > 0: a share of an epoch in (0, 1] or a whole number of "
            f"training batches"
        )


def check_decoding(cfg: DictConfig) -> None:
    """The task's decoding settings are in range (ConfigError): task.beam_size a whole number >= 1,
    task.length_penalty a finite number, and the validation sample's temperature >= 0, top_k >= 1 (or null)
    and max_new_tokens >= 0 (zoo.model.generate.sample_next's ranges)."""
    task = cfg.task
    beam = task.get("beam_size")
    if beam is not None and (not is_whole(beam) or beam < 1):
        raise ConfigError(f"task.beam_size={beam!r} must be a whole number >= 1 (1 = greedy decoding only)")
    alpha = task.get("length_penalty")
    if alpha is not None and (not is_number(alpha) or not math.isfinite(alpha)):
        raise ConfigError(f"task.length_penalty={alpha!r} must be a finite number (GNMT's alpha, e.g. 0.6)")
    sample = task.get("sample") or {}
    temperature, top_k, new = sample.get("temperature"), sample.get("top_k"), sample.get("max_new_tokens")
    if temperature is not None and (not is_number(temperature) or not 0 <= temperature < math.inf):
        raise ConfigError(f"task.sample.temperature={temperature!r} must be a number >= 0 (0 = greedy)")
    if top_k is not None and (not is_whole(top_k) or top_k < 1):
        raise ConfigError(f"task.sample.top_k={top_k!r} must be a whole number >= 1, or null (no top-k cut)")
    if new is not None and (not is_whole(new) or new < 0):
        raise ConfigError(f"task.sample.max_new_tokens={new!r} must be a whole number >= 0 (0 = no sample)")


def given_overrides(cfg: DictConfig) -> list:
    """The command line's overrides of the job `cfg`: its own hydra.overrides.task when it carries them (a config
    composed with its Hydra node), else the running Hydra job's (zoo.run.results.job_overrides)."""
    own = OmegaConf.select(cfg, "hydra.overrides.task", default=None)
    return list(own) if own is not None else job_overrides()


def check_config(cfg: DictConfig) -> RunPlan:
    """Raise ConfigError (a ValueError) for a bad model config or contradictions between groups. Returns the
    run's plan (zoo.run.plan.RunPlan.from_config: the objective, chosen once, with the model fields it reads
    checked), before any data is read."""
    check_missing(cfg)
    if cfg.get("data") is None:
        raise ConfigError("no dataset selected: add data=tiny_shakespeare (or another option of conf/data/)")
    from zoo.data.config_keys import data_key_problems

    typos = data_key_problems(cfg.data)  # a key the datamodule does not take, e.g. text_colum in a YAML file
    if typos:
        raise ConfigError("\nzoo: error: ".join(typos))
    max_steps = cfg.trainer.get("max_steps")
    whole = is_whole(max_steps)
    if max_steps is not None and (not whole or max_steps == 0 or max_steps < -1):
        what = "would train nothing" if whole else "is not a whole number"
        raise ConfigError(
            f"trainer.max_steps={max_steps!r} {what}: give a positive number of optimizer steps, or -1 "
            f"with trainer.max_epochs=N or a budget.kind of tokens, flops or time to end the run"
        )
    epochs, budget = cfg.trainer.get("max_epochs"), (cfg.get("budget") or {}).get("kind", "steps")
    ends = epochs not in (None, -1) or budget not in (None, "steps") or cfg.trainer.get("max_time") is not None
    if max_steps == -1 and not ends:
        raise ConfigError(
            "trainer.max_steps=-1 and trainer.max_epochs=-1 (no max_time, no budget) leave the run without an "
            "end, and its learning-rate schedule without a length: give trainer.max_steps=N, "
            "trainer.max_epochs=N, or a budget.kind of tokens, flops or time"
        )
    sched = (cfg.task.get("scheduler") if cfg.get("task") is not None else None) or {}
    only_time = max_steps == -1 and epochs in (None, -1) and budget in (None, "steps")
    cools = sched.get("kind") == "wsd" and sched.get("decay_start") is not None
    if only_time and cools and sched.get("decay_steps") is None:
        raise ConfigError(
            f"trainer.max_time={cfg.trainer.get('max_time')} alone bounds the run, so the wsd cool-down from "
            "task.scheduler.decay_start has no step to end at: give task.scheduler.decay_steps=N or "
            "trainer.max_steps=N"
        )
    if only_time and sched.get("kind", "cosine") == "cosine" and sched.get("decay_steps") is None:
        raise ConfigError(
            f"trainer.max_time={cfg.trainer.get('max_time')} alone bounds the run, so the cosine learning-rate "
            f"schedule has no length to decay over: give budget.kind=time budget.value=SECONDS (the cosine decays "
            f"over the time), task.scheduler.decay_steps=N, task.scheduler.kind=noam, or trainer.max_steps=N"
        )
    check_settings_read(cfg, given_overrides(cfg))  # a schedule or mask setting the run's choices would not read
    clip = cfg.trainer.get("gradient_clip_val")
    if clip is not None and (not is_number(clip) or not clip >= 0):
        raise ConfigError(
            f"trainer.gradient_clip_val={clip!r} must be a number >= 0: the largest gradient norm (0 or null: "
            f"no clipping)"
        )
    precision = cfg.trainer.get("precision")
    if precision is not None and str(precision) not in PRECISIONS:
        raise ConfigError(
            f"trainer.precision={precision!r} is not a precision Lightning runs; pick one of {', '.join(PRECISIONS)} "
            f"(32-true on any machine; bf16-mixed on a recent CPU or GPU)"
        )
    task_cls = get_class(cfg.task._target_)
    plan = check_task_and_data(cfg, task_cls)
    check_special_ids(cfg, task_cls)
    if "early_stopping" in cfg.task:
        try:
            check_early_stopping(cfg.task.early_stopping)
        except ValueError as e:
            raise ConfigError(f"task.{e}") from None
    if "z_loss" in cfg.task:
        try:
            check_z_loss(cfg.task.z_loss, "task.z_loss")
        except ValueError as e:
            raise ConfigError(str(e)) from None
    check_lengths(cfg, task_cls)
    check_weight_averaging(cfg)
    check_run_length(cfg)
    check_decoding(cfg)
    return plan


def check_weight_averaging(cfg: DictConfig) -> None:
    """A weight-averaging callback (callbacks=ema) keeps a full copy of the weights, which FSDP's shards
    cannot give it: refuse the two together (ConfigError)."""
    from lightning.pytorch.callbacks import WeightAveraging

    strategy = cfg.trainer.get("strategy")
    target = strategy.get("_target_") if isinstance(strategy, DictConfig) else strategy
    if "fsdp" not in str(target or "").lower():
        return
    for name, cb in (cfg.get("callbacks") or {}).items():
        if isinstance(cb, DictConfig) and cb.get("_target_") and issubclass(get_class(cb._target_), WeightAveraging):
            raise ConfigError(
                f"callbacks.{name} ({cb._target_}) averages full copies of the weights, and trainer=fsdp shards "
                f"them: use trainer=ddp with it, or another callbacks option (callbacks=default)"
            )


def check_task_and_data(cfg: DictConfig, task_cls) -> RunPlan:
    """The task trains the arch and reads the data's batches; its objective (RunPlan.from_config, the run's
    plan, returned), monitors, optimizer and scheduler keys are valid; one vocabulary where the model or the
    task needs one."""
    if cfg.arch not in task_cls.ARCHS:
        raise ConfigError(
            f"{task_cls.__name__} does not train +arch={cfg.arch} yet; it trains {', '.join(task_cls.ARCHS)}"
        )
    check_batches(cfg, task_cls)
    rules = arch_rules(task_cls.BATCH, cfg.arch)
    plan = RunPlan.from_config(cfg)  # the objective that will train the arch, chosen once, before the data
    check_monitors(cfg, rules["metrics"], task_cls.__name__)
    try:
        check_optimizer_and_scheduler(*(plain(cfg.task.get(k)) for k in ("optimizer", "scheduler")))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    check_vocabularies(cfg, rules)
    return plan


def check_batches(cfg: DictConfig, task_cls) -> None:
    """The datamodule gives the batches the task reads (their BATCH kinds agree); else ConfigError naming the
    conf/data options that fit."""
    data_batch = getattr(get_class(cfg.data._target_), "BATCH", None) if cfg.data.get("_target_") else None
    if data_batch is not None and task_cls.BATCH is not None and data_batch != task_cls.BATCH:
        fits = []
        for p in sorted((Path(CONF_DIR) / "data").glob("*.yaml")):
            target = OmegaConf.load(p).get("_target_")
            if target and getattr(get_class(target), "BATCH", None) == task_cls.BATCH:
                fits.append(p.stem)
        raise ConfigError(
            f"{task_cls.__name__} reads {task_cls.BATCH} batches, but data._target_="
            f"{cfg.data._target_} gives {data_batch} batches; use data={' or data='.join(fits)} (or a "
            f"datamodule whose batches keep {task_cls.__name__}.BATCH_CONTRACT)"
        )


def plain(node) -> dict:
    """A config node as a plain resolved dict ({} for None)."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})


def check_vocabularies(cfg: DictConfig, rules: dict) -> None:
    """One vocabulary for source and target where shared embeddings or the objective (rules: arch_rules)
    need it (ConfigError naming data.joint_vocab)."""
    if cfg.model.get("share_embeddings") and cfg.data.get("joint_vocab") is False:
        if cfg.get("compare") is not None:  # experiment=compare: two embeddings would unmatch the parameter counts
            raise ConfigError(
                "experiment=compare matches the architectures' parameter counts with one embedding for source and "
                "target (model.share_embeddings=true), which needs one vocabulary: set data.joint_vocab=true"
            )
        raise ConfigError(
            "model.share_embeddings=true needs one vocabulary for source and target: set "
            "data.joint_vocab=true (or model.share_embeddings=false)"
        )
    if (
        rules["one_vocabulary"]
        and cfg.data.get("joint_vocab") is False
        and str(cfg.data.get("tokenizer") or "bpe") in ("bpe", "char")
    ):  # zoo trains one tokenizer a side
        raise ConfigError(
            "encoder_only translation reads source and target as one sequence, so it needs "
            "one vocabulary: set data.joint_vocab=true"
        )


def check_special_ids(cfg: DictConfig, task_cls) -> None:
    """The special ids the data gives the model (zoo's fixed ones, or a pretrained tokenizer.json's, read
    here) agree with the model config's, and the model config is a valid ModelConfig."""
    from zoo.data.bpe import FIXED_IDS

    data_cls = get_class(cfg.data._target_) if cfg.data.get("_target_") else None
    ids = (
        data_cls.config_ids(cfg.data)
        if hasattr(data_cls, "config_ids")
        else {"model": getattr(data_cls, "special_ids", {}), "roles": None, "pretrained": None}
    )
    set_here = (
        {o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}
        if HydraConfig.initialized()
        else set()
    )
    default = {f.name: f.default for f in fields(ModelConfig)}
    model = model_dict(cfg)
    if ids["pretrained"]:  # its ids replace the config's (a contradicting override is refused below)
        model.update(ids["model"])
    try:
        ModelConfig(**{**model, "vocab_size": model.get("vocab_size") or 1})  # vocab_size comes from the data
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    for key, data_id in ids["model"].items():
        value = cfg.model.get(key, data_id)
        # zoo's tokenizers: any other value; a pretrained one: a value set on purpose (not the model default)
        if value != data_id and (not ids["pretrained"] or value != default[key] or f"model.{key}" in set_here):
            whose = (
                f"the tokenizer {ids['pretrained']}"
                if ids["pretrained"]
                else f"data={cfg.data._target_.rsplit('.', 1)[-1]}'s tokenizer"
            )
            raise ConfigError(
                f"model.{key}={value}, but {whose} puts that token at {data_id}; set "
                f"model.{key}={data_id} (or drop the override)"
            )
    if ids["pretrained"] and arch_rules(task_cls.BATCH, cfg.arch)["fixed_ids"]:
        # the non-autoregressive task writes zoo.data.bpe's constants (CLS_ID, MASK_ID, ...) into its inputs
        wrong = {
            r: ids["roles"].get(r) for r in ("pad", "bos", "eos", "mask", "cls") if ids["roles"].get(r) != FIXED_IDS[r]
        }
        if wrong:
            raise ConfigError(
                f"+arch=encoder_only translation (non-autoregressive) needs zoo's fixed special ids "
                f"({', '.join(f'{r}={FIXED_IDS[r]}' for r in wrong)}), but the tokenizer "
                f"{ids['pretrained']} has {', '.join(f'{r}={i}' for r, i in wrong.items())}; use "
                f"data.tokenizer=bpe (or a tokenizer.json zoo trained), or +arch=encoder_decoder or "
                f"decoder_only"
            )


def check_lengths(cfg: DictConfig, task_cls) -> None:
    """The data's sizes are positive integers, and its sequences fit in model.max_len."""
    for key in ("block_size", "batch_size", "max_len", "max_tokens", "vocab_size", "batches_per_epoch", "val_windows"):
        n = cfg.data.get(key)
        if n is not None and (not is_whole(n) or n < 1):
            raise ConfigError(f"data.{key}={n!r} must be a positive integer")
    for key in ("block_size", "max_len"):
        n = cfg.data.get(key)
        if n is None:
            continue
        if arch_rules(task_cls.BATCH, cfg.arch)["joins"]:
            n, key = 2 * n, f"2 x data.{key} (source + target in one sequence)"
        else:
            key = source_key(cfg.data, key, "data")
        if n > cfg.model.max_len:
            raise ConfigError(
                f"{key}={n} is larger than model.max_len={cfg.model.max_len}; lower it or raise model.max_len"
            )


def source_key(node: DictConfig, key: str, path: str) -> str:
    """The key a message names for node[key] (at `path`): scaling.block_size when its value is the plain
    interpolation ${scaling.block_size} (experiment=scaling's data.block_size), the key the user sets; else
    path.key."""
    raw = OmegaConf.to_container(node, resolve=False).get(key)
    m = re.fullmatch(r"\$\{([A-Za-z_][\w.]*)\}", raw) if isinstance(raw, str) else None
    return m.group(1) if m else f"{path}.{key}"


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


def check_checkpoint(cfg: DictConfig) -> None:
    """ckpt_path must exist and come from the same architecture and model shape (ConfigError otherwise)."""
    path = cfg.get("ckpt_path")
    if path is None:
        return
    if Path(path).is_dir():
        last = Path(path) / "checkpoints" / "last.ckpt"
        hint = f"ckpt_path={last}" if last.is_file() else "a .ckpt file from its checkpoints/ dir"
        raise ConfigError(
            f"ckpt_path={path} is a folder; a resumed run continues from one checkpoint file: pass {hint}"
        )
    if not Path(path).is_file():
        raise ConfigError(f"ckpt_path={path} does not exist; pass a .ckpt file from a run's checkpoints/ dir")
    ckpt = read_checkpoint_file(path, "pass a .ckpt file from a run's checkpoints/ dir", ConfigError)
    hp = ckpt.get("hyper_parameters", {})
    task_name = get_class(cfg.task._target_).__name__
    if ckpt.get("zoo_task", task_name) != task_name:
        raise ConfigError(
            f"ckpt_path={path} was trained by task {ckpt['zoo_task']}, but this run's task is "
            f"{task_name}; resume with the task (and data) it was trained on"
        )
    if hp.get("arch") != cfg.arch:
        raise ConfigError(
            f"ckpt_path={path} was trained with +arch={hp.get('arch')}, but this run is "
            f"+arch={cfg.arch}; resume with +arch={hp.get('arch')} or start without ckpt_path"
        )
    model = {k: v for k, v in model_dict(cfg).items() if k not in FROM_DATA + RUNTIME}
    if cfg.model.get("init_from"):  # the shape is the init checkpoint's (zoo.interop.init_from), checked when built
        model = {}
    diff = {k: (hp["model"].get(k), v) for k, v in model.items() if hp["model"].get(k) != v}
    if diff:
        raise ConfigError(f"ckpt_path={path} was trained with other model settings (checkpoint, now): {diff}")
    max_steps = cfg.trainer.get("max_steps", -1)
    if max_steps is not None and 0 < max_steps <= ckpt.get("global_step", 0):
        raise ConfigError(
            f"ckpt_path={path} has already trained {ckpt['global_step']} steps; resuming needs "
            f"trainer.max_steps above that (now {max_steps})"
        )
