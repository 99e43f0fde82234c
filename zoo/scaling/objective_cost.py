"""What each family's objective trains on and pays for a window of the LM study: the positions its loss scores
(scored tokens) and the training FLOPs of a window and of a scored token, from zoo's cost model (zoo.model.cost,
through each objective's own batch_flops) at the study's shapes.

D counts the tokens a family reads (T a window) for every family, and C what zoo counts it training on them. Two
families that read the same tokens may still score unequal numbers of them, at unequal cost: encoder_only's ENTP
(Ewer et al. 2024) scores K = task.entp_targets positions of a window, each from its own bidirectional forward over
its prefix, where decoder_only's causal_lm scores all T from one causal forward. This module puts that in numbers,
so the report can say how the comparison is unequal (issue 45's per-target-token view fits the law to them)."""

from types import SimpleNamespace

import torch

from zoo.model.cost import non_embedding_param_count
from zoo.scaling.conventions import STUDY_OBJECTIVES, scored_per_window, study_entp_targets, study_shapes
from zoo.scaling.points import REFERENCE
from zoo.scaling.sizes import FAMILY_MODELS, family_model
from zoo.tasks.objectives import objective_class

SHAKESPEARE_PLAYS_VOCAB = 84  # data=shakespeare_plays' characters (tests check it): the LM head's V


def window_cost(
    arch: str,
    d_model: int,
    n_heads: int,
    n_layers: int,
    T: int,
    vocab_size: int,
    entp_targets: int,
    objective: str | None = None,
):
    """{"objective", "N" (non-embedding parameters), "scored" (positions the training loss scores a window),
    "flops" (training FLOPs of a window: 3 x the objective's forward FLOPs of a (1, T) batch)} of a family at a
    size (zoo.scaling.sizes's layers and d_ff), trained by `objective` (None: its STUDY_OBJECTIVES entry).
    Raises KeyError for a family not in STUDY_OBJECTIVES, ValueError for an objective it does not train."""
    name = objective or STUDY_OBJECTIVES[arch]
    model = family_model(arch, d_model, n_heads, n_layers, vocab_size)
    model_arch, mask = FAMILY_MODELS.get(arch, (arch, None))
    rule = objective_class("lm", model_arch, name, mask)
    objective = rule(SimpleNamespace(model=model, hparams=SimpleNamespace(entp_targets=entp_targets)))
    x = torch.zeros(1, T, dtype=torch.long)
    scored = scored_per_window(rule.NAME, T, entp_targets)
    N = non_embedding_param_count(model)
    return {"objective": rule.NAME, "N": N, "scored": scored, "flops": 3.0 * objective.batch_flops((x, x))}


def objective_costs(
    archs,
    sizes: dict | None = None,
    T: int | None = None,
    vocab_size: int = SHAKESPEARE_PLAYS_VOCAB,
    objectives: dict | None = None,
):
    """{arch: {size: window_cost}} of the families of `archs` in STUDY_OBJECTIVES (in that order) at `sizes`
    ({size: {d_model, n_heads, n_layers}}) and window T (None: conf/experiment/scaling.yaml's, study_shapes),
    ENTP's K conf/task/lm.yaml's, each trained by its `objectives` entry (None or absent: its study's)."""
    if sizes is None or T is None:
        sizes, T = study_shapes()
    K, objectives = study_entp_targets(), objectives or {}
    return {
        a: {
            s: window_cost(a, **shape, T=T, vocab_size=vocab_size, entp_targets=K, objective=objectives.get(a))
            for s, shape in sizes.items()
        }
        for a in archs
        if a in STUDY_OBJECTIVES
    }


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g}–{hi:.3g}"


def objective_table(
    archs,
    sizes: dict | None = None,
    T: int | None = None,
    vocab_size: int = SHAKESPEARE_PLAYS_VOCAB,
    objectives: dict | None = None,
):
    """Markdown lines: per family its objective (`objectives`: {arch: task.objective} where not its study's), scored
    tokens a window and training FLOPs per scored token at each size, x REFERENCE's at that size; then a line per
    other family saying how unequal its objective makes the comparison. [] without REFERENCE among `archs` or with
    no other family."""
    costs = objective_costs(archs, sizes, T, vocab_size, objectives)
    if REFERENCE not in costs or len(costs) < 2:
        return []
    ref, T = costs[REFERENCE], T or study_shapes()[1]
    names = list(ref)
    lines = [
        f"What each objective trains on a window of T = {T} tokens, and at what cost (zoo.model.cost through each "
        f"objective's batch_flops at the study's shapes, V = {vocab_size}; training FLOPs = 3 x forward, attention "
        f"in full): the positions its loss scores, and the training FLOPs a scored token costs (x {REFERENCE}'s "
        "at the same size) in the size columns. D counts the T tokens a window reads, for every family.",
        "",
        "| arch | objective | scored tokens / window | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for arch, by in costs.items():
        cells = [
            f"{c['flops'] / c['scored']:.3g} (x{c['flops'] / c['scored'] / _per(ref[s]):.2f})" for s, c in by.items()
        ]
        first = next(iter(by.values()))
        lines.append(f"| {arch} | {first['objective']} | {first['scored']} | " + " | ".join(cells) + " |")
    lines.append("")
    for arch, by in costs.items():
        if arch == REFERENCE:
            continue
        scored = next(iter(by.values()))["scored"]
        window = [by[s]["flops"] / ref[s]["flops"] for s in names]
        token = [_per(by[s]) / _per(ref[s]) for s in names]
        lines.append(
            f"- {arch}: scores {scored} of the {T} positions a window ({scored / T:.1%} of {REFERENCE}'s {T}); a "
            f"window costs {_span(window)}x {REFERENCE}'s training FLOPs and a scored token {_span(token)}x, over "
            f"{names[0]}–{names[-1]}: at equal compute it trains on {_span([1 / t for t in token])}x {REFERENCE}'s "
            "scored tokens."
        )
    return lines


def _per(cost: dict) -> float:
    return cost["flops"] / cost["scored"]
