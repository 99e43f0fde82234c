"""scaling_misfit.py's gate statistics of changed point sets: the `variants`, `cells` and `noise` subcommands."""

import copy
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # scipy's fits are many times slower with OpenBLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from misfit_core import budgets, drop, fit  # noqa: E402

from zoo.model.cost import non_embedding_param_count  # noqa: E402
from zoo.scaling.checks import lack_of_fit, seed_noise  # noqa: E402
from zoo.scaling.conventions import study_shapes  # noqa: E402
from zoo.scaling.gates import family_checks  # noqa: E402
from zoo.scaling.law import ScalingError  # noqa: E402
from zoo.scaling.null import STATISTICS, gate_statistics, seed_deviations, simulate  # noqa: E402
from zoo.scaling.residuals import cell_residuals  # noqa: E402
from zoo.scaling.sizes import family_model  # noqa: E402

VOCAB = 84  # the characters of the 42 plays (data=shakespeare_plays)
LONGEST = ("s2", "s3")  # the sizes whose longest budget `cells` leaves out


# ---------------------------------------------------------------- gate statistics of modified point sets


def gate_stats(points: list[dict]) -> dict:
    """The law's fit and its gate statistics (zoo.scaling.gates.family_checks)."""
    law = fit(points)
    return {"fit": law, **family_checks(law, points)}


def row(label: str, g: dict) -> str:
    """One line: exponents, E, residual rms, the form's and the law's chi^2/dof, hold-out, long reach, LOSO."""
    v, lack, ho, lr, lo = g["fit"].values, g["lack"], g["holdout"], g["reach"], g["loso"]
    s = (
        f"{label:<34} a={v['alpha']:.3f} b={v['beta']:.3f} E={v['E']:.3f} rms={g['rms'] * 100:.2f}% "
        f"LoF form={lack['ratio']:.2f}/{lack['limit']:.2f} cell={lack['ratio_cell']:.2f} "
    )
    if ho is not None:
        s += f"HO={max(ho['errors']) * 100:.2f}%({np.mean(ho['signed']) * 100:+.2f}) "
    if lr is not None:
        s += f"LR[{','.join(lr['sizes'])}]={lr['worst'] * 100:.2f}%({lr['mean'] * 100:+.2f}) "
    if lo is not None:
        w = max(lo["rows"], key=lambda r: max(abs(r["d_alpha"]), abs(r["d_beta"])))
        s += f"LOSO={lo['worst']:.3f}(w/o {w['size']}: {w['d_alpha']:+.3f}/{w['d_beta']:+.3f})"
    return s


# ---------------------------------------------------------------- variants


def total_params(arch: str, n_non_embedding: dict[str, float]) -> dict[str, int]:
    """{size: total parameters} of `arch` at experiment=scaling's sizes; raises ScalingError where zoo.model's
    non-embedding count is not the points' N (a shape or vocabulary unlike the study's)."""
    sizes = study_shapes()[0]
    out = {}
    for name in n_non_embedding:
        shape = sizes[name]
        model = family_model(arch, **shape, vocab_size=VOCAB, share_embeddings=True, tie_embeddings=True, dropout=0.0)
        if non_embedding_param_count(model) != n_non_embedding[name]:
            raise ScalingError(
                f"{arch} {name}: experiment=scaling's shape has {non_embedding_param_count(model):,} non-embedding "
                f"parameters, the points {n_non_embedding[name]:,.0f}: `variants` counts the totals of the record's "
                "design; give its points.csv"
            )
        out[name] = sum(p.numel() for p in model.parameters())
    return out


def with_total(points: list[dict], arch: str) -> list[dict]:
    """The points with N = the total parameters (embeddings included)."""
    total = total_params(arch, {p["size"]: p["N"] for p in points})
    out = copy.deepcopy(points)
    for p in out:
        p["N"] = float(total[p["size"]])
        p["tokens_per_param"] = p["D"] / p["N"]
    return out


def cmd_variants(args) -> None:
    totals = {arch: with_total(pts, arch) for arch, pts in args.families.items()}  # every shape checked first
    for arch, pts in args.families.items():
        total = totals[arch]
        print(f"\n=== {arch}")
        for label, pp in (
            ("all sizes, N non-emb", pts),
            ("no s1, N non-emb", drop(pts, sizes=("s1",))),
            ("all sizes, N total", total),
            ("no s1, N total", drop(total, sizes=("s1",))),
        ):
            g = gate_stats(pp)
            print(row(label, g))
            loso = "  ".join(f"{r['size']}:{r['d_alpha']:+.3f}/{r['d_beta']:+.3f}" for r in g["loso"]["rows"])
            print(f"    LOSO rows: {loso} | objective {g['fit'].objective:.3f}")


# ---------------------------------------------------------------- cells


def cell_label(cells) -> str:
    return ",".join(f"{s}b{i + 1}" for s, i in cells)


