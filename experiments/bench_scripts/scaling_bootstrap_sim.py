"""Which design and which bootstrap pin the exponents: a simulation on a known law (experiments/RESULTS.md,
"Scaling"; docs/scaling-laws.md, "The gates").

Data sets are drawn from L(N, D) = E + A / N^alpha + B / D^beta at the points of a design, each run (a size and
seed: a trunk and its cool-downs) shifted by its own multiplicative offset (sd `--run-noise`) and each point by
its own (sd `--point-noise`), as seeds do to a real study. Each is fitted with zoo.scaling's fitter and three
bootstraps: over whole runs (groups); over runs within each size drawing n of a size's n runs (strata, plain);
and within each size with Rao & Wu's rescaling (strata: what fit_scaling_law does). Printed per design and
bootstrap: the median half-width of alpha's and beta's 95% intervals, how often they hold the truth, and the
median 95% interval of E.

Designs, on experiment=scaling's five sizes (conf/experiment/scaling.yaml):
- grid: each size's own budgets (s1-s4 at about 0.5, 1, 2, 4 M tokens, s5 at 5, 10, 20 tokens per parameter);
- ratio: every size at 5, 10, 20 tokens per parameter (D a multiple of N at every point).
Seeds: experiment=scaling_long's (3 at every size).

    OPENBLAS_NUM_THREADS=1 python experiments/bench_scripts/scaling_bootstrap_sim.py --reps 20 --bootstrap 100
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's L-BFGS-B is 10-30x slower with OpenBLAS threads

import numpy as np  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from zoo.run.conf import CONF_DIR  # noqa: E402
from zoo.scaling import bootstrap as B  # noqa: E402
from zoo.scaling.fit import fit_scaling_law  # noqa: E402
from zoo.scaling.sizes import size_budgets, size_non_embedding, size_seeds  # noqa: E402

# a law of this study's scale (the second design's decoder_only fit with E fixed near its envelope's asymptote)
TRUE = {"E": 1.1, "A": 2.3, "alpha": 0.143, "B": 655.0, "beta": 0.534}


def design(kind: str) -> list[tuple[str, int, float, float]]:
    """(size, seed, N, D) of every point of the design."""
    base = OmegaConf.load(f"{CONF_DIR}/experiment/scaling.yaml")
    scaling = OmegaConf.merge(base, OmegaConf.load(f"{CONF_DIR}/experiment/scaling_long.yaml")).scaling
    out = []
    for name, size in scaling.sizes.items():
        N = float(size_non_embedding(size))
        budgets = size_budgets(size, scaling.budgets) if kind == "grid" else [5.0, 10.0, 20.0]
        for seed in range(1, size_seeds(name, size, scaling.seed_size, scaling.seeds) + 1):
            out += [(name, seed, N, b * N) for b in budgets]
    return out


def law(N, D):
    return TRUE["E"] + TRUE["A"] / N ** TRUE["alpha"] + TRUE["B"] / D ** TRUE["beta"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=20, help="simulated data sets per design")
    p.add_argument("--bootstrap", type=int, default=100, help="resamples per fit")
    p.add_argument("--run-noise", type=float, default=0.005, help="sd of a run's multiplicative offset")
    p.add_argument("--point-noise", type=float, default=0.003, help="sd of a point's multiplicative noise")
    args = p.parse_args(argv)
    draw = B.resample_weights
    print(
        f"truth {TRUE}; noise: run {args.run_noise:.1%}, point {args.point_noise:.1%}; {args.reps} data sets, "
        f"{args.bootstrap} resamples each"
    )
    print("| design | bootstrap | points | alpha ±half-width | holds alpha | beta ±half-width | holds beta | E 95% |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for kind in ("ratio", "grid"):
        pts = design(kind)
        N, D = (np.array([q[i] for q in pts]) for i in (2, 3))
        runs = [f"{q[0]}|{q[1]}" for q in pts]
        rng = np.random.default_rng(0)
        stats = {"runs": [], "within sizes, n draws": [], "within sizes, rescaled": []}
        for _ in range(args.reps):
            offset = {r: rng.normal(0.0, args.run_noise) for r in sorted(set(runs))}
            L = law(N, D) * np.exp([offset[r] for r in runs] + rng.normal(0.0, args.point_noise, len(N)))
            for name in stats:
                B.resample_weights = lambda rng, u, n, rescaled: draw(rng, u, n, rescaled and "rescaled" in name)
                strata = None if name == "runs" else N
                fit = fit_scaling_law(N, D, L, bootstrap=args.bootstrap, seed=1, groups=runs, strata=strata)
                stats[name].append([*fit.ci["alpha"], *fit.ci["beta"], *fit.ci["E"]])
            B.resample_weights = draw
        for name, rows in stats.items():
            a = np.array(rows)
            half = lambda lo, hi: np.median((a[:, hi] - a[:, lo]) / 2)  # noqa: E731
            holds = lambda lo, hi, k: np.mean((a[:, lo] <= TRUE[k]) & (TRUE[k] <= a[:, hi]))  # noqa: E731
            print(
                f"| {kind} | {name} | {len(N)} | {half(0, 1):.3f} | {holds(0, 1, 'alpha'):.0%} | {half(2, 3):.3f} | "
                f"{holds(2, 3, 'beta'):.0%} | [{np.median(a[:, 4]):.2f}, {np.median(a[:, 5]):.2f}] |"
            )


if __name__ == "__main__":
    main()
