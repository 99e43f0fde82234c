"""zoo.scaling's gates statistics (lack of fit, long reach, leave one size out, the widened intervals), the law
forms, the FLOP conventions and `python -m zoo.scaling gates`: on closed forms, on zoo's objectives, and on the
committed study's points against the numbers a reviewer measured on them independently."""

import hashlib
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from zoo.scaling.checks import lack_of_fit, leave_one_size_out, long_reach, widen
from zoo.scaling.points import by_family, cell_means, fit_points, read_points_csv

POINTS = Path(__file__).resolve().parent.parent / "experiments" / "scaling" / "untuned" / "points.csv"
# the untuned study the reviewer measured (experiment=scaling_long, issue 36's design); another points.csv skips
POINTS_SHA256 = "883fb9bf56833eb0df794cc5ac6b77487c8971687ac38a351aa17c41e325d3a6"


@pytest.fixture
def fewer_starts(monkeypatch):
    """5 starts of each fit instead of 20, for a test whose assertions do not read the fitted values closely."""
    import zoo.scaling.points

    monkeypatch.setattr(zoo.scaling.points, "N_STARTS", 5)


@pytest.fixture(scope="module")
def committed():
    if not POINTS.is_file() or hashlib.sha256(POINTS.read_bytes()).hexdigest() != POINTS_SHA256:
        pytest.skip("experiments/scaling/untuned/points.csv is not the study the reviewer's numbers are of")
    return by_family(read_points_csv(POINTS))


def means_as_points(points: list[dict]) -> list[dict]:
    """Each cell's mean loss as one point (its size its run): the fit the reviewer made."""
    return [
        {"N": c["N"], "D": c["D"], "C": c["D"], "loss": c["mean"], "run": c["size"], "size": c["size"]}
        for c in cell_means(points)
    ]


def test_widen_stretches_each_side_by_the_ratio():
    assert widen(1.0, (0.9, 1.2), 2.0) == pytest.approx((0.8, 1.4))
    assert widen(2.0, (1.0, 4.0), 2.0, log=True) == pytest.approx((0.5, 8.0))  # factors 2 -> 4 each side
    assert widen(1.0, (0.9, 1.2), 1.0) == (0.9, 1.2) and widen(1.0, None, 3.0) is None


def test_the_parameters_gate_judges_the_widened_intervals():
    """alpha's interval ±0.10 passes the ±0.15 bound; widened by a Birge ratio of 2 it is ±0.20 and fails."""
    from zoo.scaling.gates import params_gate

    values = {"E": 1.5, "A": 100.0, "B": 300.0, "alpha": 0.6, "beta": 0.5, "a": 0.45, "b": 0.55, "G": 1.0}
    ci = {k: (v * 0.9, v * 1.1) for k, v in values.items()} | {"alpha": (0.5, 0.7), "beta": (0.45, 0.55)}
    fit = SimpleNamespace(values=values, ci=ci)
    points = [{"size": s, "run": f"{s}|{seed}"} for s in ("s1", "s2") for seed in (1, 2)]
    assert params_gate(fit, {"bound": [], "birge": 1.0}, points, budgets=3) == ("pass", "alpha ±0.10, beta ±0.05")
    state, why = params_gate(fit, {"bound": [], "birge": 2.0}, points, budgets=3)
    assert state == "FAIL" and why.startswith("alpha ±0.20") and "widened x2.00" in why


def test_lack_of_fit_per_cell_is_the_sum_of_squared_t():
    """ratio_cell: sum of ((mean - L) / L / (sd / sqrt(n) / mean))^2 over dof = cells - 5, by hand on 6 cells."""
    rng = np.random.default_rng(0)
    points, truth = [], lambda N, D: 1.5 + 40 / N**0.3 + 60 / D**0.3
    for N in (1e4, 3e4):
        for D in (1e6, 2e6, 4e6):
            points += [{"N": N, "D": D, "loss": truth(N, D) * (1 + 0.01 * rng.standard_normal())} for _ in range(3)]
    law = SimpleNamespace(predict=truth, values={"E": 1.5, "A": 40.0, "B": 60.0, "alpha": 0.3, "beta": 0.3})
    by_hand = 0.0
    for N in (1e4, 3e4):
        for D in (1e6, 2e6, 4e6):
            x = np.array([p["loss"] for p in points if (p["N"], p["D"]) == (N, D)])
            by_hand += ((x.mean() - truth(N, D)) / truth(N, D) / (x.std(ddof=1) / math.sqrt(3) / x.mean())) ** 2
    assert lack_of_fit(law, points)["ratio_cell"] == pytest.approx(by_hand / 1)


