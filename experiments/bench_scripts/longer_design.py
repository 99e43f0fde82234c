"""A longer design for the small sizes, tested on decoder_only (experiments/RESULTS.md, "Scaling").

The study's hold-out misses because its small runs stop after 78-462 steps. This refits decoder_only's law on
s1-s3 trained longer (s1, s2 to 48 tokens per parameter, s3 to 24) and predicts the study's s4 run (2-12
tokens per parameter), next to the same fit on the study's own s1-s3 (seed 1):

    for a in "s1 48 8" "s2 48 8" "s3 24 4"; do set -- $a
      python -m zoo -m experiment=scaling +arch=decoder_only \\
        $(for s in s1 s2 s3 s4; do [ $s != $1 ] && echo "~scaling.sizes.$s"; done) \\
        scaling.seed_size=$1 scaling.seeds=1 scaling.max_tokens_per_param=$2 scaling.eval_every=$3 \\
        hydra.sweep.dir=outputs/scaling_long/$1
    done
    python experiments/bench_scripts/longer_design.py outputs/scaling/<study> outputs/scaling_long
"""

import argparse
from pathlib import Path

import numpy as np

from zoo.report.runs import find_runs
from zoo.report.scaling import fit_points, scaling_points


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("study", type=Path)
    p.add_argument("long", type=Path)
    args = p.parse_args(argv)
    study = [q for q in scaling_points(find_runs(args.study)) if q["arch"] == "decoder_only" and "_seed1" in q["run"]]
    top = max(q["N"] for q in study)
    held = sorted((q for q in study if q["N"] == top), key=lambda q: q["C"])
    designs = {
        "the study's s1-s3 (to 12 tokens/param)": [q for q in study if q["N"] < top],
        "s1, s2 to 48 tokens/param, s3 to 24": scaling_points(find_runs(args.long)),
    }
    for name, train in designs.items():
        fit = fit_points(train, bootstrap=0)
        loss = np.array([q["loss"] for q in train])
        res = fit.predict(np.array([q["N"] for q in train]), np.array([q["D"] for q in train])) / loss - 1
        pred = fit.predict(np.array([q["N"] for q in held]), np.array([q["D"] for q in held]))
        errors = ", ".join(f"{abs(a - q['loss']) / q['loss']:.1%}" for a, q in zip(pred, held))
        v = fit.values
        print(
            f"{name}: {len(train)} points, alpha {v['alpha']:.3g}, beta {v['beta']:.3g}, E {v['E']:.3g}; "
            f"residual rms {np.sqrt(np.mean(res**2)):.2%}; N = {top:,.0f} predicted with errors {errors}"
        )


if __name__ == "__main__":
    main()
