"""FLOP conventions of a scaling study's compute, and its target tokens.

zoo counts training FLOPs as 3 x the objective's forward FLOPs (zoo.model.cost), attention in full: the scores and
values products over every query-key pair, as SDPA computes them, masked or not. Two other conventions recount
the same points:

- "causal attention at half": each attention product counted at its mask's share of the full matrix, a causal
  mask at 1/2 (the triangle; the count of FlashAttention's causal kernels, Dao 2023), the prefix mask of
  prefix_lm at (P T + (T - P)^2 / 2) / T^2 = 5/8 for a prefix P = T/2, the encoder's and the cross-attention's in
  full (encoder_only's ENTP forwards are bidirectional: in full);
- "6·N·D": Kaplan et al. 2020's C = 6 N D, N the non-embedding parameters, D the tokens read.

The attention FLOPs come from zoo.model.cost at the study's shapes (conf/experiment/scaling.yaml's sizes and
block_size, each family's objective's sequence lengths; encoder_only's ENTP: one forward per stratum of its K =
task.entp_targets, conf/task/lm.yaml); a point whose N is not its size's at those shapes is not recounted. Target
tokens: the tokens a window trains on (the positions its loss scores)."""

import functools
from pathlib import Path

from omegaconf import OmegaConf

from zoo.model.cost import forward_flops_by_stack, non_embedding_param_count
from zoo.scaling.law import ScalingError
from zoo.scaling.sizes import family_model
from zoo.tasks.objectives.entp import strata

CONVENTIONS = {"C": "zoo: attention in full", "C_half": "causal attention at half", "C_6ND": "6·N·D"}
_PKG = Path(__file__).resolve().parent.parent
CONF_DIR = _PKG / "conf" if (_PKG / "conf").is_dir() else _PKG.parent / "conf"


def study_shapes(experiment: str = "scaling") -> tuple[dict, int]:
    """({size: {"d_model", "n_heads", "n_layers"}}, block_size) of conf/experiment/<experiment>.yaml."""
    scaling = OmegaConf.load(CONF_DIR / "experiment" / f"{experiment}.yaml")["scaling"]
    sizes = {n: {k: int(s[k]) for k in ("d_model", "n_heads", "n_layers")} for n, s in scaling["sizes"].items()}
    return sizes, int(scaling["block_size"])


def study_entp_targets() -> int:
    """K of encoder_only's ENTP in the LM study: conf/task/lm.yaml's task.entp_targets (experiment=scaling keeps it)."""
    return int(OmegaConf.load(CONF_DIR / "task" / "lm.yaml")["task"]["entp_targets"])


def mask_share(mask: str, T: int) -> float:
    """The share of an attention product's matrix counted under "causal attention at half": full 1, causal 1/2,
    prefix (P = T/2 bidirectional, causal after) (P T + (T - P)^2 / 2) / T^2 = 5/8."""
    P = T // 2
    return {"full": 1.0, "causal": 0.5, "prefix": (P * T + (T - P) ** 2 / 2) / T**2}[mask]


# task.objective of each family's cells in the LM study (conf/task/lm.yaml's defaults); a points.csv's objective
# column names another (e.g. decoder_only's causal_continuation)
STUDY_OBJECTIVES = {
    "decoder_only": "causal_lm",
    "prefix_lm": "prefix_lm",
    "encoder_decoder": "prefix_continuation",
    "encoder_only": "entp",
}
CONTINUATION = ("prefix_lm", "prefix_continuation", "causal_continuation")  # scored after a half-window prefix


def scored_per_window(objective: str, T: int, entp_targets: int | None = None) -> int:
    """The positions a window of T tokens trains on under LM objective `objective`: causal_lm all T; entp
    min(K, T), K = entp_targets (None: study_entp_targets()); those of CONTINUATION the continuation after the
    half-window prefix, T - T/2 + 1 (zoo.tasks.objectives). Raises ValueError for another objective."""
    if objective == "causal_lm":
        return T
    if objective == "entp":
        return min(study_entp_targets() if entp_targets is None else entp_targets, T)
    if objective in CONTINUATION:
        return T - T // 2 + 1
    raise ValueError(f"objective {objective!r}: no scored-token count (LM objectives: causal_lm, entp, {CONTINUATION})")