def test_lack_of_fit_reproduces_the_reviewers_chi2(committed):
    """The reviewer's chi2/dof of the committed points, the law fitted to the cell means, each cell's se:
    decoder_only 31, prefix_lm 11, encoder_decoder 13."""
    for arch, reviewer in (("decoder_only", 31), ("prefix_lm", 11), ("encoder_decoder", 13)):
        pts = committed[arch]
        got = lack_of_fit(fit_points(means_as_points(pts), bootstrap=0), pts)["ratio_cell"]
        assert round(got) == reviewer, (arch, got)


def test_long_reach_reproduces_the_reviewers_numbers(committed):
    """The reviewer, on the committed points: fitted on s1-s3 (cell means) each law misses s5 by 1.6-2.2%, mean
    signed +1.1%, -1.1%, -1.5%."""
    for arch, mean in (("decoder_only", 0.011), ("prefix_lm", -0.011), ("encoder_decoder", -0.015)):
        r = long_reach(means_as_points(committed[arch]))
        assert r["sizes"] == ["s1", "s2", "s3"] and 0.0155 <= r["worst"] < 0.0225, (arch, r)  # 1.6-2.2%, rounded
        assert r["mean"] == pytest.approx(mean, abs=6e-4), (arch, r)


def test_leave_one_size_out_reproduces_the_reviewers_numbers(committed):
    """The reviewer: leaving one size out moves alpha by up to 0.12 (decoder_only) and 0.17 (prefix_lm), the
    law fitted to the cell means."""
    for arch, move in (("decoder_only", 0.12), ("prefix_lm", 0.17)):
        means = means_as_points(committed[arch])
        rows = leave_one_size_out(fit_points(means, bootstrap=0), means)["rows"]
        assert max(abs(r["d_alpha"]) for r in rows) == pytest.approx(move, abs=0.005), rows


def test_prefix_lms_alpha_without_s1_is_the_reviewers(committed):
    """The reviewer: prefix_lm's alpha (the report's fit of every point) goes from 0.58 to 0.37 without s1."""
    pts = committed["prefix_lm"]
    fit = fit_points(pts, bootstrap=0)
    without = {r["size"]: r for r in leave_one_size_out(fit, pts)["rows"]}["s1"]
    assert round(fit.values["alpha"], 2) == 0.58 and round(without["alpha"], 2) == 0.37


@pytest.mark.slow
def known_law_study(seed: int, sizes) -> list[dict]:
    """Points of L = 1.2 + 60 / N^0.4 + 90 / D^0.35 at `sizes`, 3 seeds, 5, 10 and 20 tokens a parameter, each loss
    times (1 + 0.3% x a standard normal of numpy's default_rng(seed))."""
    rng = np.random.default_rng(seed)
    law = lambda N, D: 1.2 + 60 / N**0.4 + 90 / D**0.35  # noqa: E731
    return [
        {"N": N, "D": b * N, "loss": law(N, b * N) * (1 + 0.003 * rng.standard_normal()), "run": f"{N}|{k}"}
        for N in sizes
        for k in range(3)
        for b in (5, 10, 20)
    ]


def test_the_judged_lack_of_fit_keeps_its_bound_on_a_known_law():
    """30 studies on a known law (5 sizes, 3 budgets, 3 seeds, 0.3% Gaussian noise): the judged chi2/dof exceeds
    its bound in at most 2 (it is built to err on passing), while the law's per-cell chi2/dof exceeds chi2_dof's
    95% quantile in 10 or more (measured: 0 and 17; t^2 of 2 degrees of freedom is heavy-tailed)."""
    from scipy.stats import chi2

    over = per_cell = 0
    for seed in range(30):
        pts = known_law_study(seed, (2.5e4, 5.7e4, 1.56e5, 4.47e5, 7.93e5))
        lack = lack_of_fit(fit_points(pts, bootstrap=0), pts)
        over += lack["ratio"] > lack["limit"]
        per_cell += lack["ratio_cell"] > chi2.ppf(0.95, lack["dof"]) / lack["dof"]
    assert over <= 2 and per_cell >= 10, (over, per_cell)


