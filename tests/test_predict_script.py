"""experiments/bench_scripts/scaling_predict.py: a law fitted on some sizes predicting a size it has not seen, on
synthetic studies of the record's design drawn from a known law (test_form_script.study)."""

import sys

import pytest
from test_form_script import study
from zoo_run import REPO, bench_script

from zoo.scaling.coupled import coupled_law

TRUTH = (1.2, 3.0, 40.0, 0.3, 0.45, 0.12)  # E, A, B, alpha, beta, g


@pytest.fixture(scope="module")
def predict():
    sys.path.insert(0, str(REPO / "experiments" / "bench_scripts"))  # it imports scaling_form as the CLI does
    return bench_script("scaling_predict")


def split(tmp_path, scale: float = 1.0):
    """s1-s4 to fit, s5 to predict (its losses times `scale`), from one study of the coupled law at 0.2% noise."""
    points = study(tmp_path, lambda N, D: coupled_law(N, D, *TRUTH))
    fit = [p for p in points if p["size"] != "s5"]
    new = [p | {"loss": p["loss"] * scale} for p in points if p["size"] == "s5"]
    return fit, new


def test_the_law_predicts_an_unseen_size_within_its_noise(predict, tmp_path):
    fit, new = split(tmp_path)
    got = predict.predict_cells("coupled", fit, new, n_boot=20)
    assert len(got["cells"]) == 3 and got["passes"] and got["worst"] < 0.005
    for c in got["cells"]:  # the prediction is the true law's value at the cell's tokens, to the fit's accuracy
        assert c["predicted"] == pytest.approx(float(coupled_law(c["N"], c["D"], *TRUTH)), rel=0.005)
        assert c["lo"] <= c["predicted"] <= c["hi"] and c["inside"]


def test_a_size_5_percent_above_the_law_fails_and_leaves_the_band(predict, tmp_path):
    fit, new = split(tmp_path, scale=1.05)
    got = predict.predict_cells("coupled", fit, new, n_boot=20)
    assert not got["passes"] and got["mean"] == pytest.approx(1 / 1.05 - 1, abs=0.005)
    assert not any(c["inside"] for c in got["cells"])


def test_new_points_of_a_size_the_fit_holds_are_refused(predict, tmp_path, capsys):
    study(tmp_path, lambda N, D: coupled_law(N, D, *TRUTH))
    path = str(tmp_path / "points.csv")
    with pytest.raises(SystemExit):
        predict.main([path, path])
    assert "has sizes the fit already holds" in capsys.readouterr().err
