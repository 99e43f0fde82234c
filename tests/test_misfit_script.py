"""experiments/bench_scripts/scaling_misfit.py and its modules (misfit_core, misfit_variants, misfit_power,
misfit_rates): the `rates` arithmetic (the paired shifts and the cells each alternative design or rate puts in
place of the study's, by hand), the interaction fits, the power table and `common`."""

import math
import sys
import types

import numpy as np
import pytest
from scipy.stats import chi2 as chi2_dist
from zoo_run import REPO, bench_script


@pytest.fixture(scope="module")
def misfit():
    """scaling_misfit.py and the modules it imports, as one namespace (the CLI runs from their folder)."""
    sys.path.insert(0, str(REPO / "experiments" / "bench_scripts"))
    modules = [bench_script(name) for name in ("misfit_core", "misfit_variants", "misfit_power", "misfit_rates")]
    return types.SimpleNamespace(
        **{k: v for m in [*modules, bench_script("scaling_misfit")] for k, v in vars(m).items()}
    )


def point(size, D, seed, loss, lr=0.004):
    return {"size": size, "D": D, "seed": seed, "loss": loss, "run": f"decoder_only|{size}|{seed}|{lr}"}


STUDY = [point("s4", 1e6, s, 2.0) for s in (1, 2)] + [point("s1", 1e6, s, 3.0) for s in (1, 2)]


def test_paired_shifts_are_relative_means_with_their_standard_error(misfit):
    other = [point("s4", 1e6, 1, 1.9, 0.0057), point("s4", 1e6, 2, 2.1, 0.0057)]
    mean, se, n = misfit.paired_shifts(STUDY, other)["s4", 1e6, 0.0057]
    assert (mean, n) == (pytest.approx(0.0), 2)
    assert se == pytest.approx(0.1 / 2**0.5 / 2**0.5)  # sd of (-0.05, +0.05) with ddof 1, over sqrt(2)


def test_a_budget_a_few_steps_off_pairs_with_the_studys_and_one_further_off_is_refused(misfit):
    """Half the batch rounds a budget to whole steps of 512 tokens: 1,000,512 tokens pair with 1e6 (0.05% off),
    keyed by the study's D; 1,010,000 (1% off) pairs with nothing and names the cell."""
    other = [point("s4", 1_000_512, 1, 1.9, 0.0057), point("s4", 1_000_512, 2, 2.1, 0.0057)]
    assert misfit.paired_shifts(STUDY, other)["s4", 1e6, 0.0057][0] == pytest.approx(0.0)
    with pytest.raises(SystemExit, match="s4 seed 1 at D = 1,010,000"):
        misfit.paired_shifts(STUDY, [point("s4", 1_010_000, 1, 1.9)])


def test_forced_cells_take_their_best_rate_even_when_worse_and_the_rest_only_when_better(misfit):
    shifts = {("s1", 1e6, 0.016): (-0.02, 0.0, 2), ("s4", 1e6, 0.0057): (-0.05, 0.0, 2)}
    forced = {("s4", 1e6, 0.0028): (0.03, 0.0, 2), ("s4", 1e6, 0.004): (0.01, 0.0, 2)}
    out = misfit.envelope(STUDY, shifts, forced=forced)
    loss = {(p["size"], p["seed"]): p["loss"] for p in out}
    assert loss["s1", 1] == loss["s1", 2] == pytest.approx(3.0 * 0.98)  # another rate, better: taken
    assert loss["s4", 1] == loss["s4", 2] == pytest.approx(2.0 * 1.01)  # forced: its best, though worse
    assert [p["loss"] for p in STUDY] == [2.0, 2.0, 3.0, 3.0]  # the study's points are left as they were
    out = misfit.envelope(STUDY, {("s1", 1e6, 0.008): (0.04, 0.0, 2)})
    assert [p["loss"] for p in out] == [2.0, 2.0, 3.0, 3.0]  # a worse rate is not taken


def test_forced_cells_without_a_variant_name_are_refused_before_reading_points(misfit, capsys):
    """--forced labels its cells by --variant; without one the table would read 'None at 0.004'."""
    with pytest.raises(SystemExit):
        misfit.main(["rates", "/nonexistent/points.csv", "--forced", "/nonexistent/other.csv"])
    assert "--forced needs --variant" in capsys.readouterr().err


