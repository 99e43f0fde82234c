"""How the report writes numbers: a metric's value, a mean ± std over seeds, a 95% interval, a cost with its
unit, seconds."""

import math


def fmt_value(v: float | None) -> str:
    if v is None:
        return "-"
    return "nan" if math.isnan(v) else f"{v:.4f}"


def fmt_mean_std(r: dict) -> str:
    """ "0.8123 +- 0.0100" over seeds, "0.8123" for one seed (its spread is "n/a (1 seed)" in the CI column)."""
    if r["n"] == 0:
        return f"failed: {r['error']}" if r["status"] == "failed" else "no metric recorded"
    return fmt_value(r["mean"]) + (f" ± {fmt_value(r['std'])}" if r["std"] is not None else "")


def fmt_ci(r: dict) -> str:
    """ "[lo, hi]" (95% Student t over seeds), "n/a (1 seed)" for one seed (never +-0), "" for none."""
    if r["n"] == 0:
        return ""
    if r["lo"] is None:
        return "n/a (1 seed)"
    return f"[{fmt_value(r['lo'])}, {fmt_value(r['hi'])}]"


def fmt_num(v: float | None, unit: str = "", scale: float = 1.0, digits: str = ".3g") -> str:
    return "-" if v is None else f"{v / scale:{digits}}{unit}"


def fmt_seconds(v: float | None) -> str:
    """Seconds with 2 decimals below 10, 1 below 100, none above; "-" for None."""
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"
