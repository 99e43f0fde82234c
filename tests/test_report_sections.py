"""zoo.report's sections: a comparison of models whose parameter counts differ by more than 10% says so, naming
experiment=compare; a report prints only sections with content (no Scaling section for a comparison in which no
architecture has runs of two sizes)."""

import json

import numpy as np
import test_report_scaling
from test_report_scaling import SIZES

from zoo.report.build import report


def write_run(root, arch, N, seed, rng):
    """test_report_scaling's run of `arch` at N non-embedding parameters (params 1.05 N), as a plain
    `+arch=...` command line records it (no scaling cell swept)."""
    test_report_scaling.write_run(root, arch, N, seed, rng)
    path = root / f"{arch}-N{int(N)}_seed{seed}" / "results.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "overrides": [f"+arch={arch}", f"seed={seed}"]}))


def test_a_report_ranking_unequal_models_warns(tmp_path):
    """decoder_only at N and encoder_only at 2.5 N (e.g. +arch=... without experiment=compare): the report names
    both counts and experiment=compare; models within 10% of each other get no such line."""
    rng = np.random.default_rng(0)
    write_run(tmp_path / "a", "decoder_only", SIZES[0], 1, rng)
    write_run(tmp_path / "a", "encoder_only", SIZES[1], 1, rng)
    text = report(tmp_path / "a")["report"].read_text()
    line = next(x for x in text.splitlines() if "parameter counts differ" in x)
    assert "21,000" in line and "52,500" in line and "experiment=compare" in line  # params = 1.05 N
    write_run(tmp_path / "b", "decoder_only", SIZES[0], 1, rng)
    write_run(tmp_path / "b", "encoder_only", SIZES[0] * 1.09, 1, rng)  # 9% apart: matched
    assert "parameter counts differ" not in report(tmp_path / "b")["report"].read_text()


def test_a_comparison_without_a_size_sweep_has_no_scaling_section(tmp_path):
    """Each architecture at one size (a comparison): no Scaling heading, no empty table, no "Figures:" line and no
    "too few points" warnings."""
    rng = np.random.default_rng(1)
    write_run(tmp_path, "decoder_only", SIZES[0], 1, rng)
    write_run(tmp_path, "encoder_only", SIZES[1], 1, rng)
    out = report(tmp_path)
    text = out["report"].read_text()
    assert "## Scaling" not in text and "Figures:" not in text and "too few" not in text and out["scaling"] == []
