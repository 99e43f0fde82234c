"""The main job: compose the config with Hydra, build data, model and trainer, train, write results.json."""

import logging
import time
from pathlib import Path

import hydra
import lightning.pytorch as pl
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class, instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.callbacks.progress import ProgressBar as ProgressBarBase
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities.model_helpers import is_overridden
from omegaconf import DictConfig

from zoo.interop.init_from import load_weights
from zoo.model.cost import non_embedding_param_count
from zoo.run.checks.sweep_preset import check_not_a_lone_sweep
from zoo.run.compare_tune import begin as begin_compare
from zoo.run.compare_tune import data_kwargs
from zoo.run.conf import CONF_DIR, TASK_OF_BATCH
from zoo.run.exits import handle_error
from zoo.run.job import build_data, checked_config
from zoo.run.loggers import data_tag, make_loggers, run_config
from zoo.run.results import arch_config, failed_record, job_overrides, write_examples, write_failure, write_json
from zoo.training.callbacks import always_callbacks
from zoo.training.callbacks.progress import ProgressBar
from zoo.training.checkpoint_io import AtomicCheckpointIO
from zoo.training.distributed import is_fsdp

log = logging.getLogger("zoo")


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


def build_trainer(cfg: DictConfig, tags):
    """The loggers of conf/logger/ and a Trainer with the configured callbacks (and always_callbacks)."""
    loggers = make_loggers(cfg, tags)
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values()] + always_callbacks()
    trainer = instantiate(
        cfg.trainer,
        logger=loggers or False,
        plugins=[AtomicCheckpointIO()],
        **trainer_callbacks(callbacks, cfg.trainer),
    )
    return trainer, loggers


def log_config(cfg: DictConfig, task, datamodule, trainer, loggers, top: dict) -> None:
    """One config per run to every logger (zoo.run.loggers.run_config: W&B columns, parallel coordinates);
    Lightning's own copies of the module's and datamodule's hparams would repeat it under clashing names."""
    task._log_hyperparams = datamodule._log_hyperparams = False
    for logger in loggers:
        logger.log_hyperparams(run_config(cfg, top))
        if isinstance(logger, WandbLogger) and trainer.is_global_zero:
            logger.experiment.summary.update({"params": top["params"], "flops_per_token": top["flops_per_token"]})


def saved_best(trainer) -> str | None:
    """The best checkpoint by the monitor that the run's checkpoint callback holds now, if that file exists."""
    best = getattr(trainer.checkpoint_callback, "best_model_path", None)
    if best and not Path(best).is_file():
        log.warning("the best checkpoint %s is missing from disk: no checkpoint is tested or recorded", best)
        return None
    return best or None


