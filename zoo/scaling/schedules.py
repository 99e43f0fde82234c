"""The law under each schedule: a family's L(N, D) fitted to its cosine-to-zero runs (the SIZE_seedN_cosine check
cells) and, beside it, to its cool-down points at the same sizes, seeds and budgets, so that the two fits differ
only by the schedule. Hägele et al. 2024 find the two schedules' points alike; where they are not (the cool-down
check's gate), this says how much the exponents depend on which points the law rests on."""

from zoo.scaling.checks import lack_of_fit, widened_ci
from zoo.scaling.gates import fmt
from zoo.scaling.law import ScalingError
from zoo.scaling.points import fit_points

MIN_SIZES = 3  # a family's cosine law needs this many sizes ...
MIN_BUDGETS = 3  # ... each with this many budgets trained alone


def _key(p: dict) -> tuple:
    return (p["arch"], p["size"], p["seed"], round(float(p["tokens_per_param"]), 9))


def paired_points(points: list[dict]) -> dict[str, tuple[list[dict], list[dict]]]:
    """{arch: (cosine points, cool-down points)}: each family's cosine-check points (kind "cosine") that have a
    cool-down point of the same size, seed and budget, and those cool-down points, in the same order."""
    cooldown = {_key(p): p for p in points if p["kind"] == "cooldown"}
    out = {}
    for p in points:
        if p["kind"] == "cosine" and _key(p) in cooldown:
            cos, cool = out.setdefault(p["arch"], ([], []))
            cos.append(p)
            cool.append(cooldown[_key(p)])
    return out


def coverage(points: list[dict]) -> str | None:
    """Why these points cannot carry a law of their own (fewer than MIN_SIZES sizes with MIN_BUDGETS budgets
    each), or None when they can."""
    budgets = {}
    for p in points:
        budgets.setdefault(p["size"], set()).add(round(float(p["tokens_per_param"]), 9))
    full = [s for s, b in budgets.items() if len(b) >= MIN_BUDGETS]
    if len(full) >= MIN_SIZES:
        return None
    return f"{len(full)} size(s) with {MIN_BUDGETS} budgets or more; a law needs {MIN_SIZES}"


def _summary(points: list[dict], bootstrap: int | None) -> dict:
    fit = fit_points(points, bootstrap)
    lack = lack_of_fit(fit, points)
    birge = lack["birge"] if lack else 1.0
    return {"fit": fit, "ci": widened_ci(fit, birge), "lack": lack, "points": len(points)}


def schedule_laws(points: list[dict], bootstrap: int | None = None) -> tuple[dict, dict]:
    """Each family's law on its cosine points and on its cool-down points of the same cells (paired_points):
    ({arch: {"cosine": summary, "cooldown": summary, "sizes": [size, ...]}}, {arch: why not fitted}). A summary:
    {"fit": ScalingFit, "ci": intervals widened by the Birge ratio, "lack": lack_of_fit or None, "points": n}."""
    laws, skipped = {}, {}
    for arch, (cos, cool) in sorted(paired_points(points).items()):
        why = coverage(cos)
        if why is None:
            try:
                laws[arch] = {"cosine": _summary(cos, bootstrap), "cooldown": _summary(cool, bootstrap)}
            except ScalingError as e:
                why = f"not fitted: {e}"
        if why is not None:
            skipped[arch] = why
            continue
        laws[arch]["sizes"] = sorted({p["size"] for p in cos})
    return laws, skipped


def schedule_table(laws: dict, skipped: dict) -> list[str]:
    """Markdown lines: per family and schedule, E, alpha and beta with their widened 95% intervals and chi2/dof,
    then how far alpha and beta move between the schedules."""
    if not laws and not skipped:
        return []
    lines = [
        "The law under each schedule: each family's L(N, D) fitted to its cosine-to-zero runs (the check cells) and "
        "to its cool-down points at the same sizes, seeds and budgets (intervals widened by each fit's Birge ratio).",
        "",
        "| arch | schedule | sizes | points | E | alpha | beta | chi2/dof |",
        "|---|---|---|---|---|---|---|---|",
    ]
    moves = []
    for arch, law in laws.items():
        for name in ("cooldown", "cosine"):
            s = law[name]
            v, ci = s["fit"].values, s["ci"]
            chi = f"{s['lack']['ratio']:.2f}" if s["lack"] else "n/a"
            cells = " | ".join(fmt(v[k], ci[k]) for k in ("E", "alpha", "beta"))
            lines.append(f"| {arch} | {name} | {', '.join(law['sizes'])} | {s['points']} | {cells} | {chi} |")
        d = {k: law["cosine"]["fit"].values[k] - law["cooldown"]["fit"].values[k] for k in ("alpha", "beta")}
        moves.append(f"{arch}: alpha {d['alpha']:+.3f}, beta {d['beta']:+.3f} (cosine minus cool-down)")
    lines += ["", "Moved by the schedule: " + "; ".join(moves) + "." if moves else ""]
    lines += [f"Not fitted under each schedule: {arch}: {why}." for arch, why in skipped.items()]
    return lines