def cells_of(law) -> dict:
    """The study's 18 cells (its sizes' N and tokens per parameter) on `law`(N, D) with 0.2% noise, each with a
    0.2% standard error: the `c` of misfit_core.cell_data."""
    sizes = {"s1": (10120, (50, 100, 200, 400)), "s2": (25408, (20, 40, 80, 160)), "s3": (56544, (10, 20, 40, 70))}
    sizes |= {"s4": (155680, (6.5, 13, 26)), "s5": (348720, (5, 10, 20))}
    rows = [(s, N, b * N) for s, (N, bs) in sizes.items() for b in bs]
    N, D = np.array([r[1] for r in rows], float), np.array([r[2] for r in rows], float)
    names = list(sizes)
    idx = np.array([names.index(r[0]) for r in rows])
    size = np.array([r[0] for r in rows])
    noise = 1 + 0.002 * np.random.default_rng(0).standard_normal(len(N))
    return {
        "N": N,
        "D": D,
        "mean": law(N, D) * noise,
        "se": np.full(len(N), 0.002),
        "size": size,
        "sizes": names,
        "idx": idx,
        "k": len(names),
        "nu": 12,
    }


LAW = {"E": 1.2, "A": 60.0, "B": 400.0, "alpha": 0.4, "beta": 0.5}  # M1's start (nested_models)


def test_the_interaction_fit_tells_a_data_term_in_d_from_one_in_d_over_n(misfit):
    """On cells of E + A/N^a + B/D^b, M1 fits (chi2 within its dof's 99.9% quantile), M1dn does not (chi2 > 100)
    and M1g's g is 0 within 2 se; on E + A/N^a + B' (N/D)^b, M1dn fits and M1g's g is b (0.5) within 2 se (these
    two started from M1's form at the law's own level and exponent)."""
    c = cells_of(lambda N, D: 1.2 + 60 / N**0.4 + 400 / D**0.5)
    fits = {name.split()[0]: r for name, (r, _) in misfit.interaction_fits(c, LAW).items()}
    assert 2 * fits["M1"].cost < chi2_dist.ppf(0.999, 18 - 7) < 100 < 2 * fits["M1dn"].cost
    assert_g(misfit, fits["M1g"], c, 0.0)
    c = cells_of(lambda N, D: 1.2 + 60 / N**0.4 + 0.4 * (N / D) ** 0.5)
    levels = [1.2 + 60 / N**0.4 for N in (10120, 25408, 56544, 155680, 348720)]
    start = types.SimpleNamespace(x=[*levels, math.log(0.4 * 0.1**0.5), 0.5])
    models = {name.split()[0]: (pred, starts) for name, pred, _, starts in misfit.interaction_models(c, start)}
    (dn, dn_starts), (g, g_starts) = models["M1dn"], models["M1g"]
    assert 2 * misfit.wls(dn, c, dn_starts).cost < chi2_dist.ppf(0.999, 18 - 7)
    assert_g(misfit, misfit.wls(g, c, g_starts), c, 0.5)


TUNE = {10120: 100, 25408: 40, 56544: 20, 155680: 13, 348720: 10}  # each size's tuning budget (the lower middle)


def test_the_curvature_fit_tells_a_one_rate_per_size_curvature_from_a_data_term_growing_with_n(misfit):
    """Cells of the law times (1 + 0.4 d^2 / 100), d = log2(D / D_tune) by hand: M1g+c gives c = 0.4 and g = 0,
    each within 2 se; cells of E + A/N^a + B N^0.1 / D^b: g = 0.1 and c = 0 within 2 se. (M1g alone reads the
    first as g > 0 where s1-s3's longest budgets lie two doublings above D_tune: the alias the joint fit undoes.)"""

    def curved(N, D):
        d = np.log2(D / (np.array([TUNE[int(n)] for n in N]) * N))
        return (1.2 + 60 / N**0.4 + 400 / D**0.5) * (1 + 0.4 * d**2 / 100)

    for law, g, cc in ((curved, 0.0, 0.4), (lambda N, D: 1.2 + 60 / N**0.4 + 400 * (N / 1e5) ** 0.1 / D**0.5, 0.1, 0)):
        c = cells_of(law)
        r, n_params = misfit.interaction_fits(c, LAW)["M1g+c c_s+BN^g/D^b, c d^2"]
        se = misfit.standard_errors(r, 18 - n_params)
        k = c["k"]
        assert abs(r.x[k + 2] - g) < 2 * se[k + 2] < 0.2, (r.x[k + 2], se[k + 2])
        assert abs(r.x[-1] - cc) < 2 * se[-1] < 0.4, (r.x[-1], se[-1])


