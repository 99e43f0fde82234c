"""experiment=scaling's cells in zoo.report, on a synthetic study (results.json with each cell's points, as
zoo.run.scaling_cell writes): the table gives each cell its largest budget's loss, the significance section leaves
cells of different sizes unranked, and the refit commands the Scaling section prints reproduce its intervals."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zoo.scaling.law import DERIVED, PARAMS

SIZES = {"s1": 2.5e4, "s2": 5.7e4, "s3": 1.56e5}
BUDGETS = (5, 10, 20)
ARCH = "decoder_only"
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
pytestmark = pytest.mark.e2e  # the report and the refit run in their own processes


def write_cell(root: Path, arch: str, size: str, seed: int, rng) -> list[dict]:
    """One cell's results.json (zoo.run.scaling_cell's record): a point per budget on a Chinchilla law with 0.3%
    noise, "final" the largest budget's loss. Returns its points."""
    N = SIZES[size]
    points = []
    for i, b in enumerate(BUDGETS):
        D = b * N
        loss = (1.2 + 60 / N**0.4 + 90 / D**0.35) * (1 + 0.003 * rng.standard_normal())
        points.append(
            {
                **{"arch": arch, "size": size, "seed": seed, "n_params": int(N), "tokens": int(D)},
                **{"flops": 6 * N * D, "loss": loss, "tokens_per_param": b, "steps": 10 * (i + 1)},
                **{"kind": "cooldown", "cooldown": 0.2, "seconds": 1.0},
            }
        )
    d = root / f"{arch}-{size}_seed{seed}"
    d.mkdir(parents=True)
    last = max(points, key=lambda p: p["steps"])
    record = {
        **{"status": "ok", "arch": arch, "arch_config": arch, "task": "lm", "dataset": "plays"},
        **{"objective": "causal_lm", "seed": seed, "overrides": [f"scaling.cell={size}_seed{seed}", f"+arch={arch}"]},
        **{"budget": {"kind": "steps", "value": last["steps"]}, "final": {"val/cont_loss": last["loss"]}, "best": {}},
        **{"params": int(N * 1.05), "params_non_embedding": int(N), "flops_per_token": 6 * N, "steps": last["steps"]},
        **{"cost": {"train_flops": last["flops"], "tokens": last["tokens"], "train_seconds": 3.0}},
        **{"wall_seconds": 4.0, "examples": None},
        "scaling": {"cell": f"{size}_seed{seed}", "size": size, "kind": "cooldown", "points": points},
    }
    (d / "results.json").write_text(json.dumps(record))
    return points


