"""zoo.scaling.null: the long reach against a true law, on studies drawn from a known law at the committed design's
sizes and budgets (conf/experiment/scaling.yaml), with seed noise of a known size."""

import numpy as np
import pytest
from known_law import LAW, SIZES, TRUE

from zoo.scaling.law import scaling_law
from zoo.scaling.null import null_reps, null_table, reach_null, seed_deviations, simulate


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
            mine = {
                p["D"]: p["loss"] / float(TRUE.predict(p["N"], p["D"])) - 1
                for p in sim
                if (p["size"], p["seed"]) == (size, k)
            }
            matches = [
                s for (sz, s), v in devs.items() if sz == size and all(v[d] == pytest.approx(mine[d]) for d in v)
            ]
            assert matches, f"{size} seed {k}: its deviations are no measured run's"
    assert all("loss" in p for p in pts)  # the study itself is not modified
    assert [p["loss"] for p in study()] == [p["loss"] for p in pts]


def test_a_law_that_misses_its_largest_size_is_beyond_the_null_and_one_that_holds_is_not():
    """The largest size 4% above the law: a true law with 0.5% seed noise never misses it by that much (its 95%
    range of the largest error is far below 4%); the same study without the shift sits inside the range."""
    shifted = study(top_shift=0.04)
    r = reach_null(shifted, TRUE, reps=30)
    assert r["observed"]["worst"] > 0.03
    assert r["worst"][1] < 0.02 and r["p_worst"] == 0.0 and r["p_mean"] == 0.0
    held = reach_null(study(), TRUE, reps=30)
    assert held["worst"][0] <= held["observed"]["worst"] <= held["worst"][1]
    assert held["p_worst"] > 0.05 and held["p_mean"] > 0.05


def test_the_table_gives_each_familys_ranges_and_the_replicates_env_is_checked(monkeypatch):
    lines = null_table({"a": study(top_shift=0.04)}, {"a": TRUE}, reps=20)
    assert "20 replicates" in lines[0]
    row = lines[-1].split(" | ")
    assert row[0] == "| a" and row[3] == "0.00" and row[-1] == "0.00 |"
    monkeypatch.setenv("ZOO_SCALING_NULL_REPS", "many")
    with pytest.raises(ValueError, match="ZOO_SCALING_NULL_REPS='many': give a whole number"):
        null_reps()
    monkeypatch.setenv("ZOO_SCALING_NULL_REPS", "0")
    assert null_table({"a": study()}, {"a": TRUE}) == []