def fit_and_test(cfg: DictConfig, trainer, task, datamodule, new_task, test: bool = True):
    """Fit; then, when the task has a test step and `test` is true, test the best checkpoint (by the monitor).
    Returns the final metrics, the task that was tested (the fitted one, or under FSDP a fresh one; the fitted
    one if none) and the checkpoint file whose weights the test scored: the path trainer.test loaded
    (trainer.ckpt_path; None when it scored the final weights in memory, as without a checkpoint callback), or
    without a test, the best checkpoint after fit. It is read right after the call that uses it: loading a checkpoint
    to test it also restores the callbacks' state saved in it, which can name an earlier best."""
    trainer.fit(task, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    final = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
    best = saved_best(trainer)
    if not test or not is_overridden("test_step", task) or trainer.fast_dev_run:
        return final, task, None if trainer.fast_dev_run else best
    tested = task
    if is_fsdp(trainer.strategy.model):
        # FSDP left the fitted task's own parameters (embeddings, head) as flat shards, and Lightning does not
        # wrap an already wrapped task again: test a fresh one, which loads the checkpoint after wrapping
        tested = new_task() if best else None
        if tested is None:
            log.warning(
                "test phase skipped: under FSDP it needs a checkpoint of the trained weights, and this run "
                "wrote none (keep callbacks=default, or test later with the run's checkpoint)"
            )
            return final, task, None
    trainer.test(tested, datamodule=datamodule, ckpt_path=best, verbose=False)
    final.update({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("test/")})
    return final, tested, str(trainer.ckpt_path) if trainer.ckpt_path else None


def write_results(cfg: DictConfig, results: dict, fitted, tested, loggers) -> None:
    """results.json and the examples (one process only); W&B's summary; the results path printed last."""
    results["examples"] = write_examples(cfg.paths.output_dir, tested if getattr(tested, "examples", None) else fitted)
    path = write_json(Path(cfg.paths.output_dir) / "results.json", results)
    log.info(
        "final %s; best %s; %d steps in %.0f s",
        {k: float(f"{v:.5g}") for k, v in results["final"].items()},
        {k: float(f"{v:.5g}") for k, v in fitted.best.items()},
        results["steps"],
        results["wall_seconds"],
    )
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            logger.experiment.summary.update(
                {
                    "wall_seconds": results["wall_seconds"],  # best/<metric>: sweeps
                    "cost/train_flops": fitted.cost["flops"],
                    **{f"best/{k}": v for k, v in fitted.best.items()},
                }
            )
            logger.experiment.finish()  # flush now, so the results path below is the last line printed
    print(path.resolve())


def run_results(
    cfg, ident: dict, data: dict, budget: dict, final: dict, task, tested, trainer, info, wall, checkpoint=None
) -> dict:
    """The results.json of a finished run (zoo.report.runs reads it): `ident` (arch, arch_config, task,
    dataset, objective, params, flops_per_token), the data, seed, overrides, budget, final and best metrics,
    the training cost and the inference cost, steps, wall seconds, where the run wrote its files, and
    best_checkpoint: `checkpoint`, the file the test scored (fit_and_test; null when it scored the final
    weights in memory)."""
    return {
        "status": "ok",
        **{k: ident[k] for k in ("arch", "arch_config", "task", "dataset")},
        "data": data,
        "objective": ident["objective"],
        "seed": cfg.seed,
        "overrides": job_overrides(),
        "budget": budget,
        "final": final,
        "best": task.best,
        "params": ident["params"],
        "params_non_embedding": ident["params_non_embedding"],
        "flops_per_token": ident["flops_per_token"],
        "cost": {
            "train_flops": task.cost["flops"],
            "tokens": task.cost["tokens"],
            "train_seconds": task.cost["seconds"],
            "inference_flops_per_token": task.inference_flops_per_token(info["seq_len"], info.get("src_len")),
            "ms_per_example": getattr(tested, "ms_per_example", getattr(task, "ms_per_example", None)),
        },
        "steps": trainer.global_step,
        "wall_seconds": wall,
        "output_dir": str(Path(cfg.paths.output_dir).resolve()),
        "best_checkpoint": checkpoint,
        "examples": None,
    }


def run_ident(cfg: DictConfig, task, task_name: str, data: dict, info: dict) -> dict:
    """What a run is, as results.json and the loggers record it: arch, arch_config, task, dataset, objective,
    params, params_non_embedding (Kaplan et al. 2020's N, zoo.scaling) and forward FLOPs per token at the data's
    typical lengths; logged."""
    n_params = task.model.num_params()
    flops_per_token = task.forward_flops_per_token(info["seq_len"], info.get("src_len"))
    log.info("model: %d parameters, %.4g forward FLOPs per token", n_params, flops_per_token)
    return {
        "arch": cfg.arch,
        "arch_config": arch_config(cfg),
        "task": task_name,
        "dataset": data["dataset"],
        "objective": getattr(task, "objective", task_name),
        "params": n_params,
        "params_non_embedding": non_embedding_param_count(task.model),
        "flops_per_token": flops_per_token,
    }


def run(cfg: DictConfig) -> float:
    """Train one run described by cfg; test on the best checkpoint when the task has a test split.
    Returns the best value of the task's monitored validation metric (for Hydra sweepers).
    Raises ConfigError / DataError / ValueError for bad input before training starts."""
    check_not_a_lone_sweep(cfg)
    if cfg.get("scaling") is not None:  # experiment=scaling: a cell of trunk and cool-down branches
        from zoo.run.scaling_cell import run_cell

        return run_cell(cfg)
    start = time.time()
    compare = begin_compare(cfg)  # experiment=compare: a tuning run's seed and rate, a tuned cell's rate
    tuning = bool(compare and compare["tuning"])  # trained and validated; its test split never read
    cfg, budget, source, plan = checked_config(cfg)
    choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
    task_name = TASK_OF_BATCH.get(get_class(cfg.task._target_).BATCH, choices.get("task", "lm"))  # task_for_data
    pl.seed_everything(cfg.seed, workers=True)
    datamodule, info, data = build_data(cfg, choices, data_kwargs(cfg, tuning))
    log.info("arch=%s task=%s data=%s output_dir=%s", cfg.arch, task_name, data["dataset"], cfg.paths.output_dir)
    plan = plan.with_data(cfg, info, source, data["dataset"])

    def new_task():
        return plan.build_task(cfg, info)

    task = new_task()
    if source is not None and not cfg.get("ckpt_path"):  # resuming restores its own weights
        load_weights(task.model, source)
    if budget["kind"] != "steps":
        task.budget = (budget["kind"], budget["value"])
    tags = [cfg.arch, task_name, data_tag(data), *cfg.get("tags", []), *(["tune"] if tuning else [])]
    trainer, loggers = build_trainer(cfg, tags)
    ident = run_ident(cfg, task, task_name, data, info)
    log_config(cfg, task, datamodule, trainer, loggers, {**ident, "data_info": data})
    final, tested, checkpoint = fit_and_test(cfg, trainer, task, datamodule, new_task, test=not tuning)
    if trainer.is_global_zero:
        wall = time.time() - start
        results = run_results(cfg, ident, data, budget, final, task, tested, trainer, info, wall, checkpoint)
        if compare is not None:
            results["compare"] = compare
        write_results(cfg, results, task, tested, loggers)
    monitor = cfg.get("optimized_metric") or task.hparams.get("monitor", "val/loss")  # hparams_search sets it
    return task.best.get(monitor, final.get(monitor, float("nan")))


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> float:
    try:
        return run(cfg)
    except BaseException as e:  # a run that fails leaves a results.json saying so (zoo.report lists it)
        if not isinstance(e, KeyboardInterrupt) and cfg.get("arch") is not None:
            try:
                write_failure(cfg.paths.output_dir, failed_record(cfg, e))
            except Exception:  # noqa: BLE001 -- never hide the run's own error behind this one
                pass
        return handle_error(e)