# the report of the study in its own process (OpenBLAS on one thread, as `python -m zoo.report` runs it), with 40
# resamples a fit (the CLI's least) and no figures; the fits it made written as JSON (ScalingFit.to_dict)
REPORT = """
import json, sys
from pathlib import Path
import zoo.report.scaling as section
import zoo.scaling.points as points
import zoo.scaling.study as study
from zoo.report.build import report
points.BOOTSTRAP = 40
section.scaling_plots = lambda *a, **k: []
real, kept = study.fit_families, {}
study.fit_families = lambda by_arch, *a: kept.setdefault("fits", real(by_arch, *a))
root = Path(sys.argv[1])
report(root, root / "out")
fits = {arch: fit.to_dict() for arch, fit in kept["fits"][0].items()}
(root / "fits.json").write_text(json.dumps(fits))
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """One family at three sizes, two seeds each, and its report. Returns (the report's folder, {size: [each seed's
    largest budget's loss]}, {arch: the report's fit as JSON})."""
    root = tmp_path_factory.mktemp("cells")
    rng = np.random.default_rng(0)
    last = {}
    for size in SIZES:
        for seed in (1, 2):
            last.setdefault(size, []).append(write_cell(root, ARCH, size, seed, rng)[-1]["loss"])
    (root / "plan.json").write_text("[]")
    r = subprocess.run([sys.executable, "-c", REPORT, str(root)], env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return root / "out", last, json.loads((root / "fits.json").read_text())


def test_the_table_gives_a_cell_its_largest_budgets_loss(study):
    """A size's seeds are one row: val/cont_loss, the mean over seeds of each cell's loss at its largest budget."""
    out, last, _ = study
    md = (out / "report.md").read_text()
    assert "no metric recorded" not in md
    for size, losses in last.items():
        row = f"| lm / {ARCH} scaling.cell={size} | plays | steps 30 | causal_lm | val/cont_loss | 2 | "
        assert row + f"{np.mean(losses):.4f} ± {np.std(losses, ddof=1):.4f} |" in md, size


def test_cells_of_different_sizes_are_not_ranked(study):
    """No ranking or p-value among cells (they differ in size on purpose); the section says where they are
    compared."""
    out, _, _ = study
    md = (out / "report.md").read_text()
    assert "Ranking (best first" not in md and "p-values," not in md
    assert "### lm\n\nexperiment=scaling's cells are not tested or ranked here" in md


def test_the_printed_refit_command_reproduces_the_reports_intervals(study, tmp_path):
    """The command the Scaling section prints, run as printed (its argv) in the report's folder, refits the family
    with the report's resamples: every value and 95% interval equal to the report's, to the last bit."""
    out, _, fits = study
    (cmd,) = re.findall(r"`(python -m zoo\.scaling fit [^`]+)`", (out / "report.md").read_text())
    argv = shlex.split(cmd)
    assert argv[:4] == ["python", "-m", "zoo.scaling", "fit"] and argv[-4:] == ["--bootstrap", "40", "--seed", "0"]
    r = subprocess.run(
        [sys.executable, *argv[1:], "--json", str(tmp_path / "fit.json")],
        cwd=out,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    cli, report_fit = json.loads((tmp_path / "fit.json").read_text()), fits[ARCH]
    assert cli["n_points"] == report_fit["n_points"] == len(SIZES) * 2 * len(BUDGETS)
    assert (cli["n_bootstrap"], cli["seed"]) == (40, 0)
    for k in (*PARAMS, *DERIVED):
        assert (cli[k]["value"], cli[k]["ci"]) == (report_fit[k]["value"], report_fit[k]["ci"]), k


def cell_design(folder: Path, seed: int, activation: str = "relu") -> None:
    """A cell.json beside a written cell's results.json: its trunk's config, as zoo.run.scaling_cell writes."""
    config = {"model.activation": activation, "model.d_model": 20, "seed": seed, "data.seed": seed}
    (folder / "cell.json").write_text(json.dumps({"arch": ARCH, "config": {**config, "scaling.cell": folder.name}}))


def test_two_studies_or_a_copied_cell_in_one_folder_are_refused(tmp_path):
    """The report never fits one law to two studies: a copy of a cell (the same points twice) and cells of one
    family and size under two designs (another study below the folder) are each refused in one line, exit 2,
    naming both folders; cells that differ in their seed alone are one design."""
    from zoo.report.build import main as report_main
    from zoo.report.runs import find_runs
    from zoo.report.scaling_points import scaling_points

    rng = np.random.default_rng(0)
    for seed in (1, 2):
        write_cell(tmp_path / "a", ARCH, "s1", seed, rng)
        cell_design(tmp_path / "a" / f"{ARCH}-s1_seed{seed}", seed)
    assert len(scaling_points(find_runs(tmp_path / "a"))) == 6
    write_cell(tmp_path / "a" / "gelu", ARCH, "s1", 3, rng)
    cell_design(tmp_path / "a" / "gelu" / f"{ARCH}-s1_seed3", 3, activation="gelu")
    r = subprocess.run(
        [sys.executable, "-m", "zoo.report", str(tmp_path / "a")], env=ENV, capture_output=True, text=True
    )
    assert r.returncode == 2 and "under two designs (model.activation differ)" in r.stderr, r.stderr[-2000:]
    assert "gelu" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "a" / "gelu" / f"{ARCH}-s1_seed3").rename(tmp_path / "elsewhere")
    (tmp_path / "a" / f"{ARCH}-s1_seed1").rename(tmp_path / "a" / f"{ARCH}-s1_seed1.bak")
    write_cell(tmp_path / "a", ARCH, "s1", 1, rng)
    cell_design(tmp_path / "a" / f"{ARCH}-s1_seed1", 1)
    assert report_main([str(tmp_path / "a")]) == 2
    with pytest.raises(ValueError, match=r"seed1(\.bak)? and .*seed1(\.bak)? give the same point .* move the copy"):
        scaling_points(find_runs(tmp_path / "a"))


def test_a_cell_not_finished_is_named_not_dropped_in_silence(tmp_path):
    """A cell folder whose results.json is missing (killed before its last write) is left out of the fit, and
    report.md says so, naming it; with every cell finished there is no such line."""
    from zoo.report.build import main as report_main

    rng = np.random.default_rng(0)
    header = "arch,size,seed,n_params,tokens,flops,loss,steps"
    for seed in (1, 2):
        rows = [",".join(str(p[k]) for k in header.split(",")) for p in write_cell(tmp_path, ARCH, "s1", seed, rng)]
        cell_design(tmp_path / f"{ARCH}-s1_seed{seed}", seed)
        (tmp_path / f"{ARCH}-s1_seed{seed}" / "points.csv").write_text("\n".join([header, *rows]) + "\n")
    assert report_main([str(tmp_path)]) == 0
    assert "not finished" not in (tmp_path / "report.md").read_text()
    cut = tmp_path / f"{ARCH}-s1_seed3"
    cut.mkdir()
    cell_design(cut, 3)
    (cut / "points.csv").write_text(f"{header}\n{ARCH},s1,3,25000,125000,1.9e10,2.1,10\n")
    assert report_main([str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    assert f"**1 scaling cell(s) not finished** (still training, or cut off): {ARCH}-s1_seed3." in md