def greedy(points: list[dict], steps: int = 4):
    """Yields the cells removed so far, adding each time the one whose removal lowers the form's chi^2/dof most."""
    cells = [(s, i) for s, ds in budgets(points).items() for i in range(len(ds))]
    ratio = lambda pts: lack_of_fit(fit(pts), pts)["ratio"]  # noqa: E731
    dropped = []
    for _ in range(steps):
        dropped.append(
            min((c for c in cells if c not in dropped), key=lambda c: ratio(drop(points, cells=[*dropped, c])))
        )
        yield list(dropped)


def cmd_cells(args) -> None:
    for arch, pts in args.families.items():
        print(f"\n=== {arch}")
        print(row("all cells", gate_stats(pts)))
        if arch in args.singles:
            cells = [(s, i) for s, ds in budgets(pts).items() for i in range(len(ds))]
            stats = {c: gate_stats(drop(pts, cells=[c])) for c in cells}
            for c, g in sorted(stats.items(), key=lambda kv: kv[1]["lack"]["ratio"]):
                print(row(f"drop {c[0]} b{c[1] + 1}", g))
        for dropped in greedy(pts):
            print(row("greedy drop " + cell_label(dropped), gate_stats(drop(pts, cells=dropped))))
        longest = [(s, len(ds) - 1) for s, ds in budgets(pts).items() if s in LONGEST]
        print(row("drop longest " + cell_label(longest), gate_stats(drop(pts, cells=longest))))


# ---------------------------------------------------------------- noise


def misfit_size(fams: dict) -> None:
    print(
        "(a) cell residuals: rms over the cells (%), median cell se (%), rms of t; seed noise (rms of per-cell rel sd)"
    )
    for arch, pts in fams.items():
        rs = cell_residuals(fit(pts), pts)
        r, t = np.array([x["resid"] for x in rs]) * 100, np.array([x["t"] for x in rs])
        print(
            f"  {arch:<16} cell-resid rms {np.sqrt(np.mean(r**2)):.2f}%  median se {np.median(np.abs(r / t)):.3f}%  "
            f"rms t {np.sqrt(np.mean(t**2)):.1f}  seed noise {seed_noise(pts) * 100:.2f}%"
        )


def reach_stats(points: list[dict]) -> tuple:
    """long reach worst and mean, hold-out worst and mean (relative), leave-one-size-out worst (the report's null
    statistics, zoo.scaling.null.gate_statistics)."""
    return tuple(gate_statistics(points)[key] for key, *_ in STATISTICS)


def boot(points: list[dict], rng) -> list[dict]:
    """The points of runs drawn with replacement within each size (as many as it has)."""
    out = []
    for s in dict.fromkeys(p["size"] for p in points):
        seeds = sorted({p["seed"] for p in points if p["size"] == s})
        for new, sd in enumerate(rng.choice(seeds, len(seeds), replace=True)):
            out += [
                {**p, "seed": 100 + new, "run": f"{s}|{100 + new}"} for p in points if (p["size"], p["seed"]) == (s, sd)
            ]
    return out


def summarize(name: str, rows: list, obs: tuple, null: bool) -> None:
    rows = np.array(rows)
    labels = ("long reach worst", "long reach mean", "hold-out worst", "hold-out mean", "LOSO worst")
    print(f"  {name} (B={len(rows)}):")
    for j, label in enumerate(labels):
        v, o, x, pct = rows[:, j], obs[j], (100 if j < 4 else 1), ("%" if j < 4 else "")
        s = (
            f"    {label:<18} observed {o * x:+.3f}{pct}  replicates: median {np.median(v) * x:+.3f}, "
            f"2.5-97.5% [{np.percentile(v, 2.5) * x:+.3f}, {np.percentile(v, 97.5) * x:+.3f}]"
        )
        print(s + (f", P(|stat| >= observed) = {np.mean(np.abs(v) >= abs(o)):.2f}" if null else ""))


def cmd_noise(args) -> None:
    misfit_size(args.families)
    pts = args.families[args.arch]
    law, devs, obs = fit(pts), seed_deviations(pts), reach_stats(pts)
    print(
        f"\n(b,c) {args.arch}: observed long reach {obs[0] * 100:.2f}% ({obs[1] * 100:+.2f}), hold-out "
        f"{obs[2] * 100:.2f}% ({obs[3] * 100:+.2f}), LOSO {obs[4]:.3f}"
    )
    rng = np.random.default_rng(args.seed)
    null = [reach_stats(simulate(pts, law, devs, rng)) for _ in range(args.reps)]
    summarize("null: the fitted law + resampled seed deviations", null, obs, True)
    summarize(
        "bootstrap of runs within sizes (real points)",
        [reach_stats(boot(pts, rng)) for _ in range(args.reps)],
        obs,
        False,
    )
