"""Paired significance tests between the groups of a task, and the ranking they support.

Groups are compared only within one (dataset, budget) of a task, and only when their objective is comparable
(zoo.report_table.objective_note). Two groups are paired on the same examples: their runs' examples.json,
matched by "ids" (runs whose ids differ are not paired, and the report says so). With several seeds, the
i-th seed of one group (in seed order) is paired with the i-th of the other (min(n_a, n_b) seeds) and the
pairs are pooled: outputs concatenated seed after seed, references repeated once per seed; a bootstrap then
resamples (seed, example) units.

Tests: BLEU / chrF: sacreBLEU's paired bootstrap resampling (zoo.report_stats.sacrebleu_paired); accuracy:
McNemar's exact test (mcnemar_exact); LM loss: a paired bootstrap over the same validation windows,
weighted by their scored tokens (paired_bootstrap). A group is "ahead" of another when the test's p < ALPHA
and, where both have several seeds, their 95% seed intervals do not overlap (a difference within the
intervals is not an ordering); without examples, the intervals alone decide, and one seed each decides nothing.
"""

from zoo.report_runs import read_examples
from zoo.report_stats import (
    ALPHA,
    BOOTSTRAP_SAMPLES,
    SACREBLEU_SAMPLES,
    SEED,
    mcnemar_exact,
    paired_bootstrap,
    pooled,
    sacrebleu_paired,
)
from zoo.report_table import PRIMARY, fmt_ci, fmt_value, lower_is_better, objective_note

TESTS = {  # task -> how its metrics are tested (printed)
    "translation": f"sacreBLEU paired bootstrap resampling ({SACREBLEU_SAMPLES} resamples, seed {SEED}; "
    f"sacrebleu.significance.PairedTest, test_type 'bs') on test/bleu, test/chrf (greedy outputs) "
    f"and test/bleu_beam (beam outputs, when both runs have them)",
    "classification": "McNemar's exact test (two-sided binomial test on the discordant test examples) on test/acc",
    "lm": f"paired bootstrap over the same validation windows ({BOOTSTRAP_SAMPLES} resamples, seed {SEED}): the "
    f"difference of the token-weighted mean losses, windows resampled, p two-sided (bootstrap shifted to the "
    f"null)",
}
POOLING = (
    "seeds: the i-th seed of one group is paired with the i-th of the other (seed order) and the pairs are "
    "pooled (outputs concatenated seed after seed, references / labels repeated once per seed), so a resample "
    "draws (seed, example) units"
)


# ---- pairing ---------------------------------------------------------------------------------------------
class NotPaired(ValueError):
    """Two groups' examples cannot be paired (different ids, splits, references or labels)."""


def load_examples(group: dict) -> None:
    """Read the group's examples once: group["examples"] = [(run, examples.json)] of its finished runs that have
    one (seed order), group["examples_missing"] = [(run, why not)]."""
    if "examples" in group:
        return
    group["examples"], group["examples_missing"] = [], []
    for r in group["ok"]:
        ex, why = read_examples(r)
        (group["examples"].append((r, ex)) if ex is not None else group["examples_missing"].append((r, why)))


def _align(ex_a: dict, ex_b: dict, who: str) -> list[int]:
    """Indices into ex_b of ex_a's ids, in ex_a's order; NotPaired when the splits or the id sets differ."""
    if ex_a.get("split") != ex_b.get("split"):
        raise NotPaired(f"{who}: one is scored on {ex_a.get('split')!r}, the other on {ex_b.get('split')!r}")
    ids_a, ids_b = ex_a["ids"], ex_b["ids"]
    if set(ids_a) != set(ids_b):
        common = len(set(ids_a) & set(ids_b))
        raise NotPaired(f"{who}: their example ids differ ({len(ids_a)} and {len(ids_b)} ids, {common} in common)")
    where = {i: k for k, i in enumerate(ids_b)}
    return [where[i] for i in ids_a]


