"""zoo.scaling.budget_rate: the one-rate-per-size diagnosis on studies drawn from a known law, each budget's loss
raised by a known c d^2 % and a per-size tilt t_s d % (d = log2(D / D_tune), D_tune the size's middle budget), on
the committed design's budgets (conf/experiment/scaling.yaml: s1-s3 four budgets, s4-s5 three)."""

import math

import numpy as np
import pytest
from known_law import LAW, SIZES, TRUE

from zoo.scaling.budget_rate import budget_rate, budget_rate_table, corrected, doublings
from zoo.scaling.gates import family_checks
from zoo.scaling.law import scaling_law
from zoo.scaling.points import fit_points

TILTS = {"s1": -0.7, "s2": -0.3, "s3": 0.2, "s4": -0.3, "s5": 0.4}  # % per doubling, the committed study's order


def study(c=0.0, tilts=None, sigma=0.0, seeds=8, sizes=SIZES, seed=0) -> list[dict]:
    """Points: loss = L(N, D) (1 + (c d^2 + t_s d) / 100) (1 + sigma z) per seed; sigma 0: seeds 1e-5 apart (so
    each cell has an se)."""
    rng, tilts, out = np.random.default_rng(seed), tilts or {}, []
    for size, (N, budgets) in sizes.items():
        tune = budgets[(len(budgets) - 1) // 2]
        for b in budgets:
            D, d = b * N, math.log2(b / tune)
            loss = float(scaling_law(N, D, *LAW.values())) * (1 + (c * d * d + tilts.get(size, 0.0) * d) / 100)
            for k in range(seeds):
                z = rng.standard_normal() if sigma else 1e-5 * (k - (seeds - 1) / 2)
                row = {"arch": "a", "size": size, "seed": k, "run": f"{size}|{k}", "N": N, "D": D, "tokens": D}
                out.append({**row, "C": 6 * N * D, "loss": loss * (1 + (sigma or 1) * z), "tokens_per_param": b})
    return out


def closed_form_se(cell_sd: float) -> float:
    """se of c (%) of the regression with every cell's sd `cell_sd` (%): by Frisch-Waugh-Lovell, cell_sd / sqrt of
    the sum over sizes of |d^2 - its projection on [1, d]|^2 (d = -1, 0, 1, 2 leaves (1, -1, -1, 1), 4; s3's
    -1, 0, 1, log2 3.5 leaves 2.95; d = -1, 0, 1 leaves (1/3, -2/3, 1/3), 2/3)."""
    info = 0.0
    for _, budgets in SIZES.values():
        d = np.log2(np.array(budgets) / budgets[(len(budgets) - 1) // 2])
        basis = np.stack([np.ones_like(d), d], axis=1)
        info += float(np.sum((d**2 - basis @ np.linalg.lstsq(basis, d**2, rcond=None)[0]) ** 2))
    return cell_sd / math.sqrt(info)


def test_d_counts_doublings_from_the_middle_budget_the_rate_was_tuned_at():
    """4 budgets: the lower middle (zoo.scaling.sizes.middle_budget), so 50, 100, 200, 400 -> -1, 0, 1, 2."""
    d = dict(zip(((p["size"], p["tokens_per_param"]) for p in study(seeds=1)), doublings(study(seeds=1))))
    assert [d[("s1", b)] for b in (50, 100, 200, 400)] == pytest.approx([-1, 0, 1, 2])
    assert [d[("s3", b)] for b in (10, 20, 40, 70)] == pytest.approx([-1, 0, 1, math.log2(3.5)])
    assert [d[("s5", b)] for b in (5, 10, 20)] == pytest.approx([-1, 0, 1])


def test_c_and_the_tilts_come_back_against_the_true_law():
    """Against the law that drew them, the residuals are c d^2 + t_s d + noise: c within 4 closed-form se (0.02
    at 0.2 % noise, 8 seeds), each tilt within 5 sd of a slope (cell sd / sqrt(Sxx), Sxx = 5 or 2), and the se
    reported within a factor 2 of the closed form."""
    sigma, seeds = 0.002, 8
    est = budget_rate(TRUE, study(c=0.3, tilts=TILTS, sigma=sigma, seeds=seeds))
    se = closed_form_se(100 * sigma / math.sqrt(seeds))
    assert abs(est["c"] - 0.3) < 4 * se and se / 2 < est["se"] < 2 * se
    for size, tilt in TILTS.items():
        sxx = 5.0 if len(SIZES[size][1]) == 4 else 2.0
        assert abs(est["slopes"][size][0] - tilt) < 5 * 100 * sigma / math.sqrt(seeds * sxx)
    assert est["left_out"] == [] and est["cells"] == 18 and est["dof"] == 18 - 11


def test_scatter_beyond_the_seeds_widens_c_by_the_birge_ratio():
    """Cells 0.1 % apart at random (shared by their seeds, 1e-5 apart): chi2/dof >> 1, and c's se is the scatter's,
    closed_form_se(0.1) (within a factor 2: 7 dof), not the seeds'."""
    rng = np.random.default_rng(3)
    offset = {}
    pts = [
        {**p, "loss": p["loss"] * (1 + offset.setdefault((p["N"], p["D"]), 1e-3 * rng.standard_normal()))}
        for p in study(c=0.3, seeds=3)
    ]
    est, se = budget_rate(TRUE, pts), closed_form_se(0.1)
    assert est["chi2_dof"] > 100 and se / 2 < est["se"] < 2 * se and abs(est["c"] - 0.3) < 4 * se


def test_no_curvature_gives_c_within_its_se_against_the_fitted_law():
    est = budget_rate(fit_points(pts := study(sigma=0.003, seeds=4, seed=1), bootstrap=0), pts)
    assert abs(est["c"]) < 3 * est["se"] and est["se"] < 3 * closed_form_se(0.3 / math.sqrt(4))


def test_the_fitted_law_absorbs_about_a_third_of_the_curvature():
    """What the report's number is: the curvature the family's own law leaves. On this design the law's B / D^beta
    takes up about a third of a pure c d^2 (measured 0.64 c), and tilts that differ from size to size move c by
    about +-0.1 (measured -0.10 for TILTS, +0.10 for -TILTS, 0.00 for one tilt at every size)."""
    pts = study(c=0.3)
    assert 0.55 * 0.3 < budget_rate(fit_points(pts, bootstrap=0), pts)["c"] < 0.75 * 0.3
    for tilts, lo, hi in ((TILTS, -0.15, -0.05), ({s: -t for s, t in TILTS.items()}, 0.05, 0.15)):
        pts = study(tilts=tilts)
        assert lo < budget_rate(fit_points(pts, bootstrap=0), pts)["c"] < hi


def test_removing_the_true_c_gives_back_the_law_and_its_exponents():
    """loss / (1 + c d^2 / 100) is the law itself (up to the seeds' 1e-5): the refit finds alpha and beta;
    without the correction alpha is 0.03 off."""
    pts = study(c=0.3)
    fixed = corrected(pts, 0.3)
    law = scaling_law(np.array([p["N"] for p in fixed]), np.array([p["D"] for p in fixed]), *LAW.values())
    assert np.allclose([p["loss"] for p in fixed], law, rtol=5e-5)
    refit = fit_points(fixed, bootstrap=0).values
    assert refit["alpha"] == pytest.approx(0.69, abs=2e-3) and refit["beta"] == pytest.approx(0.475, abs=2e-3)
    assert abs(fit_points(pts, bootstrap=0).values["alpha"] - 0.69) > 0.02


def test_a_size_of_fewer_than_3_budgets_is_left_out_of_the_regression_but_corrected():
    """s0 has 2 budgets (its D_tune the lower, 20), s6 one seed: intercept + slope would fit s0 exactly, s6 has no
    se; c is then exactly that of the other sizes, and s0's larger budget is still divided by 1 + c / 100."""
    extra = {"s0": (4.0e3, (20, 40)), "s6": (7.0e5, (5, 10, 20))}
    pts = study(c=0.3, tilts=TILTS, sigma=0.002, sizes=SIZES | extra)
    pts = [p for p in pts if p["size"] != "s6" or p["seed"] == 0]
    base = budget_rate(TRUE, [p for p in pts if p["size"] in SIZES])
    est = budget_rate(TRUE, pts)
    assert est["left_out"] == ["s0", "s6"] and est["c"] == pytest.approx(base["c"], rel=1e-9)
    ratio = {(p["size"], p["tokens_per_param"]): q["loss"] / p["loss"] for p, q in zip(pts, corrected(pts, 0.3))}
    assert ratio[("s0", 20)] == 1.0 and ratio[("s0", 40)] == pytest.approx(1 / 1.003)


def test_too_few_cells_give_no_estimate():
    two = {s: (n, b[:2]) for s, (n, b) in SIZES.items()}
    assert budget_rate(TRUE, study(sizes=two)) is None
    assert budget_rate(TRUE, study(sizes={"s4": SIZES["s4"]})) is None  # 3 cells, 3 parameters: dof 0


def test_a_c_of_the_wrong_unit_is_refused():
    with pytest.raises(ValueError, match="give c in %"):
        corrected(study(seeds=1), -30.0)  # -0.3 as a fraction, taken for % at d = 2: 1 - 30 * 4 / 100 < 0


def test_the_table_puts_c_and_the_gates_before_and_after_on_the_familys_row():
    """Against the true law c comes back exact (0.30); the law refitted to the corrected points is the law, so every
    gate statistic after is 0 (up to the seeds' 1e-5) and passes; before: the checks given, as they are."""
    pts = study(c=0.3, seeds=3)
    before = family_checks(TRUE, pts)
    lines = budget_rate_table({"a": pts}, {"a": TRUE}, {"a": before})
    assert lines[2].startswith("| arch | c (%/doubling²) | χ²/dof left | lack of fit |") and len(lines) == 5
    _, c, _, lack, holdout, reach, loso = lines[-1].strip("| ").split(" | ")
    assert c == "+0.30 ± 0.00" and lack.startswith(f"{before['lack']['ratio']:.3g} → ")
    assert float(lack.split(" → ")[1].split(" ")[0]) < 1e-9 and "(pass, bound " in lack
    assert holdout == f"{max(before['holdout']['errors']):.2%} → 0.00% (pass)"
    assert reach.endswith("→ 0.00% (+0.00%) (pass)") and loso.endswith("→ 0.000 (pass)")
