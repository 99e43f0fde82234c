"""The p-value tables of the significance section: one per tested metric, starred by the ranking's rule
(zoo.report.significance_rule.significant), with the counts each p-value rests on."""

from zoo.report.significance_rule import DEGENERATE, both_degenerate, fmt_p, significant
from zoo.report.stats import ALPHA

OVERLAP = f"p < {ALPHA}, but the 95% seed intervals overlap: not significantly different (the rule above)"


def counts_text(res: dict, metric: str) -> str:
    """What a paired test rests on: McNemar's b and c, or how many segments / windows differ, of how many pooled
    units."""
    seeds = res.get("seeds", 1)
    pooled = f", {seeds} seeds pooled" if seeds and seeds > 1 else ""
    if res.get("test") == "McNemar exact":
        return (
            f"b = {res['b']} (A right, B wrong), c = {res['c']} (A wrong, B right): {res['b'] + res['c']} "
            f"discordant of {res['n']} examples{pooled}"
        )
    unit = res.get("unit", "units")
    what = f"in their {metric} statistics" if unit == "segments" else "in loss" if unit == "windows" else ""
    text = f"{res.get('n_diff', '?')} of {res.get('n', '?')} {unit} differ {what}".rstrip() + pooled
    return text + (" (identical outputs)" if res.get("identical") else "")


def p_value_lines(by_metric: dict, order: list[int], tests: dict, groups: list[dict]) -> list[str]:
    """One Markdown table of p-values per metric that was tested, each followed by the counts each p-value rests
    on (counts_text); then the pairs with identical outputs. A p-value is starred when the pair is significantly
    different (significant, the ranking's rule), marked ° when p < ALPHA but the seed intervals overlap; a pair of
    flagged groups (both_degenerate) gets its p-value unstarred and marked †."""
    lines = []
    marks = set()
    for m in [m for m in by_metric if any(m in res for res in tests.values())]:
        m_order = [g for g in order if g in by_metric[m]] or order
        lines += [
            f"p-values, {m} ({next(res[m]['test'] for res in tests.values() if m in res)}):",
            "",
            "| " + " | ".join([m] + [groups[g]["label"] for g in m_order]) + " |",
            "|" + "---|" * (len(m_order) + 1),
        ]
        for gi in m_order:
            cells = ["-" if gi == gj else _p_cell(by_metric[m], tests, groups, gi, gj, m, marks) for gj in m_order]
            lines.append("| " + " | ".join([groups[gi]["label"]] + cells) + " |")
        lines += ["", f"Counts behind the p-values, {m}:", ""]
        for (gi, gj), res in tests.items():
            if m in res and gi in m_order and gj in m_order:
                lines.append(f"- {groups[gi]['label']} (A) vs {groups[gj]['label']} (B): {counts_text(res[m], m)}")
        lines.append("")
    lines += [f"{mark}: {why}." for mark, why in (("°", OVERLAP), ("†", DEGENERATE)) if mark in marks]
    lines += [""] if marks else []
    identical = sorted(
        {
            f"{groups[gi]['label']} and {groups[gj]['label']}"
            for (gi, gj), res in tests.items()
            if any(v.get("identical") for v in res.values())
        }
    )
    if identical:
        lines += ["Identical outputs (p = 1, no test): " + "; ".join(identical), ""]
    return lines


def _p_cell(rows: dict, tests: dict, groups: list[dict], gi: int, gj: int, metric: str, marks: set) -> str:
    """The p-value table's cell of groups gi, gj on `metric` (rows: {group: table row}): the p starred when
    significant, "p °" when p < ALPHA with overlapping seed intervals, "p †" for two flagged groups; adds the
    mark used to `marks`."""
    res = tests.get((gi, gj)) or tests.get((gj, gi)) or {}
    p = res.get(metric, {}).get("p")
    if p is None:
        return fmt_p(p)
    if both_degenerate(groups, gi, gj):
        marks.add("†")
        return fmt_p(p, star=False) + " †"
    if gi in rows and gj in rows and p < ALPHA and not significant(rows[gi], rows[gj], p):
        marks.add("°")
        return fmt_p(p, star=False) + " °"
    return fmt_p(p)