def test_a_lack_of_fit_refit_that_does_not_converge_is_an_error(monkeypatch):
    """A refit cut off at its evaluation limit (here 3) has a chi2/dof above the least one: an error, not a gate."""
    import zoo.scaling.checks
    from zoo.scaling.law import ScalingError

    pts = known_law_study(0, (2.5e4, 5.7e4, 1.56e5, 4.47e5))
    fit = fit_points(pts, bootstrap=0)
    assert lack_of_fit(fit, pts)["ratio"] < 5
    monkeypatch.setattr(zoo.scaling.checks, "MAX_EVALS", 3)
    with pytest.raises(ScalingError, match="did not converge in 3 evaluations"):
        lack_of_fit(fit, pts)


def test_lack_of_fit_takes_a_law_whose_E_collapsed_to_zero():
    """A fit at the bound E = 0 (as encoder_only's refits without a size are): the judged refit starts just above
    it instead of raising on log(0), and on points of that law (0.3% noise, 3 seeds) stays under its bound."""
    truth = lambda N, D: 40 / N**0.3 + 60 / D**0.3  # noqa: E731
    rng = np.random.default_rng(1)
    pts = [
        {"N": N, "D": b * N, "loss": truth(N, b * N) * (1 + 0.003 * rng.standard_normal()), "run": f"{N}|{k}"}
        for N in (1e4, 3e4, 1e5)
        for k in range(3)
        for b in (5, 10, 20)
    ]
    law = SimpleNamespace(predict=truth, values={"E": 0.0, "A": 40.0, "B": 60.0, "alpha": 0.3, "beta": 0.3})
    lack = lack_of_fit(law, pts)
    assert math.isfinite(lack["ratio"]) and lack["ratio"] < lack["limit"], lack


# --- FLOP conventions and target tokens ---


def test_recounting_halves_causal_attention_by_the_closed_form(committed):
    """At s1 (d = 20, 2 layers, windows of T = 128): decoder_only's attention products are 2 layers x 4 T d
    FLOPs a token forward (scores and values, 2 T d each), 3x in training: 48% of its measured C; at half they
    save half of it. encoder_decoder's (1 layer a side, encoder over 64 tokens, decoder over 65): encoder 4 64 64 d,
    cross 4 65 64 d (full) and the decoder's own 4 65 65 d (causal) a window; prefix_lm's prefix mask counts
    (64 128 + 64^2 / 2) / 128^2 = 5/8 of its matrix. 6 N D: 6 x N x tokens."""
    from zoo.scaling.conventions import recount, study_shapes

    sizes, T = study_shapes()
    assert T == 128 and sizes["s1"] == {"d_model": 20, "n_heads": 2, "n_layers": 2}
    points, why = recount([p for pts in committed.values() for p in pts if p["size"] == "s1"], sizes, T)
    assert why is None
    d = 20
    per_window = {"decoder_only": 2 * 4 * T * T * d, "prefix_lm": 2 * 4 * T * T * d}
    saved = {"decoder_only": 0.5, "prefix_lm": 3 / 8}
    for p in points:
        windows = p["tokens"] / T
        if p["arch"] == "encoder_decoder":
            attn, half = 4 * 64 * 64 * d + 4 * 65 * 64 * d + 4 * 65 * 65 * d, 0.5 * 4 * 65 * 65 * d
        else:
            attn, half = per_window[p["arch"]], saved[p["arch"]] * per_window[p["arch"]]
        assert p["attention"] == pytest.approx(3 * attn * windows / p["C"], rel=1e-6), p
        assert p["C_half"] == pytest.approx(p["C"] - 3 * half * windows, rel=1e-6), p
        assert p["C_6ND"] == 6 * p["N"] * p["tokens"]
    assert {round(p["attention"], 3) for p in points if p["arch"] == "decoder_only"} == {0.476}  # the reviewer's 48%