def paired_data(ga: dict, gb: dict, task: str) -> dict:
    """The pooled paired outputs of two groups (module docstring): {"seeds": k, field: (A list, B list), ...}
    with fields by task: classification "correct"; translation "hyp", "ref" and, when every paired run has
    them, "hyp_beam"; lm "loss" and "tokens", "metric". Raises NotPaired with the reason."""
    load_examples(ga)
    load_examples(gb)
    k = min(len(ga["examples"]), len(gb["examples"]))
    if k == 0:
        missing = ga["examples_missing"] + gb["examples_missing"]
        raise NotPaired(missing[0][1] if missing else "no examples")
    per: dict[str, tuple[list, list]] = {}
    for (ra, ea), (rb, eb) in zip(ga["examples"][:k], gb["examples"][:k]):
        who = f"{ga['label']} (seed {ra.get('seed', '?')}) and {gb['label']} (seed {rb.get('seed', '?')})"
        idx = _align(ea, eb, who)
        pick = lambda name: [eb[name][i] for i in idx]  # noqa: E731
        if task == "classification":
            if ea["label"] != pick("label"):
                raise NotPaired(f"{who}: the same ids carry different labels")
            fields = {
                "correct": (
                    [p == y for p, y in zip(ea["pred"], ea["label"])],
                    [p == y for p, y in zip(pick("pred"), pick("label"))],
                )
            }
        elif task == "translation":
            if ea["ref"] != pick("ref"):
                raise NotPaired(f"{who}: the same ids carry different references")
            fields = {"hyp": (ea["hyp"], pick("hyp")), "ref": (ea["ref"], ea["ref"])}
            if isinstance(ea.get("hyp_beam"), list) and isinstance(eb.get("hyp_beam"), list):
                fields["hyp_beam"] = (ea["hyp_beam"], pick("hyp_beam"))
        elif task == "lm":
            if ea.get("metric") != eb.get("metric"):
                raise NotPaired(f"{who}: the losses are of {ea.get('metric')!r} and {eb.get('metric')!r}")
            if list(map(int, ea["tokens"])) != list(map(int, pick("tokens"))):
                raise NotPaired(f"{who}: the same windows score different numbers of tokens")
            fields = {"loss": (ea["loss"], pick("loss")), "tokens": (ea["tokens"], ea["tokens"])}
        else:
            raise NotPaired(f"no paired test for task {task!r}")
        for name, (xa, xb) in fields.items():
            acc = per.setdefault(name, ([], []))
            acc[0].append(list(xa))
            acc[1].append(list(xb))
    out = {"seeds": k}
    for name, (xa, xb) in per.items():
        if len(xa) == k:  # a field every seed pair has (hyp_beam may be missing in some)
            out[name] = (pooled(xa), pooled(xb))
    if task == "lm":
        out["metric"] = ga["examples"][0][1].get("metric", "val/cont_loss")
    return out


def paired_tests(ga: dict, gb: dict, task: str) -> tuple[dict[str, dict], dict[str, str]]:
    """({table metric: {"p", "test", ...}}, {"BLEU"/"chrF2": sacreBLEU signature}) of groups A vs B. Raises
    NotPaired."""
    data = paired_data(ga, gb, task)
    out, sigs = {}, {}
    if task == "classification":
        m = mcnemar_exact(*data["correct"])
        out["test/acc"] = {**m, "test": "McNemar exact", "seeds": data["seeds"], "n": len(data["correct"][0])}
    elif task == "translation":
        refs = data["ref"][0]
        s = sacrebleu_paired(*data["hyp"], refs)
        out["test/bleu"] = {**s["bleu"], "test": "sacreBLEU paired bootstrap", "seeds": data["seeds"], "n": len(refs)}
        out["test/chrf"] = {**s["chrf"], "test": "sacreBLEU paired bootstrap", "seeds": data["seeds"], "n": len(refs)}
        sigs = {"BLEU": s["bleu"]["signature"], "chrF2": s["chrf"]["signature"]}
        if "hyp_beam" in data:
            s = sacrebleu_paired(*data["hyp_beam"], refs)
            out["test/bleu_beam"] = {
                **s["bleu"],
                "test": "sacreBLEU paired bootstrap",
                "seeds": data["seeds"],
                "n": len(refs),
            }
    elif task == "lm":
        la, lb = data["loss"]
        diff = [float(x) - float(y) for x, y in zip(la, lb)]
        b = paired_bootstrap(diff, [float(t) for t in data["tokens"][0]])
        out[data["metric"] + " (best)"] = {
            **b,
            "test": "paired bootstrap (token-weighted windows)",
            "seeds": data["seeds"],
        }
    return out, sigs


# ---- ranking ---------------------------------------------------------------------------------------------
def overlap(ra: dict, rb: dict) -> bool | None:
    """Whether two rows' 95% seed intervals overlap; None when one of them has a single seed."""
    if ra["lo"] is None or rb["lo"] is None:
        return None
    return not (ra["lo"] > rb["hi"] or rb["lo"] > ra["hi"])


def ordering(ra: dict, rb: dict, p: float | None) -> tuple[int, str]:
    """(+1 A ahead, -1 B ahead, 0 neither, why) for two rows of one metric (module docstring's rule)."""
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


def partitions(table: list[dict], task: str) -> dict[tuple[str, str], list[dict]]:
    """{(dataset, budget text): [group indices]} of a task's groups with finished runs: the sets within which
    groups are ranked."""
    parts: dict[tuple[str, str], list[int]] = {}
    for r in table:
        if r["task"] == task and r["n"] > 0:
            lst = parts.setdefault((r["dataset"], r["budget"]), [])
            if r["group"] not in lst:
                lst.append(r["group"])
    return parts


def fmt_p(p: float | None) -> str:
    return "-" if p is None else (f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}") + ("*" if p < ALPHA else "")


