"""python -m zoo.scaling fit FILE.csv --params COL (--tokens COL | --flops COL) --loss COL [--drop-highest K]
[--bootstrap B] [--seed S] [--group COLS] [--strata COLS] [--json OUT] [--compute C ...]
python -m zoo.scaling gates POINTS.csv [--bootstrap B] [--unique-tokens U]
python -m zoo.scaling cross LM.csv TRANSLATION.csv [--bootstrap B] [--unique-tokens U_LM U_TRANSLATION]
python -m zoo.scaling pack DIR FILE | unpack FILE DIR

Fits the Chinchilla law L(N, D) = E + A / N^alpha + B / D^beta to a CSV of points (any runs, not only zoo's) with
bootstrap intervals, and prints the compute-optimal allocation and the frontier L*(C) (docs/scaling-laws.md).
`gates` prints the gate table of a study's points.csv and the tables beside it (zoo.scaling.study); `cross` the
cross-task table of two studies (zoo.scaling.cross_task); `pack` and `unpack` carry a study's finished cells
between machines (zoo.scaling.carry).
Bad input (a missing column, a non-numeric or non-positive value, too few points, fewer than 3 distinct N or D) exits
with 2 before any fitting.
"""

import argparse
import json
import math
import os
import sys
from pathlib import Path

from zoo.scaling.fit_csv import read_points

MIN_BOOTSTRAP = 40  # the fewest resamples whose 2.5% and 97.5% percentiles are not the extreme draws


def default_compute(N, D) -> list[float]:
    """Powers of ten spanning the points' compute 6 N D (FLOPs)."""
    logs = [math.log10(6.0 * n * d) for n, d in zip(N, D)]
    return [float(f"1e{k}") for k in range(math.floor(min(logs)), math.ceil(max(logs)) + 1)]


def _ci(ci) -> str:
    return "-" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def table(fit, allocation: dict, source: str, unit: str = "points") -> str:
    """The text report: parameters with intervals, then N_opt, D_opt and L*(C) at each compute C; `unit`: what a
    resample draws (whole points, or the groups of --group)."""
    pct = f"{100 * fit.level:g}%"
    boot = f"{fit.n_bootstrap} bootstrap resamples of whole {unit}, seed {fit.seed}"
    boot = boot if fit.n_bootstrap else "no bootstrap"
    lines = [
        "L(N, D) = E + A / N^alpha + B / D^beta",
        f"data: {source}",
        f"fit: Huber (delta 1e-3) on log L, L-BFGS-B from Hoffmann et al.'s grid; {boot}",
        "",
        f"{'':8}{'value':>12}  {pct} interval",
    ]
    notes = {"a": "N_opt ∝ C^a, a = beta / (alpha + beta)", "b": "D_opt ∝ C^b, b = alpha / (alpha + beta)"}
    notes["G"] = "N_opt = G (C/6)^a"
    for k in ("E", "A", "B", "alpha", "beta", "a", "b", "G"):
        value = f"{fit.values[k]:.4g}" if math.isfinite(fit.values[k]) else "-"
        lines.append(f"{k:8}{value:>12}  {_ci(fit.ci[k]):24}  {notes.get(k, '')}".rstrip())
    lines += ["", f"compute-optimal allocation, C = 6 N D FLOPs (Hoffmann et al. 2022, appendix D.2; {pct} intervals):"]
    lines.append(f"{'C':>10}  {'N_opt':>10} {'':24} {'D_opt':>10} {'':24} {'L*(C)':>10}")
    for i, c in enumerate(allocation["C"]):
        cells = []
        for name in ("N_opt", "D_opt", "loss"):
            v, ci = allocation[name]["value"][i], allocation[name]["ci"]
            cells.append(f"{'-' if v is None else f'{v:.4g}':>10} {_ci(None if ci is None else ci[i]):24}")
        lines.append(f"{c:>10.3g}  " + " ".join(cells).rstrip())
    lines += [f"note: {n}" for n in fit.notes]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    """The argument parser of `python -m zoo.scaling` (sub-commands fit, gates, cross, pack and unpack)."""
    parser = argparse.ArgumentParser(prog="python -m zoo.scaling", description=__doc__.split("\n\n")[1])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fit", help="fit L(N, D) = E + A / N^alpha + B / D^beta to a CSV of points")
    p.add_argument("csv", type=Path, metavar="FILE.csv", help="one row per point (run), with a header row")
    p.add_argument("--params", required=True, metavar="COL", help="column of parameter counts N")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--tokens", metavar="COL", help="column of training tokens D")
    which.add_argument("--flops", metavar="COL", help="column of training compute C in FLOPs: D = C / (6 N)")
    p.add_argument("--loss", required=True, metavar="COL", help="column of final losses (nats per token)")
    p.add_argument("--drop-highest", type=int, default=0, metavar="K", help="drop the K highest-loss points first")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="B", help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resamples (default 0)")
    p.add_argument(
        "--group",
        metavar="COL",
        help="column naming each point's run (or other unit of independence), or columns (COL1,COL2, e.g. "
        "size,seed): a resample draws whole groups (default: whole points, too narrow when a run gives several)",
    )
    p.add_argument(
        "--strata",
        metavar="COLS",
        help="column(s) of a designed factor, e.g. size: a resample draws each stratum's own number of groups (or "
        "points) from it, so every size stays in every resample (the stratified bootstrap)",
    )
    p.add_argument(
        "--where",
        action="append",
        metavar="COL=VALUE",
        help="fit only the rows whose column COL holds VALUE (repeatable), e.g. --where arch=decoder_only for one "
        "architecture of a study's points.csv",
    )
    p.add_argument("--json", type=Path, metavar="OUT", help="also write the fit as JSON")
    _gates_parser(sub)
    _cross_parser(sub)
    _carry_parsers(sub)
    p.add_argument(
        "--compute",
        type=float,
        nargs="+",
        metavar="C",
        help="compute budgets (FLOPs) of the allocation table (default: the powers of ten spanning the points' 6 N D)",
    )
    return parser


