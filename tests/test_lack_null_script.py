"""experiments/bench_scripts/lack_null.py: the lack-of-fit gate against a true law whose runs keep their deviation
vectors, on synthetic studies of the record's design drawn from a known law (test_form_script.study)."""

import sys

import numpy as np
import pytest
from test_form_script import study
from zoo_run import REPO, bench_script

from zoo.scaling.law import scaling_law

TRUTH = (1.2, 3.0, 60.0, 0.3, 0.45)  # E, A, B, alpha, beta


@pytest.fixture(scope="module")
def lack():
    sys.path.insert(0, str(REPO / "experiments" / "bench_scripts"))  # it imports scaling_form as the CLI does
    return bench_script("lack_null")


@pytest.mark.slow  # 80 replicates' fits: -m slow
def test_a_law_that_holds_is_inside_its_null_and_a_shifted_size_is_beyond_it(lack, tmp_path):
    """On Chinchilla's law (0.2% noise, 4 seeds) the observed chi2/dof lies inside the replicates' range (P >= 0.05)
    and at most a fifth of 40 replicates exceed the F bound; with s3's losses 1% higher (a size off the N curve)
    the observed chi2/dof is beyond every replicate, whose own losses follow the law fitted to it and scatter."""
    points = study(tmp_path, lambda N, D: scaling_law(N, D, *TRUTH))
    holds = lack.lack_null("chinchilla", points, reps=40)
    assert holds["p"] >= 0.05 and holds["over"] <= 8 and len(holds["ratios"]) == 40
    assert holds["observed"] < holds["limit"] and np.all(np.isfinite(holds["ratios"]))
    shifted = [p | {"loss": p["loss"] * 1.01} if p["size"] == "s3" else p for p in points]
    off = lack.lack_null("chinchilla", shifted, reps=40)
    assert off["observed"] > 3 * off["limit"] and off["p"] == 0.0
    assert np.median(off["ratios"]) < off["limit"] and np.std(off["ratios"]) > 0.1  # replicates of the fitted law


def test_the_cli_prints_each_family_and_refuses_bad_arguments(lack, tmp_path, capsys):
    study(tmp_path, lambda N, D: scaling_law(N, D, *TRUTH))
    lack.main([str(tmp_path / "points.csv"), "--reps", "5"])
    out = capsys.readouterr().out
    assert out.startswith("decoder_only (chinchilla): chi2/dof ") and "over the bound" in out and "of 5; P = " in out
    for args, said in ((["--reps", "0"], "give 1 or more replicates"), (["--arch", "gpt"], "'gpt' is not in")):
        with pytest.raises(SystemExit):
            lack.main([str(tmp_path / "points.csv"), *args])
        assert said in capsys.readouterr().err