def target_tokens_per_window(arch: str, T: int, entp_targets: int | None = None, objective: str | None = None):
    """scored_per_window of `objective`, or of the family's STUDY_OBJECTIVES entry where None: decoder_only all
    T, prefix_lm and encoder_decoder T - T/2 + 1, encoder_only min(K, T). None for another family."""
    objective = objective or STUDY_OBJECTIVES.get(arch)
    return None if objective is None else scored_per_window(objective, T, entp_targets)


def family_objective(arch: str, points: list[dict]) -> str | None:
    """The objective a family's points trained: each point's `objective` (a points.csv column; empty or absent:
    STUDY_OBJECTIVES[arch], None for another family). Raises ScalingError where they differ."""
    named = sorted({p.get("objective") or STUDY_OBJECTIVES.get(arch) or "?" for p in points})
    if len(named) > 1:
        raise ScalingError(
            f"{arch}'s points mix objectives {', '.join(named)} (an empty objective is {arch}'s study objective, "
            f"{STUDY_OBJECTIVES.get(arch)}): one law is one objective; fit them apart, a points.csv or a sweep "
            "folder each"
        )
    return None if named == ["?"] else named[0]


@functools.cache
def attention_per_window(arch: str, d_model: int, n_heads: int, n_layers: int, T: int) -> tuple[int, dict] | None:
    """(N, {mask: forward FLOPs}) of one window of T tokens: the non-embedding parameters of the family at that
    size (zoo.scaling.sizes's layers and d_ff), and its attention products (scores + values) by the mask they run
    under ("full", "causal", "prefix"); None for a family of another objective."""
    if arch not in ("decoder_only", "prefix_lm", "encoder_decoder", "encoder_only"):
        return None
    model = family_model(arch, d_model, n_heads, n_layers)  # a mask does not change the FLOPs counted
    N = non_embedding_param_count(model)
    if arch == "encoder_only":  # entp: one bidirectional forward a stratum, as wide as its last prefix
        widths = strata(T, min(study_entp_targets(), T))[1:]
        encs = [forward_flops_by_stack(model, 1, w)["encoder"] for w in widths]
        return N, {"full": sum(e["attention_scores"] + e["attention_values"] for e in encs)}
    if arch == "encoder_decoder":  # prefix_continuation: encoder over T/2, decoder over T - T/2 + 1
        st = forward_flops_by_stack(model, 1, T - T // 2 + 1, T // 2)
        enc, dec = st["encoder"], st["decoder"]
        full = enc["attention_scores"] + enc["attention_values"] + dec["cross_scores"] + dec["cross_values"]
        return N, {"full": full, "causal": dec["attention_scores"] + dec["attention_values"]}
    dec = forward_flops_by_stack(model, 1, T)["decoder"]
    attn = dec["attention_scores"] + dec["attention_values"]
    return N, {"causal" if arch == "decoder_only" else "prefix": attn}


def recount(points: list[dict], sizes: dict, T: int) -> tuple[list[dict] | None, str | None]:
    """The points with C_half (causal attention at half), C_6ND (6 N D), attention (the share of C that is
    attention products) and target (the target tokens trained: tokens x target_tokens_per_window / T; D: the
    tokens read), or (None, why)
    when a point's family has no known objective or its N is not its size's at `sizes` (study_shapes)."""
    out = []
    for p in points:
        shape = sizes.get(p.get("size"))
        got = attention_per_window(p["arch"], **shape, T=T) if shape else None
        if got is None or round(got[0]) != round(p["N"]):
            why = "no shape" if got is None else f"N {got[0]:,} at the study's shape"
            return None, f"{p['arch']} {p.get('size')}: N {p['N']:,.0f}, {why} (conf/experiment/scaling.yaml)"
        windows = p["tokens"] / T
        attn = {m: 3 * f * windows for m, f in got[1].items()}  # training FLOPs of the attention products
        saved = sum(f * (1 - mask_share(m, T)) for m, f in attn.items())
        target = p["tokens"] * target_tokens_per_window(p["arch"], T, objective=p.get("objective")) / T
        share = sum(attn.values()) / p["C"]
        out.append(
            {**p, "C_half": p["C"] - saved, "C_6ND": 6 * p["N"] * p["tokens"], "attention": share, "target": target}
        )
    return out, None
