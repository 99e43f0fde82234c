"""zoo's ranking against the literature: the ordering of prefix_lm, decoder_only (causal LM) and encoder_decoder
on translation (test BLEU) and classification (test accuracy) against T5's (Raffel et al. 2020, Table 2).

T5's numbers are constants here (T5_TABLE2, with its citation). t5_claim turns them into pairwise orderings
(an ordering needs a gap beyond T5's own run-to-run noise); versus_t5 puts zoo's ordering (ranking records of
zoo.report.significance.compare_task, which require a paired test and disjoint seed intervals) beside them,
only for runs on zoo's built-in benchmarks of T5's kind (T5_SETUP: Multi30k between English and German, SST-2)
and with a verdict only where each architecture has several seeds.
"""

import math

from zoo.report.formats import fmt_ci, fmt_value

T5_CITATION = (
    'Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text '
    'Transformer", JMLR 21(140): Table 2 (EnDe BLEU, GLUE average); run-to-run std of the baseline over '
    "10 runs: Table 1"
)
# (zoo architecture, T5's row, pre-training objective, parameters, cost, EnDe BLEU, GLUE average or None)
T5_TABLE2 = (
    ("encoder_decoder", "encoder-decoder 12+12 layers", "denoising", "2P", "M", 26.98, 83.28),
    ("encoder_decoder", "encoder-decoder 6+6 layers", "denoising", "P", "M/2", 26.38, None),
    ("prefix_lm", "prefix LM", "denoising", "P", "M", 26.43, 81.82),
    ("decoder_only", "language model (causal)", "denoising", "P", "M", 25.09, 74.70),
    ("encoder_decoder", "encoder-decoder 12+12 layers", "LM", "2P", "M", 26.27, None),
    ("prefix_lm", "prefix LM", "LM", "P", "M", 26.28, None),
    ("decoder_only", "language model (causal)", "LM", "P", "M", 25.23, None),
)
T5_STD = {"EnDe": 0.112, "GLUE": 0.235}  # Table 1: baseline standard deviation over 10 runs
# zoo task -> (T5 benchmark, its column in T5_TABLE2, the zoo metric compared with it)
T5_BENCHMARK = {"translation": ("EnDe", 5, "test/bleu"), "classification": ("GLUE", 6, "test/acc")}
T5_ARCHS = ("prefix_lm", "decoder_only", "encoder_decoder")
# zoo's built-in benchmarks of T5's kind: translation between English and German (T5: WMT EnDe) on Multi30k, and
# SST-2 classification (one of GLUE's tasks); zoo task -> (dataset name, language pair or None)
T5_SETUP = {"translation": ("multi30k", {"en", "de"}), "classification": ("sst2", None)}


def t5_setup(task: str, group: dict) -> str:
    """ "" when every finished run of the group is on the built-in benchmark of T5_SETUP for its task, else why
    not. A run's results.json "data" (the datamodule's data_info) must name the built-in dataset ("builtin"
    True, "dataset") and, for translation, an English-German pair; a results.json from before "data" was kept
    is judged by its "dataset" name."""
    if task not in T5_SETUP:
        return f"T5's Table 2 has no {task} benchmark"
    name, langs = T5_SETUP[task]
    for r in group["ok"]:
        data = r.get("data") if isinstance(r.get("data"), dict) else {"dataset": r.get("dataset"), "builtin": True}
        if data.get("dataset") != name or data.get("builtin") is False:
            return f"{group['label']} is on {data.get('dataset') or r.get('dataset')!r}, not zoo's built-in {name}"
        if langs and "src_lang" in data and {data["src_lang"], data.get("tgt_lang")} != langs:
            pair = f"{data['src_lang']}->{data.get('tgt_lang')}"
            return f"{group['label']} translates {pair}, not between English and German"
    return ""


def t5_threshold(benchmark: str) -> float:
    """The smallest gap T5 counts as an ordering: 1.96 * sqrt(2) * std, the 95% two-sided bound of the
    difference of two single runs each with T5's run-to-run std (Table 1)."""
    return 1.96 * math.sqrt(2) * T5_STD[benchmark]


def t5_claim(a: str, b: str, benchmark: str) -> tuple[int, str] | None:
    """T5's ordering of zoo architectures a and b on a benchmark: (+1 a ahead, -1 b ahead, 0 no ordering, why).
    Compares T5_TABLE2 rows of the same pre-training objective, only those at equal parameters where there are
    any; an ordering needs every such gap beyond t5_threshold with the same sign. None: T5 has no such rows."""
    col = 5 if benchmark == "EnDe" else 6
    pairs = [
        (ra, rb)
        for ra in T5_TABLE2
        if ra[0] == a and ra[col] is not None
        for rb in T5_TABLE2
        if rb[0] == b and rb[col] is not None and rb[2] == ra[2]
    ]
    matched = [(ra, rb) for ra, rb in pairs if ra[3] == rb[3]]
    pairs = matched or pairs
    if not pairs:
        return None
    thr = t5_threshold(benchmark)
    gaps = [ra[col] - rb[col] for ra, rb in pairs]
    why = "; ".join(
        f"{ra[1]} ({ra[3]}, {ra[4]}) {ra[col]:.2f} vs {rb[1]} ({rb[3]}, {rb[4]}) {rb[col]:.2f}, {ra[2]} objective"
        for ra, rb in pairs
    )
    if all(g > thr for g in gaps):
        return 1, why
    if all(g < -thr for g in gaps):
        return -1, why
    return 0, why + f"; |gap| within {thr:.2f} (1.96 * sqrt(2) * T5's std {T5_STD[benchmark]})"


