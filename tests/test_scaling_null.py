"""zoo.scaling.null: the gates' statistics against a true law, on studies drawn from a known law at the committed
design's sizes and budgets (conf/experiment/scaling.yaml), with seed noise of a known size."""

import numpy as np
import pytest
from known_law import LAW, SIZES, TRUE

from zoo.scaling.law import scaling_law
from zoo.scaling.null import gate_null, null_reps, null_table, seed_deviations, simulate
from zoo.scaling.points import cell_means


@pytest.fixture(autouse=True)
def fewer_starts(monkeypatch):
    """5 starts of each refit instead of 20: on points drawn from a law the best grid start finds its minimum."""
    import zoo.scaling.points

    monkeypatch.setattr(zoo.scaling.points, "N_STARTS", 5)


def study(top_shift=0.0, sigma=0.005, seeds=3, seed=0) -> list[dict]:
    """Points of the law, each loss times (1 + sigma z); the largest size's times (1 + top_shift) besides."""
    rng, out = np.random.default_rng(seed), []
    for size, (N, budgets) in SIZES.items():
        for b in budgets:
            loss = float(scaling_law(N, b * N, *LAW.values())) * (1 + (top_shift if size == "s5" else 0.0))
            for k in range(seeds):
                row = {"arch": "a", "size": size, "seed": k, "run": f"{size}|{k}", "N": N, "D": b * N}
                out.append(
                    {**row, "tokens": b * N, "C": 6 * N * b * N, "loss": loss * (1 + sigma * rng.standard_normal())}
                )
    return out


def test_a_runs_deviations_are_its_losses_over_its_cells_means():
    """Two seeds at losses a and b: deviations (a - b) / (a + b) and its negative."""
    pts = [
        {"size": "s1", "seed": s, "N": 1e4, "D": 5e5, "loss": loss, "run": f"s1|{s}"}
        for s, loss in ((0, 2.2), (1, 2.0))
    ]
    dev = seed_deviations(pts)
    assert dev["s1", 0][5e5] == pytest.approx(0.2 / 4.2)
    assert dev["s1", 1][5e5] == pytest.approx(-0.2 / 4.2)


def test_a_replicate_is_the_law_times_one_measured_runs_whole_deviation_vector():
    pts = study()
    devs = seed_deviations(pts)
    sim = simulate(pts, TRUE, devs, np.random.default_rng(3))
    for size in SIZES:
        for k in range(3):
            mine = {  # a run's deviation, rescaled from a mean of 3 to one run's variance: sqrt(3 / 2)
                p["D"]: (p["loss"] / float(TRUE.predict(p["N"], p["D"])) - 1) / np.sqrt(3 / 2)
                for p in sim
                if (p["size"], p["seed"]) == (size, k)
            }
            matches = [
                s for (sz, s), v in devs.items() if sz == size and all(v[d] == pytest.approx(mine[d]) for d in v)
            ]
            assert matches, f"{size} seed {k}: its deviations are no measured run's"
    assert all("loss" in p for p in pts)  # the study itself is not modified
    assert [p["loss"] for p in study()] == [p["loss"] for p in pts]


def test_a_replicates_runs_scatter_about_the_law_as_much_as_the_true_noise():
    """A deviation from a mean of 3 seeds has 2/3 of a run's variance; rescaled by sqrt(3 / 2) the replicates' runs
    scatter about the law by the noise the studies were drawn with, 0.5% (within 5% over 20 studies; unrescaled
    they would be about 20% short)."""
    ratios = []
    for seed in range(20):
        pts = study(sigma=0.005, seed=seed)
        rng, devs = np.random.default_rng(seed), seed_deviations(pts)
        sims = [p for _ in range(20) for p in simulate(pts, TRUE, devs, rng)]
        ratios.append(np.std([p["loss"] / float(TRUE.predict(p["N"], p["D"])) - 1 for p in sims]) / 0.005)
    assert abs(np.mean(ratios) - 1) < 0.05, np.mean(ratios)


def study_at(shift: dict, sigma=0.005, seeds=3, seed=0) -> list[dict]:
    """study(), each size's losses times (1 + shift[size]) besides."""
    return [{**p, "loss": p["loss"] * (1 + shift.get(p["size"], 0.0))} for p in study(0.0, sigma, seeds, seed)]


