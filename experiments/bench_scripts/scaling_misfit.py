"""Why decoder_only's law fails its gates: diagnostics of the tuned study's fits (experiments/RESULTS.md, "Scaling:
experiment=scaling_long, each family tuned at each size (issue 45)"). Every law is zoo.scaling's fit (fit_points, no
bootstrap) and every gate statistic zoo.scaling.gates.family_checks', per family of a points.csv (N: non-embedding
parameters, as the study counts them). Eight subcommands, in four modules beside it (misfit_core: decompose and
interaction; misfit_variants: variants, cells, noise; misfit_power: common, power; misfit_rates: rates):

- decompose: the form's lack-of-fit chi^2 (the weighted fit to the cell means of zoo.scaling.checks.lack_of_fit,
  se = the size's pooled relative sd / sqrt(n)) split by nested models: M0 the law E + A/N^alpha + B/D^beta (5
  parameters); M1 c_s + B/D^beta (an offset per size: N's effect unconstrained); M2 c_s + B_s/D^beta (a D
  amplitude per size); M3 c_s + B_s/D^beta_s (a D exponent per size). Then M1's offsets against an E + A/N^alpha
  curve fitted to them, M2's amplitudes, M3's exponents, and M0's and M1's chi^2 by size. --without S ...: sizes
  left out; --se-from P: each size's sd from the same-named size of another points file (another record's noise).
- variants: the gate statistics of all sizes and without s1, with N non-embedding and total parameters (the
  embeddings counted: each size built by zoo.model at the plays' 84-character vocabulary, embeddings tied and
  shared, as the study trains them).
- cells: the gate statistics without each single cell (a size and a budget; decoder_only's by default), without
  the 4 cells removed greedily (each time the one whose removal lowers the form's chi^2/dof most), and without
  the longest budgets of s2 and s3 (160 and 70 tokens per parameter: 4 and 3.5 times their tuning budgets).
- noise: each family's cell residuals against the cells' standard errors; then for one family (decoder_only) the
  long-reach, hold-out and leave-one-size-out statistics of (b) a null simulation, the fitted law plus the
  family's own seed deviations (each run's vector of deviations from its cell means, drawn whole within its
  size), and (c) a bootstrap of runs within sizes of the real points.
- rates: cells rerun at another rate (experiments/scaling/rate_test.csv: decoder_only one sqrt(2) step down at s2
  and s3, one up at s4, seeds 1-3, every budget; and s2 seed 1 at the study's own rate, which must equal its
  points): each cell's loss against the study's, paired by seed, at d doublings from the budget the rate was
  tuned at; then the gates with each cell at its best rate (the lowest paired mean of the files given). With
  --other rate_test.csv per_budget_rates.csv: decoder_only one sqrt(2) step either side of its tuned rate at
  every size (two up at s4), seeds 1-2. With --other heads_test.csv and --variant: decoder_only's s4 and s5
  cells with 2 heads instead of 4 (so 2 heads, d_head = d_model / 2, at every size), at the study's rate. With
  --other beta2_0.95.csv or beta2_0.999.csv: decoder_only's s2 and s4 cells with AdamW's beta2 changed. With
  --forced heads_test.csv heads_rates.csv and --variant: s4 and s5 at 2 heads, each cell at its best of three rates,
  beside --other's rates for s1-s3. With --other objective_test.csv and --variant: decoder_only trained on the
  continuation alone (task.objective=causal_continuation), seeds 1-5 at every size; with objective_test.csv as
  the points and --other objective_rates.csv: that objective one sqrt(2) step up and down at every size. Under
  RoPE: --other rope_wd0.csv --variant "weight decay 0"; --other --forced rope_batch4.csv --variant "4 windows a
  step" (s1-s3 at half the batch, each cell at the better of two rates; --other with no file: --forced's cells
  alone); --other --forced rope_cosine.csv --variant "cosine to 0, each budget alone" (the schedule). A cell
  pairs with the study's budget within 0.1% (half a batch rounds budgets to whole steps).
  --decompose: the chi^2 decomposition of the changed cells, as `decompose` prints it; with --variant also with
  each paired shift's se added in quadrature to its cell's (the shifts' own noise, which the first leaves out).
- interaction: is the size-by-data interaction a data term whose shape depends on D/N (the design's confound:
  each size spans its own tokens per parameter)? On the cell means, each with an offset per size: M1 a data term
  B/D^b (the law's), M1dn B (N/D)^b, M1g B N^g / D^b (g free: 0 the law's, b a term in D/N), M2 B_s/D^b. The
  sizes' tokens per parameter overlap pairwise, so the two terms predict different cells. Then M1 and M1g each
  with report.md's one-rate-per-size curvature, a factor (1 + c d^2 / 100) in d = log2(D / D_tune): the two alias
  where a size's budgets lie on one side of its tuning budget, and fitted together they are told apart.
- power: each gate's power against another record's misfit (--pattern, e.g. the sinusoidal record; --model M2, its
  size-by-data interaction as decompose's M2 fits it, or M3, or raw: its cell means' residuals from its law, its
  own seed noise included), added to this record's: replicates of this record's design from its own law
  and seed deviations, with and without the pattern, on the same noise; per gate the share failing its fixed bound
  and the share beyond a true law's 95% range. Its lack of fit uses the record's own pooled seed sd (a replicate's
  drawn deviations repeat runs and would understate it).
- common: two records of one design (--other), per family, on the runs (size, seed) both have (--every-run: all of
  each, for records of other seeds): each size's pooled seed sd in each, and the law's chi^2 on the cell means
  and their rms residual with one standard error for both (each size's two sds pooled by their degrees of
  freedom), so that a noisier record's smaller chi^2 is not its noise alone.

Their output, as RESULTS.md quotes it: experiments/scaling/misfit_rope.txt for the RoPE record (decompose, common,
interaction) and experiments/scaling/misfit.txt for the sinusoidal one (each command's lines after its `$` line;
the decompose, variants, cells and noise blocks were printed before points.csv gained encoder_only's rows: a rerun
adds its family and leaves the other three's lines unchanged).

    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    python experiments/bench_scripts/scaling_misfit.py decompose
    python experiments/bench_scripts/scaling_misfit.py decompose experiments/scaling/untuned/points.csv
    python experiments/bench_scripts/scaling_misfit.py variants
    python experiments/bench_scripts/scaling_misfit.py cells
    python experiments/bench_scripts/scaling_misfit.py noise --reps 200 --seed 1
    python experiments/bench_scripts/scaling_misfit.py rates
    python experiments/bench_scripts/scaling_misfit.py interaction
    python experiments/bench_scripts/scaling_misfit.py power experiments/scaling/rope_test.csv \
        --pattern SINUSOIDAL_POINTS.csv --arch decoder_only
    python experiments/bench_scripts/scaling_misfit.py common --other experiments/scaling/rope_test.csv
    python experiments/bench_scripts/scaling_misfit.py rates --other experiments/scaling/heads_test.csv \
        --variant "2 heads instead of 4"
"""

