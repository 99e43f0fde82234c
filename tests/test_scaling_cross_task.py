"""The cross-task table (`python -m zoo.scaling cross LM.csv TRANSLATION.csv`, zoo.scaling.cross_task) on two
synthetic studies drawn from known laws: each family's alpha and beta recovered, k(C*) on the right side of 1, and
the ranking at equal compute told the same or not."""

import csv
from types import SimpleNamespace

import numpy as np
import pytest

from zoo.scaling.__main__ import main
from zoo.scaling.cross_task import cross_task_lines, ranking_lines
from zoo.scaling.frontier import Frontier
from zoo.scaling.points import read_points_csv

HEADER = ("arch", "size", "seed", "n_params", "tokens", "flops", "loss", "lr")
SIZES = {"s1": 1.0e4, "s2": 2.5e4, "s3": 6.0e4, "s4": 1.4e5, "s5": 3.0e5}
BUDGETS = (5, 10, 20, 40)
LAWS = {  # task -> (E, A, B, alpha, beta)
    "lm": (1.2, 60.0, 90.0, 0.40, 0.35),
    "translation": (0.9, 30.0, 120.0, 0.30, 0.45),
}


def write_study(path, task: str, families: dict, seed: int = 0) -> None:
    """points.csv of a study: families {arch: (FLOPs per token / 6 N, tokens per useful token)}, 2 seeds a size,
    each loss the task's law at (N, D / slow) x (1 + 0.1% noise)."""
    E, A, B, alpha, beta = LAWS[task]
    rng = np.random.default_rng(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for arch, (cost, slow) in families.items():
            for size, N in SIZES.items():
                for s in (1, 2):
                    for b in BUDGETS:
                        D = b * N
                        loss = (E + A / N**alpha + B / (D / slow) ** beta) * (1 + 0.001 * rng.standard_normal())
                        w.writerow([arch, size, s, int(N), int(D), 6 * cost * N * D, f"{loss:.6f}", 0.01])


def cross(tmp_path, capsys, lm: dict, translation: dict) -> str:
    write_study(tmp_path / "lm.csv", "lm", lm)
    write_study(tmp_path / "tr.csv", "translation", translation, seed=1)
    argv = ["cross", str(tmp_path / "lm.csv"), str(tmp_path / "tr.csv"), "--bootstrap", "40"]
    assert main([*argv, "--unique-tokens", "1e12", "1e12"]) == 0
    return capsys.readouterr().out


def row(out: str, arch: str, task: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.startswith(f"| {arch} | {task} |"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.slow
def test_each_familys_exponents_and_multiplier_per_task(tmp_path, capsys):
    """alpha and beta within 0.03 of each task's law; encoder_decoder at half the FLOPs a token and as good a
    learner needs about half decoder_only's compute (k < 1), prefix_lm, 1.5x slower to learn, more (k > 1)."""
    families = {"decoder_only": (1.0, 1.0), "encoder_decoder": (0.5, 1.0), "prefix_lm": (1.0, 1.5)}
    out = cross(tmp_path, capsys, families, families)
    for task, (_, _, _, alpha, beta) in LAWS.items():
        task_name = "language modelling" if task == "lm" else task
        for arch in families:
            cells = row(out, arch, task_name)
            assert abs(float(cells[3].split()[0]) - alpha) < 0.03 and abs(float(cells[4].split()[0]) - beta) < 0.03
        assert row(out, "decoder_only", task_name)[5] == "1 (the reference)"
        assert float(row(out, "encoder_decoder", task_name)[5].split()[0]) < 0.8
        assert float(row(out, "prefix_lm", task_name)[5].split()[0]) > 1.2
    assert "The same ranking on every task, of decoder_only, encoder_decoder, prefix_lm: yes." in out
    lm_rank = next(x for x in out.splitlines() if x.startswith("- language modelling (C = "))
    assert lm_rank.index("encoder_decoder") < lm_rank.index("decoder_only") < lm_rank.index("prefix_lm")


def frontier_study(path, task: str, families: dict) -> SimpleNamespace:
    """The parts of a Study the ranking reads: by_arch and zoo's compute frontiers (40 resamples)."""
    write_study(path, task, families)
    by_arch = {}
    for p in read_points_csv(path):
        by_arch.setdefault(p["arch"], []).append(p)
    return SimpleNamespace(by_arch=by_arch, frontiers={"C": {a: Frontier(pts, 40) for a, pts in by_arch.items()}})


def test_a_ranking_that_flips_between_tasks_is_told(tmp_path):
    """encoder_decoder at half decoder_only's FLOPs a token ranks first on LM; at twice them on translation it
    ranks after decoder_only there: not the same ranking."""
    lm = frontier_study(tmp_path / "lm.csv", "lm", {"decoder_only": (1.0, 1.0), "encoder_decoder": (0.5, 1.0)})
    tr = {"decoder_only": (1.0, 1.0), "encoder_decoder": (2.0, 1.0)}
    lines = ranking_lines(
        {"language modelling": lm, "translation": frontier_study(tmp_path / "tr.csv", "translation", tr)}
    )
    assert lines[-1] == (
        "The same ranking on every task, of decoder_only, encoder_decoder: no (language modelling: encoder_decoder "
        "< decoder_only; translation: decoder_only < encoder_decoder)."
    )
    C = min(max(p["C"] for p in pts) for pts in lm.by_arch.values())  # encoder_decoder's largest: 0.5 x 6 N D
    assert C == 0.5 * 6 * 3.0e5 * 40 * 3.0e5 and lines[2].startswith(
        f"- language modelling (C = {C:.3g}): encoder_decoder "
    )
    same = ranking_lines({"a": lm, "b": lm})
    assert same[-1] == "The same ranking on every task, of decoder_only, encoder_decoder: yes."


def test_families_not_told_apart_on_one_task_are_no_verdict(tmp_path):
    """On translation two families with one cost and one law overlap at equal compute (≈): the verdict is "cannot
    tell", naming them, not an order read from the point estimates; told apart on LM alone, nothing is flipped."""
    lm = frontier_study(tmp_path / "lm.csv", "lm", {"decoder_only": (1.0, 1.0), "encoder_decoder": (0.5, 1.0)})
    tr = {"decoder_only": (1.0, 1.0), "encoder_decoder": (1.0, 1.0)}
    lines = ranking_lines(
        {"language modelling": lm, "translation": frontier_study(tmp_path / "tr.csv", "translation", tr)}
    )
    assert " ≈ " in lines[3] and lines[-1].startswith(
        "The same ranking on every task, of decoder_only, encoder_decoder: cannot tell (not told apart: translation: "
    )
    assert "the pairs told apart are in one order on every task)." in lines[-1]


def fit(alpha: float, beta: float, half: float) -> SimpleNamespace:
    values = {"E": 1.0, "A": 10.0, "B": 10.0, "alpha": alpha, "beta": beta, "a": 0.5, "b": 0.5, "G": 1.0}
    return SimpleNamespace(values=values, ci={k: (v - half, v + half) for k, v in values.items()})


def test_the_table_widens_each_interval_by_its_birge_ratio(tmp_path):
    """alpha 0.40 [0.37, 0.43] under a Birge ratio of 2 is quoted 0.4 [0.34, 0.46]; a law that failed a gate says
    so; the reference's k is 1."""
    base = frontier_study(tmp_path / "lm.csv", "lm", {"decoder_only": (1.0, 1.0), "encoder_decoder": (0.5, 1.0)})
    study = SimpleNamespace(
        **vars(base),
        fits={"decoder_only": fit(0.40, 0.35, 0.03), "encoder_decoder": fit(0.30, 0.25, 0.01)},
        birge={"decoder_only": 2.0},
        verdicts={"decoder_only": {"trusted": True}, "encoder_decoder": {"trusted": False}},
    )
    lines = cross_task_lines({"language modelling": study})
    assert (
        "| decoder_only | language modelling | passed | 0.4 [0.34, 0.46] | 0.35 [0.29, 0.41] | 1 (the reference) |"
        in lines
    )
    row = next(x for x in lines if x.startswith("| encoder_decoder | language modelling | FAILED | 0.3 [0.29, 0.31] |"))
    k = float(row.split("|")[6].split()[0])
    assert 0.3 < k < 0.8  # half the FLOPs a token for the same loss: about half the compute


def test_a_bad_file_exits_2_naming_it(tmp_path, capsys):
    (tmp_path / "lm.csv").write_text("arch,size\n", encoding="utf-8")
    assert main(["cross", str(tmp_path / "lm.csv"), str(tmp_path / "lm.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo.scaling: error: ") and "lm.csv: no column 'seed'" in err and err.count("\n") == 1


def test_the_same_file_twice_or_a_bad_second_file_is_refused_before_any_fit(tmp_path, capsys, monkeypatch):
    """cross reads and checks both CSVs before fitting either: a missing second file, or one file given as both
    studies, is one line (exit 2) and no fit runs."""
    import zoo.scaling.cross_task as cross_task

    write_study(tmp_path / "lm.csv", "lm", {"decoder_only": (1.0, 1.0)})
    monkeypatch.setattr(cross_task, "analyse", lambda *a, **k: pytest.fail("a fit ran"))
    assert main(["cross", str(tmp_path / "lm.csv"), str(tmp_path / "none.csv")]) == 2
    assert "none.csv" in capsys.readouterr().err
    assert main(["cross", str(tmp_path / "lm.csv"), str(tmp_path / "lm.csv")]) == 2
    assert "hold the same points" in capsys.readouterr().err


def test_two_studies_given_swapped_are_refused_by_their_design_records(tmp_path, capsys, monkeypatch):
    """Each study's folder holds the lr_sweep.design.json that zoo.report wrote for the committed studies (the LM
    study's names zoo.tasks.lm.LanguageModeling, the translation study's zoo.tasks.translation.Translation): given
    translation first, `cross` exits 2 naming the file and its task, before any fit; in order the check passes; a
    folder without a record is not judged."""
    from pathlib import Path

    from zoo.scaling import cross_task

    root = Path(__file__).resolve().parents[1] / "experiments"
    for task, study in (("lm", "scaling"), ("tr", "scaling_translation")):
        (tmp_path / task).mkdir()
        write_study(tmp_path / task / "points.csv", "lm" if task == "lm" else "translation", {"decoder_only": (1, 1)})
        (tmp_path / task / "lr_sweep.design.json").write_text((root / study / "lr_sweep.design.json").read_text())
    lm, tr = str(tmp_path / "lm" / "points.csv"), str(tmp_path / "tr" / "points.csv")
    assert (cross_task.recorded_task(lm), cross_task.recorded_task(tr)) == ("language modelling", "translation")
    monkeypatch.setattr(cross_task, "analyse", lambda *a, **k: pytest.fail("a fit ran"))
    assert main(["cross", tr, lm]) == 2
    err = capsys.readouterr().err
    assert "tr/points.csv is a translation study" in err and "given as the language modelling one" in err

    def fitted(*a, **k):
        raise cross_task.ScalingError("reached the fits")

    monkeypatch.setattr(cross_task, "analyse", fitted)
    assert main(["cross", lm, tr]) == 2 and "reached the fits" in capsys.readouterr().err
    (tmp_path / "tr" / "lr_sweep.design.json").unlink()
    assert cross_task.recorded_task(tr) is None
    assert main(["cross", tr, lm]) == 2 and "lm/points.csv is a language modelling study" in capsys.readouterr().err
