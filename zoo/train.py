"""The main job: compose the config with Hydra, build data, model and trainer, train, write results.json."""
import logging
import os
import sys
import time
from pathlib import Path

import hydra
import lightning.pytorch as pl
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from hydra.utils import get_class, instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.callbacks.progress import ProgressBar as ProgressBarBase
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from lightning.pytorch.utilities.model_helpers import is_overridden
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from zoo.budget import BudgetError, apply_budget
from zoo.callbacks.progress import ProgressBar
from zoo.checkpoint_io import AtomicCheckpointIO
from zoo.data.resolver import DataError
from zoo.distributed import is_fsdp
from zoo.init_from import InitFromError, init_model_config, init_source, load_weights
from zoo.model import ModelConfig
from zoo.model.beam_search import check_early_stopping
from zoo.results import (arch_config, failed_record, job_overrides, keep_csv_history, save_tokenizers,
                         write_examples, write_json)
from zoo.tasks.base import metric_mode
from zoo.threads import set_threads

NO_ARCH = ("zoo needs an architecture. Pick one of the three with +arch=...: "
           "`python -m zoo +arch=encoder_only` (bidirectional encoder, classification), "
           "`python -m zoo +arch=decoder_only` (causal decoder, language modeling on Tiny Shakespeare), or "
           "`python -m zoo +arch=encoder_decoder` (the original Transformer, translation). "
           "Any other option follows as key=value; `python -m zoo --help` lists the config groups.")


log = logging.getLogger("zoo")