def test_recount_refuses_points_of_another_shape():
    from zoo.scaling.conventions import recount, study_shapes

    sizes, T = study_shapes()
    p = {"arch": "decoder_only", "size": "s1", "N": 12345.0, "tokens": 1e6, "D": 1e6, "C": 1e11}
    assert recount([p], sizes, T) == (
        None,
        "decoder_only s1: N 12,345, N 10,120 at the study's shape (conf/experiment/scaling.yaml)",
    )
    assert recount([{**p, "arch": "encoder_only"}], sizes, T)[0] is None


@pytest.mark.parametrize(
    "arch, objective",
    [("decoder_only", "CausalLM"), ("prefix_lm", "PrefixLM"), ("encoder_decoder", "PrefixContinuation")],
)
def test_target_tokens_are_the_positions_each_objective_scores(arch, objective):
    """The positions each objective's loss scores in a window of 128 tokens: its head_loss's targets."""
    import torch

    import zoo.tasks.objectives as objectives
    from zoo.model import ModelConfig, build_model
    from zoo.scaling.conventions import target_tokens_per_window

    cfg = ModelConfig(
        vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=2, mask="prefix" if arch == "prefix_lm" else None
    )
    model = build_model("encoder_decoder" if arch == "encoder_decoder" else "decoder_only", cfg)
    obj = getattr(objectives, objective)(SimpleNamespace(model=model, hparams={}))
    seen = []

    def head_loss(hidden, target, **kwargs):
        seen.append(target.shape[-1])
        return target.float().mean(), torch.zeros(target.shape)

    obj.head_loss = head_loss
    x = torch.randint(0, 11, (2, 128))
    obj.losses((x, x))
    assert seen == [target_tokens_per_window(arch, 128)] and seen[0] == (128 if arch == "decoder_only" else 65)


@pytest.mark.slow
def test_the_plays_training_split_has_the_recorded_unique_tokens(tmp_path):
    """forms.SHAKESPEARE_PLAYS_TRAIN_TOKENS is the training split of data=shakespeare_plays as zoo's datamodule
    tokenizes it (character level, 38 of the 42 documents)."""
    from zoo.data.text_corpus import TextCorpus
    from zoo.scaling.forms import SHAKESPEARE_PLAYS_TRAIN_TOKENS

    dm = TextCorpus(file="shakespeare_plays", val_fraction=0.1, block_size=128, data_dir=tmp_path, token_dir=tmp_path)
    dm.prepare_data()
    dm.setup()
    assert len(dm.train_data) == SHAKESPEARE_PLAYS_TRAIN_TOKENS


# --- the law forms ---


def test_effective_tokens_follow_muennighoff_eq_5():
    """D' = D up to one epoch; U (1 + R* (1 - exp(-R / R*))) after: R = 1 repetition at R* = 1 is U (2 - 1/e),
    and endless repetition saturates at U (1 + R*)."""
    from zoo.scaling.forms import effective_tokens

    assert effective_tokens([5e5, 1e6], 1e6, 15.4) == pytest.approx([5e5, 1e6])
    assert effective_tokens(2e6, 1e6, 1.0) == pytest.approx(1e6 * (2 - math.exp(-1)))
    assert effective_tokens(1e12, 1e6, 3.0) == pytest.approx(4e6)


def _grid(law, U=None):
    """(N, D, L) on 4 sizes x 5 budgets (D from 0.25 to 4 epochs of U = 1e6 when given) of a law L(N, D)."""
    N = np.repeat([1e4, 3e4, 1e5, 3e5], 5)
    D = np.tile([2.5e5, 5e5, 1e6, 2e6, 4e6], 4)
    return N, D, law(N, D)


def test_the_data_constrained_fit_recovers_r_star():
    """Points of the Chinchilla law in D' with R*_D = 2 (up to 4 epochs of 1e6 unique tokens): the profile
    finds R*_D = 2; without a repeated point it keeps Muennighoff's 15.4 and says it was not fitted."""
    from zoo.scaling.forms import MUENNIGHOFF_R_STAR_D, effective_tokens, fit_data_constrained

    N, D, L = _grid(lambda N, D: 1.5 + 50 / N**0.4 + 300 / effective_tokens(D, 1e6, 2.0) ** 0.35)
    got = fit_data_constrained(N, D, L, np.full(len(N), 1e6))
    assert got["fitted"] and got["r_star"] == pytest.approx(2.0, rel=0.05)
    assert got["fit"].values["beta"] == pytest.approx(0.35, abs=0.01)
    once = D <= 1e6
    got = fit_data_constrained(N[once], D[once], L[once], np.full(once.sum(), 1e6))
    assert not got["fitted"] and got["r_star"] == MUENNIGHOFF_R_STAR_D


