"""The gate table and the tables beside it, as Markdown lines: printed by `python -m zoo.scaling gates` and put in
the report's Scaling section by zoo.report.scaling (one rendering for both)."""

from zoo.scaling.checks import widen, widened_ci
from zoo.scaling.conventions import CONVENTIONS
from zoo.scaling.forms import FORMS
from zoo.scaling.frontier import crossover, fitted, measured_compute, multiplier
from zoo.scaling.gates import (
    EXPONENT_HALF_WIDTH,
    FIT_NOISE,
    FIT_RMS,
    GATES,
    HOLDOUT,
    K_RATIO,
    LACK_LEVEL,
    LOSO,
    REACH,
    REACH_BIAS,
    REACH_ERROR,
    fmt,
)
from zoo.scaling.points import REFERENCE, flops_ratio


def gate_table(verdicts: dict) -> list[str]:
    lines = [
        "Can each law be trusted? The gates (docs/scaling-laws.md): **fit** the law's relative residual rms "
        f"<= {FIT_RMS:.1%} and <= {FIT_NOISE:g}x the seed noise; **lack of fit** chi2/dof of the cell means' "
        "relative residuals over their relative standard errors (a cell: a size and a budget; printed for the law "
        "with each cell's se, and judged for the form: its weighted fit to the cell means, each size's seed sd "
        f"pooled) at most the {LACK_LEVEL:.0%} quantile of F(dof, the smallest size's pooled dof); above 1, every "
        "interval of the law is widened by the Birge ratio sqrt(chi2/dof) of the form; **hold-out** every point of "
        f"the largest size predicted within {HOLDOUT:.0%} "
        f"by a fit without it; **long reach** a fit on the sizes of N <= N_max / {REACH:g} predicts every point of "
        f"the largest size within {REACH_ERROR:.0%}, with a mean signed error within ±{REACH_BIAS:.0%}; **leave one "
        f"size out** alpha and beta refitted without each size move by <= {LOSO:.2f}; **parameters** none at a "
        f"bound, each exponent's widened 95% interval narrower than ±{EXPONENT_HALF_WIDTH}; **k(C)** the compute "
        f"multiplier against {REFERENCE} (zoo's FLOP count), from the compute frontiers at the largest C both "
        "families measured (C* = the smaller of the reference's largest C and the C at which the reference reaches "
        f"the family's best frontier loss), has a 95% interval whose upper bound is at most {K_RATIO:g}x its lower "
        "(the law's k at C* in parentheses).",
        "",
        "| arch | law trusted | " + " | ".join(GATES.values()) + " |",
        "|---|---|" + "---|" * len(GATES),
    ]
    for arch, g in verdicts.items():
        cells = [f"{g[k][0]}: {g[k][1]}" for k in GATES]
        lines.append(f"| {arch} | {'yes' if g['trusted'] else 'NO'} | " + " | ".join(cells) + " |")
    return lines