def seed_list(n) -> str:
    """${zoo_seeds:3} -> "1,2,3": the seeds a sweep runs (conf/experiment/compare.yaml's compare.seeds).
    Prints a message and exits with 2 for an n that is not a positive whole number."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        print(f"zoo: error: compare.seeds={n!r} must be a positive whole number: the runs of each cell, seeds "
              f"1 .. N (compare.seeds=1 for one run; seed=5,6,7 picks the seeds themselves)", file=sys.stderr)
        sys.exit(2)
    return ",".join(str(i) for i in range(1, n + 1))


OmegaConf.register_new_resolver("zoo_seeds", seed_list, replace=True)

# model keys the datamodule fills in (the special ids: its tokenizer's, zoo.data.bpe)
FROM_DATA = ("vocab_size", "src_vocab_size", "num_classes", "pad_id", "bos_id", "eos_id")
# model keys that do not change the math: free to change on resume
RUNTIME = ("compile", "compile_scope", "activation_checkpointing")


def model_dict(cfg: DictConfig) -> dict:
    """The model group as ModelConfig keyword arguments (resolved, without _target_)."""
    return {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items()
            if k not in ("_target_", "init_from")}  # init_from: weights to start from (zoo.init_from)


class ConfigError(ValueError):
    """A bad or contradictory config, found before any training starts."""


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
    picks = [("task.monitor", cfg.task.get("monitor"), "task.monitor_mode", mode),
             ("optimized_metric", cfg.get("optimized_metric"), "task.monitor_mode", mode)]
    for name, cb in (cfg.get("callbacks") or {}).items():
        if isinstance(cb, DictConfig) and cb.get("monitor") is not None:
            picks.append((f"callbacks.{name}.monitor", cb.monitor, f"callbacks.{name}.mode", cb.get("mode", "min")))
    for key, name, _, _ in picks:
        if metrics and name is not None and name not in metrics:
            raise ConfigError(f"{key}={name} is not a validation metric of {task_name} with +arch={cfg.arch}; it "
                              f"logs {', '.join(metrics)}")
    monitor, optimized = cfg.task.get("monitor"), cfg.get("optimized_metric")
    if monitor is not None and optimized is not None and metric_mode(monitor) != metric_mode(optimized):
        raise ConfigError(f"task.monitor={monitor} and optimized_metric={optimized} point in opposite directions "
                          f"(one is better lower, one higher), and task.monitor_mode serves both; choose metrics "
                          f"that agree (optimized_metric defaults to task.monitor)")

    def better(name: str) -> str:
        return "lower" if metric_mode(name) == "min" else "higher"
    for key, name, mode_key, its_mode in picks:
        if name is not None and metric_mode(name) != its_mode:  # the best checkpoint (or a sweep) would be the worst
            raise ConfigError(f"{key}={name} is better {better(name)}, but {mode_key}={its_mode}; add "
                              f"{mode_key}={metric_mode(name)}")
    direction = HydraConfig.get().sweeper.get("direction") if HydraConfig.initialized() else None
    if isinstance(direction, str) and direction in ("minimize", "maximize") and optimized is not None:
        if direction != metric_mode(optimized) + "imize":  # a sweep (Optuna) toward the worst runs
            raise ConfigError(f"hydra.sweeper.direction={direction}, but optimized_metric={optimized} is better "
                              f"{better(optimized)}; leave the direction to hparams_search (it follows "
                              f"task.monitor_mode)")


def check_config(cfg: DictConfig) -> None:
    """Raise ConfigError (a ValueError) for a bad model config or contradictions between groups."""
    if cfg.get("data") is None:
        raise ConfigError("no dataset selected: add data=tiny_shakespeare (or another option of conf/data/)")
    task_cls = get_class(cfg.task._target_)
    if cfg.arch not in task_cls.ARCHS:
        raise ConfigError(f"{task_cls.__name__} does not train +arch={cfg.arch} yet; it trains "
                          f"{', '.join(task_cls.ARCHS)}")
    data_batch = getattr(get_class(cfg.data._target_), "BATCH", None) if cfg.data.get("_target_") else None
    if data_batch is not None and task_cls.BATCH is not None and data_batch != task_cls.BATCH:
        fits = []
        for p in sorted((Path(CONF_DIR) / "data").glob("*.yaml")):
            target = OmegaConf.load(p).get("_target_")
            if target and getattr(get_class(target), "BATCH", None) == task_cls.BATCH:
                fits.append(p.stem)
        raise ConfigError(f"{task_cls.__name__} reads {task_cls.BATCH} batches, but data._target_="
                          f"{cfg.data._target_} gives {data_batch} batches; use data={' or data='.join(fits)} (or a "
                          f"datamodule whose batches keep {task_cls.__name__}.BATCH_CONTRACT)")
    check_monitors(cfg, getattr(task_cls, "VAL_METRICS", {}).get(cfg.arch, ()), task_cls.__name__)
    from zoo.tasks.optim_config import check_keys as check_optim_keys
    sched = cfg.task.get("scheduler") or {}
    try:
        check_optim_keys(cfg.task.get("optimizer"), sched)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if sched.get("kind", "cosine") not in ("cosine", "noam"):
        raise ConfigError(f"task.scheduler.kind={sched.get('kind')!r} is unknown; allowed: cosine, noam")
    if sched.get("kind") == "noam" and not (sched.get("warmup_steps") or 0) >= 1:
        raise ConfigError(f"task.scheduler.kind=noam needs task.scheduler.warmup_steps >= 1 (its peak is at "
                          f"warmup_steps: lr * min(step^-0.5, step * warmup^-1.5) * warmup^0.5); "
                          f"got {sched.get('warmup_steps')}")
    if cfg.model.get("share_embeddings") and cfg.data.get("joint_vocab") is False:
        raise ConfigError("model.share_embeddings=true needs one vocabulary for source and target: set "
                          "data.joint_vocab=true (or model.share_embeddings=false)")
    if (cfg.arch == "encoder_only" and task_cls.BATCH == "translation" and cfg.data.get("joint_vocab") is False
            and str(cfg.data.get("tokenizer") or "bpe") in ("bpe", "char")):  # zoo trains one tokenizer a side
        raise ConfigError("encoder_only translation reads source and target as one sequence, so it needs "
                          "one vocabulary: set data.joint_vocab=true")
    # the special ids the data gives the model: zoo's fixed ones, or a pretrained tokenizer.json's (read here)
    from dataclasses import fields

    from zoo.data.bpe import FIXED_IDS
    data_cls = get_class(cfg.data._target_) if cfg.data.get("_target_") else None
    ids = (data_cls.config_ids(cfg.data) if hasattr(data_cls, "config_ids")
           else {"model": getattr(data_cls, "special_ids", {}), "roles": None, "pretrained": None})
    set_here = ({o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}
                if HydraConfig.initialized() else set())
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
            whose = (f"the tokenizer {ids['pretrained']}" if ids["pretrained"]
                     else f"data={cfg.data._target_.rsplit('.', 1)[-1]}'s tokenizer")
            raise ConfigError(f"model.{key}={value}, but {whose} puts that token at {data_id}; set "
                              f"model.{key}={data_id} (or drop the override)")
    if ids["pretrained"] and cfg.arch == "encoder_only" and task_cls.BATCH == "translation":
        # the non-autoregressive task writes zoo.data.bpe's constants (CLS_ID, MASK_ID, ...) into its inputs
        wrong = {r: ids["roles"].get(r) for r in ("pad", "bos", "eos", "mask", "cls")
                 if ids["roles"].get(r) != FIXED_IDS[r]}
        if wrong:
            raise ConfigError(f"+arch=encoder_only translation (non-autoregressive) needs zoo's fixed special ids "
                              f"({', '.join(f'{r}={FIXED_IDS[r]}' for r in wrong)}), but the tokenizer "
                              f"{ids['pretrained']} has {', '.join(f'{r}={i}' for r, i in wrong.items())}; use "
                              f"data.tokenizer=bpe (or a tokenizer.json zoo trained), or +arch=encoder_decoder or "
                              f"decoder_only")
    if "early_stopping" in cfg.task:
        try:
            check_early_stopping(cfg.task.early_stopping)
        except ValueError as e:
            raise ConfigError(f"task.{e}") from None
    allowed = getattr(task_cls, "MASKS", {}).get(cfg.arch)
    if allowed is not None and cfg.model.get("mask") not in allowed:
        raise ConfigError(f"model.mask={cfg.model.mask} would let {cfg.arch} see the tokens it predicts in "
                          f"task={task_cls.__name__}; allowed: {', '.join(str(m) for m in allowed)}")
    for key in ("block_size", "batch_size", "max_len", "max_tokens", "vocab_size", "batches_per_epoch", "val_windows"):
        n = cfg.data.get(key)
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ConfigError(f"data.{key}={n!r} must be a positive integer")
    for key in ("block_size", "max_len"):
        n = cfg.data.get(key)
        if n is None:
            continue
        if task_cls.JOINS_SOURCE_AND_TARGET and cfg.arch != "encoder_decoder":
            n, key = 2 * n, f"2 x data.{key} (source + target in one sequence)"
        else:
            key = f"data.{key}"
        if n > cfg.model.max_len:
            raise ConfigError(f"{key}={n} is larger than model.max_len={cfg.model.max_len}; "
                              f"lower it or raise model.max_len")


TASK_OF_BATCH = {"lm": "lm", "classification": "classification", "translation": "translation"}  # conf/task/


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
    if "task" in keys or "data" not in keys or "+cell" in overrides:
        return cfg
    data_kind = getattr(get_class(cfg.data._target_), "BATCH", None)
    task_kind = getattr(get_class(cfg.task._target_), "BATCH", None)
    if data_kind is None or task_kind is None or data_kind == task_kind or data_kind not in TASK_OF_BATCH:
        return cfg
    log.info("task=%s follows data=%s (it gives %s batches); add task=... to choose another", TASK_OF_BATCH[data_kind],
             HydraConfig.get().runtime.choices.get("data"), data_kind)
    searchpath = [o for o in HydraConfig.get().overrides.hydra if o.startswith("hydra.searchpath")]
    return compose(HydraConfig.get().job.config_name,
                   overrides=searchpath + overrides + [f"task={TASK_OF_BATCH[data_kind]}"])


def check_checkpoint(cfg: DictConfig) -> None:
    """ckpt_path must exist and come from the same architecture and model shape (ConfigError otherwise)."""
    path = cfg.get("ckpt_path")
    if path is None:
        return
    if not Path(path).is_file():
        raise ConfigError(f"ckpt_path={path} does not exist; pass a .ckpt file from a run's checkpoints/ dir")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, foreign or not a checkpoint at all
        raise ConfigError(f"ckpt_path={path} is not a readable checkpoint ({type(e).__name__}); pass a .ckpt "
                          f"file from a run's checkpoints/ dir") from None
    hp = ckpt.get("hyper_parameters", {})
    task_name = get_class(cfg.task._target_).__name__
    if ckpt.get("zoo_task", task_name) != task_name:
        raise ConfigError(f"ckpt_path={path} was trained by task {ckpt['zoo_task']}, but this run's task is "
                          f"{task_name}; resume with the task (and data) it was trained on")
    if hp.get("arch") != cfg.arch:
        raise ConfigError(f"ckpt_path={path} was trained with +arch={hp.get('arch')}, but this run is "
                          f"+arch={cfg.arch}; resume with +arch={hp.get('arch')} or start without ckpt_path")
    model = {k: v for k, v in model_dict(cfg).items() if k not in FROM_DATA + RUNTIME}
    if cfg.model.get("init_from"):  # the shape is the init checkpoint's (zoo.init_from), checked when built
        model = {}
    diff = {k: (hp["model"].get(k), v) for k, v in model.items() if hp["model"].get(k) != v}
    if diff:
        raise ConfigError(f"ckpt_path={path} was trained with other model settings (checkpoint, now): {diff}")
    max_steps = cfg.trainer.get("max_steps", -1)
    if max_steps is not None and 0 < max_steps <= ckpt.get("global_step", 0):
        raise ConfigError(f"ckpt_path={path} has already trained {ckpt['global_step']} steps; resuming needs "
                          f"trainer.max_steps above that (now {max_steps})")


def route_lightning_logs() -> None:
    """Send Lightning's messages, once each, to the handlers Hydra configured (console and <run dir>/train.log).
    Lightning, imported before Hydra sets up logging, gives its loggers private console handlers ("lightning":
    "INFO: ..."; "lightning.pytorch" and "lightning.fabric" with propagation off), so its messages would
    print twice on the console, or never reach train.log. Those console handlers are removed and the
    messages propagate to the root logger."""
    if not logging.getLogger().handlers:  # logging not configured (zoo.train.run called as a library)
        return
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        lightning_log = logging.getLogger(name)
        for handler in list(lightning_log.handlers):
            if type(handler) is logging.StreamHandler:
                lightning_log.removeHandler(handler)
        lightning_log.propagate = True


def trainer_callbacks(callbacks: list, trainer_cfg: DictConfig) -> dict:
    """The Trainer's callback arguments for the configured `callbacks`. Without a ModelCheckpoint among them
    (callbacks=none) no checkpoint is written: Lightning would otherwise add its default one under the
    logger's folder, and the test phase would load it; enable_checkpointing=False, unless trainer.* sets it.
    Without a progress bar among them, zoo's ProgressBar, so the bar reads "Epoch 3", not Lightning's default
    "Epoch 3/-2"; +trainer.enable_progress_bar=false drops every bar (Lightning refuses one in the list)."""
    kwargs = {"callbacks": list(callbacks)}
    if not any(isinstance(c, ModelCheckpoint) for c in callbacks) and trainer_cfg.get("enable_checkpointing") is None:
        kwargs["enable_checkpointing"] = False
    if trainer_cfg.get("enable_progress_bar") is False:
        kwargs["callbacks"] = [c for c in callbacks if not isinstance(c, ProgressBarBase)]
    elif not any(isinstance(c, ProgressBarBase) for c in callbacks):
        kwargs["callbacks"].append(ProgressBar())
    return kwargs


def wandb_group(cfg: DictConfig) -> str:
    """The W&B group of a run: logger.wandb.group if set; else, in a Hydra multirun (a -m sweep, Optuna,
    submitit), the sweep dir, so one sweep's runs form one group; else experiment_name."""
    group = (cfg.get("logger") or {}).get("wandb", {}).get("group")
    if group:
        return str(group)
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return str(HydraConfig.get().sweep.dir)[-128:]  # W&B's limit
    return str(cfg.get("experiment_name") or cfg.arch)