def _gates_parser(sub) -> None:
    g = sub.add_parser("gates", help="the gate table of a study's points.csv (python -m zoo.report writes it)")
    g.add_argument("csv", type=Path, metavar="POINTS.csv", help="arch,size,seed,n_params,tokens,flops,loss[,kind,lr]")
    g.add_argument("--bootstrap", type=int, default=200, metavar="B", help="resamples of each fit (default 200)")
    g.add_argument(
        "--unique-tokens",
        type=float,
        metavar="U",
        help="unique training tokens of the data-constrained form (default: a train_tokens column, else the "
        "shakespeare_plays training split's 4,470,805)",
    )


def _cross_parser(sub) -> None:
    c = sub.add_parser("cross", help="the cross-task table of two studies' points.csv: LM and translation")
    c.add_argument("lm", type=Path, metavar="LM.csv", help="the language-model study's points.csv")
    c.add_argument("translation", type=Path, metavar="TRANSLATION.csv", help="the translation study's points.csv")
    c.add_argument("--bootstrap", type=int, default=200, metavar="B", help="resamples of each fit (default 200)")
    c.add_argument(
        "--unique-tokens",
        type=float,
        nargs=2,
        metavar=("U_LM", "U_TRANSLATION"),
        help="each study's unique training tokens (the law forms' comparison; default: the shakespeare_plays "
        "training split's 4,470,805, and a train_tokens column or none for the translation study)",
    )


def _carry_parsers(sub) -> None:
    p = sub.add_parser("pack", help="a study's finished cells into one text file (zoo.scaling.carry)")
    p.add_argument("sweep", type=Path, metavar="DIR", help="the study's sweep folder (hydra.sweep.dir)")
    p.add_argument("file", type=Path, metavar="FILE", help="the pack file (cells it holds already are kept)")
    u = sub.add_parser("unpack", help="a pack file's cells into a sweep folder, where the study skips them")
    u.add_argument("file", type=Path, metavar="FILE", help="a file written by pack")
    u.add_argument("sweep", type=Path, metavar="DIR", help="the sweep folder to continue the study in")


def _carry_command(args) -> int:
    """`pack` or `unpack` (zoo.scaling.carry): prints what it did; 2 after printing a ScalingError."""
    from zoo.errors import listed
    from zoo.scaling.carry import pack, unpack
    from zoo.scaling.law import ScalingError

    try:
        if args.command == "pack":
            new, total, left = pack(args.sweep, args.file)
            print(f"{args.file}: {new} finished cells of {args.sweep} packed; {total} cells in the file")
            if left:
                print(f"not packed, not finished (training, cut off or damaged): {listed(left, 5)}")
        else:
            written, same = unpack(args.file, args.sweep)
            print(f"{args.sweep}: {written} cells written from {args.file}, {same} already there")
    except ScalingError as e:
        print(f"zoo.scaling: error: {e}", file=sys.stderr)
        return 2
    return 0


def _study_command(args) -> int:
    """`gates` (zoo.scaling.study), `cross` (zoo.scaling.cross_task), `pack` or `unpack` (zoo.scaling.carry),
    imported only when asked for."""
    if args.command in ("pack", "unpack"):
        return _carry_command(args)
    if args.command == "cross":
        from zoo.scaling.cross_task import cross_main

        return cross_main(args)
    from zoo.scaling.study import gates_main

    return gates_main(args)


