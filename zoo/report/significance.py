"""Paired significance tests between the groups of a task, and the ranking they support.

Groups are compared only within one (dataset, budget) of a task, and only when their objective is comparable
(zoo.report.table.objective_note). Two groups are paired on the same examples: their runs' examples.json,
matched by "ids" (runs whose ids differ are not paired, and the report says so). With several seeds, the
i-th seed of one group (in seed order) is paired with the i-th of the other (min(n_a, n_b) seeds) and the
pairs are pooled: outputs concatenated seed after seed, references repeated once per seed; a bootstrap then
resamples (seed, example) units.

Tests: BLEU / chrF: sacreBLEU's paired bootstrap resampling (zoo.report.stats.sacrebleu_paired); accuracy:
McNemar's exact test (mcnemar_exact); LM loss: a paired bootstrap over the same validation windows,
weighted by their scored tokens (paired_bootstrap). A group is "ahead" of another when the test's p < ALPHA
and, where both have several seeds, their 95% seed intervals do not overlap (a difference within the
intervals is not an ordering); without examples, the intervals alone decide, and one seed each decides nothing.
The p-value tables star a pair by the same rule (significant): a p < ALPHA whose seed intervals overlap is
printed unstarred and marked °, since the paired tests resample examples of the trained models and do not see
the seed-to-seed variance the intervals measure.
Two translation groups whose every run is flagged (zoo.report.table.flag_group: all hypotheses empty, or test
BLEU below 1) are never ahead of each other, and their p-values are printed unstarred. Under each p-value
table the report prints the counts the tests rest on (counts_text): McNemar's b and c, and how many segments
or windows differ.
"""

from zoo.report.formats import fmt_ci, fmt_value
from zoo.report.p_values import p_value_lines
from zoo.report.pairing import NotPaired, paired_tests
from zoo.report.significance_rule import DEGENERATE, both_degenerate, ordering
from zoo.report.stats import ALPHA, BOOTSTRAP_SAMPLES, SACREBLEU_SAMPLES, SEED
from zoo.report.table import PRIMARY, lower_is_better, objective_note

TESTS = {  # task -> how its metrics are tested (printed)
    "translation": f"sacreBLEU paired bootstrap resampling ({SACREBLEU_SAMPLES} resamples, seed {SEED}; "
    f"sacrebleu.significance.PairedTest, test_type 'bs') on test/bleu, test/chrf (greedy outputs) "
    f"and test/bleu_beam (beam outputs, when both runs have them)",
    "classification": "McNemar's exact test (two-sided binomial test on the discordant test examples) on test/acc",
    "lm": f"paired bootstrap over the same validation windows ({BOOTSTRAP_SAMPLES} resamples, seed {SEED}): the "
    f"difference of the token-weighted mean losses, windows resampled, p two-sided (bootstrap shifted to the "
    f"null)",
}
ZERO_AND_FLOOR = (
    "p = 1 where the observed difference is 0 (identical outputs, equal scores); a bootstrap's p is at least "
    "2^(1 - k), k = the segments / windows that differ (the smallest p an exact paired randomization test "
    "reaches on k units), so one differing unit is never significant"
)
CELLS = (
    "experiment=scaling's cells are not tested or ranked here: they differ in size on purpose, so a ranking would "
    "mostly rank sizes; the Scaling section compares the architectures across sizes"
)
POOLING = (
    "seeds: the i-th seed of one group is paired with the i-th of the other (seed order) and the pairs are "
    "pooled (outputs concatenated seed after seed, references / labels repeated once per seed), so a resample "
    "draws (seed, example) units"
)


def partitions(table: list[dict], task: str) -> dict[tuple[str, str], list[dict]]:
    """{(dataset, budget text): [group indices]} of a task's groups with finished runs: the sets within which
    groups are ranked. Scaling cells are left out (CELLS)."""
    parts: dict[tuple[str, str], list[int]] = {}
    for r in table:
        if r["task"] == task and r["n"] > 0 and not r.get("scaling_cell"):
            lst = parts.setdefault((r["dataset"], r["budget"]), [])
            if r["group"] not in lst:
                lst.append(r["group"])
    return parts


def pairwise_tests(order: list[int], groups: list[dict], task: str) -> tuple[dict, list[str], dict]:
    """paired_tests for every pair of `order` (group indices): ({(gi, gj): {metric: result}}, the refusals as
    Markdown bullets, the sacreBLEU signatures {name: signature})."""
    tests, refusals, signatures = {}, [], {}
    for i, gi in enumerate(order):
        for gj in order[i + 1 :]:
            try:
                res, sigs = paired_tests(groups[gi], groups[gj], task)
            except NotPaired as e:
                refusals.append(f"- {groups[gi]['label']} vs {groups[gj]['label']}: not paired: {e}")
                res, sigs = {}, {}
            tests[(gi, gj)] = res
            signatures.update(sigs)
    return tests, refusals, signatures


def ranking_lines(order: list[int], rows: dict, pairs: dict, groups: list[dict]) -> list[str]:
    """The ranking chain (best first, `>` ahead / `≈` tied) and the reference sentence; rows: {group: table row}
    of the ranked metric, pairs as compare_task's."""
    if len(order) == 1:
        return [f"One group ({groups[order[0]]['label']}): nothing to compare it with.", ""]
    if not order:
        return []
    chain = []
    for k, g in enumerate(order):
        piece = f"{groups[g]['label']} {fmt_value(rows[g]['mean'])} {fmt_ci(rows[g])}"
        if k:
            piece = (" > " if pairs[(order[k - 1], g)][0] == 1 else " ≈ ") + piece
        chain.append(piece)
    best = order[0]
    ahead = [groups[g]["label"] for g in order[1:] if pairs[(best, g)][0] == 1]
    tied = [f"{groups[g]['label']} ({pairs[(best, g)][1]})" for g in order[1:] if pairs[(best, g)][0] != 1]
    return [
        "Ranking (best first; `>`: ahead, `≈`: not significantly different): " + "".join(chain),
        "",
        f"Reference: the best group, {groups[best]['label']}. Significantly behind it: "
        f"{', '.join(ahead) or 'none'}. Not significantly different from it: {', '.join(tied) or 'none'}.",
        "",
    ]