def compare_task(task: str, table: list[dict], groups: list[dict]) -> tuple[list[str], list[dict]]:
    """The significance section of one task (Markdown lines), and per (dataset, budget) partition a record
    {"dataset", "budget", "metric", "order": [rows best first], "pairs": {(gi, gj): (sign for gi, why, p)}} that
    the T5 comparison reads."""
    lines, records = [], []
    parts = partitions(table, task)
    if not parts:
        return lines, records
    lines += [
        f"### {task}",
        "",
        f"Test: {TESTS.get(task, 'none (no paired test for this task)')}; {POOLING}. "
        f"`*`: p < {ALPHA}. A group is ahead of another when p < {ALPHA} and, where both have several seeds, "
        f"their 95% seed intervals do not overlap.",
        "",
    ]
    if len(parts) > 1:
        lines += [
            f"**Not ranked across datasets / budgets**: the {task} runs mix "
            + "; ".join(f"({d}, {b}): {', '.join(groups[g]['label'] for g in gs)}" for (d, b), gs in parts.items())
            + ". Groups are tested and ranked only within each (dataset, budget).",
            "",
        ]
    signatures: dict[str, str] = {}
    for (dataset, budget), gis in parts.items():
        by_metric = {}
        for r in table:
            if r["group"] in gis and r["n"] > 0:
                by_metric.setdefault(r["metric"], {})[r["group"]] = r
        metric = PRIMARY.get(task) if PRIMARY.get(task) in by_metric else next(iter(by_metric))
        excluded = [g for g in gis if objective_note(task, groups[g]["objective"])]
        ranked = [g for g in gis if g in by_metric[metric] and g not in excluded]
        lines += [f"**{dataset}, budget {budget}**, ranked by {metric}:", ""]
        if excluded:
            lines += ["Not ranked (a different objective): " + ", ".join(groups[g]["label"] for g in excluded), ""]
        rows_ = sorted(
            (by_metric[metric][g] for g in ranked), key=lambda r: r["mean"], reverse=not lower_is_better(metric)
        )
        order = [r["group"] for r in rows_]
        tests, refusals = {}, []
        for i, gi in enumerate(order):
            for gj in order[i + 1 :]:
                try:
                    res, sigs = paired_tests(groups[gi], groups[gj], task)
                except NotPaired as e:
                    refusals.append(f"- {groups[gi]['label']} vs {groups[gj]['label']}: not paired: {e}")
                    res, sigs = {}, {}
                tests[(gi, gj)] = res
                signatures.update(sigs)
        pairs = {}
        for (gi, gj), res in tests.items():
            p = res.get(metric, {}).get("p")
            sign, why = ordering(by_metric[metric][gi], by_metric[metric][gj], p)
            pairs[(gi, gj)] = (sign, why, p)
            pairs[(gj, gi)] = (-sign, why, p)
        chain = []
        for k, g in enumerate(order):
            r = by_metric[metric][g]
            piece = f"{groups[g]['label']} {fmt_value(r['mean'])} {fmt_ci(r)}"
            if k:
                piece = (" > " if pairs[(order[k - 1], g)][0] == 1 else " ≈ ") + piece
            chain.append(piece)
        if len(order) == 1:
            lines += [f"One group ({groups[order[0]]['label']}): nothing to compare it with.", ""]
        elif order:
            lines += ["Ranking (best first; `>`: ahead, `≈`: not significantly different): " + "".join(chain), ""]
            best = order[0]
            ahead = [groups[g]["label"] for g in order[1:] if pairs[(best, g)][0] == 1]
            tied = [f"{groups[g]['label']} ({pairs[(best, g)][1]})" for g in order[1:] if pairs[(best, g)][0] != 1]
            lines += [
                f"Reference: the best group, {groups[best]['label']}. Significantly behind it: "
                f"{', '.join(ahead) or 'none'}. Not significantly different from it: "
                f"{', '.join(tied) or 'none'}.",
                "",
            ]
        tested_metrics = [m for m in by_metric if any(m in res for res in tests.values())]
        for m in tested_metrics:
            m_order = [g for g in order if g in by_metric[m]] or order
            lines += [
                f"p-values, {m} ({next(res[m]['test'] for res in tests.values() if m in res)}):",
                "",
                "| " + " | ".join([m] + [groups[g]["label"] for g in m_order]) + " |",
                "|" + "---|" * (len(m_order) + 1),
            ]
            for gi in m_order:
                cells = []
                for gj in m_order:
                    res = tests.get((gi, gj)) or tests.get((gj, gi)) or {}
                    cells.append("-" if gi == gj else fmt_p(res.get(m, {}).get("p")))
                lines.append("| " + " | ".join([groups[gi]["label"]] + cells) + " |")
            lines.append("")
        identical = sorted(
            {
                f"{groups[gi]['label']} and {groups[gj]['label']}"
                for (gi, gj), res in tests.items()
                if any(v.get("identical") for v in res.values())
            }
        )
        if identical:
            lines += ["Identical outputs (p = 1, no test): " + "; ".join(identical), ""]
        if refusals:
            lines += ["Not paired (no test):", "", *refusals, ""]
        records.append({"dataset": dataset, "budget": budget, "metric": metric, "order": rows_, "pairs": pairs})
    if signatures:
        lines += ["sacreBLEU signatures: " + "; ".join(f"{k} `{v}`" for k, v in signatures.items()), ""]
    return lines, records