def assert_g(misfit, r, c, g):
    """M1g's fit `r` has g within 2 of its se of `g`, and twice that se below 0.2."""
    se = misfit.standard_errors(r, 18 - 8)[c["k"] + 2]
    assert abs(r.x[c["k"] + 2] - g) < 2 * se < 0.2, (r.x[c["k"] + 2], se)


def law_study(pattern=None, noise=0.003, seeds=3):
    """Five sizes, four budgets, `seeds` seeds: L = 1.5 + 300 / N^0.5 + 600 / D^0.4, each run times (1 + its cell's
    `pattern` residual) times (1 + a seeded normal deviation of sd `noise`)."""
    rng = np.random.default_rng(0)
    pts = []
    for size, N in (("s1", 1e4), ("s2", 2.5e4), ("s3", 6e4), ("s4", 1.5e5), ("s5", 3.5e5)):
        for D in (5e5, 1e6, 2e6, 4e6):
            loss = 1.5 + 300 / N**0.5 + 600 / D**0.4
            r = (pattern or {}).get((size, D), 0.0)
            for s in range(1, seeds + 1):
                y = loss * (1 + r) * (1 + noise * rng.standard_normal())
                pts.append(
                    {
                        "arch": "a",
                        "size": size,
                        "seed": s,
                        "N": N,
                        "D": D,
                        "C": 6 * N * D,
                        "loss": y,
                        "run": f"a|{size}|{s}",
                    }
                )
    return pts


def test_a_pattern_multiplies_each_point_of_its_cell_and_refuses_another_design(misfit):
    pts = law_study(seeds=2)
    pattern = {(p["size"], p["D"]): 0.0 for p in pts} | {("s3", 1e6): 0.02}
    out = misfit.with_pattern(pts, pattern)
    assert [q["loss"] / p["loss"] for p, q in zip(pts, out)] == pytest.approx(
        [1.02 if (p["size"], p["D"]) == ("s3", 1e6) else 1.0 for p in pts]
    )
    with pytest.raises(misfit.ScalingError, match=r"no cell at s5, D 4,000,000: another design"):
        misfit.with_pattern(pts, {k: v for k, v in pattern.items() if k != ("s5", 4e6)})


@pytest.mark.slow  # a bench script's calibration, 30 s: -m slow
def test_power_a_size_by_data_misfit_is_caught_by_lack_of_fit_and_a_true_law_is_not(misfit):
    """A D slope per size (alternating sign, +-1.5% over the budgets), on a known law with 0.3% seed noise: the
    record's misfit_pattern recovers most of it (the law's beta takes up the slope the sizes share), and every
    replicate with it fails lack of fit, none without."""
    slope = {
        (s, D): (-1) ** i * 0.005 * (math.log2(D / 5e5) - 1.5)
        for i, s in enumerate(("s1", "s2", "s3", "s4", "s5"))
        for D in (5e5, 1e6, 2e6, 4e6)
    }
    raw, fitted = misfit.misfit_pattern(law_study(slope), "raw"), misfit.misfit_pattern(law_study(slope), "M3")
    assert np.corrcoef([raw[k] for k in slope], list(slope.values()))[0, 1] > 0.8  # 0.86
    assert np.corrcoef([fitted[k] for k in slope], list(slope.values()))[0, 1] > 0.8
    pattern = fitted
    null, shifted = misfit.power_rows(law_study(), pattern, reps=8, seed=1)
    assert [s["lof"] > s["lof_limit"] for s in null] == [False] * 8
    assert [s["lof"] > s["lof_limit"] for s in shifted] == [True] * 8


