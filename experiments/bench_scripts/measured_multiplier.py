"""The compute multiplier read off the measured points, without a fitted law (experiments/RESULTS.md "Scaling").

    python experiments/bench_scripts/measured_multiplier.py STUDY_DIR [--ref decoder_only]

Per architecture, the measured frontier is the lower envelope of its evaluations in (training FLOPs C, loss):
the best loss any of its runs reached with at most C. For each point of the reference's envelope (loss L at C),
the compute C' at which another architecture's envelope first reaches L (interpolated linearly in log C and log
L between its envelope points) gives k = C' / C; '>' when that architecture never got so low, '<' when it was
already lower at its smallest C. Prints a Markdown table.
"""

import argparse
import math
from pathlib import Path

from zoo.report.runs import find_runs
from zoo.report.scaling import scaling_points


def envelope(points: list[dict]) -> list[tuple[float, float]]:
    """[(C, loss)] in increasing C where the loss is lower than at every smaller C."""
    out = []
    for p in sorted(points, key=lambda p: p["C"]):
        if not out or p["loss"] < out[-1][1]:
            out.append((p["C"], p["loss"]))
    return out


def compute_to_reach(env: list[tuple[float, float]], loss: float) -> tuple[str, float]:
    """('=', C') where the envelope first reaches `loss`; ('<', C_min) when already below it at its first
    point; ('>', C_max) when it never does."""
    if env[0][1] <= loss:
        return "<", env[0][0]
    for (c0, l0), (c1, l1) in zip(env, env[1:]):
        if l1 <= loss:
            t = (math.log(loss) - math.log(l0)) / (math.log(l1) - math.log(l0))
            return "=", math.exp(math.log(c0) + t * (math.log(c1) - math.log(c0)))
    return ">", env[-1][0]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("study", type=Path)
    p.add_argument("--ref", default="decoder_only")
    args = p.parse_args(argv)
    points = scaling_points(find_runs(args.study))
    archs = sorted({q["arch"] for q in points} - {args.ref})
    envs = {a: envelope([q for q in points if q["arch"] == a]) for a in [args.ref, *archs]}
    lines = [f"| {args.ref} C | {args.ref} loss | " + " | ".join(f"k {a}" for a in archs) + " |"]
    lines.append("|---:|---:|" + "---:|" * len(archs))
    for c, loss in envs[args.ref]:
        cells = []
        for a in archs:
            how, c2 = compute_to_reach(envs[a], loss)
            cells.append(f"{'' if how == '=' else how}{c2 / c:.2f}")
        lines.append(f"| {c:.3g} | {loss:.3f} | " + " | ".join(cells) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