def test_the_kaplan_fit_recovers_its_law():
    """Points of L = [(N_c / N)^(alpha_N / alpha_D) + D_c / D]^alpha_D (Kaplan et al. 2020's eq. 1.5 at
    N_c = 8.8e13, D_c = 5.4e13, alpha_N = 0.076, alpha_D = 0.095): the fit predicts them within 0.1%."""
    from zoo.scaling.forms import fit_kaplan, kaplan_law

    truth = (math.log(8.8e13), math.log(5.4e13), 0.076, 0.095)
    N, D, L = _grid(lambda N, D: kaplan_law(N, D, truth))
    assert np.max(np.abs(kaplan_law(N, D, fit_kaplan(N, D, L)) / L - 1)) < 1e-3


def test_kaplans_form_without_e_is_fitted_as_well_as_fit_kaplan_fits_it():
    """The sinusoidal record's encoder_decoder at s1-s3 (the long reach's fit): fit_kaplan_e(floor=False) reaches
    fit_kaplan's Huber objective (0.7292), not the local minimum with the N term switched off (3.15) that its own
    grid of starts ends in."""
    from zoo.scaling.forms import fit_kaplan, fit_kaplan_e, kaplan_e_law, kaplan_law
    from zoo.scaling.huber import huber_sum

    pts = by_family(read_points_csv(POINTS.parents[1] / "sinusoidal" / "points.csv"))["encoder_decoder"]
    top = max(p["N"] for p in pts)
    N, D, L = (np.array([p[k] for p in pts if p["N"] <= top / 4]) for k in ("N", "tokens", "loss"))
    reference = huber_sum(np.log(kaplan_law(N, D, fit_kaplan(N, D, L)) / L))
    got = huber_sum(np.log(kaplan_e_law(N, D, *fit_kaplan_e(N, D, L, floor=False)) / L))
    assert reference == pytest.approx(0.7292, abs=1e-3)
    assert got <= reference + 1e-9


def test_the_kaplan_form_with_e_is_kaplans_law_plus_e_and_its_fit_recovers_it():
    """kaplan_e_law at (E, A, B, alpha, beta) is E + Kaplan's eq. 1.5 at N_c = A^(1/alpha), D_c = B^(1/beta),
    alpha_N = alpha, alpha_D = beta (written out here); its fit recovers noiseless points within 0.1%."""
    from zoo.scaling.forms import fit_kaplan_e, kaplan_e_law

    E, A, B, alpha, beta = 1.2, 3.0, 60.0, 0.3, 0.4
    kaplan = lambda N, D: E + ((A ** (1 / alpha) / N) ** (alpha / beta) + B ** (1 / beta) / D) ** beta  # noqa: E731
    N, D, L = _grid(kaplan)
    assert np.allclose(kaplan_e_law(N, D, E, A, B, alpha, beta), L, rtol=1e-12)
    assert np.max(np.abs(kaplan_e_law(N, D, *fit_kaplan_e(N, D, L)) / L - 1)) < 1e-3


def test_the_comparison_keeps_the_form_that_reaches_further():
    """Five sizes of one law read up to 8 epochs: in D' (R*_D = 1) the data-constrained form is kept; the same
    sizes on Chinchilla's law in D keep Chinchilla's (the profile then puts R*_D past 100: no repetition cost)."""
    from zoo.scaling.forms import compare_forms, effective_tokens

    def points(law):
        return [
            {"N": n, "tokens": b * n, "loss": law(n, b * n), "size": s, "run": s}
            for s, n in zip(("s1", "s2", "s3", "s4", "s5"), (1e4, 2e4, 5e4, 1e5, 4e5))
            for b in (10, 40, 160)
        ]

    repeated = points(lambda N, D: 1.5 + 50 / N**0.4 + 300 / effective_tokens(D, 1e6, 1.0) ** 0.35)
    plain = points(lambda N, D: 1.5 + 50 / N**0.4 + 300 / D**0.35)
    assert compare_forms({"a": repeated}, 1e6)["kept"] == "data-constrained"
    assert compare_forms({"a": plain}, 1e6)["kept"] == "chinchilla"


