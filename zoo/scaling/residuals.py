"""Where a law misses: each cell's mean against the law, per family, as a size-by-budget table. A lack of fit shows
as a pattern (one sign along a size's budgets, or opposite curvature at two sizes) that the single chi2/dof
number does not show."""

import numpy as np

from zoo.scaling.points import cell_means


def cell_residuals(fit, points: list[dict]) -> list[dict]:
    """Each cell's (a size and a budget) relative residual (mean - L_hat) / L_hat and its t = residual over the
    cell's relative standard error (nan with one seed): [{"size", "N", "D", "key", "n", "resid", "t"}] (D, key:
    zoo.scaling.points.cell_means), N then D order."""
    out = []
    for c in cell_means(points):
        pred = float(fit.predict(np.array([c["N"]]), np.array([c["D"]]))[0])
        resid = (c["mean"] - pred) / pred
        t = resid / (c["se"] / c["mean"]) if c["se"] > 0 else float("nan")
        out.append({"size": c["size"], "N": c["N"], "D": c["D"], "key": c["key"], "n": c["n"], "resid": resid, "t": t})
    return out


def _cell(r: dict) -> str:
    return f"{r['resid']:+.2%}" + (f" ({r['t']:+.1f})" if np.isfinite(r["t"]) else "")


def residual_table(by_arch: dict, fits: dict) -> list[str]:
    """Markdown lines: per family and size, each budget's cell residual in % of the law and in standard errors
    (smallest budget first)."""
    if not fits:
        return []
    rows = {arch: cell_residuals(fit, by_arch[arch]) for arch, fit in fits.items()}
    width = max(len([r for r in rs if r["size"] == s]) for rs in rows.values() for s in {r["size"] for r in rs})
    lines = [
        "Each cell's mean against its family's law: (mean - law) / law, and in the cell's standard errors (t; none "
        "for one seed); budgets from the smallest. A sign that runs along a size's budgets, or turns the other way "
        "at another size, is a misfit of the law's form, not noise.",
        "",
        "| arch | size | " + " | ".join(f"budget {i + 1}" for i in range(width)) + " |",
        "|---|---|" + "---|" * width,
    ]
    for arch, rs in rows.items():
        for size in dict.fromkeys(r["size"] for r in rs):
            cells = [_cell(r) for r in rs if r["size"] == size]
            cells += ["–"] * (width - len(cells))
            lines.append(f"| {arch} | {size} | " + " | ".join(cells) + " |")
    return lines