def t5_arch(group: dict) -> str | None:
    """The T5 architecture a group stands for: prefix_lm (+arch=prefix_lm, or decoder_only with
    model.mask=prefix), decoder_only (the causal LM), encoder_decoder; None for another."""
    label = group.get("arch_config") or group["arch"]
    if label == "decoder_only" and group["settings"].get("model.mask") == "prefix":
        return "prefix_lm"
    return label if label in T5_ARCHS else None


def versus_t5(task: str, records: list[dict], groups: list[dict]) -> list[str]:
    """The literature section of a task (translation, classification): zoo's ordering of prefix_lm, decoder_only
    and encoder_decoder with intervals, T5's (t5_claim), and per pair "agrees" / "disagrees" / "not significant".
    Only for groups on the built-in benchmarks of T5's setup (t5_setup: Multi30k en-de, SST-2): nothing for a
    user's dataset, nor for a group flagged in every run (zoo.report.table.flag_group: empty hypotheses or BLEU
    below 1). A pair where either group has a single seed is "not judged": T5's orderings are gaps beyond
    its run-to-run noise, which one training run per architecture cannot show."""
    if task not in T5_BENCHMARK:
        return []
    benchmark, col, zoo_metric = T5_BENCHMARK[task]
    lines = []
    for rec in records:
        if rec["metric"] != zoo_metric:
            continue
        arch_rows = _t5_arch_rows(task, rec, groups)
        if len(arch_rows) < 2:
            continue
        head = f"**{task} ({rec['dataset']}, budget {rec['budget']}) against T5 ({benchmark}, {zoo_metric})**"
        several = [a for a, rs in arch_rows.items() if len(rs) > 1]
        if several:
            lines += [head + f": not compared; several groups stand for {', '.join(several)} (other keys swept).", ""]
            continue
        lines += [
            head,
            "",
            f"- zoo: {_zoo_chain(rec, arch_rows, groups)}",
            f"- T5 ({T5_CITATION}): "
            + "; ".join(_t5_rows(arch_rows, col))
            + f". A gap counts as an ordering beyond {t5_threshold(benchmark):.2f} (1.96 * sqrt(2) * T5's std "
            f"{T5_STD[benchmark]}), comparing rows of one objective, at equal parameters where T5 has them",
        ]
        lines += _pair_lines(rec, arch_rows, benchmark)
        lines.append("")
    return lines


def _t5_arch_rows(task: str, rec: dict, groups: list[dict]) -> dict[str, list[dict]]:
    """The ranking rows of rec["order"] by the T5 architecture their group stands for (t5_arch), in rank order;
    only groups on T5's setup (t5_setup) and not flagged degenerate."""
    arch_rows: dict[str, list[dict]] = {}
    for r in rec["order"]:
        a = t5_arch(groups[r["group"]])
        if a and not t5_setup(task, groups[r["group"]]) and not groups[r["group"]].get("degenerate"):
            arch_rows.setdefault(a, []).append(r)
    return arch_rows


def _zoo_chain(rec: dict, arch_rows: dict, groups: list[dict]) -> str:
    """zoo's ordering as text, "arch mean [ci] > arch ... ≈ arch ...": ">" where the ranking separates neighbours."""
    present = [r for r in rec["order"] if t5_arch(groups[r["group"]]) in arch_rows]
    zoo_chain = ""
    for k, r in enumerate(present):
        if k:
            zoo_chain += " > " if rec["pairs"][(present[k - 1]["group"], r["group"])][0] == 1 else " ≈ "
        zoo_chain += f"{t5_arch(groups[r['group']])} {fmt_value(r['mean'])} {fmt_ci(r)}"
    return zoo_chain


def _t5_rows(arch_rows: dict, col: int) -> list[str]:
    """T5_TABLE2's numbers in column `col` for each architecture present, "arch v (params, cost, objective) / ..."."""
    return [
        f"{a} "
        + " / ".join(
            f"{row[col]:.2f} ({row[3]}, {row[4]}, {row[2]})"
            for row in T5_TABLE2
            if row[0] == a and row[col] is not None
        )
        for a in T5_ARCHS
        if a in arch_rows
    ]


def _pair_lines(rec: dict, arch_rows: dict, benchmark: str) -> list[str]:
    """One line per pair of architectures T5 compares (t5_claim): T5's ordering, zoo's, and the verdict."""
    lines = []
    archs = [a for a in T5_ARCHS if a in arch_rows]
    for i, a in enumerate(archs):
        for b in archs[i + 1 :]:
            claim = t5_claim(a, b, benchmark)
            if claim is None:
                continue
            t5_sign, t5_why = claim
            ra, rb = arch_rows[a][0], arch_rows[b][0]
            z_sign, z_why, _ = rec["pairs"][(ra["group"], rb["group"])]
            t5_text = {1: f"{a} ahead", -1: f"{b} ahead", 0: "no ordering"}[t5_sign]
            zoo_text = {1: f"{a} ahead", -1: f"{b} ahead", 0: "no significant ordering"}[z_sign]
            verdict = _verdict(t5_sign, z_sign, min(ra["n"], rb["n"]))
            lines.append(f"- {a} vs {b}: T5 {t5_text} ({t5_why}); zoo {zoo_text} ({z_why}): **{verdict}**")
    return lines


def _verdict(t5_sign: int, z_sign: int, n_seeds: int) -> str:
    """Whether zoo's ordering (z_sign: +1, -1, 0) agrees with T5's (t5_sign); n_seeds: the fewer seeds of the two."""
    if n_seeds < 2:
        return "not judged (one seed: a verdict needs several seeds per architecture)"
    if t5_sign == 0:
        return (
            "agrees (neither orders them)"
            if z_sign == 0
            else "disagrees (zoo orders them; T5's gap is within its run-to-run noise)"
        )
    if z_sign == 0:
        return "not significant"
    return "agrees" if z_sign == t5_sign else "disagrees"
