"""How the report's Scaling section fits each architecture's law, and the command that redoes a fit.

The report and `python -m zoo.scaling fit` draw their bootstrap resamples with one function
(zoo.scaling.fit.fit_scaling_law: numpy's default_rng(seed), groups and strata numbered in sorted order of their
labels). The report gives it the labels the CLI reads from points.csv: a point's group is "SIZE|SEED" (its run:
--group size,seed) and its stratum SIZE (--strata size), and points.csv holds every number as the report fitted
it. So the printed command, run in the report's folder, draws the same resamples and prints the same intervals.
"""

SEED = 0  # the seed of the report's resamples
COMMAND = "python -m zoo.scaling fit {csv} --params n_params --tokens tokens --loss loss --where arch={arch}"


def fit_options(points: list[dict], bootstrap: int, strata: bool, by_run: bool = True) -> dict:
    """The keyword arguments of fit_scaling_law for `points` (zoo.report.scaling.scaling_points): bootstrap, seed
    (SEED), groups ("SIZE|SEED", the CLI's --group size,seed; a point without a size and seed: its "run"; None
    with by_run False: whole points) and strata (SIZE, the CLI's --strata size, else N; None when `strata` is
    False)."""
    return {
        "bootstrap": bootstrap,
        "seed": SEED,
        "groups": [f"{p['size']}|{p['seed']}" if "size" in p and "seed" in p else str(p["run"]) for p in points]
        if by_run
        else None,
        "strata": [str(p["size"]) if "size" in p else str(p["N"]) for p in points] if strata else None,
    }


def refit_command(csv_name: str, arch: str, options: dict) -> str:
    """The `python -m zoo.scaling fit` command that redoes the fit of `arch` that fit_scaling_law made with
    `options` (fit_options) from the points.csv named csv_name: the same points, groups, strata, resamples and
    seed."""
    cmd = COMMAND.format(csv=csv_name, arch=arch)
    if options.get("groups") is not None:
        cmd += " --group size,seed"
    if options.get("strata") is not None:
        cmd += " --strata size"
    return cmd + f" --bootstrap {options['bootstrap']} --seed {options['seed']}"


def refit_sentence(csv_name: str, fits: dict) -> str:
    """ " Each command ...: `cmd`; `cmd`." for the fits {arch: ScalingFit with its fit_scaling_law `options`}; ""
    for none."""
    if not fits:
        return ""
    commands = "; ".join(f"`{refit_command(csv_name, arch, fit.options)}`" for arch, fit in fits.items())
    return (
        " Each command here, run in this folder, redoes an architecture's fit with the same resamples and seed, so "
        f"it prints the same intervals: {commands}."
    )


def number(x) -> str:
    """A number of points.csv as text that reads back to the same float: an integral value as an integer, else
    Python's shortest round-trip repr."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)
