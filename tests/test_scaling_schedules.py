"""zoo.scaling.schedules: the law fitted to the cosine check's points beside the cool-down points of the same cells."""

import numpy as np

from zoo.scaling.schedules import coverage, paired_points, schedule_laws, schedule_table

SIZES = {"s1": 2.5e4, "s2": 5.7e4, "s3": 1.56e5, "s4": 4.47e5, "s5": 7.93e5}


def law(alpha: float, beta: float):
    return lambda N, D: 1.2 + 60 / N**alpha + 90 / D**beta


def study(cooldown, cosine, sizes=SIZES, budgets=(5, 10, 20), seeds=2, noise=0.0005):
    """Points of two schedules on known laws: each (size, seed, budget) once as a cool-down point and once as a
    cosine point."""
    rng = np.random.default_rng(0)
    out = []
    for kind, f in (("cooldown", cooldown), ("cosine", cosine)):
        for size, N in sizes.items():
            for seed in range(1, seeds + 1):
                for b in budgets:
                    loss = f(N, b * N) * (1 + noise * rng.standard_normal())
                    run = f"x|{size}|{seed}|{kind}"
                    out.append(
                        {"arch": "x", "size": size, "seed": seed, "run": run, "N": N, "D": b * N,
                         "tokens_per_param": float(b), "loss": loss, "kind": kind}
                    )  # fmt: skip
    return out


def test_each_schedule_recovers_its_own_exponents():
    """Cool-down points on alpha 0.5, cosine points on alpha 0.3 (beta 0.35 both): each fit recovers its own
    alpha within 0.03, and the table says alpha moved by about -0.2."""
    pts = study(law(0.5, 0.35), law(0.3, 0.35))
    laws, skipped = schedule_laws(pts, bootstrap=0)
    assert not skipped
    got = {k: laws["x"][k]["fit"].values for k in ("cooldown", "cosine")}
    assert abs(got["cooldown"]["alpha"] - 0.5) < 0.03 and abs(got["cosine"]["alpha"] - 0.3) < 0.03
    assert abs(got["cosine"]["beta"] - 0.35) < 0.03
    text = "\n".join(schedule_table(laws, skipped))
    moved = got["cosine"]["alpha"] - got["cooldown"]["alpha"]
    assert f"alpha {moved:+.3f}" in text and -0.25 < moved < -0.15


def test_only_cells_both_schedules_trained_are_paired():
    """A cool-down point at a budget the cosine check did not train (40) is left out of both fits."""
    pts = study(law(0.5, 0.35), law(0.5, 0.35))
    pts.append({**pts[0], "tokens_per_param": 40.0, "D": 40 * pts[0]["N"]})
    cos, cool = paired_points(pts)["x"]
    assert len(cos) == len(cool) == 5 * 2 * 3
    assert all(c["kind"] == "cosine" for c in cos) and all(c["kind"] == "cooldown" for c in cool)
    assert [(p["size"], p["seed"], p["D"]) for p in cos] == [(p["size"], p["seed"], p["D"]) for p in cool]


def test_two_sizes_or_two_budgets_carry_no_law():
    few_sizes = study(law(0.5, 0.35), law(0.5, 0.35), sizes={"s1": 2.5e4, "s2": 5.7e4})
    laws, skipped = schedule_laws(few_sizes, bootstrap=0)
    assert not laws and "2 size(s)" in skipped["x"]
    few_budgets = [p for p in study(law(0.5, 0.35), law(0.5, 0.35)) if p["tokens_per_param"] != 20]
    assert coverage([p for p in few_budgets if p["kind"] == "cosine"]) is not None
    assert "Not fitted under each schedule: x" in "\n".join(schedule_table(*schedule_laws(few_budgets, bootstrap=0)))
