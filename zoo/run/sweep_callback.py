"""A Hydra callback (conf/config.yaml's hydra.callbacks) that names a multirun's directory when it starts and
ends, with the command that reports it: a sweep's jobs otherwise print only their own run directories."""

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepDir(Callback):
    """Prints `zoo: multirun dir: DIR` at the start, and the `python -m zoo.report DIR` line at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        print(f"zoo: multirun dir: {config.hydra.sweep.dir}", flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        d = config.hydra.sweep.dir
        print(f"zoo: multirun done: {d}\nzoo: report it with: python -m zoo.report {d}", flush=True)


class ScalingPlan(Callback):
    """experiment=scaling's plan (zoo.run.scaling_plan.run_plan): composes every job of the sweep, prints N, the
    steps it trains, D, C, tokens per parameter, the budgets already done (an earlier command's, kept), the
    estimated seconds of what is left and their spread, and the architectures it leaves out; writes plan.json in
    the sweep directory. Exits with 0 after the plan when scaling.dry_run is true, and with 2 (nothing trains) when
    the total is over scaling.time_budget_s, the design is bad (zoo.scaling.design.check_design; a window longer than
    the models take, check_window), a job cannot be built, a job's config fails the checks its run would make
    (zoo.run.job.checked_config), a job's folder holds a cell of another design (its cell.json) or two jobs would
    write the same run directory."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        import sys

        from omegaconf.errors import InterpolationResolutionError

        from zoo.errors import ConfigError, DataError, is_number
        from zoo.run.budget import unwrapped
        from zoo.run.scaling_data import check_corpus
        from zoo.run.scaling_plan import check_budget, run_plan
        from zoo.scaling.design import check_settings

        try:
            for key, default in (("time_budget_s", None), ("job_overhead_s", 10)):
                value = config.scaling.get(key, default)
                if not is_number(value) or value < 0:  # before anything is timed
                    raise ConfigError(f"scaling.{key}={value!r} must be a number of seconds >= 0")
            dry_run = config.scaling.get("dry_run", False)
            if not isinstance(dry_run, bool):
                raise ConfigError(f"scaling.dry_run={dry_run!r} must be true (print the plan only) or false")
            check_settings(config.scaling, measured_block=True)  # the study-wide settings, before composing jobs
            print("zoo: scaling plan: composing and checking the sweep's jobs", file=sys.stderr, flush=True)
            data = {}  # a corpus too small for the sweep exits before the rest of its jobs compose
            jobs = sweep_jobs(config, lambda first, sizes: data.setdefault("dm", check_corpus(first, sizes)))
            rows = run_plan(config, jobs, data.get("dm"))
            if dry_run:
                total = sum(r.seconds for r in rows)
                print(
                    f"zoo: scaling.dry_run=true: the plan only, nothing trained ({total:.0f} s estimated, "
                    f"scaling.time_budget_s={config.scaling.time_budget_s:g})",
                    flush=True,
                )
                sys.exit(0)
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


def sweep_overrides(config: DictConfig) -> list[tuple[str, list[str]]]:
    """Every job of a basic-sweeper multirun as [(its +arch choice, its overrides)], in the order the sweeper runs
    them (hydra.sweeper.params, then the command line's overrides, as BasicSweeper combines them), each led by the
    command's hydra.searchpath."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    # the overrides as typed: one may hold an interpolation such as ${hydra:...}, resolvable only inside a job
    task_overrides = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    hydra_overrides = OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)
    parsed = OverridesParser.create().parse_overrides(params + list(task_overrides))
    searchpath = [o for o in hydra_overrides if o.startswith("hydra.searchpath")]
    specs = []
    for batch in BasicSweeper.split_arguments(parsed, None):
        for overrides in batch:
            arch = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].lstrip("+~") == "arch"), "?")
            specs.append((arch, searchpath + list(overrides)))
    return specs


def compose_job(config: DictConfig, overrides: list[str]) -> DictConfig:
    """One job's config: the multirun's config name composed with `overrides`."""
    from hydra import compose

    return compose(config.hydra.job.config_name, overrides=overrides)


def sweep_sizes(first: DictConfig, specs: list[tuple[str, list[str]]]) -> list[str]:
    """The sizes the sweep's cells name (each job's scaling.cell override, else the first job's scaling.cell), in
    order, without composing the jobs. Raises ConfigError for a cell naming no size of scaling.sizes."""
    from zoo.scaling.grid import cell_size

    default = first.scaling.cell
    cells = [next((o.split("=", 1)[1] for o in ov if o.startswith("scaling.cell=")), default) for _, ov in specs]
    return list(dict.fromkeys(cell_size(cell, first.scaling.sizes) for cell in cells))


def sweep_jobs(config: DictConfig, check_first=None) -> list:
    """Every job of a basic-sweeper multirun, composed: [(its +arch choice, its config)], in the order the
    sweeper runs them (sweep_overrides). check_first(the first job, the sizes the cells name (sweep_sizes)) runs
    after the first job composes and before the others do."""
    specs = sweep_overrides(config)
    first = compose_job(config, specs[0][1])
    if check_first is not None:
        check_first(first, sweep_sizes(first, specs))
    return [(specs[0][0], first)] + [(arch, compose_job(config, overrides)) for arch, overrides in specs[1:]]
