"""encoder_only (ENTP) in the LM scaling study: the positions each objective scores and the FLOPs it pays a window
and a scored token (zoo.scaling.objective_cost), and ENTP's points recounted under the other FLOP conventions
(zoo.scaling.conventions), against closed forms of the layer FLOPs (Narayanan et al. 2021: 24 b N d^2 + 4 b N^2 d
a layer at d_ff = 4 d; the LM head 2 d V a scored position)."""

from types import SimpleNamespace

import pytest
import torch

from zoo.scaling.conventions import recount, study_entp_targets, study_shapes, target_tokens_per_window
from zoo.scaling.objective_cost import SHAKESPEARE_PLAYS_VOCAB, objective_table, window_cost

V = SHAKESPEARE_PLAYS_VOCAB


def closed_form(arch: str, d: int, L: int, T: int, K: int, scored: int | None = None) -> float:
    """Training FLOPs (3 x forward) of one window of T tokens, by hand; `scored`: the positions the LM head
    projects where not all T (prefix_lm, causal_continuation: the continuation's T - T/2 + 1)."""
    layer = lambda n: 24 * n * d**2 + 4 * n**2 * d  # noqa: E731  (d_ff 4 d, no cross-attention)
    if arch in ("decoder_only", "prefix_lm"):  # one causal (prefix) forward, the head on the scored positions
        return 3.0 * (L * layer(T) + 2 * (scored or T) * d * V)
    if arch == "encoder_only":  # one forward a stratum, as wide as its last prefix, the head on one position
        return 3.0 * sum(L * layer(w) + 2 * d * V for w in (T * (i + 1) // K for i in range(K)))
    S, n = T // 2, T - T // 2 + 1  # encoder_decoder: L/2 layers a side, d_ff 3 d, cross-attention over S
    enc = 20 * S * d**2 + 4 * S**2 * d
    dec = 24 * n * d**2 + 4 * n**2 * d + 4 * S * d**2 + 4 * n * S * d
    return 3.0 * (L // 2 * (enc + dec) + 2 * n * d * V)


@pytest.mark.parametrize(
    "arch, objective, scored",
    [
        ("decoder_only", None, 128),
        ("decoder_only", "causal_continuation", 65),
        ("prefix_lm", None, 65),
        ("encoder_decoder", None, 65),
        ("encoder_only", None, 4),
    ],
)
def test_a_windows_flops_and_scored_tokens_are_the_closed_forms(arch, objective, scored):
    """At s1 (d 20, 2 layers) and T 128, ENTP K 4 (conf/task/lm.yaml): decoder_only 16,527,360 FLOPs a window,
    encoder_only 33,217,920; the head projects only the scored positions (prefix_lm, causal_continuation: 65)."""
    sizes, T = study_shapes()
    K = study_entp_targets()
    assert (T, K, sizes["s1"]["d_model"], sizes["s1"]["n_layers"]) == (128, 4, 20, 2)
    got = window_cost(arch, **sizes["s1"], T=T, vocab_size=V, entp_targets=K, objective=objective)
    head = scored if arch in ("prefix_lm", "decoder_only") else None
    assert (got["scored"], got["flops"]) == (scored, closed_form(arch, 20, 2, 128, 4, head))
    assert (
        closed_form("decoder_only", 20, 2, 128, 4) == 16_527_360
        and closed_form("encoder_only", 20, 2, 128, 4) == 33_217_920
    )
    assert target_tokens_per_window(arch, T, objective=objective) == scored


def test_points_of_one_family_under_two_objectives_are_refused():
    """One law is one objective: decoder_only's causal_lm points (objective empty) beside causal_continuation's."""
    from zoo.scaling.conventions import family_objective
    from zoo.scaling.law import ScalingError

    mixed = [{"objective": None}, {"objective": "causal_continuation"}]
    with pytest.raises(ScalingError, match="decoder_only's points mix objectives causal_continuation, causal_lm"):
        family_objective("decoder_only", mixed)
    assert family_objective("decoder_only", mixed[1:]) == "causal_continuation"
    assert family_objective("decoder_only", mixed[:1]) == "causal_lm"
    assert family_objective("decoder_only", [{"objective": "causal_lm"}, {}]) == "causal_lm"


def test_entp_training_scores_k_positions_a_window():
    """ENTP's training loss reads the LM head's targets at K = 4 positions a window (one a stratum)."""
    from zoo.model import ModelConfig, build_model
    from zoo.tasks.objectives import ENTP

    model = build_model("encoder_only", ModelConfig(vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=2))
    obj = ENTP(SimpleNamespace(model=model, hparams=SimpleNamespace(entp_targets=4)))
    seen = []

    def head_loss(hidden, target, **kwargs):
        seen.append(target.numel())
        return torch.zeros(target.shape)

    obj.head_loss = head_loss
    x = torch.randint(0, 11, (3, 128))
    obj.training_loss((x, x))
    assert sum(seen) / 3 == 4 == target_tokens_per_window("encoder_only", 128, entp_targets=4)


def test_the_table_says_how_unequal_entp_is_in_numbers():
    """encoder_only at s1: 4 of 128 positions (3.1%); a scored token costs (33,217,920 / 4) / (16,527,360 / 128) =
    64.32x decoder_only's, so at equal compute it trains on 1/64.32 = 0.0155x its scored tokens."""
    lines = objective_table(["decoder_only", "prefix_lm", "encoder_decoder", "encoder_only"])
    ratio = (33_217_920 / 4) / (16_527_360 / 128)
    row = next(line for line in lines if line.startswith("| encoder_only |"))
    assert row.startswith("| encoder_only | entp | 4 | 8.3e+06 (x64.32) |") and f"{ratio:.2f}" == "64.32"
    line = next(line for line in lines if line.startswith("- encoder_only:"))
    assert "scores 4 of the 128 positions a window (3.1% of decoder_only's 128)" in line
    assert "a scored token 64.3–75.1x" in line and "0.0133–0.0155x decoder_only's scored tokens" in line
    assert objective_table(["encoder_only"]) == []  # no reference, no comparison


def test_entp_points_are_recounted_under_every_convention():
    """An encoder_only point at s1's N (10,120): its attention products, 4 a window of widths 32 .. 128 in full
    (L x 4 w^2 d each), are its share of C; nothing is saved at half (bidirectional); target = tokens x 4 / 128."""
    sizes, T = study_shapes()
    windows = 1000
    C = windows * closed_form("encoder_only", 20, 2, 128, 4)
    p = {"arch": "encoder_only", "size": "s1", "N": 10_120.0, "tokens": windows * T, "D": windows * T, "C": C}
    got, why = recount([p], sizes, T)
    assert why is None
    attention = 3 * windows * 2 * sum(4 * w**2 * 20 for w in (32, 64, 96, 128))
    assert got[0]["attention"] == pytest.approx(attention / C, rel=1e-12)
    assert (got[0]["C_half"], got[0]["target"], got[0]["C_6ND"]) == (C, windows * 4, 6 * 10_120 * windows * T)


@pytest.mark.slow
def test_the_plays_vocabulary_is_the_recorded_one(tmp_path):
    """SHAKESPEARE_PLAYS_VOCAB is data=shakespeare_plays' character vocabulary as zoo's datamodule builds it."""
    from zoo.data.text_corpus import TextCorpus

    dm = TextCorpus(file="shakespeare_plays", val_fraction=0.1, block_size=128, data_dir=tmp_path, token_dir=tmp_path)
    dm.prepare_data()
    dm.setup()
    assert dm.vocab_size == SHAKESPEARE_PLAYS_VOCAB


def test_the_studys_tables_print_it_beside_the_attention_share():
    """zoo.scaling.study.study_lines (the report's Scaling section, `python -m zoo.scaling gates`) puts the
    objectives' table after the attention share when the points were recounted at the study's shapes."""
    from zoo.scaling.study import Study, study_lines

    point = {"size": "s1", "attention": 0.5, "C": 1e12, "N": 10_120.0, "run": "r", "loss": 2.0}
    by_arch = {a: [{**point, "arch": a}] for a in ("decoder_only", "encoder_only")}
    study = Study(by_arch, {}, {}, {}, {"C": {}}, block=128)
    lines = study_lines(study)
    at = lines.index(next(x for x in lines if x.startswith("Attention products")))
    table = lines.index(next(x for x in lines if x.startswith("What each objective trains on a window of T = 128")))
    assert at < table and "| encoder_only | entp | 4 | 8.3e+06 (x64.32) |" in lines[table + 5]
    assert not any(
        x.startswith("What each objective")
        for x in study_lines(Study(by_arch, {}, {}, {}, {"C": {}}, recount_why="no"))
    )