def test_one_standard_error_for_both_scales_the_chi2_by_its_square_and_a_law_gives_none(misfit):
    """Runs +-0.3% about the law's value (each cell's mean on the law): chi^2 and rms residual 0. With a per-size
    pattern added, doubling the standard error quarters the chi^2 (the same weighted fit) and leaves the rms."""
    pts = law_study(noise=0.0, seeds=2)
    pts = [{**p, "loss": p["loss"] * (1 + 0.003 * (-1) ** p["seed"])} for p in pts]
    sd = {p["N"]: 0.003 for p in pts}
    chi2, rms = misfit.common_chi2(pts, sd)
    assert chi2 < 1e-8 and rms < 1e-6
    bent = misfit.with_pattern(pts, {(p["size"], p["D"]): 0.004 * math.sin(p["N"] * p["D"] / 1e9) for p in pts})
    (c1, r1), (c2, r2) = misfit.common_chi2(bent, sd), misfit.common_chi2(bent, {n: 2 * s for n, s in sd.items()})
    assert c1 > 1 and c2 == pytest.approx(c1 / 4, rel=1e-4) and r2 == pytest.approx(r1, rel=1e-4)
    one, two = misfit.shared_runs(pts, [p for p in pts if p["seed"] == 1 or p["size"] == "s1"])
    assert {(p["size"], p["seed"]) for p in one} == {(p["size"], p["seed"]) for p in two}
    assert len(one) == 4 * (2 + 4) and {p["seed"] for p in one if p["size"] == "s3"} == {1}


def test_the_power_table_counts_failures_and_replicates_beyond_a_true_laws_range(misfit):
    """20 null replicates with statistics x = 0.001 .. 0.020 (lack of fit 100 x against a bound of 1.5, leave one size
    out 10 x, the signed mean -x); the shifted ones at x + 0.005 = 0.006 .. 0.025. Beyond a true law's range: above
    the null's 95th percentile (x > 0.01905: 6 of 20; its median would take 15), or for the signed mean below its
    2.5th percentile (-0.019525: the same 6)."""

    def row(i, shift):
        x = (i + 1) / 1000 + shift
        return {
            "lof": 100 * x,
            "lof_limit": 1.5,
            "reach_worst": x,
            "reach_mean": -x,
            "holdout_worst": x,
            "loso_worst": 10 * x,
        }

    null = [row(i, 0) for i in range(20)]
    table = {label: rest for label, *rest in misfit.power_table(null, [row(i, 0.005) for i in range(20)])}
    assert table["lack of fit, known sd"] == pytest.approx([0.25, 0.5, 0.3])  # over 1.5: x > 0.015
    assert table["long reach: largest"] == pytest.approx([0.0, 0.0, 0.3])  # none over 3%
    assert table["long reach: mean"] == pytest.approx([0.5, 0.75, 0.3])  # |x| over 1%
    assert table["leave one size out"] == pytest.approx([0.5, 0.75, 0.3])  # 10 x over 0.10