def _checked_args(args) -> dict:
    """The fit command's --where as {column: value}, after checking --json and --compute. ScalingError for a
    --json in a missing folder or naming a folder, a compute budget that is not positive, or a --where not COL=VALUE."""
    from zoo.scaling.law import ScalingError

    if args.json is not None and not args.json.parent.is_dir():
        raise ScalingError(f"--json {args.json}: the folder {args.json.parent} does not exist; create it first")
    if args.json is not None and args.json.is_dir():
        raise ScalingError(f"--json {args.json} is a folder; give a file name in it, e.g. {args.json / 'fit.json'}")
    if args.compute is not None and not all(math.isfinite(c) and c > 0 for c in args.compute):
        raise ScalingError(f"--compute {args.compute}: compute budgets must be positive FLOPs")
    where = {}
    for item in args.where or []:
        col, eq, value = item.partition("=")
        if not eq or not col:
            raise ScalingError(f"--where {item!r}: give COL=VALUE, e.g. --where arch=decoder_only")
        where[col] = value
    return where


def _check_resampling(args) -> None:
    """ScalingError for a negative --seed, or a --bootstrap that is neither 0 nor at least MIN_BOOTSTRAP."""
    from zoo.scaling.law import ScalingError

    if args.seed < 0:
        raise ScalingError(f"--seed {args.seed}: a seed is a non-negative integer (default 0)")
    if args.bootstrap < 0 or 0 < args.bootstrap < MIN_BOOTSTRAP:
        raise ScalingError(
            f"--bootstrap {args.bootstrap}: give 0 (no intervals) or at least {MIN_BOOTSTRAP} resamples (a 95% "
            "percentile interval needs its 2.5% tails; default 1000)"
        )


def _print_fit(args, fit, allocation: dict, labels: list[str], kept, groups, strata) -> None:
    """The fit's table on stdout, and its JSON in --json (with the frontier and which rows were dropped)."""
    derived = f"D = C / (6 N) from {args.flops!r}" if args.flops else f"D from {args.tokens!r}"
    dropped = sorted(set(range(len(labels))) - set(kept.tolist()))
    source = f"{args.csv}: {fit.n_points} of {len(labels)} points ({len(dropped)} highest losses dropped); {derived}"
    unit = "points" if groups is None else f"groups of {args.group!r} ({len({groups[i] for i in kept})})"
    if strata is not None:
        unit += f" within the strata of {args.strata!r} ({len({strata[i] for i in kept})})"
    print(table(fit, allocation, source, unit))
    if args.json is not None:
        data = {"file": str(args.csv), "rows": len(labels), "dropped": [labels[i] for i in dropped]}
        out = {**fit.to_dict(), "frontier": allocation, "data": {**data, "group": args.group, "strata": args.strata}}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(args.json)


def main(argv=None) -> int:
    """Run the CLI: print the fit's table (and write --json); returns 0, 2 after printing a ScalingError, or 1 when
    the fit did not converge (nothing printed to stdout or written)."""
    args = _parser().parse_args(argv)
    # scipy >= 1.15's L-BFGS-B runs 10-30x slower with OpenBLAS threads (scipy issue #22438): one thread, unless
    # the user chose; takes effect because numpy loads only below
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args.command != "fit":
        return _study_command(args)
    from zoo.scaling.fit import fit_scaling_law
    from zoo.scaling.law import ScalingError, check_points, underdetermined

    try:
        where = _checked_args(args)
        N, D, L, labels, groups, strata = read_points(
            args.csv, args.params, args.loss, args.tokens, args.flops, args.group, where, args.strata
        )
        kept = check_points(N, D, L, args.drop_highest, labels)
        why_not = underdetermined([N[i] for i in kept], [D[i] for i in kept])
        if why_not is not None:
            raise ScalingError(why_not)
        _check_resampling(args)
        fit = fit_scaling_law(
            N,
            D,
            L,
            drop_highest=args.drop_highest,
            bootstrap=args.bootstrap,
            seed=args.seed,
            groups=groups,
            strata=strata,
        )
        compute = args.compute or default_compute([N[i] for i in kept], [D[i] for i in kept])
        allocation = fit.allocation(compute)
    except ScalingError as e:
        print(f"zoo.scaling: error: {e}", file=sys.stderr)
        return 2
    if not fit.converged:  # refused: an optimiser's early stop is not a fit
        print(f"zoo.scaling: error: {fit.notes[0]}; check the data (docs/scaling-laws.md#convergence)", file=sys.stderr)
        return 1
    _print_fit(args, fit, allocation, labels, kept, groups, strata)
    return 0


if __name__ == "__main__":
    sys.exit(main())
