"""The Scaling section's gates, points.csv, compute frontier, cool-down check and steps-bound check, on synthetic
experiment=scaling cells drawn from known laws (results.json with their points, as zoo.run.scaling_cell writes):
a design that meets the gates, one whose points miss the law, and one the gates cannot judge."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from zoo.report.runs import find_runs
from zoo.report.scaling import scaling_section
from zoo.report.scaling_checks import cooldown_check, steps_bound
from zoo.report.scaling_points import scaling_points
from zoo.scaling.checks import seed_noise
from zoo.scaling.conventions import STUDY_OBJECTIVES
from zoo.scaling.fit import fit_scaling_law
from zoo.scaling.frontier import Frontier, envelope
from zoo.scaling.gates import GATES

TRUE = {"E": 1.2, "A": 60.0, "B": 90.0, "alpha": 0.4, "beta": 0.35}
SIZES = {"s1": 2.5e4, "s2": 5.7e4, "s3": 1.56e5, "s4": 4.47e5, "s5": 7.93e5}
BUDGETS = (5, 10, 20)
# (FLOPs per token / 6 N, tokens per useful token): encoder_decoder learns 1.5x less per token at half the FLOPs;
# encoder_only spends 2x the FLOPs per token (its C reaches past decoder_only's)
FAMILIES = {"decoder_only": (1.0, 1.0), "encoder_decoder": (0.5, 1.5), "encoder_only": (2.0, 1.0)}


def law(N, D):
    return TRUE["E"] + TRUE["A"] / N ** TRUE["alpha"] + TRUE["B"] / D ** TRUE["beta"]


def write_cell(root: Path, arch: str, size: str, seed: int, rng, noise: float, kind="cooldown", bend=0.0) -> None:
    """One cell's results.json: a point per budget, loss = the law x (1 + noise) x (1 +- bend), the sign alternating
    from size to size (a learning rate mistuned at every other size: no law of N and D follows it)."""
    cost, slow = FAMILIES[arch]
    N = SIZES[size]
    rows = []
    for b in BUDGETS:
        D = b * N
        sign = (-1) ** list(SIZES).index(size)
        loss = law(N, D / slow) * (1 + noise * rng.standard_normal()) * (1 + sign * bend) * (3 if kind == "tune" else 1)
        rows.append(
            {
                "arch": arch,
                "size": size,
                "seed": seed,
                "n_params": int(N),
                "tokens": int(D),
                "flops": 6 * cost * N * D,
                "loss": loss,
                "tokens_per_param": b,
                "steps": int(D / 2048),
                "kind": kind,
                "cooldown": 0.2 if kind == "cooldown" else "",
                "seconds": 1.0,
            }
        )
    d = root / f"{arch}-{size}_seed{seed}{ {'cosine': '_cosine', 'tune': '_lr0.008'}.get(kind, '') }"
    d.mkdir(parents=True)
    record = {
        "status": "ok",
        "arch": arch,
        "arch_config": arch,
        "task": "lm",
        "dataset": "synthetic",
        "objective": STUDY_OBJECTIVES[arch],  # each family's, as a real study's runs record it
        "seed": seed,
        # seed 3 as a later command added it (scaling.seeds chooses the cells, not what one trains)
        "overrides": [f"scaling.cell={d.name.split('-', 1)[1]}", f"+arch={arch}", *(["scaling.seeds=3"] * (seed == 3))],
        "final": {"val/cont_loss": rows[-1]["loss"]},
        "best": {},
        "params": int(N * 1.05),
        "params_non_embedding": int(N),
        "flops_per_token": 6 * cost * N,
        "steps": rows[-1]["steps"],
        "cost": {"train_seconds": 3.0},
        "wall_seconds": 4.0,
        "scaling": {"cell": d.name, "size": size, "kind": kind, "points": rows, "train_tokens": 4_000_000},
        "examples": None,
    }
    (d / "results.json").write_text(json.dumps(record))


def study(root: Path, noise: float, sizes=SIZES, seeds=3, others=2, bend=0.0, check=True, tune=False) -> Path:
    """Cells of every family at `sizes`: `seeds` seeds at s3, `others` at every other size; tune: also a
    learning-rate tuning cell per family at s2 (kind tune, losses 3x the law's: no law fits them)."""
    rng = np.random.default_rng(0)
    for arch in FAMILIES:
        for size in sizes:
            for seed in range(1, (seeds if size == "s3" else others) + 1):
                write_cell(root, arch, size, seed, rng, noise, bend=bend)
        if check:
            write_cell(root, arch, "s1", 1, rng, noise, kind="cosine")
    for arch in FAMILIES if tune else ():
        write_cell(root, arch, "s2", 1, np.random.default_rng(1), noise, kind="tune")
    (root / "plan.json").write_text("[]")
    return root


@pytest.fixture(scope="module", autouse=True)
def fewer_resamples():
    """60 bootstrap resamples a fit instead of the report's 200, and 5 starts of each fit instead of 20: the gates'
    verdicts here are far from their bounds, and on points drawn from a law the best grid start finds its minimum."""
    import zoo.scaling.points as section

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(section, "BOOTSTRAP", 60)
        mp.setattr(section, "N_STARTS", 5)
        yield


def gate_row(text: list[str], arch: str) -> dict[str, str]:
    """The gate table's row of `arch`: {column: cell}, columns as its header names them ("law trusted", "fit",
    "lack of fit", "hold-out", "long reach", "leave one size out", "parameters", "k(C)")."""
    header = next(line for line in text if line.startswith("| arch | law trusted |"))
    row = next(line for line in text if line.startswith(f"| {arch} | ") and line.split(" | ")[1] in ("yes", "NO"))
    return dict(zip((c.strip() for c in header.split("|")[1:-1]), (c.strip() for c in row.split("|")[1:-1])))


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = study(tmp_path_factory.mktemp("good"), noise=0.001, tune=True)
    out = tmp_path_factory.mktemp("good_report")
    return root, out, scaling_section(find_runs(root), out, scaling_sweep=True)[0]


def test_a_study_on_its_law_passes_every_gate(good):
    """0.1% noise on the law, 5 sizes over 32x, 3 budgets, 2 seeds (3 at s3), and tuning points the report leaves
    out: every gate passes, and the text says so first. (At 0.2% the long reach's fit on s1-s3 misses s5 by a mean
    of about 1%: its ±1% needs less noise.)"""
    _, _, text = good
    assert text[0] == "## Scaling" and text[2].startswith("Can each law be trusted?")
    for arch in FAMILIES:
        row = gate_row(text, arch)
        assert row["law trusted"] == "yes", row
        assert all(row[g].startswith("pass") for g in GATES.values()), row


def test_the_gates_of_a_study_on_its_law_are_inside_a_true_laws_range(good):
    """The null table (zoo.scaling.null, ZOO_SCALING_NULL_REPS=5 in the tests) follows the hold-out table; on
    points drawn from the law every family's observed largest errors and exponent moves are at most 4x the top of a
    true law's range (5 replicates draw the range's ends roughly)."""
    _, _, text = good
    at = text.index(next(x for x in text if x.startswith("The gates against a true law")))
    assert at > text.index(next(x for x in text if x.startswith("The largest size predicted")))
    for arch in FAMILIES:
        rows = [x.split(" | ") for x in text[at:] if x.startswith(f"| {arch} | ")][:5]
        assert [r[1].split(":")[0] for r in rows] == ["long reach"] * 2 + ["hold-out"] * 2 + ["leave one size out"]
        for r in (rows[0], rows[2], rows[4]):
            worst, top = float(r[2].rstrip("%")), float(r[3].split(" – ")[1].rstrip("%"))
            assert worst <= 4 * top, r


def test_the_one_rate_per_size_table_follows_the_residuals_and_finds_no_curvature_on_the_law(good):
    """The points carry no c d^2 (zoo.scaling.budget_rate): each family's c lies within 3 of its se of 0, and its
    row says the gates' after state."""
    _, _, text = good
    at = text.index(next(x for x in text if x.startswith("The one-rate-per-size design")))
    assert at > text.index(next(x for x in text if x.startswith("Each cell's mean against its family's law")))
    for arch in FAMILIES:
        row = next(x for x in text[at:] if x.startswith(f"| {arch} | "))
        c, se = (float(x) for x in row.split(" | ")[1].split(" ± "))
        assert abs(c) < 3 * se and "→" in row, row


def test_a_sizes_seeds_are_one_row_of_the_report(good):
    """scaling.cell names the seed (s3_seed2), but a size's seeds are one group of the report's table, averaged
    like any seeds, also when a later command added a seed with scaling.seeds; the cosine check cells and the
    tuning cells are rows of their own."""
    from zoo.report.grouping import group_runs

    root, _, _ = good
    groups = group_runs(find_runs(root))
    labels = sorted(g["label"] for g in groups)
    assert len(groups) == len(FAMILIES) * (len(SIZES) + 2), labels  # + the cosine check's and the tuning cell's
    s3 = next(g for g in groups if g["arch"] == "decoder_only" and g["settings"].get("scaling.cell") == "s3")
    assert sorted(r["seed"] for r in s3["runs"]) == [1, 2, 3]
    assert any(g["settings"].get("scaling.cell") == "s1_cosine" and len(g["runs"]) == 1 for g in groups)


def test_points_csv_holds_every_fitted_point_and_refits_to_the_sections_law(good):
    """One row per cool-down point (the cosine check's are left out), header as the issue names it; the CLI's
    refit of one family's rows gives the section's alpha."""
    root, out, text = good
    with open(out / "points.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["arch", "size", "seed", "n_params", "tokens", "flops", "loss", "lr"]
    n_cells = 2 * len(SIZES) + 1  # two seeds per size, three at s3
    assert len(rows) == len(FAMILIES) * n_cells * len(BUDGETS)
    dec = [r for r in rows if r["arch"] == "decoder_only"]
    fit = fit_scaling_law(*(np.array([float(r[k]) for r in dec]) for k in ("n_params", "tokens", "loss")), bootstrap=0)
    law_row = next(line for line in text if line.startswith("| decoder_only | passed"))
    assert float(law_row.split(" | ")[8].split()[0]) == pytest.approx(fit.values["alpha"], rel=2e-3)
    assert fit.values["alpha"] == pytest.approx(TRUE["alpha"], abs=0.05)


def test_the_multiplier_from_law_and_frontier_holds_the_truth(good):
    """encoder_decoder needs 1.5x the tokens at half the FLOPs per token: k = 0.75 at every C (law); the law's
    interval at the measured C holds it."""
    _, _, text = good
    law_row = next(line for line in text if line.startswith("| encoder_decoder | law"))
    for cell in law_row.split("|")[3:5]:
        value, ci = cell.strip().split(" [")
        lo, hi = (float(x) for x in ci.rstrip("]").split(", "))
        assert lo <= 0.75 <= hi and abs(math.log(float(value) / 0.75)) < math.log(1.1), law_row
    assert any(line.startswith("| encoder_decoder | frontier") for line in text)


def test_k_is_read_at_the_largest_compute_both_families_measured(good):
    """The k(C) gate reads the frontiers' k at C*, the largest C where both families are measured. encoder_only
    (the same law at 2x the FLOPs per token) reaches decoder_only's best loss within its own C: C* is decoder_only's
    largest C (6 N D at s5, 20 tokens per parameter), not encoder_only's 2x larger one, and k = 2 there.
    encoder_decoder's best loss (s5, 20 tokens per parameter at 1.5x fewer useful tokens) is decoder_only's at
    s5 with 20 / 1.5 tokens per parameter: C* = 6 N (13.3 N), two thirds of decoder_only's largest C, so the
    multiplier there is measured on both sides, not extrapolated past encoder_decoder's runs."""
    _, _, text = good
    n5 = SIZES["s5"]
    cmax = 6 * n5 * 20 * n5
    for arch, cstar, k in (("encoder_only", cmax, 2.0), ("encoder_decoder", 6 * n5 * (20 / 1.5) * n5, 0.75)):
        why = gate_row(text, arch)["k(C)"]
        assert why.startswith("pass: k = "), why
        at = float(why.split(" at C = ")[1].split()[0])
        assert at == pytest.approx(cstar, rel=0.05), why
        assert at <= cmax * (1 + 1e-3), why
        assert float(why.split("k = ")[1].split()[0]) == pytest.approx(k, rel=0.06), why


def test_points_that_miss_the_law_fail_the_fit_gate_and_their_law_is_marked(tmp_path):
    """Sizes alternately 3% above and below the law leave residuals many times the seed noise: the fit gate fails,
    the law's row says not to quote it, and no extrapolation is printed for it."""
    root = study(tmp_path / "bent", noise=0.002, bend=0.03)
    text, _ = scaling_section(find_runs(root), tmp_path, scaling_sweep=True)
    row = gate_row(text, "encoder_decoder")
    assert row["law trusted"] == "NO" and row["fit"].startswith("FAIL: rms"), row
    assert any(line.startswith("| encoder_decoder | FAILED: not to quote") for line in text)
    law_row = next(line for line in text if line.startswith("| encoder_decoder | law"))
    assert "gate FAILED" in law_row and law_row.rstrip(" |").endswith("– (a gate failed)")


def test_a_design_the_gates_cannot_judge_says_which_gate(tmp_path):
    """Two sizes, no repeated seeds, no check cells: the fit and hold-out gates say they cannot check, and the law is
    not called trusted."""
    root = study(
        tmp_path / "small", noise=0.002, sizes={k: SIZES[k] for k in ("s1", "s5")}, seeds=1, others=1, check=False
    )
    text, _ = scaling_section(find_runs(root), tmp_path, scaling_sweep=True)
    row = gate_row(text, "decoder_only")
    assert row["law trusted"] == "NO"
    assert row["fit"].startswith("cannot check") and "no repeated seeds" in row["fit"]
    assert row["lack of fit"].startswith("cannot check: fewer than 6 cells")
    assert row["hold-out"].startswith("cannot check: 2 sizes")
    assert row["long reach"].startswith("cannot check: fewer than 3 sizes")
    assert row["leave one size out"].startswith("cannot check: 2 sizes")
    assert any("no SIZE_seedN_cosine cells" in line for line in text)


def test_one_seed_at_a_size_cannot_check_the_intervals(tmp_path):
    """Seeds repeated at s3 alone (experiment=scaling's default): the bootstrap over seeds within sizes cannot vary
    the other sizes, so the exponent and multiplier gates say they cannot check, naming the sizes; the fit and
    hold-out gates still judge."""
    root = study(tmp_path / "one_seed", noise=0.002, others=1)
    text, _ = scaling_section(find_runs(root), tmp_path, scaling_sweep=True)
    for arch in FAMILIES:
        row = gate_row(text, arch)
        assert row["law trusted"] == "NO" and row["fit"].startswith("pass") and row["hold-out"].startswith("pass"), row
        assert (
            row["parameters"]
            == "cannot check: one seed at s1, s2, s4, s5: the bootstrap over seeds within sizes cannot "
            "vary it (2 or more)"
        ), row
    assert (
        gate_row(text, "encoder_decoder")["k(C)"].startswith("cannot check: k = ")
        and "one seed at s1, s2, s4, s5" in (gate_row(text, "encoder_decoder")["k(C)"])
    )


def test_seed_noise_is_the_rms_of_the_relative_sd_at_each_repeated_budget():
    """Also where each seed trains its own target tokens at a budget (a translation study's, 0.2-0.6% apart: the
    cells of zoo.scaling.points.budget_keys); grouped by exact tokens no two seeds met, and it was None."""
    pts = [
        {"N": 1.0, "D": float(b), "tokens_per_param": b, "seed": s, "loss": loss}
        for b, losses in ((5, (2.0, 2.2, 2.4)), (10, (1.0, 1.0, 1.3)))
        for s, loss in zip((1, 2, 3), losses)
    ]
    sd1, sd2 = np.std([2.0, 2.2, 2.4], ddof=1) / 2.2, np.std([1.0, 1.0, 1.3], ddof=1) / 1.1
    assert seed_noise(pts) == pytest.approx(math.sqrt((sd1**2 + sd2**2) / 2))
    assert seed_noise([p for p in pts if p["seed"] == 1]) is None
    apart = [
        {**p, "D": p["D"] * (1 + 0.002 * p["seed"]), "tokens_per_param": p["D"] * (1 + 0.002 * p["seed"])} for p in pts
    ]
    assert seed_noise(apart) == pytest.approx(math.sqrt((sd1**2 + sd2**2) / 2))


def test_one_runs_evaluations_close_in_tokens_are_cells_of_their_own():
    """A run's curve evaluated at D 1.00e7, 1.02e7, 1.04e7 (within 5%, the spread a translation budget's seeds
    may have): three cells of one seed, not one cell of three (its loss trend counted as seed noise); two seeds'
    points 0.5% apart stay one cell."""
    from zoo.scaling.points import cell_means

    curve = [{"N": 1e5, "D": d, "loss": 3.0 - d / 1e8, "seed": 1, "run": "a|s1|1"} for d in (1.00e7, 1.02e7, 1.04e7)]
    assert [c["n"] for c in cell_means(curve)] == [1, 1, 1]
    seeds = [
        {"N": 1e5, "D": 1e7 * (1 + 0.005 * s), "loss": 2.0 + 0.01 * s, "seed": s, "run": f"a|s1|{s}"} for s in (1, 2)
    ]
    assert [c["n"] for c in cell_means(seeds)] == [2]


def test_the_frontier_fit_recovers_a_known_envelope():
    """Points on L = 1.3 + 40 C^-0.12 (the envelope) and others above it: the fit returns (E, A, gamma)."""
    C = np.geomspace(1e10, 1e14, 9)
    on = [{"run": f"r{i}", "C": c, "loss": 1.3 + 40 * c**-0.12} for i, c in enumerate(C)]
    above = [{"run": f"r{i}", "C": c * 1.5, "loss": 1.1 * (1.3 + 40 * c**-0.12)} for i, c in enumerate(C)]
    assert envelope(on + above) == on
    fr = Frontier(on + above, bootstrap=20)
    assert fr.values == pytest.approx([1.3, 40.0, 0.12], rel=1e-3)
    lo, hi = fr.ci(2)
    assert lo <= 0.12 <= hi


def test_the_frontier_resamples_runs_within_sizes_when_every_size_repeats(monkeypatch):
    """Two runs at each of two sizes: every resample draws 2 runs from each size (the report's law does the same,
    fit_points); a size with one run: the plain bootstrap over all runs."""
    import zoo.scaling.frontier as section

    seen, real = [], section.resample_weights
    monkeypatch.setattr(section, "resample_weights", lambda rng, units, *a: seen.append(units) or real(rng, units, *a))
    pts = [
        {"run": f"{n}|{seed}", "N": n, "C": c * n, "loss": 1.3 + 40 * (c * n) ** -0.12 * (1 + 0.01 * seed)}
        for n in (1e4, 1e5)
        for seed in (1, 2)
        for c in (1e6, 4e6, 1.6e7)
    ]
    Frontier(pts, bootstrap=5)
    assert len(seen) == 5 and all(sorted(map(len, u)) == [2, 2] for u in seen)
    seen.clear()
    Frontier([p for p in pts if p["run"] != "100000.0|2"], bootstrap=5)
    assert all(len(u) == 1 and len(u[0]) == 3 for u in seen)


def test_the_cool_down_check_pairs_each_cosine_point_with_its_branch(good):
    root, _, text = good
    rows = cooldown_check(scaling_points(find_runs(root)))
    assert len(rows) == len(FAMILIES) * len(BUDGETS)
    assert all(r["size"] == "s1" for r in rows)
    assert any(line.startswith("| decoder_only | s1 | 5 |") for line in text)


def test_steps_bound_flags_a_larger_size_no_better_at_equal_steps():
    """Loss set by steps alone (the same curve at every size) fails every comparison; a larger size lower at every
    step passes."""
    bound = [{"N": n, "seed": 1, "steps": s, "loss": 3.0 / s**0.1} for n in (1, 2) for s in (100, 200, 400)]
    assert steps_bound(bound)["pairs"] == 3 and len(steps_bound(bound)["failed"]) == 3
    better = [{"N": n, "seed": 1, "steps": s, "loss": 3.0 / s**0.1 / n**0.2} for n in (1, 2) for s in (100, 200, 400)]
    assert steps_bound(better) == {"pairs": 3, "failed": []}


# --- each gate fails on its own: one family's points drawn from a law, with one flaw each ---

# a law whose N term (400 / N^0.5: 2.5 at s1, 0.45 at s5) dominates its loss: alpha is pinned by 5 sizes
STRONG = {"E": 1.0, "A": 400.0, "B": 90.0, "alpha": 0.5, "beta": 0.35}


def family(arch="decoder_only", law=STRONG, offsets=(0.003, 0.0, -0.003), budgets=None, noise=0.0, **flaw) -> list:
    """zoo.scaling.points dicts of one family at SIZES: per size one run per entry of `offsets` (its loss the
    law x (1 + offset) at every budget: a seed's level), budgets BUDGETS (or budgets[size]), and i.i.d. noise.
    flaw: size_offsets {size: offsets} (another seed spread there), bias {size: relative change of its points},
    budget_bias {tokens per parameter: relative change at every size}."""
    rng = np.random.default_rng(1)
    out = []
    for size, N in SIZES.items():
        for seed, offset in enumerate(flaw.get("size_offsets", {}).get(size, offsets), start=1):
            for b in (budgets or {}).get(size, BUDGETS):
                bias = (1 + flaw.get("bias", {}).get(size, 0.0)) * (1 + flaw.get("budget_bias", {}).get(b, 0.0))
                L = law["E"] + law["A"] / N ** law["alpha"] + law["B"] / (b * N) ** law["beta"]
                loss = L * (1 + offset) * bias * (1 + noise * rng.standard_normal())
                run = f"{arch}|{size}|{seed}"
                p = {"arch": arch, "size": size, "seed": seed, "run": run, "N": N, "D": b * N, "tokens": b * N}
                out.append({**p, "C": 6 * b * N * N, "loss": loss, "kind": "cooldown", "tokens_per_param": b})
    return out


def judged(by_arch: dict) -> tuple[dict, dict]:
    """(verdicts, checks) of zoo.scaling.gates on the families' points, 40 resamples a fit and a frontier."""
    from zoo.scaling.gates import family_checks, gates
    from zoo.scaling.points import fit_families

    fits, _ = fit_families(by_arch, bootstrap=40)
    checks = {arch: family_checks(fit, by_arch[arch]) for arch, fit in fits.items()}
    frontiers = {arch: Frontier(pts, bootstrap=40) for arch, pts in by_arch.items()} if len(by_arch) > 1 else {}
    return gates(by_arch, fits, frontiers, checks), checks


FLAWED = {
    # seeds 2.2% apart: rms 1.8% > 1.5%, though 0.8x the seed noise (the cell medians are on the law)
    "fit": lambda: {"decoder_only": family(offsets=(0.022, 0.0, -0.022))},
    # 5 seeds 0.1% apart, and the middle budget 0.3% below the law at every size, the others 0.15% above
    "lack": lambda: {
        "decoder_only": family(
            offsets=(0.002, 0.001, 0.0, -0.001, -0.002), budget_bias={5: 0.0015, 10: -0.003, 20: 0.0015}
        )
    },
    # s4 2% above the law, within its seeds' spread of 2.5%: the fit without s5 bends to it
    "holdout": lambda: {"decoder_only": family(size_offsets={"s4": (0.025, 0.0, -0.025)}, bias={"s4": 0.02})},
    # s3 0.5% above the law, within its seeds' spread of 1%: a fit on s1-s3 extrapolates it
    "reach": lambda: {"decoder_only": family(size_offsets={"s3": (0.01, 0.0, -0.01)}, bias={"s3": 0.005})},
    # one budget a size but s3's three: beta rests on s3 alone
    "loso": lambda: {
        "decoder_only": family(budgets={s: (10,) for s in SIZES if s != "s3"}, offsets=(0, 0, 0), noise=0.002)
    },
    # a law whose N term is small (60 / N^0.4), seeds 1.8% apart: rms 1.47%, alpha's interval about ±0.18
    "params": lambda: {"decoder_only": family(law=TRUE, offsets=(0.018, 0.0, -0.018))},
    # encoder_decoder's loss floor E = 4.5 near its losses: its frontier is flat, k(C)'s interval wide
    "k": lambda: {
        "decoder_only": family(offsets=(0.015, 0.0, -0.015)),
        "encoder_decoder": family("encoder_decoder", {**STRONG, "E": 4.5}, offsets=(0.01, 0.0, -0.01)),
    },
}


@pytest.mark.parametrize("gate", list(FLAWED))
def test_each_gate_fails_on_its_own(gate):
    """A study with one flaw fails that gate and passes every other; in a study of two families the reference
    passes every gate."""
    verdicts, _ = judged(FLAWED[gate]())
    arch = "encoder_decoder" if gate == "k" else "decoder_only"
    states = {g: verdicts[arch][g][0] for g in GATES}
    assert states == {g: "FAIL" if g == gate else "pass" for g in GATES}, verdicts[arch]
    assert all(verdicts["decoder_only"][g][0] == "pass" for g in GATES) or arch == "decoder_only"


def test_the_fit_gate_needs_both_conditions():
    """The fit study's rms, d sqrt(2/3) at seeds d apart about a fit through the middle seed, is over 1.5% but
    under 2x the seed noise d: the gate fails on the first condition alone."""
    _, checks = judged(FLAWED["fit"]())
    c = checks["decoder_only"]
    assert c["rms"] == pytest.approx(0.022 * math.sqrt(2 / 3), rel=1e-3)
    assert c["noise"] == pytest.approx(0.022, rel=1e-3) and c["rms"] <= 2 * c["noise"]


def test_the_holdout_gate_judges_the_largest_error():
    """The hold-out study's smallest error is within 3%, its largest over: the gate must read the largest."""
    from zoo.scaling.gates import HOLDOUT

    _, checks = judged(FLAWED["holdout"]())
    errors = checks["decoder_only"]["holdout"]["errors"]
    assert min(errors) <= HOLDOUT < max(errors), errors


def test_the_long_reach_judges_the_mean_signed_error():
    """The long-reach study misses every point of s5 within 3%, but all on one side: a mean over 1%."""
    _, checks = judged(FLAWED["reach"]())
    r = checks["decoder_only"]["reach"]
    assert r["worst"] <= 0.03 and r["mean"] > 0.01 and r["sizes"] == ["s1", "s2", "s3"], r