def write_points(path, pts, lr, scale=None):
    """`pts` as a points.csv (the study's header, one peak rate), each loss times scale(point) if given."""
    rows = ["arch,size,seed,n_params,tokens,flops,loss,lr"]
    for p in pts:
        loss = p["loss"] * (scale(p) if scale else 1.0)
        rows.append(f"{p['arch']},{p['size']},{p['seed']},{p['N']:.0f},{p['D']:.0f},{p['C']:.6g},{loss!r},{lr}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def test_forced_cells_alone_are_read_when_other_names_no_file(misfit, tmp_path, capsys):
    """`rates --other --forced F --variant V` (the batch and schedule tests): F's cells alone, each study cell of
    F's sizes scaled by its paired shift (s1 here, +1.00% at every seed), the label naming V, and no block of
    other rates."""
    pts = law_study(seeds=3)
    study = write_points(tmp_path / "points.csv", pts, 0.004)
    forced = write_points(tmp_path / "forced.csv", [p for p in pts if p["size"] == "s1"], 0.008, lambda p: 1.01)
    misfit.main(["rates", study, "--other", "--forced", forced, "--variant", "half the batch"])
    out = capsys.readouterr().out
    assert "=== a: half the batch (--forced)" in out and "each cell at another rate" not in out
    shifts = [line for line in out.splitlines() if "half the batch at 0.008" in line]
    assert len(shifts) == 4 and all(": +1.00% +- 0.00 (n=3)" in line for line in shifts)
    assert any(line.startswith("half the batch at its best rate where measured") for line in out.splitlines())


def test_a_shifts_noise_added_in_quadrature_weighs_its_cell_less(misfit):
    """nested_fits(points, extra_se): each cell's se becomes sqrt(se^2 + extra^2). Extra equal to sqrt(3) x every
    cell's own se doubles each se: the same weighted fits, every chi^2 a quarter. An extra on one cell alone
    lowers M0's chi^2 and leaves every other cell's se as it was."""
    pattern = {
        (s, D): 0.004 * math.sin(N * D / 1e9)
        for s, N in (("s1", 1e4), ("s3", 6e4), ("s5", 3.5e5))
        for D in (5e5, 1e6, 2e6, 4e6)
    }
    pts = law_study(pattern=pattern, noise=0.002)
    c, fits = misfit.nested_fits(pts)
    extra = {(s, d): math.sqrt(3) * se for s, d, se in zip(c["size"], c["D"], c["se"])}
    c4, fits4 = misfit.nested_fits(pts, extra)
    assert c4["se"] == pytest.approx(2 * c["se"])
    for name in fits:
        assert fits4[name][0].cost == pytest.approx(fits[name][0].cost / 4, rel=1e-3), name
    one = {("s1", 5e5): 0.05}
    c1, fits1 = misfit.nested_fits(pts, one)
    changed = (c1["size"] == "s1") & (c1["D"] == 5e5)
    assert c1["se"][changed] == pytest.approx(np.sqrt(c["se"][changed] ** 2 + 0.05**2))
    assert c1["se"][~changed] == pytest.approx(c["se"][~changed])
    assert fits1["M0 law"][0].cost < fits["M0 law"][0].cost


def test_decompose_at_another_records_noise_scales_each_chi2_by_the_ratios_square(misfit):
    """`decompose --se-from`: each size's se from the same-named size of another record (other N values). An
    other record whose deviations from its cell means are twice as large has twice the pooled sd, so every nested
    model's chi^2 is a quarter of its own-noise value; a size the other record lacks is refused by name."""
    from zoo.scaling.law import ScalingError

    pts = law_study(noise=0.003, seeds=3)
    means = {}
    for p in pts:
        means.setdefault((p["size"], p["D"]), []).append(p["loss"])
    other = [
        {**p, "N": p["N"] * 1.5, "loss": (m := np.mean(means[(p["size"], p["D"])])) + 2 * (p["loss"] - m)} for p in pts
    ]
    sd = misfit.sd_by_name(pts, other)
    own = misfit.pooled_sd(pts)
    assert set(sd) == {p["N"] for p in pts}
    for n, s in sd.items():
        assert s == pytest.approx(2 * own[n][0], rel=1e-9)
    (_, mine), (_, theirs) = misfit.nested_fits(pts), misfit.nested_fits(pts, sd=sd)
    for name in mine:
        assert 2 * theirs[name][0].cost == pytest.approx(2 * mine[name][0].cost / 4, rel=1e-3)
    with pytest.raises(ScalingError, match="no size s5"):
        misfit.sd_by_name(pts, [p for p in other if p["size"] != "s5"])
    assert {p["size"] for p in misfit.drop(pts, sizes=["s2"])} == {"s1", "s3", "s4", "s5"}


def test_common_leaves_out_a_family_without_seed_spread_and_says_why(misfit, tmp_path, capsys):
    """Two records sharing one seed a size at s2-s5 for family a: its pooled sd there has 0 degrees of freedom in
    both, so a is left out with a message naming those sizes (it divided by zero); family b, both seeds in both
    records, is still compared."""
    a = law_study(seeds=2)
    b = [{**p, "arch": "b"} for p in a]
    one = write_points(tmp_path / "one.csv", a + b, 0.004)
    two = write_points(tmp_path / "two.csv", [p for p in a if p["seed"] == 1 or p["size"] == "s1"] + b, 0.004)
    misfit.main(["common", one, "--other", two])
    out = capsys.readouterr().out
    assert "a: no seed spread at N [25000.0, 60000.0, 150000.0, 350000.0]" in out and "a: chi2" not in out
    assert "b: chi2" in out


def test_variants_refuses_points_of_another_design_before_any_fit(misfit, tmp_path, capsys):
    """`variants` counts total parameters at experiment=scaling's shapes: law_study's N (1e4 at s1, not the
    record's 10,120) is another design, refused with exit 2 naming the size and both counts."""
    pts = [{**p, "arch": "decoder_only"} for p in law_study(seeds=2)]
    with pytest.raises(SystemExit) as exit_:
        misfit.main(["variants", write_points(tmp_path / "points.csv", pts, 0.004)])
    assert exit_.value.code == 2
    assert "decoder_only s1: experiment=scaling's shape has 10,120 non-embedding parameters, the points 10,000" in (
        capsys.readouterr().err
    )