def reach_table(checks: dict) -> list[str]:
    """The one-size hold-out beside the long reach, per family: errors (predicted - measured) / measured."""
    lines = [
        "The largest size predicted: by a fit without it (hold-out) and by a fit on the sizes of N <= N_max / "
        f"{REACH:g} (long reach); relative errors (predicted - measured) / measured.",
        "",
        "| arch | N_max | hold-out: sizes fitted | largest error | mean signed | long reach: sizes fitted | largest "
        "error | mean signed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arch, c in checks.items():
        cells = []
        for h in (c["holdout"], c["reach"]):
            if h is None:
                cells += ["–", "–", "–"]
            else:
                mean = sum(h["signed"]) / len(h["signed"])
                cells += [", ".join(h["sizes"]), f"{max(h['errors']):.2%}", f"{mean:+.2%}"]
        top = (c["holdout"] or c["reach"] or {}).get("N")
        lines.append(f"| {arch} | {'–' if top is None else f'{top:,.0f}'} | " + " | ".join(cells) + " |")
    return lines


def loso_table(checks: dict) -> list[str]:
    """alpha and beta refitted without each size: the change from the fit of all sizes."""
    rows = {arch: c["loso"] for arch, c in checks.items() if c["loso"]}
    if not rows:
        return ["Leave one size out: no family has 3 or more sizes."]
    sizes = list(dict.fromkeys(r["size"] for lo in rows.values() for r in lo["rows"]))
    lines = [
        f"Leave one size out: the change of alpha / beta refitted without each size (gate: each within ±{LOSO:.2f}).",
        "",
        "| arch | " + " | ".join(f"without {s}" for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for arch, lo in rows.items():
        by = {r["size"]: r for r in lo["rows"]}
        cells = [
            "–" if s not in by else (by[s]["error"] or f"{by[s]['d_alpha']:+.3f} / {by[s]['d_beta']:+.3f}")
            for s in sizes
        ]
        lines.append(f"| {arch} | " + " | ".join(cells) + " |")
    return lines


def forms_table(comparison: dict, unique: float) -> list[str]:
    """Each law form's long reach per family, and the form kept (zoo.scaling.forms)."""
    lines = [
        f"The law's form, judged by the long reach (fit on N <= N_max / {REACH:g}; largest error, mean signed): "
        f"Chinchilla's, Muennighoff et al. 2023's data-constrained one (U_D = {unique:,.0f} unique training tokens; "
        f"the points read them at most {comparison['epochs']:.2f} times) and Kaplan et al. 2020's. Kept: "
        f"**{comparison['kept']}** (the smaller worst error of the first two).",
        "",
        "| arch | " + " | ".join(FORMS) + " |",
        "|---|" + "---|" * len(FORMS),
    ]
    for arch, r in comparison["families"].items():
        if r is None:
            lines.append(f"| {arch} | " + " | ".join("–" for _ in FORMS) + " |")
            continue
        cells = [
            f"{r[f]['worst']:.2%}, {r[f]['mean']:+.2%}" + (f" ({r[f]['note']})" if r[f]["note"] else "") for f in FORMS
        ]
        lines.append(f"| {arch} | " + " | ".join(cells) + " |")
    return lines


def attention_table(recounted: list[dict]) -> list[str]:
    """The share of each family's training FLOPs (zoo's count) that is attention products, per size."""
    share = {}
    for p in recounted:
        share.setdefault(p["arch"], {}).setdefault(p["size"], p["attention"])
    sizes = list(dict.fromkeys(s for by in share.values() for s in by))
    return [
        "Attention products (scores and values) as a share of the training FLOPs zoo counts (attention in full), "
        "per size:",
        "",
        "| arch | " + " | ".join(sizes) + " |",
        "|---|" + "---|" * len(sizes),
        *(
            f"| {a} | " + " | ".join(f"{by[s]:.0%}" if s in by else "–" for s in sizes) + " |"
            for a, by in share.items()
        ),
    ]


def frontier_table(frontiers: dict) -> list[str]:
    """{key: {arch: Frontier}}: E, A, gamma of each family's frontier under each FLOP convention (CONVENTIONS)."""
    lines = [
        "The compute frontier L*(C) = E + A C^-gamma fitted to each family's lower envelope of (C, loss) (Kaplan et "
        "al. 2020; 95% intervals over resamples of whole runs), C counted under each FLOP convention:",
        "",
        "| arch | FLOPs counted | envelope points | E | A | gamma |",
        "|---|---|---|---|---|---|",
    ]
    for key, by in frontiers.items():
        for arch, fr in by.items():
            head = f"| {arch} | {CONVENTIONS.get(key, key)} | {fr.n_points} | "
            if fr.values is None:
                lines.append(head + "– | – | – (fewer than 4 envelope points) |")
            else:
                lines.append(head + " | ".join(fmt(fr.values[i], fr.ci(i)) for i in range(3)) + " |")
    return lines


def has_multiplier(by_arch: dict) -> bool:
    """Whether a compute multiplier can be computed: REFERENCE and at least one other family are in by_arch."""
    return REFERENCE in by_arch and len(by_arch) >= 2


def multiplier_table(by_arch, fits, frontiers, verdicts, birge, key="C") -> list[str]:
    """k(C) of each family against REFERENCE, C counted as `key` (CONVENTIONS), at REFERENCE's smallest and
    largest C, at C* (the largest C both measured), the frontiers' crossover (k = 1) and, for a law that passed
    its gates, 10x beyond; the law's intervals widened by the larger Birge ratio of the two families."""
    if not has_multiplier(by_arch):
        return [f"No compute multiplier: no other family than {REFERENCE}, or no {REFERENCE}."]
    cs = [min(p[key] for p in by_arch[REFERENCE]), max(p[key] for p in by_arch[REFERENCE])]
    return [
        f"The compute multiplier k(C), **FLOPs counted as {CONVENTIONS[key]}**: how many times {REFERENCE}'s "
        f"compute C a family needs to reach {REFERENCE}'s loss at C (1 = as efficient, > 1 = needs more; 95% "
        "intervals over paired bootstrap resamples of runs within sizes), from the law L(N, D) and the compute "
        "frontier L*(C). C*: the largest C both families measured; crossover: the C at which the frontiers' k = 1; "
        "10x beyond the largest C: an extrapolation, shown only for laws that passed every gate.",
        "",
        "| arch | from | " + " | ".join(f"C = {c:.3g}" for c in cs) + f" | C* | crossover | C = {10 * cs[1]:.3g} |",
        "|---|---|" + "---|" * (len(cs) + 3),
        *multiplier_rows(by_arch, fits, frontiers, verdicts, birge, key),
    ]


def target_table(by_arch: dict, frontiers: dict, per_window: dict) -> list[str]:
    """The per-target-token view: each family's frontier of loss against the target tokens it trained on
    (frontiers: {arch: Frontier} on key "target"; per_window: {arch: target tokens a window}), and the token
    multiplier: how many times decoder_only's target tokens a family needs to reach its loss."""
    if REFERENCE not in by_arch or REFERENCE not in frontiers:
        return []
    ts = [min(p["target"] for p in by_arch[REFERENCE]), max(p["target"] for p in by_arch[REFERENCE])]
    lines = [
        "Per target token: the loss against the target tokens trained (the positions a window's loss scores: "
        + ", ".join(f"{a} {n}" for a, n in per_window.items())
        + " a window), each family's frontier L*(T) = E + A T^-gamma on its envelope, and the token multiplier: "
        f"how many times {REFERENCE}'s target tokens a family needs to reach {REFERENCE}'s loss at T.",
        "",
        "| arch | target tokens / window | E | gamma | "
        + " | ".join(f"T = {t:.3g}" for t in ts)
        + " | T* | crossover |",
        "|---|---|---|---|" + "---|" * (len(ts) + 2),
    ]
    for arch, fr in frontiers.items():
        head = f"| {arch} | {per_window.get(arch, '–')} | "
        if fr.values is None:
            lines.append(head + "– | – |" + " – |" * (len(ts) + 2))
            continue
        head += f"{fmt(fr.values[0], fr.ci(0))} | {fmt(fr.values[2], fr.ci(2))} | "
        if arch == REFERENCE:
            lines.append(head + " | ".join("1" for _ in ts) + " | – | – |")
            continue
        lines.append(head + " | ".join(_frontier_cells(arch, by_arch, frontiers, "target", ts)) + " |")
    return lines


def multiplier_rows(by_arch, fits, frontiers, verdicts, birge, key) -> list[str]:
    """The law's and the frontier's row of each family but REFERENCE (multiplier_table)."""
    ref = by_arch[REFERENCE]
    cs = [min(p[key] for p in ref), max(p[key] for p in ref)]
    lines = []
    for arch, pts in by_arch.items():
        if arch == REFERENCE:
            continue
        fr, ref_fr = frontiers.get(arch), frontiers.get(REFERENCE)
        cstar = measured_compute(fr, ref_fr, max(p[key] for p in pts), cs[1]) if fitted(fr, ref_fr) else None
        if arch in fits and REFERENCE in fits:
            trusted = verdicts[arch]["trusted"] and verdicts[REFERENCE]["trusted"]
            s = max(birge.get(arch, 1.0), birge.get(REFERENCE, 1.0))
            r, r_ref = flops_ratio(pts, key), flops_ratio(ref, key)
            k = lambda c: multiplier(fits[arch], fits[REFERENCE], c, r, r_ref)  # noqa: E731
            show = lambda m: fmt(m["value"], widen(m["value"], m["ci"], s, log=True))  # noqa: E731
            cells = [show(k(c)) for c in cs] + ["–" if cstar is None else f"{show(k(cstar))} at {cstar:.3g}", "–"]
            cells.append(show(k(10 * cs[1])) if trusted else "– (a gate failed)")
            lines.append(f"| {arch} | law{'' if trusted else ' (gate FAILED)'} | " + " | ".join(cells) + " |")
        if cstar is not None:
            lines.append(
                f"| {arch} | frontier | " + " | ".join(_frontier_cells(arch, by_arch, frontiers, key, cs)) + " | – |"
            )
    return lines


def _frontier_cells(arch: str, by_arch: dict, frontiers: dict, key: str, cs: list) -> list[str]:
    """The frontier's k at each of cs, at C* and its crossover (k = 1) within cs's range."""
    fr, ref_fr = frontiers[arch], frontiers[REFERENCE]
    cstar = measured_compute(fr, ref_fr, max(p[key] for p in by_arch[arch]), cs[-1])
    cells = [fmt(m["value"], m["ci"]) for m in (fr.multiplier(ref_fr, c) for c in (*cs, cstar))]
    cells[-1] += f" at {cstar:.3g}"
    cross = crossover(fr, ref_fr, cs[0], cs[-1])
    return [*cells, "none in the measured range" if cross is None else f"{cross:.3g}"]


def fit_table(by_arch: dict, fits: dict, verdicts: dict, birge: dict) -> list[str]:
    """Each family's law with its 95% bootstrap intervals, widened by its Birge ratio where chi2/dof > 1
    (zoo.scaling.checks.widened_ci); a law that failed a gate is marked so on its row."""
    lines = [
        "| arch | gates | runs | sizes | points | E | A | B | alpha | beta | a (N_opt ∝ C^a) | intervals widened |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arch, fit in fits.items():
        pts, s = by_arch[arch], birge.get(arch, 1.0)
        ci = widened_ci(fit, s)
        cells = [fmt(fit.values[k], ci[k]) for k in ("E", "A", "B", "alpha", "beta", "a")]
        mark = "passed" if verdicts[arch]["trusted"] else "FAILED: not to quote"
        lines.append(
            f"| {arch} | {mark} | {len({p['run'] for p in pts})} | {len({p['N'] for p in pts})} | {len(pts)} | "
            + " | ".join(cells)
            + f" | {'x' + format(s, '.2f') if s > 1 else 'no'} |"
        )
    return lines