def flat_config(cfg: DictConfig, top: dict) -> dict:
    """The resolved config with nested keys joined by dots (model.d_model, task.optimizer.lr: the names of
    Hydra overrides and W&B sweep parameters), then the `top` keys (arch, task, dataset, params, ...), nested
    ones joined the same way (data_info.tokenizer.kind)."""
    out = {}

    def walk(prefix: str, node) -> None:
        for k, v in node.items():
            if isinstance(v, dict) and v:
                walk(f"{prefix}{k}.", v)
            else:
                out[f"{prefix}{k}"] = v

    walk("", OmegaConf.to_container(cfg, resolve=True))
    walk("", top)
    return out


def data_tag(data: dict) -> str:
    """The W&B tag of the data a run read: a built-in dataset's name, or the name a user's config gave it, else
    the user's file names joined by "+" ("file:my.txt"), cut to W&B's 64 characters."""
    name = str(data["dataset"])
    if data.get("builtin", True) or "/" not in name:
        return name[:64]
    paths = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, str) and Path(value).is_absolute():
            paths.append(Path(value).name)
    walk(data.get("files", {}))
    return ("file:" + "+".join(dict.fromkeys(paths)))[:64]


def make_loggers(cfg: DictConfig, tags):
    """The loggers of conf/logger/; W&B gets group (wandb_group), job_type = arch and tags."""
    loggers = []
    for name, lcfg in (cfg.get("logger") or {}).items():
        kwargs = {}
        if lcfg._target_.endswith("WandbLogger"):
            kwargs.update(tags=tags, group=wandb_group(cfg), job_type=cfg.arch)
            if os.environ.get("WANDB_MODE") == "online":
                kwargs["offline"] = False
            Path(cfg.paths.output_dir).mkdir(parents=True, exist_ok=True)
        logger = instantiate(lcfg, **kwargs)
        if isinstance(logger, CSVLogger) and cfg.get("ckpt_path"):
            keep_csv_history(logger, cfg.ckpt_path)
        loggers.append(logger)
    return loggers


