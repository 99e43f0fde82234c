"""experiments/bench_scripts/scaling_misfit.py's `rates` arithmetic: the paired shifts and the cells each
alternative design or rate puts in place of the study's (by hand)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "bench_scripts" / "scaling_misfit.py"


@pytest.fixture(scope="module")
def misfit():
    spec = importlib.util.spec_from_file_location("scaling_misfit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def point(size, D, seed, loss, lr=0.004):
    return {"size": size, "D": D, "seed": seed, "loss": loss, "run": f"decoder_only|{size}|{seed}|{lr}"}


STUDY = [point("s4", 1e6, s, 2.0) for s in (1, 2)] + [point("s1", 1e6, s, 3.0) for s in (1, 2)]


def test_paired_shifts_are_relative_means_with_their_standard_error(misfit):
    other = [point("s4", 1e6, 1, 1.9, 0.0057), point("s4", 1e6, 2, 2.1, 0.0057)]
    mean, se, n = misfit.paired_shifts(STUDY, other)["s4", 1e6, 0.0057]
    assert (mean, n) == (pytest.approx(0.0), 2)
    assert se == pytest.approx(0.1 / 2**0.5 / 2**0.5)  # sd of (-0.05, +0.05) with ddof 1, over sqrt(2)


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
