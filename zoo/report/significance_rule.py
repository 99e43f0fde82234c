"""The one rule for "significantly different" (zoo.report.significance's module docstring): a paired test's
p < ALPHA and, where both groups have several seeds, disjoint 95% seed intervals; the ordering of two groups it
gives, and p-values as the report prints them."""

import math
import numbers

from zoo.report.stats import ALPHA
from zoo.report.table import MIN_BLEU, lower_is_better

DEGENERATE = (
    f"both flagged (all hypotheses empty or test/bleu < {MIN_BLEU:g} in every run): not ranked against each other"
)


def _p_value(func: str, p):
    """p unchanged when it is None or a number in [0, 1]; else ValueError naming func and p."""
    if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0):
        raise ValueError(f"{func}: p = {p!r} is not a p-value (a number in [0, 1], or None for no test)")
    return p


def _interval(func: str, name: str, row: dict) -> None:
    """Raise ValueError naming func, the row and the bad bound unless row's lo, hi are both None or finite with
    lo <= hi."""
    lo, hi = row.get("lo"), row.get("hi")
    if lo is None and hi is None:
        return
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"{func}: {name}'s interval (lo {lo!r}, hi {hi!r}) is not finite with lo <= hi")


def overlap(ra: dict, rb: dict) -> bool | None:
    """Whether two rows' 95% seed intervals overlap; None when one of them has a single seed. Raises ValueError
    for an interval that is not finite with lo <= hi."""
    _interval("overlap", "ra", ra)
    _interval("overlap", "rb", rb)
    if ra["lo"] is None or rb["lo"] is None:
        return None
    return not (ra["lo"] > rb["hi"] or rb["lo"] > ra["hi"])


def significant(ra: dict, rb: dict, p: float | None) -> bool:
    """The one rule for "significantly different" (the ranking and the p-value tables): a paired test's p < ALPHA
    and, where both rows have several seeds, disjoint 95% seed intervals (overlap). Raises ValueError for a p
    that is not None or in [0, 1], or an interval that is not finite with lo <= hi."""
    return _p_value("significant", p) is not None and p < ALPHA and overlap(ra, rb) is not True


def ordering(ra: dict, rb: dict, p: float | None) -> tuple[int, str]:
    """(+1 A ahead, -1 B ahead, 0 neither, why) for two rows of one metric (module docstring's rule). Raises
    ValueError for a p that is not None or in [0, 1] (a NaN p would rank A ahead)."""
    _p_value("ordering", p)
    sign = 1 if (ra["mean"] < rb["mean"]) == lower_is_better(ra["metric"]) else -1
    if ra["mean"] == rb["mean"]:
        return 0, "equal means"
    ov = overlap(ra, rb)
    if p is None:
        if ov is None:
            return 0, "untested (no paired examples, one seed)"
        return (0, "95% seed intervals overlap, no paired test") if ov else (sign, "95% seed intervals disjoint")
    if p >= ALPHA:
        return 0, f"p = {p:.3g} >= {ALPHA}"
    if ov:
        return 0, f"p = {p:.3g}, but the 95% seed intervals overlap"
    return sign, f"p = {p:.3g}" + ("" if ov is None else ", 95% seed intervals disjoint")


def both_degenerate(groups: list[dict], gi: int, gj: int) -> bool:
    """Whether both groups are flagged as unusable (zoo.report.table.flag_group): no ordering between them."""
    return bool(groups[gi].get("degenerate") and groups[gj].get("degenerate"))


def fmt_p(p: float | None, star: bool = True) -> str:
    """A p-value with 4 decimals (scientific below 1e-4, "<1e-300" where it underflowed), `*` when p < ALPHA and
    star is True; "-" for None. Raises ValueError for a p that is not in [0, 1]."""
    _p_value("fmt_p", p)
    if p is None:
        return "-"
    text = f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}" if p >= 1e-300 else "<1e-300"
    return text + ("*" if star and p < ALPHA else "")