# --- points.csv and python -m zoo.scaling gates ---


def write_points(path: Path, tune_loss: float = 99.0) -> Path:
    """A study's points.csv with the lead's lr and kind columns: decoder_only on a law at 5 sizes, 3 budgets and
    3 seeds (levels 0.3% apart), and a tune point per size whose loss would wreck any fit that read it."""
    rows = ["arch,size,seed,n_params,tokens,flops,loss,lr,kind"]
    for i, N in enumerate((2.5e4, 5.7e4, 1.56e5, 4.47e5, 7.93e5), start=1):
        for seed, offset in ((1, 0.003), (2, 0.0), (3, -0.003)):
            for b in (5, 10, 20):
                loss = (1.0 + 400 / N**0.5 + 90 / (b * N) ** 0.35) * (1 + offset)
                rows.append(
                    f"decoder_only,s{i},{seed},{N:.0f},{b * N:.0f},{6 * b * N * N:.6g},{loss:.6f},0.004,cooldown"
                )
        rows.append(f"decoder_only,s{i},1,{N:.0f},{5 * N:.0f},{30 * N * N:.6g},{tune_loss},0.008,tune")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_the_points_reader_keeps_cool_down_points_and_reads_lr(tmp_path):
    points = read_points_csv(write_points(tmp_path / "points.csv"))
    assert len(points) == 5 * 3 * 3 and all(p["loss"] < 10 for p in points)
    assert points[0]["run"] == "decoder_only|s1|1|0.004" and points[0]["tokens_per_param"] == pytest.approx(5)


def test_the_gates_command_prints_the_gate_table_of_a_points_file(tmp_path, capsys, fewer_starts):
    """python -m zoo.scaling gates on a points.csv with tune rows and an lr column: the law of the cool-down points
    passes every gate; the sizes are not the study's, so the FLOPs are not recounted, and it says so."""
    from zoo.scaling.__main__ import main

    assert main(["gates", str(write_points(tmp_path / "points.csv")), "--bootstrap", "40"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Can each law be trusted?")
    row = next(line for line in out if line.startswith("| decoder_only | "))
    assert row.startswith("| decoder_only | yes | pass: rms 0.24%"), row
    assert any(
        line.startswith("FLOPs not recounted under other conventions: decoder_only s1: N 25,000") for line in out
    )
    assert any(line.startswith("| decoder_only | 0.30%, +0.00% |") for line in out)  # the forms' long reach


def test_the_gates_command_refuses_bad_input(tmp_path, capsys):
    from zoo.scaling.__main__ import main

    bad = tmp_path / "bad.csv"
    bad.write_text("arch,size,seed,n_params,tokens,loss\ndecoder_only,s1,1,10,100,2.0\n")
    assert main(["gates", str(bad)]) == 2
    assert "no column 'flops'" in capsys.readouterr().err
    assert main(["gates", str(write_points(tmp_path / "p.csv")), "--bootstrap", "10"]) == 2
    assert "--bootstrap 10: give at least 40" in capsys.readouterr().err


def test_one_family_at_the_study_shapes_says_no_multiplier_once(capsys, fewer_starts):
    """A points file of decoder_only alone at the study's shapes (the committed objective test): every FLOP
    convention is recounted, and the one line that no multiplier can be computed is printed once, not per
    convention."""
    from zoo.scaling.__main__ import main

    path = Path(__file__).resolve().parents[1] / "experiments" / "scaling" / "objective_test.csv"
    assert main(["gates", str(path), "--bootstrap", "40"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("| decoder_only | 6·N·D |") for line in out) == 1  # all three conventions
    assert sum(line.startswith("No compute multiplier") for line in out) == 1
    per_target = next(line for line in out if line.startswith("Per target token"))
    assert "(the positions a window's loss scores: decoder_only 65 a window)" in per_target  # causal_continuation
