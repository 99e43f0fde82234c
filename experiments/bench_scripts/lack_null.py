"""The lack-of-fit gate against a true law whose runs keep their correlation across budgets.

The gate's judged chi2/dof (zoo.scaling.checks.form_lack_of_fit) is bounded by an F quantile that assumes the
cell means' errors are independent. A study's cells are not: a size's budgets are cool-downs of one trunk per
seed, so a seed's deviation carries across its budgets and moves a size's level as a whole. This script measures
what that does to the gate: each replicate is the family's design with the losses of its own fitted law (the
form's) times one measured run's whole deviation vector per run (zoo.scaling.null.simulate, as the report's null
of the other gates), refitted; its judged chi2/dof is compared with the same bound.

Prints, per family: the observed chi2/dof and its bound; a true law's 95% range and median over the replicates;
how many replicates exceed the bound (a calibrated gate: about 5%); and P, the share at least as large as observed.

    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    python experiments/bench_scripts/lack_null.py experiments/scaling/points.csv --form chinchilla --reps 200
"""

import argparse
import os
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scaling_form import FORMS, arrays  # noqa: E402

from zoo.scaling.checks import form_lack_of_fit  # noqa: E402
from zoo.scaling.law import ScalingError  # noqa: E402
from zoo.scaling.null import NULL_SEED, seed_deviations, simulate  # noqa: E402
from zoo.scaling.points import by_family, read_points_csv  # noqa: E402


def lack_null(form: str, points: list[dict], reps: int, seed: int = NULL_SEED) -> dict:
    """{"observed", "limit", "ratios" (each replicate's judged chi2/dof), "over" (replicates above their own
    bound), "p" (the share of replicates >= observed)} of `points` under `form` (scaling_form.FORMS). Raises
    ScalingError where the design gives no lack of fit (dof < 1) or cannot be simulated (zoo.scaling.null)."""
    law, fitter, floor = FORMS[form]
    params = fitter(*arrays(points))
    observed = form_lack_of_fit(law, params, points, floor=floor)
    if observed is None:
        raise ScalingError("no lack of fit to calibrate: fewer cells of 2 or more seeds than the form's parameters")
    truth = SimpleNamespace(predict=lambda N, D: law(N, D, *params))
    rng, deviations = np.random.default_rng(seed), seed_deviations(points)
    ratios, over = [], 0
    for _ in range(reps):
        sim = simulate(points, truth, deviations, rng)
        lack = form_lack_of_fit(law, fitter(*arrays(sim), starts=[params]), sim, floor=floor)
        ratios.append(lack["ratio"])
        over += lack["ratio"] > lack["limit"]
    ratios = np.array(ratios)
    p = float(np.mean(ratios >= observed["ratio"]))
    return {"observed": observed["ratio"], "limit": observed["limit"], "ratios": ratios, "over": over, "p": p}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("points", type=Path, help="a points.csv")
    p.add_argument("--form", choices=tuple(FORMS), default="chinchilla", help="the law's form (default chinchilla)")
    p.add_argument("--arch", nargs="*", help="only these families (default: every family of the points)")
    p.add_argument("--reps", type=int, default=200, help="replicates (default 200)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error(f"--reps {args.reps}: give 1 or more replicates")
    families = by_family(read_points_csv(args.points))
    for arch in args.arch or families:
        if arch not in families:
            p.error(f"--arch {arch!r} is not in {args.points}; it has {', '.join(families)}")
        r = lack_null(args.form, families[arch], args.reps)
        lo, med, hi = np.percentile(r["ratios"], [2.5, 50, 97.5])
        print(
            f"{arch} ({args.form}): chi2/dof {r['observed']:.2f} (bound {r['limit']:.2f}); a true law's 95%: "
            f"{lo:.2f} .. {hi:.2f}, median {med:.2f}; over the bound {r['over']} of {args.reps}; P = {r['p']:.3f}"
        )


if __name__ == "__main__":
    main()