def test_a_law_that_misses_its_largest_size_is_beyond_the_null_and_one_that_holds_is_not():
    """The largest size 4% above the law: a true law with 0.5% seed noise never misses it by that much in the long
    reach or the hold-out (their 95% ranges of the largest error are far below 4%); the same study without the shift
    sits inside every range, leave one size out's included."""
    r = gate_null(study(top_shift=0.04), TRUE, reps=20)["stats"]
    assert r["reach_worst"]["observed"] > 0.03 and r["holdout_worst"]["observed"] > 0.03
    for key in ("reach_worst", "reach_mean", "holdout_worst", "holdout_mean"):
        assert r[key]["p"] == 0.0, (key, r[key])
    assert r["reach_worst"]["range"][1] < 0.02 and r["holdout_worst"]["range"][1] < 0.02
    held = gate_null(study(), TRUE, reps=20)["stats"]
    assert set(held) == {"reach_worst", "reach_mean", "holdout_worst", "holdout_mean", "loso_worst"}
    for key, st in held.items():
        assert st["range"][0] <= st["observed"] <= st["range"][1] and st["p"] > 0.05, (key, st)


def test_a_smallest_size_off_the_law_moves_the_exponents_beyond_a_true_laws_range():
    """s1 3% above the law: leaving it out moves alpha or beta far more than any replicate of the true law does (P
    = 0), though the largest size's predictions stay inside their range."""
    r = gate_null(study_at({"s1": 0.03}), TRUE, reps=20)["stats"]
    assert r["loso_worst"]["observed"] > r["loso_worst"]["range"][1] and r["loso_worst"]["p"] == 0.0, r["loso_worst"]


def test_the_table_gives_each_familys_ranges_and_the_replicates_env_is_checked(monkeypatch):
    lines = null_table({"a": study(top_shift=0.04)}, {"a": TRUE}, reps=20)
    assert "20 replicates" in lines[0] and lines[2] == (
        "| arch | statistic | observed | a true law's 95% range | P | the gate's bound |"
    )
    rows = [line.split(" | ") for line in lines[4:-2]]
    assert lines[-1].startswith(
        "Multiplicity: 5 statistics judged over 1 families; 5 have P < 0.05 (5 beyond every replicate), where laws "
        "that all hold would give about 0.2 by chance."
    )
    assert [r[1] for r in rows] == [
        "long reach: largest error",
        "long reach: mean signed error",
        "hold-out: largest error",
        "hold-out: mean signed error",
        "leave one size out: largest move of α or β",
    ]
    assert all(r[0] == "| a" for r in rows) and [r[4] for r in rows[:4]] == ["< 0.05"] * 4  # none of 20
    assert [r[5] for r in rows] == ["3% |", "±1% |", "3% |", "none |", "0.10 |"]
    monkeypatch.setenv("ZOO_SCALING_NULL_REPS", "many")
    with pytest.raises(ValueError, match="ZOO_SCALING_NULL_REPS='many': give a whole number"):
        null_reps()
    monkeypatch.setenv("ZOO_SCALING_NULL_REPS", "0")
    assert null_table({"a": study()}, {"a": TRUE}) == []


def test_seeds_whose_tokens_differ_a_little_share_their_cells_and_the_null_runs():
    """A translation study's D is the target tokens its seed's batches held: each seed's D here is 0.2-0.6% off
    the others'. The cells are still a size and a budget (3 seeds each, their mean D), and the null draws from
    them as from an LM study's."""
    pts = [{**p, "D": p["D"] * (1 + 0.002 * (p["seed"] + 1))} for p in study()]
    cells = cell_means(pts)
    assert len(cells) == sum(len(b) for _, b in SIZES.values()) and {c["n"] for c in cells} == {3}
    r = gate_null(pts, TRUE, reps=5)["stats"]
    assert set(r) == {"reach_worst", "reach_mean", "holdout_worst", "holdout_mean", "loso_worst"}


def test_a_run_missing_a_budget_draws_only_from_runs_that_have_it_and_one_run_is_not_calibrated():
    """Seed 0 of s5 lacks its largest budget: a replicate gives it any run's deviations, the others only those of
    runs with every budget (no KeyError). A size of one run has no deviation to draw: the table says so."""
    pts = study()
    top = max(p["D"] for p in pts if p["size"] == "s5")
    gaps = [p for p in pts if not (p["size"] == "s5" and p["seed"] == 0 and p["D"] == top)]
    assert gate_null(gaps, TRUE, reps=5)["stats"]["reach_worst"]["observed"] >= 0
    lonely = [p for p in pts if p["size"] != "s1" or p["seed"] == 0]
    lines = null_table({"a": lonely}, {"a": TRUE}, reps=5)
    assert lines[-1] == "| a | not calibrated: one run at s1: no seed deviations to draw there | | | | |"
