"""Pairing two groups of a task on the same examples, and their paired tests (zoo.report.significance ranks
with them).

Two groups are paired on the same examples: their runs' examples.json, matched by "ids" (runs whose ids differ
are not paired: NotPaired). With several seeds, the i-th seed of one group (in seed order) is paired with the
i-th of the other (min(n_a, n_b) seeds) and the pairs are pooled: outputs concatenated seed after seed,
references repeated once per seed; a bootstrap then resamples (seed, example) units.
"""

from zoo.report.runs import read_examples
from zoo.report.stats import mcnemar_exact, paired_bootstrap, pooled, sacrebleu_paired


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
    """({table metric: {"p", "test", "seeds", "n" (pooled paired units), "n_diff" (units that differ: McNemar's
    discordant examples b + c, segments whose metric statistics differ, windows whose losses differ), "unit"
    ("examples", "segments", "windows"), and the test's own keys (McNemar's "b", "c"; sacreBLEU's "a", "b"
    scores, "identical")}}, {"BLEU"/"chrF2": sacreBLEU signature}) of groups A vs B. Raises NotPaired."""
    data = paired_data(ga, gb, task)
    out, sigs = {}, {}
    if task == "classification":
        m = mcnemar_exact(*data["correct"])
        out["test/acc"] = {**m, "test": "McNemar exact", "seeds": data["seeds"], "unit": "examples"}
    elif task == "translation":
        refs = data["ref"][0]
        s = sacrebleu_paired(*data["hyp"], refs)
        common = {"test": "sacreBLEU paired bootstrap", "seeds": data["seeds"], "unit": "segments"}
        out["test/bleu"] = {**s["bleu"], **common}
        out["test/chrf"] = {**s["chrf"], **common}
        sigs = {"BLEU": s["bleu"]["signature"], "chrF2": s["chrf"]["signature"]}
        if "hyp_beam" in data:
            s = sacrebleu_paired(*data["hyp_beam"], refs)
            out["test/bleu_beam"] = {**s["bleu"], **common}
    elif task == "lm":
        la, lb = data["loss"]
        diff = [float(x) - float(y) for x, y in zip(la, lb)]
        b = paired_bootstrap(diff, [float(t) for t in data["tokens"][0]])
        out[data["metric"] + " (best)"] = {
            **b,
            "test": "paired bootstrap (token-weighted windows)",
            "seeds": data["seeds"],
            "unit": "windows",
        }
    return out, sigs