import argparse
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")


from misfit_core import REPO, cmd_decompose, cmd_interaction  # noqa: E402
from misfit_power import cmd_common, cmd_power  # noqa: E402
from misfit_rates import cmd_rates  # noqa: E402
from misfit_variants import cmd_cells, cmd_noise, cmd_variants  # noqa: E402

from zoo.scaling.law import ScalingError  # noqa: E402
from zoo.scaling.points import by_family, read_points_csv  # noqa: E402

POINTS = REPO / "experiments" / "scaling" / "points.csv"
RATE_TEST = REPO / "experiments" / "scaling" / "rate_test.csv"


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    cmds = {
        "decompose": cmd_decompose,
        "variants": cmd_variants,
        "cells": cmd_cells,
        "noise": cmd_noise,
        "rates": cmd_rates,
        "interaction": cmd_interaction,
        "power": cmd_power,
        "common": cmd_common,
    }
    helps = {
        "decompose": "the form's lack-of-fit chi2 split by nested models M0 .. M3",
        "variants": "gate statistics without s1, and with N the total parameters",
        "cells": "gate statistics without single cells, the greedy 4, the longest budgets of s2 and s3",
        "noise": "cell residuals vs se; a seed-noise null simulation and a bootstrap of runs",
        "rates": "cells rerun at another rate: paired shifts, and the gates with each cell at its better rate",
        "interaction": "is the size-by-data interaction a data term in D/N? M1, M1dn, M1g, M2 on the cell means",
        "power": "each gate's power: a true law's replicates with and without another record's misfit added",
        "common": "two records of one design: seed sd per size, and the law's chi^2 with one standard error for both",
    }
    for name, func in cmds.items():
        s = sub.add_parser(name, help=helps[name])
        s.add_argument("points", nargs="?", type=Path, default=POINTS, help="a points.csv (default: %(default)s)")
        s.set_defaults(func=func)
    sub.choices["cells"].add_argument(
        "--singles", nargs="*", default=["decoder_only"], help="families to drop each cell of"
    )
    dec = sub.choices["decompose"]
    dec.add_argument("--without", nargs="*", default=[], help="sizes left out (e.g. s2)")
    dec.add_argument("--se-from", type=Path, help="a points.csv whose same-named sizes' seed noise sets the se")
    sub.choices["noise"].add_argument("--arch", default="decoder_only", help="the family simulated and resampled")
    sub.choices["noise"].add_argument("--reps", type=positive, default=40, help="replicates of each (default 40)")
    sub.choices["rates"].add_argument(
        "--other",
        type=Path,
        nargs="*",
        default=[RATE_TEST],
        help="the cells at other rates (default: %(default)s; none: --forced's cells alone)",
    )
    sub.choices["rates"].add_argument(
        "--decompose", action="store_true", help="also decompose the chi^2 of the cells at their best rates"
    )
    sub.choices["rates"].add_argument(
        "--variant", help="what --other's cells changed, where it is not the rate (e.g. '2 heads at s4')"
    )
    sub.choices["rates"].add_argument(
        "--forced",
        type=Path,
        nargs="+",
        help="cells of another design (named by --variant) at one or more rates: each of their cells takes its "
        "best of them, better than the study's or not; --other's rates apply to the other cells",
    )
    sub.choices["noise"].add_argument("--seed", type=int, default=1, help="numpy's generator seed (default 1)")
    sub.choices["common"].add_argument("--other", type=Path, required=True, help="the other record's points.csv")
    sub.choices["common"].add_argument(
        "--every-run", action="store_true", help="every run of each record, not the (size, seed) runs both have"
    )
    power = sub.choices["power"]
    power.add_argument("--pattern", type=Path, required=True, help="the points.csv whose misfit is added")
    power.add_argument("--arch", default="decoder_only", help="the family (default decoder_only)")
    power.add_argument("--reps", type=positive, default=100, help="replicates (default 100)")
    power.add_argument("--seed", type=int, default=1, help="numpy's generator seed (default 1)")
    power.add_argument(
        "--model", choices=("M2", "M3", "raw"), default="M2", help="the misfit: a nested model's (default M2) or raw"
    )
    return p


def main(argv=None) -> None:
    p = parser()
    args = p.parse_args(argv)
    if getattr(args, "forced", None) and not args.variant:
        p.error("--forced needs --variant: name what its cells changed (e.g. --variant '2 heads instead of 4')")
    try:
        args.families = by_family(read_points_csv(args.points))
    except ScalingError as e:
        p.error(str(e))
    if args.command in ("noise", "power") and args.arch not in args.families:
        p.error(f"--arch {args.arch!r} is not in {args.points}; it has {', '.join(args.families)}")
    try:
        args.func(args)
    except ScalingError as e:
        p.error(str(e))


if __name__ == "__main__":
    main()
