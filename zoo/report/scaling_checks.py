"""Two checks of a scaling study that need its points (zoo.report.scaling): the steps bound (at equal steps a larger
size must reach a lower loss) and the cool-down check (a cool-down point against its budget trained alone with a
cosine schedule), with their report lines."""

import numpy as np

COOLDOWN_CHECK = 0.01  # a cool-down point within this of the budget trained alone


def steps_bound(points: list[dict]) -> dict:
    """The steps-bound check: for each pair of adjacent sizes and each point of the smaller one at a step count
    the larger also spans, the larger size's loss interpolated (linearly in log steps) at that step must be lower.
    {"pairs": checked comparisons, "failed": [(smaller N, larger N, steps, smaller loss, larger loss)]}."""
    by_size = {}
    for p in points:
        if p["seed"] == min(q["seed"] for q in points if q["N"] == p["N"]):
            by_size.setdefault(p["N"], []).append((p["steps"], p["loss"]))
    sizes = sorted(by_size)
    checked, failed = 0, []
    for small, large in zip(sizes, sizes[1:]):
        curve = sorted(by_size[large])
        s, loss = np.log([c[0] for c in curve]), np.array([c[1] for c in curve])
        for steps, l_small in sorted(by_size[small]):
            if len(curve) < 2 or not s[0] <= np.log(steps) <= s[-1]:
                continue
            checked += 1
            l_large = float(np.interp(np.log(steps), s, loss))
            if not l_large < l_small:
                failed.append((small, large, steps, l_small, l_large))
    return {"pairs": checked, "failed": failed}


def cooldown_check(points: list[dict]) -> list[dict]:
    """Each cosine-check point beside the cool-down point of the same family, size, seed and budget:
    {arch, size, tokens_per_param, cooldown, cosine, diff (relative to the cosine run's loss)}."""
    out = []
    for p in points:
        if p["kind"] != "cosine":
            continue
        twin = next(
            (
                q
                for q in points
                if q["kind"] == "cooldown"
                and (q["arch"], q["size"], q["seed"]) == (p["arch"], p["size"], p["seed"])
                and abs(q["tokens_per_param"] - p["tokens_per_param"]) < 1e-9
            ),
            None,
        )
        if twin is not None:
            out.append(
                {
                    "arch": p["arch"],
                    "size": p["size"],
                    "tokens_per_param": p["tokens_per_param"],
                    "cooldown": twin["loss"],
                    "cosine": p["loss"],
                    "rates": (twin.get("lr", ""), p.get("lr", "")),
                    "diff": (twin["loss"] - p["loss"]) / p["loss"],
                }
            )
    return out


def steps_bound_lines(by_arch: dict) -> list[str]:
    """The report's steps-bound lines: steps_bound per family, its failures named."""
    lines = [
        "Steps-bound check: at equal optimizer steps a larger size must reach a lower loss (otherwise the loss is "
        "bound by steps, a term L(N, D) does not have): each point of a size against the next size's losses "
        "interpolated at the same steps.",
        "",
    ]
    for arch, pts in by_arch.items():
        c = steps_bound([p for p in pts if p["kind"] != "cosine"])
        if not c["pairs"]:
            lines.append(f"- {arch}: no size's steps overlap the next size's; cannot check")
            continue
        worst = "; ".join(
            f"N {a:,.0f} at {s} steps {la:.4f} vs N {b:,.0f} {lb:.4f}" for a, b, s, la, lb in c["failed"][:3]
        )
        lines.append(
            f"- {arch}: {c['pairs'] - len(c['failed'])} of {c['pairs']} comparisons lower at the larger size"
            + (f" (not: {worst})" if c["failed"] else "")
        )
    return lines


def cooldown_table(rows: list[dict]) -> list[str]:
    """The report's cool-down check table of cooldown_check's rows, against the COOLDOWN_CHECK gate."""
    if not rows:
        return ["Cool-down check: no SIZE_seedN_cosine cells (scaling.check_sizes) to compare with."]
    lines = [
        "Cool-down check: each budget's cool-down point against a run trained to that budget alone (cosine from "
        f"the peak rate to 0, the same seed and data); gate: within {COOLDOWN_CHECK:.0%}.",
        "",
        "| arch | size | tokens / param | cool-down | cosine | difference | rates (cool-down, cosine) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = "" if abs(r["diff"]) <= COOLDOWN_CHECK else " OVER"
        rates = ", ".join(f"{float(x):g}" if x not in (None, "") else "?" for x in r.get("rates", ("", "")))
        lines.append(
            f"| {r['arch']} | {r['size']} | {r['tokens_per_param']:g} | {r['cooldown']:.4f} | {r['cosine']:.4f} | "
            f"{r['diff']:+.2%}{mark} | {rates} |"
        )
    passed = sum(abs(r["diff"]) <= COOLDOWN_CHECK for r in rows)
    lines += ["", f"{passed} of {len(rows)} within {COOLDOWN_CHECK:.0%}."]
    return lines