def run(cfg: DictConfig) -> float:
    """Train one run described by cfg; test on the best checkpoint when the task has a test split.
    Returns the best value of the task's monitored validation metric (for Hydra sweepers).
    Raises ConfigError / DataError / ValueError for bad input before training starts."""
    if cfg.get("arch") is None:
        print(NO_ARCH, file=sys.stderr)
        sys.exit(2)
    start = time.time()
    seed = cfg.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        print(f"zoo: error: seed={seed!r} must be a non-negative integer (e.g. seed=1; a sweep: seed=1,2,3 or "
              f"compare.seeds=3)", file=sys.stderr)
        sys.exit(2)
    route_lightning_logs()
    cfg = task_for_data(cfg)
    check_config(cfg)
    budget = apply_budget(cfg)
    try:
        set_threads(cfg)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    check_checkpoint(cfg)
    source = init_source(cfg)  # model.init_from: the checkpoint's shape, before any data work
    choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
    task_name = TASK_OF_BATCH.get(get_class(cfg.task._target_).BATCH, choices.get("task", "lm"))  # task_for_data
    pl.seed_everything(cfg.seed, workers=True)

    datamodule = instantiate(cfg.data, _convert_="all")  # plain lists and dicts: checkpoints hold no omegaconf
    datamodule.prepare_data()
    datamodule.setup()
    info = datamodule.model_info()  # vocabulary sizes, classes, tokenizer state, typical lengths
    if rank_zero_only.rank == 0:
        save_tokenizers(cfg.paths.output_dir, info["tokenizer"])  # also in every checkpoint's hyperparameters
    # the data actually read (a user's data.file=... is not the config group's name)
    data = datamodule.data_info() if hasattr(datamodule, "data_info") else {"dataset": choices.get("data", "?")}
    data_name = data["dataset"]
    tags = [cfg.arch, task_name, data_tag(data), *cfg.get("tags", [])]
    log.info("arch=%s task=%s data=%s output_dir=%s", cfg.arch, task_name, data_name, cfg.paths.output_dir)
    model_cfg = model_dict(cfg)
    wanted = model_cfg.get("num_classes") or 0  # 0 (conf/model): the data's count
    if "num_classes" in info and wanted and wanted != info["num_classes"]:
        classes = info.get("classes") or []
        raise ConfigError(f"model.num_classes={wanted}, but the data ({data_name}) has {info['num_classes']} classes"
                          + (f" ({', '.join(map(str, classes))})" if 0 < len(classes) <= 10 else "")
                          + "; drop the override (model.num_classes=0, the default, takes the data's count)")
    model_cfg.update({k: info[k] for k in FROM_DATA if k in info})
    if source is not None:
        model_cfg = init_model_config(source, model_cfg, info)

    def new_task():
        return instantiate(cfg.task, arch=cfg.arch, model=model_cfg, tokenizer=info["tokenizer"], _convert_="all")
    task = new_task()
    if source is not None and not cfg.get("ckpt_path"):  # resuming restores its own weights
        load_weights(task.model, source)
    if budget["kind"] != "steps":
        task.budget = (budget["kind"], budget["value"])
    loggers = make_loggers(cfg, tags)
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values()]
    trainer = instantiate(cfg.trainer, logger=loggers or False, plugins=[AtomicCheckpointIO()],
                          **trainer_callbacks(callbacks, cfg.trainer))

    n_params = task.model.num_params()
    fpt = task.forward_flops_per_token(info["seq_len"], info.get("src_len"))
    log.info("model: %d parameters, %.4g forward FLOPs per token", n_params, fpt)
    # one flat config per run (W&B columns, parallel coordinates); Lightning's own nested copies of the
    # module's and datamodule's hparams would repeat it under clashing names (save_hyperparameters(logger=False))
    task._log_hyperparams = datamodule._log_hyperparams = False
    for logger in loggers:
        logger.log_hyperparams(flat_config(cfg, {"arch": cfg.arch, "arch_config": arch_config(cfg),
                                                 "task": task_name, "dataset": data_name,
                                                 "data_info": data,
                                                 "objective": getattr(task, "objective", task_name),
                                                 "params": n_params, "flops_per_token": fpt}))
        if isinstance(logger, WandbLogger) and trainer.is_global_zero:
            logger.experiment.summary.update({"params": n_params, "flops_per_token": fpt})

    trainer.fit(task, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    final = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
    fitted = task
    if is_overridden("test_step", task) and not trainer.fast_dev_run:
        best = getattr(trainer.checkpoint_callback, "best_model_path", None)
        tested = task
        if is_fsdp(trainer.strategy.model):
            # FSDP left the fitted task's own parameters (embeddings, head) as flat shards, and Lightning does not
            # wrap an already wrapped task again: test a fresh one, which loads the checkpoint after wrapping
            tested = new_task() if best else None
            if tested is None:
                log.warning("test phase skipped: under FSDP it needs a checkpoint of the trained weights, and this run "
                            "wrote none (keep callbacks=default, or test later with the run's checkpoint)")
        if tested is not None:
            trainer.test(tested, datamodule=datamodule, ckpt_path=best or None, verbose=False)  # best by the monitor
            final.update({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("test/")})
            task = tested
    results = {
        "status": "ok", "arch": cfg.arch, "arch_config": arch_config(cfg), "task": task_name,
        "dataset": data_name, "data": data, "objective": getattr(fitted, "objective", task_name),
        "seed": cfg.seed, "overrides": job_overrides(), "budget": budget,
        "final": final, "best": fitted.best,
        "params": n_params, "flops_per_token": fpt,
        "cost": {"train_flops": fitted.cost["flops"], "tokens": fitted.cost["tokens"],
                 "train_seconds": fitted.cost["seconds"],
                 "inference_flops_per_token": fitted.inference_flops_per_token(info["seq_len"], info.get("src_len")),
                 "ms_per_example": getattr(task, "ms_per_example", getattr(fitted, "ms_per_example", None))},
        "steps": trainer.global_step, "wall_seconds": time.time() - start,
        "output_dir": str(Path(cfg.paths.output_dir).resolve()),
        "best_checkpoint": getattr(trainer.checkpoint_callback, "best_model_path", None) or None,
        "examples": None,
    }
    if trainer.is_global_zero:
        results["examples"] = write_examples(cfg.paths.output_dir, task if getattr(task, "examples", None) else fitted)
        path = write_json(Path(cfg.paths.output_dir) / "results.json", results)
        log.info("final %s; best %s; %d steps in %.0f s", {k: float(f"{v:.5g}") for k, v in final.items()},
                 {k: float(f"{v:.5g}") for k, v in fitted.best.items()}, results["steps"], results["wall_seconds"])
        for logger in loggers:
            if isinstance(logger, WandbLogger):
                logger.experiment.summary.update({"wall_seconds": results["wall_seconds"],  # best/<metric>: sweeps
                                                  "cost/train_flops": fitted.cost["flops"],
                                                  **{f"best/{k}": v for k, v in fitted.best.items()}})
                logger.experiment.finish()  # flush now, so the results path below is the last line printed
        print(path.resolve())
    monitor = cfg.get("optimized_metric") or fitted.hparams.get("monitor", "val/loss")  # hparams_search sets it
    return fitted.best.get(monitor, final.get(monitor, float("nan")))


_PKG = Path(__file__).resolve().parent
# a wheel installs conf/ as zoo/conf (pyproject.toml); an editable install runs zoo/ from the repo, beside conf/
CONF_DIR = str(_PKG / "conf" if (_PKG / "conf").is_dir() else _PKG.parent / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> float:
    try:
        return run(cfg)
    except BaseException as e:  # a run that fails leaves a results.json saying so (zoo.report lists it)
        if not isinstance(e, KeyboardInterrupt) and cfg.get("arch") is not None:
            try:
                write_json(Path(cfg.paths.output_dir) / "results.json", failed_record(cfg, e))
            except Exception:  # noqa: BLE001 -- never hide the run's own error behind this one
                pass
        return handle_error(e)


def basic_multirun() -> bool:
    """True in a multirun of Hydra's basic sweeper, whose jobs are independent (a grid): one job's bad input
    need not stop the others. A search sweeper (Optuna) proposes its next job from the last one's value."""
    if not (HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN):
        return False
    return str(HydraConfig.get().sweeper.get("_target_", "")).endswith("BasicSweeper")


def handle_error(e: BaseException) -> float:
    """Bad input (ConfigError, DataError, BudgetError, a constructor's ValueError): print its message and exit
    with 2; in a grid multirun (basic_multirun), raise it instead, so Hydra runs the other jobs and fails at
    the end. Re-raise anything else."""
    cause = e.__cause__ if isinstance(e, InstantiationException) else e  # a datamodule's or task's constructor
    if isinstance(cause, (ConfigError, DataError, BudgetError, InitFromError)) or (cause is not e and isinstance(cause, ValueError)):
        print(f"zoo: error: {cause}", file=sys.stderr)  # the message says what and how to fix, no traceback
        if not basic_multirun():
            sys.exit(2)
    raise e
