"""A Hydra callback (conf/config.yaml's hydra.callbacks) that names a multirun's directory when it starts and
ends, with the command that reports it: a sweep's jobs otherwise print only their own run directories."""

from hydra.experimental.callback import Callback
from hydra.utils import instantiate
from omegaconf import DictConfig


class SweepDir(Callback):
    """Prints `zoo: multirun dir: DIR` at the start, and the `python -m zoo.report DIR` line at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        print(f"zoo: multirun dir: {config.hydra.sweep.dir}", flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        d = config.hydra.sweep.dir
        print(f"zoo: multirun done: {d}\nzoo: report it with: python -m zoo.report {d}", flush=True)


class ScalingPlan(Callback):
    """experiment=scaling's plan (zoo.run.scaling_plan): composes every job of the sweep, prints N, the steps it
    trains, D, C, tokens per parameter, the budgets already done (an earlier command's, kept) and the estimated
    seconds of what is left, writes plan.json in the sweep directory, and exits with 2 (nothing trains) when that
    total is over scaling.time_budget_s, the design is bad (zoo.scaling.grid.check_design; a window longer than
    the models take, check_window), a job cannot be built,
    a job's config fails the checks its run would make (zoo.run.train.checked_config) or two jobs would write the
    same run directory."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        import copy
        import json
        import sys
        from dataclasses import asdict
        from pathlib import Path

        from omegaconf import OmegaConf
        from omegaconf.errors import InterpolationResolutionError

        from zoo.errors import ConfigError, DataError, is_number
        from zoo.run.budget import unwrapped
        from zoo.run.scaling_plan import check_budget, check_run_dirs, plan, plan_table
        from zoo.run.train import checked_config
        from zoo.scaling.grid import cell_size, check_design

        try:
            for key, default in (("time_budget_s", None), ("job_overhead_s", 10)):
                value = config.scaling.get(key, default)
                if not is_number(value) or value < 0:  # before anything is timed
                    raise ConfigError(f"scaling.{key}={value!r} must be a number of seconds >= 0")
            jobs = sweep_jobs(config)
            check_run_dirs(jobs, OmegaConf.to_container(config.hydra.sweep, resolve=False)["subdir"])
            for _, job in jobs:  # a bad design or job config exits 2 before any data is read or timed
                check_window(job)
                check_design(job.scaling, [cell_size(job.scaling.cell, job.scaling.sizes)])
                checked_config(copy.deepcopy(job))  # the job's own checks (a cool-down shape, a rate), run now
            dm = instantiate(jobs[0][1].data, _convert_="all")
            dm.prepare_data()
            dm.setup()
            overhead = float(config.scaling.get("job_overhead_s", 10))
            rows = plan(jobs, dm.model_info(), overhead, config.hydra.sweep.dir)
            print(f"zoo: scaling plan\n{plan_table(rows)}", flush=True)
            out = Path(config.hydra.sweep.dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / "plan.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
            check_budget(rows, float(config.scaling.time_budget_s), config.scaling.sizes)
        except (ValueError, DataError, InterpolationResolutionError) as e:  # bad config or resolver; no data
            print(f"zoo: error: {unwrapped(e) if isinstance(e, InterpolationResolutionError) else e}", file=sys.stderr)
            sys.exit(2)
        except Exception as e:  # noqa: BLE001 - Hydra would only warn and launch the jobs unchecked
            first = (str(e).strip().splitlines() or [""])[0]  # Hydra's errors go on with the search path
            print(
                f"zoo: error: the scaling plan could not check this sweep ({type(e).__name__}: {first}); nothing was "
                "trained: check the overrides (a number where a number is expected, a list for budgets, a config "
                "option that exists for +arch= and the other groups)",
                file=sys.stderr,
            )
            sys.exit(2)


def check_window(job: DictConfig) -> None:
    """ConfigError when scaling.block_size (data.block_size, each window's tokens) is longer than model.max_len,
    the longest sequence the models take (a whole-number block_size is check_design's)."""
    from zoo.errors import ConfigError, is_whole

    block, max_len = job.scaling.get("block_size"), job.model.get("max_len")
    if is_whole(block) and is_whole(max_len) and block > max_len:
        raise ConfigError(
            f"scaling.block_size={block} is longer than model.max_len={max_len}, the longest window the models "
            f"take: lower scaling.block_size to at most {max_len}, or raise model.max_len"
        )


def sweep_jobs(config: DictConfig) -> list:
    """Every job of a basic-sweeper multirun, composed: [(its +arch choice, its config)], in the order the
    sweeper runs them (hydra.sweeper.params, then the command line's overrides, as BasicSweeper combines them)."""
    from hydra import compose
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    # the overrides as typed: one may hold an interpolation such as ${hydra:...}, resolvable only inside a job
    task_overrides = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    hydra_overrides = OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)
    parsed = OverridesParser.create().parse_overrides(params + list(task_overrides))
    searchpath = [o for o in hydra_overrides if o.startswith("hydra.searchpath")]
    jobs = []
    for batch in BasicSweeper.split_arguments(parsed, None):
        for overrides in batch:
            arch = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].lstrip("+~") == "arch"), "?")
            jobs.append((arch, compose(config.hydra.job.config_name, overrides=searchpath + list(overrides))))
    return jobs