def compare_task(task: str, table: list[dict], groups: list[dict]) -> tuple[list[str], list[dict]]:
    """The significance section of one task (Markdown lines), and per (dataset, budget) partition a record
    {"dataset", "budget", "metric", "order": [rows best first], "pairs": {(gi, gj): (sign for gi, why, p)}} that
    the T5 comparison reads."""
    lines, records = [], []
    parts = partitions(table, task)
    cells = [f"{CELLS}.", ""] if any(r["task"] == task and r.get("scaling_cell") for r in table) else []
    if not parts:
        return ([f"### {task}", "", *cells] if cells else []), records
    lines += _task_head(task, parts, groups) + cells
    signatures: dict[str, str] = {}
    for (dataset, budget), gis in parts.items():
        part_lines, record = _compare_partition(task, table, groups, dataset, budget, gis, signatures)
        lines += part_lines
        records.append(record)
    if signatures:
        lines += ["sacreBLEU signatures: " + "; ".join(f"{k} `{v}`" for k, v in signatures.items()), ""]
    return lines, records


def _task_head(task: str, parts: dict, groups: list[dict]) -> list[str]:
    """The task's heading, its tests and rule of ordering, and a warning when its runs span several
    (dataset, budget) partitions."""
    lines = [
        f"### {task}",
        "",
        f"Test: {TESTS.get(task, 'none (no paired test for this task)')}; {POOLING}; {ZERO_AND_FLOOR}. "
        f"Significantly different (`*` in the p-value tables, `>` in the ranking): p < {ALPHA} and, where both "
        f"have several seeds, disjoint 95% seed intervals; the paired test resamples the examples of the trained "
        f"models, the intervals the seeds, and a difference must stand both (°: p < {ALPHA} with overlapping "
        "intervals, not significant).",
        "",
    ]
    if len(parts) > 1:
        lines += [
            f"**Not ranked across datasets / budgets**: the {task} runs mix "
            + "; ".join(f"({d}, {b}): {', '.join(groups[g]['label'] for g in gs)}" for (d, b), gs in parts.items())
            + ". Groups are tested and ranked only within each (dataset, budget).",
            "",
        ]
    return lines


def _compare_partition(
    task: str, table: list[dict], groups: list[dict], dataset: str, budget: str, gis: list[int], signatures: dict
) -> tuple[list[str], dict]:
    """The lines and ranking record of one (dataset, budget) partition whose groups are gis; adds the sacreBLEU
    signatures of its tests to `signatures`."""
    by_metric = {}
    for r in table:
        if r["group"] in gis and r["n"] > 0:
            by_metric.setdefault(r["metric"], {})[r["group"]] = r
    metric = PRIMARY.get(task) if PRIMARY.get(task) in by_metric else next(iter(by_metric))
    excluded = [g for g in gis if objective_note(task, groups[g]["objective"])]
    ranked = [g for g in gis if g in by_metric[metric] and g not in excluded]
    lines = [f"**{dataset}, budget {budget}**, ranked by {metric}:", ""]
    lines += _left_out_lines(groups, gis, excluded)
    rows_ = sorted((by_metric[metric][g] for g in ranked), key=lambda r: r["mean"], reverse=not lower_is_better(metric))
    order = [r["group"] for r in rows_]
    tests, refusals, sigs = pairwise_tests(order, groups, task)
    signatures.update(sigs)
    pairs = _pair_orderings(tests, by_metric[metric], metric, groups)
    lines += ranking_lines(order, by_metric[metric], pairs, groups)
    lines += p_value_lines(by_metric, order, tests, groups)
    if refusals:
        lines += ["Not paired (no test):", "", *refusals, ""]
    return lines, {"dataset": dataset, "budget": budget, "metric": metric, "order": rows_, "pairs": pairs}


def _left_out_lines(groups: list[dict], gis: list[int], excluded: list[int]) -> list[str]:
    """Lines naming the groups not ranked (a different objective) and the flagged ones (flag_group)."""
    lines = []
    if excluded:
        lines += ["Not ranked (a different objective): " + ", ".join(groups[g]["label"] for g in excluded), ""]
    flagged = [g for g in gis if groups[g].get("flags")]
    if flagged:
        lines += [
            "Flagged (the table's flag column): "
            + "; ".join(f"{groups[g]['label']} ({'; '.join(groups[g]['flags'])})" for g in flagged)
            + ". Two groups flagged in every run are not ranked against each other.",
            "",
        ]
    return lines


def _pair_orderings(tests: dict, rows: dict, metric: str, groups: list[dict]) -> dict:
    """{(gi, gj): (sign for gi, why, p)} in both directions, from each pair's p-value of `metric` and the rows'
    seed intervals (ordering); 0 with DEGENERATE for two groups flagged in every run."""
    pairs = {}
    for (gi, gj), res in tests.items():
        p = res.get(metric, {}).get("p")
        sign, why = ordering(rows[gi], rows[gj], p)
        if both_degenerate(groups, gi, gj):
            sign, why = 0, DEGENERATE
        pairs[(gi, gj)] = (sign, why, p)
        pairs[(gj, gi)] = (-sign, why, p)
    return pairs
