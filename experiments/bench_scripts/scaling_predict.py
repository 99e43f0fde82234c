"""A law fitted on one study's points predicting the cells of a size it has not seen (experiments/RESULTS.md, "A
seventh size for the depth-with-width law"): each new cell's seed mean against the law at its measured tokens.

- fit: the form (scaling_form.py's FORMS: chinchilla, kaplan-e, kaplan, coupled) on every run's points of FIT;
- band: the 95% percentile interval of the prediction over resamples of FIT's runs within sizes (Rao & Wu's
  rescaled weights, numpy's default_rng(0), as the report's intervals);
- error: (predicted - measured) / measured of each new cell's mean; the long reach's bounds judge them: every
  |error| <= 3%, the mean signed error within ±1%;
- inside: whether the cell mean lies within the band widened by 2 standard errors of the mean (std over seeds with
  ddof 1 / sqrt(n)), a reading beside the bounds.

    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    python experiments/bench_scripts/scaling_predict.py experiments/scaling/depthwidth_points.csv \\
        experiments/scaling/depthwidth_s7_points.csv --form coupled
"""

import argparse
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scaling_form import FORMS, arrays, resampled_fits  # noqa: E402

from zoo.scaling.gates import REACH_BIAS, REACH_ERROR  # noqa: E402
from zoo.scaling.points import by_family, cell_means, read_points_csv  # noqa: E402


def prediction_band(fitter, law, points: list[dict], params, N, D, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """The 2.5% and 97.5% percentiles of law(N, D) over scaling_form.resampled_fits (n_boot refits on resamples of
    the points' runs within sizes, each from `params`)."""
    draws = [law(N, D, *fit) for fit in resampled_fits(fitter, points, params, n_boot)]
    lo, hi = np.percentile(np.array(draws), [2.5, 97.5], axis=0)
    return lo, hi


def predict_cells(form: str, fit_points: list[dict], new_points: list[dict], n_boot: int) -> dict:
    """{"params", "cells": [{"size", "D", "n", "mean", "se", "predicted", "lo", "hi", "error", "inside"}], "worst",
    "mean", "passes"} of `form` fitted on fit_points, predicting new_points' cell means."""
    law, fitter, _ = FORMS[form]
    params = fitter(*arrays(fit_points))
    cells = cell_means(new_points)
    N, D = (np.array([c[k] for c in cells]) for k in ("N", "D"))
    predicted = law(N, D, *params)
    lo, hi = prediction_band(fitter, law, fit_points, params, N, D, n_boot)
    rows = []
    for c, p, a, b in zip(cells, predicted, lo, hi):
        se = 0.0 if np.isnan(c["se"]) else c["se"]
        inside = bool(a - 2 * se <= c["mean"] <= b + 2 * se)
        error = float(p / c["mean"] - 1)
        rows.append(c | {"predicted": float(p), "lo": float(a), "hi": float(b), "error": error, "inside": inside})
    errors = np.array([r["error"] for r in rows])
    worst, mean = float(np.max(np.abs(errors))), float(np.mean(errors))
    passes = worst <= REACH_ERROR and abs(mean) <= REACH_BIAS
    return {"params": params, "cells": rows, "worst": worst, "mean": mean, "passes": passes}


def print_prediction(form: str, got: dict) -> None:
    print(f"{form}: " + " ".join(f"{v:.4g}" for v in got["params"]))
    print("size  D (tokens)   seeds  mean ± se          predicted  95% band           error    inside band ± 2 se")
    for r in got["cells"]:
        band = f"[{r['lo']:.4f}, {r['hi']:.4f}]"
        print(
            f"{r['size']:<5} {r['D']:>11,.0f}  {r['n']:>5}  {r['mean']:.4f} ± {r['se']:.4f}  {r['predicted']:.4f}"
            f"     {band}  {r['error']:+.2%}   {'yes' if r['inside'] else 'no'}"
        )
    verdict = "pass" if got["passes"] else "FAIL"
    print(f"largest |error| {got['worst']:.2%}, mean signed {got['mean']:+.2%}: {verdict} (3%, ±1%)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fit", type=Path, help="the points.csv the law is fitted on")
    p.add_argument("new", type=Path, help="the points.csv of the size it predicts")
    p.add_argument("--form", nargs="+", choices=tuple(FORMS), default=["coupled"], help="the law's form(s)")
    p.add_argument("--arch", default="decoder_only", help="the family (default %(default)s)")
    p.add_argument("--bootstrap", type=int, default=200, help="resamples of the prediction's band (default 200)")
    args = p.parse_args(argv)
    fit, new = (by_family(read_points_csv(path)) for path in (args.fit, args.new))
    for name, points in (("fit", fit), ("new", new)):
        if args.arch not in points:
            p.error(f"--arch {args.arch!r} is not in the {name} points; they have {', '.join(points)}")
    seen = {q["N"] for q in fit[args.arch]} & {q["N"] for q in new[args.arch]}
    if seen:
        p.error(f"{args.new} has sizes the fit already holds (N = {sorted(seen)}): give a size it has not seen")
    for form in args.form:
        print_prediction(form, predict_cells(form, fit[args.arch], new[args.arch], args.bootstrap))
        print()


if __name__ == "__main__":
    main()
