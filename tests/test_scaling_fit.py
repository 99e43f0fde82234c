"""zoo.scaling: the Chinchilla law's fit (Huber on log L, L-BFGS-B from Hoffmann's grid), its bootstrap intervals,
the compute-optimal allocation, the CLI and its refusals.

Fits with many bootstrap resamples run in a subprocess: scipy >= 1.15's L-BFGS-B is 10-30x slower with OpenBLAS
threads (scipy issue #22438), and OPENBLAS_NUM_THREADS only takes effect before numpy loads.
"""

import csv
import gzip
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import approx_fprime, minimize_scalar
from scipy.special import huber

from zoo.scaling import bootstrap as B
from zoo.scaling import fit as F
from zoo.scaling import huber as H
from zoo.scaling import law
from zoo.scaling.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
CHINCHILLA = "chinchilla_epoch/svg_extracted_data.csv"
# Besiroglu et al. 2024 (arXiv 2404.10102), 240 points (5 highest losses dropped): the fit and 95% intervals
EPOCH_FIT = {"E": 1.817, "A": 478.0, "B": 2143.0, "alpha": 0.347, "beta": 0.367}
EPOCH_CI = {"E": (1.769, 1.871), "alpha": (0.317, 0.373), "beta": (0.331, 0.415)}
# synthetic truth for coverage and recovery: Epoch's fit, on a design like zoo's (4 sizes over 16x, 4 budgets each)
TRUE = {"E": 1.82, "A": 478.0, "B": 2143.0, "alpha": 0.347, "beta": 0.367}


def design(tokens_per_param=(5, 10, 20, 40)):
    """4 model sizes spanning 16x (1M-16M parameters) x the given tokens per parameter: (N, D) of each point."""
    n, r = np.meshgrid(1e6 * np.geomspace(1, 16, 4), np.asarray(tokens_per_param, dtype=float))
    return n.ravel(), (n * r).ravel()


def true_loss(N, D):
    return law.scaling_law(N, D, *(TRUE[k] for k in law.PARAMS))


def _coverage(reps: int, bootstrap: int, sigma: float = 0.01, seed: int = 0, **fit_kw) -> dict:
    """Fit `reps` synthetic data sets (design(), multiplicative log-normal noise `sigma`); how often each
    percentile interval holds the true value, and the median interval widths. fit_kw go to fit_scaling_law."""
    N, D = design()
    rng = np.random.default_rng(seed)
    hits, widths = [], []
    for r in range(reps):
        L = true_loss(N, D) * np.exp(sigma * rng.standard_normal(len(N)))
        fit = F.fit_scaling_law(N, D, L, bootstrap=bootstrap, seed=r, **fit_kw)
        hits.append([fit.ci[k][0] <= TRUE[k] <= fit.ci[k][1] for k in ("alpha", "beta", "E")])
        widths.append([fit.ci[k][1] - fit.ci[k][0] for k in ("alpha", "beta")])
    h = np.mean(hits, axis=0)
    return {"alpha": h[0], "beta": h[1], "E": h[2], "width": np.median(widths, axis=0).tolist(), "reps": reps}


def _one_thread_env():
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def _in_subprocess(expr: str):
    """Evaluate `expr` (JSON-able) in a fresh interpreter with this module imported as t and one OpenBLAS thread."""
    code = f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_scaling_fit as t; "
    code += f"print(json.dumps({expr}))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_one_thread_env(), capture_output=True, text=True, timeout=1200
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


# --- the objective ------------------------------------------------------------------------------------------------


def _reference_objective(theta, N, D, L, w):
    """Sum_i w_i huber_delta(LSE(a - alpha log N, b - beta log D, e) - log L), from scipy.special.huber."""
    a, b, e, alpha, beta = theta
    pred = np.logaddexp.reduce([a - alpha * np.log(N), b - beta * np.log(D), np.full(len(N), e)], axis=0)
    return float(w @ huber(H.DELTA, pred - np.log(L)))


def test_objective_is_the_summed_huber_of_log_residuals_and_its_gradient_is_exact():
    N, D = design()
    # at the truth, half the log residuals lie inside delta = 1e-3 (quadratic) and half outside (linear)
    noise = np.where(np.arange(len(N)) % 2, 5e-4, 2e-2) * np.where(np.arange(len(N)) % 4 < 2, 1, -1)
    L = true_loss(N, D) * np.exp(noise)
    problem = H.HuberProblem(N, D, L)
    w = np.random.default_rng(1).integers(0, 3, len(N)).astype(float)
    truth = [np.log(TRUE["A"]), np.log(TRUE["B"]), np.log(TRUE["E"]), TRUE["alpha"], TRUE["beta"]]
    for theta in (truth, [6.0, 7.5, 0.6, 0.3, 0.4], [1, 2, 0, 0.1, 0.9]):
        u = problem.to_u(np.array(theta, dtype=float))
        f, g = problem.value_and_grad(u, w)
        assert f * H.DELTA == pytest.approx(_reference_objective(theta, N, D, L, w), rel=1e-12)
        assert problem.values(u[None, :], w)[0] == pytest.approx(f, rel=1e-12)
        numeric = approx_fprime(u, lambda v: problem.value_and_grad(v, w)[0], 1e-8)
        np.testing.assert_allclose(g, numeric, rtol=1e-4, atol=1e-4 * np.abs(g).max())
        np.testing.assert_allclose(problem.to_theta(u), theta, atol=1e-12)


def _noise_free_fit() -> dict:
    N, D = design((2, 5, 10, 20, 40, 80))
    fit = F.fit_scaling_law(N, D, true_loss(N, D), bootstrap=0)
    err = float(np.max(np.abs(fit.predict(N, D) / true_loss(N, D) - 1)))
    return {"values": fit.values, "ci": fit.ci["alpha"], "samples": fit.samples.shape, "predict_err": err}


def test_fit_recovers_the_parameters_of_noise_free_data():
    fit = _in_subprocess("t._noise_free_fit()")
    for k, v in TRUE.items():
        assert fit["values"][k] == pytest.approx(v, rel=1e-4), k
    assert fit["values"]["a"] == pytest.approx(TRUE["beta"] / (TRUE["alpha"] + TRUE["beta"]), rel=1e-4)
    assert fit["ci"] is None and fit["samples"] == [0, 5] and fit["predict_err"] < 1e-6


# --- compute-optimal allocation -----------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [TRUE, {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}])
def test_compute_optimal_allocation_minimises_the_law_at_fixed_compute(params):
    p = [params[k] for k in law.PARAMS]
    C = np.array([1e15, 1e18, 1e21, 1e24])
    n_opt, d_opt, l_star = law.compute_optimal(C, *p)
    np.testing.assert_allclose(6 * n_opt * d_opt, C, rtol=1e-12)
    np.testing.assert_allclose(l_star, law.scaling_law(n_opt, d_opt, *p), rtol=1e-12)
    for c, n in zip(C, n_opt):
        # numerical minimum of L(N, C / 6N) over log N
        res = minimize_scalar(lambda x: law.scaling_law(np.exp(x), c / (6 * np.exp(x)), *p), bracket=(0, 60), tol=1e-12)
        assert np.exp(res.x) == pytest.approx(n, rel=1e-4)
    a, b = law.allocation_exponents(params["alpha"], params["beta"])
    assert a + b == pytest.approx(1.0)
    assert n_opt[1] / n_opt[0] == pytest.approx(1e3**a, rel=1e-10)  # N_opt ∝ C^a
    assert d_opt[1] / d_opt[0] == pytest.approx(1e3**b, rel=1e-10)
    assert all(np.isnan(v) for v in law.compute_optimal(1e20, 1.8, 400.0, 400.0, -0.1, 0.3))  # alpha < 0: no optimum


# --- the bootstrap ------------------------------------------------------------------------------------------------


def _seeded_fits() -> dict:
    N, D = design()
    L = true_loss(N, D) * np.exp(0.01 * np.random.default_rng(3).standard_normal(len(N)))
    fits = [F.fit_scaling_law(N, D, L, bootstrap=8, seed=seed) for seed in (7, 7, 8)]
    return {"samples": [f.samples.tolist() for f in fits], "alpha": fits[0].values["alpha"], "ci": fits[0].ci["alpha"]}


def test_bootstrap_is_deterministic_given_the_seed_and_resamples_whole_points():
    fits = _in_subprocess("t._seeded_fits()")
    one, two, other = (np.array(s) for s in fits["samples"])
    np.testing.assert_array_equal(one, two)
    assert one.shape == (8, 5) and not np.array_equal(one, other)
    # every resample moved away from the full-data fit (a stuck optimiser gives the fit back: intervals collapse)
    assert np.all(np.abs(one[:, 3] - fits["alpha"]) > 1e-9)
    lo, hi = np.percentile(one, [2.5, 97.5], axis=0)
    assert fits["ci"] == pytest.approx([lo[3], hi[3]])


def test_an_optimiser_that_stops_where_it_starts_is_refused(monkeypatch):
    N, D = design()
    L = true_loss(N, D) * np.exp(0.01 * np.random.default_rng(3).standard_normal(len(N)))
    real = H.HuberProblem.minimize

    def stuck(self, u0, w):
        if np.all(w == 1):  # the full-data fit runs; each resample's optimiser "stops at its start"
            return real(self, u0, w)
        return u0, self.value_and_grad(u0, w)[0], False, None

    monkeypatch.setattr(H.HuberProblem, "minimize", stuck)
    with pytest.raises(RuntimeError, match="stopped where it started on 4 of 4 resamples"):
        F.fit_scaling_law(N, D, L, bootstrap=4, seed=0, n_starts=1)


def test_epoch_replication_of_chinchilla_fit_and_intervals(shared_data, tmp_path):
    """The published reproduction: Besiroglu et al. 2024 on Chinchilla's 245 points, 5 highest losses dropped."""
    out = tmp_path / "fit.json"
    args = ["fit", str(shared_data / CHINCHILLA), "--params", "Model Size", "--flops", "Training FLOP"]
    args += ["--loss", "loss", "--drop-highest", "5", "--json", str(out)]  # --bootstrap 1000 --seed 0: defaults
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "zoo.scaling", *args], cwd=ROOT, env=_one_thread_env(), capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    assert run.returncode == 0, run.stderr
    fit = json.loads(out.read_text())
    assert fit["n_points"] == 240 and fit["n_bootstrap"] == 1000 and len(fit["data"]["dropped"]) == 5
    for k in ("E", "alpha", "beta"):
        assert abs(fit[k]["value"] - EPOCH_FIT[k]) <= 0.002, (k, fit[k])
        for got, published in zip(fit[k]["ci"], EPOCH_CI[k]):
            assert abs(got - published) <= 0.015, (k, fit[k]["ci"], EPOCH_CI[k])
    for k in ("A", "B"):
        assert fit[k]["value"] == pytest.approx(EPOCH_FIT[k], rel=0.01), k
    a = fit["beta"]["value"] / (fit["alpha"]["value"] + fit["beta"]["value"])
    assert fit["a"]["value"] == pytest.approx(a) and fit["a"]["ci"][0] < a < fit["a"]["ci"][1]
    frontier = fit["frontier"]
    assert frontier["C"][0] == 1e18 and frontier["C"][-1] == 1e23  # the decades the points' 6ND span
    assert all(lo < v < hi for v, (lo, hi) in zip(frontier["loss"]["value"], frontier["loss"]["ci"]))
    assert "alpha" in run.stdout and "L*(C)" in run.stdout
    print(f"Epoch replication: {seconds:.1f} s wall")


def test_bootstrap_intervals_cover_the_truth_fast():
    """A quick coverage check (fewer starts and resamples than the defaults): intervals that collapse (a stuck
    optimiser) almost never hold the truth; 95% ones do 8+ times in 10."""
    cov = _in_subprocess("t._coverage(10, 40, seed=1, n_starts=5, bootstrap_starts=0)")
    print(cov)
    assert cov["alpha"] >= 0.8 and cov["beta"] >= 0.8, cov


@pytest.mark.slow
def test_bootstrap_intervals_cover_the_truth():
    """Over 50 synthetic data sets (16 points, 1% noise), the 95% intervals hold the true alpha and beta >= 90%."""
    cov = _in_subprocess("t._coverage(50, 200, seed=2)")
    print(cov)
    assert cov["alpha"] >= 0.9 and cov["beta"] >= 0.9, cov


# --- the CLI and its refusals -------------------------------------------------------------------------------------


def _points(n=8):
    N, D = design()
    L = true_loss(N, D)
    return [(f"{a:.6g}", f"{b:.6g}", f"{6 * a * b:.6g}", f"{c:.6g}") for a, b, c in zip(N[:n], D[:n], L[:n])]


HEADER = ["params", "tokens", "flops", "loss"]


@pytest.fixture
def no_fitting(monkeypatch):
    """Any optimiser call fails: a refusal must come before fitting."""

    def refuse(*a, **k):
        raise AssertionError("fitting started")

    monkeypatch.setattr(H.HuberProblem, "minimize", refuse)


def _refused(capsys, argv) -> str:
    with pytest.raises(SystemExit) as e:
        sys.exit(main(argv))
    assert e.value.code == 2
    return capsys.readouterr().err


def test_cli_tokens_and_flops_give_the_same_fit(tmp_path):
    path = _write_csv(tmp_path / "runs.csv", HEADER, _points(16))
    outs = []
    for flag in (["--tokens", "tokens"], ["--flops", "flops"]):
        out = tmp_path / f"{flag[1]}.json"
        argv = ["fit", str(path), "--params", "params", *flag, "--loss", "loss", "--bootstrap", "0", "--json", str(out)]
        run = subprocess.run([sys.executable, "-m", "zoo.scaling", *argv], cwd=ROOT, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert "E " in run.stdout and "L*(C)" in run.stdout
        outs.append(json.loads(out.read_text()))
    for k in law.PARAMS:
        assert outs[0][k]["value"] == pytest.approx(outs[1][k]["value"], rel=1e-4)
        assert outs[0][k]["value"] == pytest.approx(TRUE[k], rel=1e-3)
        assert outs[0][k]["ci"] is None
    assert outs[0]["n_points"] == 16


@pytest.mark.parametrize(
    "edit, expected",
    [
        ({"column": "Params"}, r"no column --params 'Params'; the columns are: 'params', 'tokens', 'flops', 'loss'"),
        ({"row": 2, "col": 0, "value": "0"}, "line 4: column 'params' (--params) = '0'"),
        ({"row": 0, "col": 1, "value": "-5e7"}, "line 2: column 'tokens' (--tokens) = '-5e7'"),
        ({"row": 5, "col": 3, "value": "-1"}, "line 7: column 'loss' (--loss) = '-1'"),
        ({"row": 1, "col": 3, "value": "nan"}, "line 3: column 'loss' (--loss) = 'nan'"),
        ({"row": 3, "col": 3, "value": ""}, "line 5: column 'loss' (--loss) = ''"),
        ({"row": 4, "col": 2, "value": "0", "flops": True}, "line 6: column 'flops' (--flops) = '0'"),
    ],
)
def test_cli_refuses_bad_columns_and_values_naming_the_row(tmp_path, capsys, no_fitting, edit, expected):
    rows = [list(r) for r in _points(8)]
    if "row" in edit:
        rows[edit["row"]][edit["col"]] = edit["value"]
    path = _write_csv(tmp_path / "runs.csv", HEADER, rows)
    which = ["--flops", "flops"] if edit.get("flops") else ["--tokens", "tokens"]
    err = _refused(capsys, ["fit", str(path), "--params", edit.get("column", "params"), *which, "--loss", "loss"])
    assert expected in err and str(path) in err, err


def test_one_size_or_one_token_count_is_refused_before_fitting(no_fitting):
    """Runs of one N (or one D) cannot separate A / N^alpha (B / D^beta) from E: refused, not fitted to a
    degenerate law (E = A = B = 1, alpha = beta = 0 with a note, before)."""
    N, D = [1e6] * 6, [1e7, 2e7, 4e7, 8e7, 1.6e8, 3.2e8]
    L = [3.0, 2.9, 2.8, 2.7, 2.6, 2.5]
    with pytest.raises(law.ScalingError, match=r"every point fitted has the same N \(parameters\) \(1e\+06\)"):
        law.check_points(N, D, L)
    with pytest.raises(law.ScalingError, match=r"same D \(tokens\) \(1e\+06\).*two sizes and two token counts"):
        law.check_points(D, N, L)
    # the highest loss dropped leaves one size: also refused
    with pytest.raises(law.ScalingError, match="same N"):
        law.check_points([2e6, *N[1:]], D, L, drop_highest=1)


def test_two_sizes_are_refused_by_the_cli_and_noted_by_the_fit(tmp_path, capsys, monkeypatch):
    """With 2 distinct N the points fix 2 values of E + A / N^alpha and its 3 unknowns trade off (an A interval up
    to 1e130 before): the CLI refuses in one line before fitting, with no numpy warning; fit_scaling_law notes it
    first. 3 sizes are accepted."""
    import warnings

    N, D = design()
    two = np.isin(N, np.unique(N)[:2])  # 8 points: 2 sizes x 4 budgets (8 distinct D)
    rows = [[repr(float(v)) for v in (a, b, 6 * a * b, c)] for a, b, c in zip(N[two], D[two], true_loss(N, D)[two])]
    path = _write_csv(tmp_path / "two.csv", HEADER, rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with monkeypatch.context() as m:
            m.setattr(H.HuberProblem, "minimize", lambda *a, **k: pytest.fail("fitting started"))
            err = _refused(capsys, ["fit", str(path), "--params", "params", "--tokens", "tokens", "--loss", "loss"])
    assert err.count("\n") == 1 and err.startswith(
        "zoo.scaling: error: only 2 distinct N among the points: the law's 5 parameters need at least 3 distinct N "
        "and 3 distinct D"
    ), err
    assert err.rstrip().endswith("so the fit cannot be trusted; add runs of another size")
    fit = F.fit_scaling_law(N[two], D[two], true_loss(N, D)[two], bootstrap=0, n_starts=2)
    assert fit.notes[0].startswith("only 2 distinct N among the points")
    three = np.isin(N, np.unique(N)[:3])
    assert law.underdetermined(N[three], D[three]) is None
    assert law.underdetermined(N, np.repeat(D[:2], 8)).startswith("only 2 distinct D among the points")


def test_cli_refuses_too_few_points_after_dropping(tmp_path, capsys, no_fitting):
    path = _write_csv(tmp_path / "runs.csv", HEADER, _points(7))
    base = ["fit", str(path), "--params", "params", "--tokens", "tokens", "--loss", "loss"]
    err = _refused(capsys, [*base, "--drop-highest", "3"])
    assert "4 point(s) left to fit (7 given, 3 highest dropped)" in err and "at least 5" in err
    assert "lower --drop-highest" in err
    assert "0 point(s) left" in _refused(capsys, [*base, "--drop-highest", "7"])
    assert "non-negative" in _refused(capsys, [*base, "--drop-highest", "-1"])
    assert "--seed -1: a seed is a non-negative integer" in _refused(capsys, [*base, "--seed", "-1"])
    small = _write_csv(tmp_path / "four.csv", HEADER, _points(4))
    assert "4 point(s) left to fit (4 given" in _refused(capsys, ["fit", str(small), *base[2:]])


def test_cli_requires_exactly_one_of_tokens_and_flops(tmp_path, capsys, no_fitting):
    path = _write_csv(tmp_path / "runs.csv", HEADER, _points(8))
    base = ["fit", str(path), "--params", "params", "--loss", "loss"]
    assert "one of the arguments --tokens --flops is required" in _refused(capsys, base)
    err = _refused(capsys, [*base, "--tokens", "tokens", "--flops", "flops"])
    assert "argument --flops: not allowed with argument --tokens" in err


def test_cli_refuses_a_missing_file_and_an_unwritable_json(tmp_path, capsys, no_fitting):
    base = ["--params", "params", "--tokens", "tokens", "--loss", "loss"]
    err = _refused(capsys, ["fit", str(tmp_path / "nope.csv"), *base])
    assert "nope.csv: cannot read the file" in err
    path = _write_csv(tmp_path / "runs.csv", HEADER, _points(8))
    err = _refused(capsys, ["fit", str(path), *base, "--json", str(tmp_path / "no" / "fit.json")])
    assert "does not exist; create it first" in err
    err = _refused(capsys, ["fit", str(path), *base, "--json", str(tmp_path)])  # refused before the fit
    assert f"--json {tmp_path} is a folder; give a file name in it" in err


def test_cli_refuses_a_binary_file_and_one_column_for_two_flags(tmp_path, capsys, no_fitting):
    """A file that is not UTF-8 text (a checkpoint, a gzip) and --params / --tokens naming the same column exit 2
    with a message, before any fitting (not a UnicodeDecodeError, or a fit of N against itself)."""
    binary = tmp_path / "runs.csv"
    binary.write_bytes(gzip.compress(b"params,tokens,loss\n1,2,3\n"))
    err = _refused(capsys, ["fit", str(binary), "--params", "params", "--tokens", "tokens", "--loss", "loss"])
    assert f"{binary}: not a UTF-8 CSV file" in err
    path = _write_csv(tmp_path / "ok.csv", HEADER, _points(8))
    err = _refused(capsys, ["fit", str(path), "--params", "params", "--tokens", "params", "--loss", "loss"])
    assert "--params and --tokens both name column 'params'" in err
    err = _refused(capsys, ["fit", str(path), "--params", "params", "--flops", "flops", "--loss", "flops"])
    assert "--flops and --loss both name column 'flops'" in err, err


def test_drop_highest_drops_the_k_highest_losses():
    L = np.array([3.0, 5.0, 2.0, 4.0, 5.0, 1.0, 2.5])
    kept = law.check_points(np.arange(1.0, 8.0), np.arange(2.0, 9.0), L, drop_highest=2)
    np.testing.assert_array_equal(kept, [0, 2, 3, 5, 6])
    with pytest.raises(law.ScalingError, match="point 1: loss = -2.0"):
        law.check_points([1, 1, 1, 1, 1, 1], [1] * 6, [1, -2, 1, 1, 1, 1])


# --- convergence: an optimiser's early stop is never reported as the fit --------------------------------------


def _noisy():
    N, D = design()
    return N, D, true_loss(N, D) * np.exp(0.01 * np.random.default_rng(3).standard_normal(len(N)))


def test_a_fit_stopped_at_maxiter_is_flagged_with_no_intervals(monkeypatch):
    N, D, L = _noisy()
    assert F.fit_scaling_law(N, D, L, bootstrap=0, n_starts=2).converged  # the defaults converge
    monkeypatch.setitem(H.LBFGSB, "maxiter", 1)
    fit = F.fit_scaling_law(N, D, L, bootstrap=4, seed=0, n_starts=2)
    assert fit.converged is False and fit.samples.shape == (0, 5)
    assert all(v is None for v in fit.ci.values())
    (note,) = fit.notes
    assert note.startswith("the fit did not converge (L-BFGS-B: STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT after 1")
    assert fit.to_dict()["converged"] is False


def test_a_success_flag_on_a_flat_stretch_is_caught_by_the_gradient(monkeypatch):
    """A loose relative-reduction test (ftol) makes L-BFGS-B report success far from the minimum; the gradient
    at the end point is what says it is not a fit."""
    from scipy.optimize import minimize

    N, D, L = _noisy()
    monkeypatch.setitem(H.LBFGSB, "ftol", 0.5)
    problem = H.HuberProblem(N, D, L)
    u0 = problem.to_u(H.grid_starts())[0]
    res = minimize(problem.value_and_grad, u0, args=(np.ones(16),), jac=True, method="L-BFGS-B", options=H.LBFGSB)
    assert res.success and np.max(np.abs(res.jac)) / 16 > 100 * H.GRAD_TOL  # scipy's flag says converged
    fit = F.fit_scaling_law(N, D, L, bootstrap=0, n_starts=2)
    assert fit.converged is False and "|gradient|" in fit.notes[0]


def test_resamples_that_stop_early_are_left_out_of_the_intervals(monkeypatch):
    """Every other resample's optimiser stops at maxiter=1: those fits are not in samples or the intervals."""
    from scipy.optimize import minimize as scipy_minimize

    N, D, L = _noisy()
    calls = []

    def every_other_resample_stops_early(fun, x0, args, **kw):
        (w,) = args
        if not np.all(w == 1):
            calls.append(len(calls))
            if len(calls) % 2:
                kw = {**kw, "options": {**kw["options"], "maxiter": 1}}
        return scipy_minimize(fun, x0, args=args, **kw)

    monkeypatch.setattr(H, "minimize", every_other_resample_stops_early)
    fit = F.fit_scaling_law(N, D, L, bootstrap=8, seed=0, n_starts=2, bootstrap_starts=0)
    assert len(calls) == 8  # one start (the full-data fit) per resample
    assert fit.converged and fit.n_unconverged == 4 and fit.samples.shape == (4, 5)
    monkeypatch.setattr(H, "minimize", scipy_minimize)
    full = F.fit_scaling_law(N, D, L, bootstrap=8, seed=0, n_starts=2, bootstrap_starts=0)
    np.testing.assert_allclose(fit.samples, full.samples[1::2], rtol=1e-12)  # the converged ones, unchanged
    lo, hi = np.percentile(full.samples[1::2, 3], [2.5, 97.5])
    assert fit.ci["alpha"] == pytest.approx((lo, hi))
    assert fit.notes[0].startswith("4 of 8 resamples did not converge (first: L-BFGS-B: STOP: TOTAL NO. OF ITER")
    assert fit.notes[0].endswith("the intervals use the other 4") and fit.to_dict()["n_unconverged"] == 4


def test_cli_refuses_a_fit_that_did_not_converge(tmp_path, capsys, monkeypatch):
    path = _write_csv(tmp_path / "runs.csv", HEADER, _points(16))
    out = tmp_path / "fit.json"
    monkeypatch.setitem(H.LBFGSB, "maxiter", 1)
    argv = ["fit", str(path), "--params", "params", "--tokens", "tokens", "--loss", "loss", "--json", str(out)]
    assert main([*argv, "--bootstrap", "0"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert captured.err.startswith("zoo.scaling: error: the fit did not converge (L-BFGS-B: STOP: TOTAL NO. OF")
    assert captured.err.count("\n") == 1


# --- --group: resample whole runs from the command line --------------------------------------------------------


def _runs_csv(tmp_path):
    """16 noisy points, two per run (8 runs): the columns of HEADER and `run`."""
    N, D, L = _noisy()
    cells = [[repr(float(v)) for v in (a, b, 6 * a * b, c)] for a, b, c in zip(N, D, L)]
    rows = [(*row, f"run{i // 2}") for i, row in enumerate(cells)]
    return _write_csv(tmp_path / "runs.csv", [*HEADER, "run"], rows), (N, D, L, [r[-1] for r in rows])


def test_cli_group_resamples_whole_runs_as_the_api_does(tmp_path, capsys):
    path, (N, D, L, runs) = _runs_csv(tmp_path)
    base = ["fit", str(path), "--params", "params", "--tokens", "tokens", "--loss", "loss", "--bootstrap", "40"]
    cis = {}
    for name, extra in (("group", ["--group", "run"]), ("points", [])):
        out = tmp_path / f"{name}.json"
        assert main([*base, "--seed", "3", "--json", str(out), *extra]) == 0
        cis[name] = json.loads(out.read_text())
    stdout = capsys.readouterr().out
    assert "40 bootstrap resamples of whole groups of 'run' (8), seed 3" in stdout
    api = F.fit_scaling_law(N, D, L, bootstrap=40, seed=3, groups=runs)
    points = F.fit_scaling_law(N, D, L, bootstrap=40, seed=3)
    for k in law.PARAMS:
        assert cis["group"][k]["ci"] == pytest.approx(list(api.ci[k]), rel=1e-9), k
        assert cis["points"][k]["ci"] == pytest.approx(list(points.ci[k]), rel=1e-9), k
    assert cis["group"]["alpha"]["ci"] != pytest.approx(cis["points"]["alpha"]["ci"], rel=1e-3)  # not ignored
    assert cis["group"]["data"]["group"] == "run" and cis["points"]["data"]["group"] is None


def test_cli_group_refuses_a_missing_or_empty_column_and_one_group(tmp_path, capsys, no_fitting):
    path, _ = _runs_csv(tmp_path)
    base = ["fit", str(path), "--params", "params", "--tokens", "tokens", "--loss", "loss"]
    err = _refused(capsys, [*base, "--group", "seed"])
    assert "no column --group 'seed'; the columns are: 'params', 'tokens', 'flops', 'loss', 'run'" in err
    rows = list(csv.reader(open(path)))
    rows[3][4] = " "
    blank = _write_csv(tmp_path / "blank.csv", rows[0], rows[1:])
    err = _refused(capsys, ["fit", str(blank), *base[2:], "--group", "run"])
    assert f"{blank} line 4: column 'run' (--group) is empty" in err
    one = _write_csv(tmp_path / "one.csv", rows[0], [[*r[:4], "run0"] for r in rows[1:]])
    err = _refused(capsys, ["fit", str(one), *base[2:], "--group", "run"])
    assert "every point fitted is in one group ('run0'): resampling whole groups needs at least 2" in err
    assert _refused(capsys, [*base, "--group", "loss"]).count("--loss and --group both name column 'loss'") == 1


# --- the stratified bootstrap: the sizes are the design, the seeds the sampling ----------------------------------


def _sized():
    """_noisy()'s 16 points (4 sizes x 4 budgets) as two runs per size (budgets 1-2 and 3-4): (N, D, L, runs)."""
    N, D, L = _noisy()
    runs = [f"{int(n)}|{i // 8}" for i, n in enumerate(N)]  # point i: budget i // 4, size i % 4
    return N, D, L, runs


def test_a_stratified_draw_keeps_every_strata_weight_and_the_rescaled_one_its_variance():
    """Each stratum's weights sum to its size in every draw, and a unit's weight has mean 1. Drawn n times from n
    units its weight is Binomial(n, 1/n): variance (n - 1) / n (1/2, 2/3, 0 for strata of 2, 3, 1), which
    understates the spread between units; Rao & Wu's rescaled draw (n - 1 draws, x n / (n - 1)) has variance 1
    at every n >= 2 (and a stratum of 1 keeps weight 1)."""
    rng = np.random.default_rng(0)
    units = [np.array([0, 3]), np.array([1, 2, 5]), np.array([4])]
    for rescaled, var in ((False, [1 / 2, 2 / 3, 2 / 3, 1 / 2, 0, 2 / 3]), (True, [1, 1, 1, 1, 0, 1])):
        draws = np.array([B.resample_weights(rng, units, 6, rescaled) for _ in range(8000)])
        for u in units:
            np.testing.assert_allclose(draws[:, u].sum(axis=1), len(u))
        np.testing.assert_allclose(draws.mean(axis=0), 1.0, atol=0.04)
        np.testing.assert_allclose(draws.var(axis=0), var, atol=0.05)
    assert set(np.unique(B.resample_weights(rng, [np.array([0, 1])], 2, True))) <= {0.0, 2.0}  # one seed of two


def test_strata_keep_every_size_in_every_resample_and_no_strata_do_not(monkeypatch):
    """With strata, each resample's weights keep every size's 4 points (2 runs x 2 budgets) and vary within it
    (rescaled: one of the two runs, weight 2); without, some resample drops a size (the bootstrap that leaves out
    the largest size: intervals too wide)."""
    N, D, L, runs = _sized()
    seen, real = [], H.best_start

    def spy(problem, starts, w):
        seen.append(np.array(w))
        return real(problem, starts, w)

    for module in (F, B):  # the full-data fit, then each resample's
        monkeypatch.setattr(module, "best_start", spy)
    for strata in (N, None):
        seen.clear()
        F.fit_scaling_law(N, D, L, bootstrap=12, seed=1, n_starts=2, groups=runs, strata=strata)
        per_size = np.array([[w[N == n].sum() for n in np.unique(N)] for w in seen[1:]])
        assert len(per_size) == 12
        if strata is not None:
            assert np.all(per_size == 4) and all(set(np.unique(w)) == {0.0, 2.0} for w in seen[1:])
        else:
            assert np.any(per_size == 0)


def test_cli_strata_and_a_group_of_two_columns_resample_as_the_api_does(tmp_path, capsys):
    """points.csv's runs are (size, seed): --group size,seed --strata size gives the API's intervals."""
    N, D, L, runs = _sized()
    rows = [[repr(float(v)) for v in (a, b, 6 * a * b, c)] + r.split("|") for a, b, c, r in zip(N, D, L, runs)]
    path = _write_csv(tmp_path / "points.csv", [*HEADER, "size", "seed"], rows)
    out = tmp_path / "fit.json"
    argv = ["fit", str(path), "--params", "params", "--tokens", "tokens", "--loss", "loss", "--bootstrap", "40"]
    assert main([*argv, "--group", "size,seed", "--strata", "size", "--json", str(out)]) == 0
    assert "40 bootstrap resamples of whole groups of 'size,seed' (8) within the strata of 'size' (4)" in (
        capsys.readouterr().out
    )
    got = json.loads(out.read_text())
    api = F.fit_scaling_law(N, D, L, bootstrap=40, seed=0, groups=runs, strata=N)
    assert _refused(capsys, [*argv[:-1], "39"]).count("--bootstrap 39: give 0 (no intervals) or at least 40") == 1
    for k in law.PARAMS:
        assert got[k]["ci"] == pytest.approx(list(api.ci[k]), rel=1e-9), k
    assert got["data"]["strata"] == "size"
    err = _refused(capsys, [*argv, "--strata", "family"])
    assert "no column --strata 'family'" in err
    err = _refused(capsys, [*argv, "--group", "size,", "--strata", "size"])
    assert "--group 'size,': an empty column name" in err


def test_cli_where_fits_only_the_rows_of_one_value(tmp_path, capsys):
    """A study's points.csv holds every architecture: --where arch=a fits arch a's rows alone, as a file of only
    those rows does; a value no row has, a column that does not exist, or no '=' is refused."""
    N, D, L = _noisy()
    rows = [[repr(float(v)) for v in (a, b, 6 * a * b, c)] + ["a"] for a, b, c in zip(N, D, L)]
    rows += [[repr(float(v)) for v in (a, b, 6 * a * b, 1.3 * c)] + ["b"] for a, b, c in zip(N, D, L)]
    both = _write_csv(tmp_path / "points.csv", [*HEADER, "arch"], rows)
    alone = _write_csv(tmp_path / "a.csv", [*HEADER, "arch"], rows[: len(N)])
    fits = {}
    for name, path, extra in (("where", both, ["--where", "arch=a"]), ("alone", alone, [])):
        out = tmp_path / f"{name}.json"
        argv = ["fit", str(path), "--params", "params", "--tokens", "tokens", "--loss", "loss", "--bootstrap", "0"]
        assert main([*argv, "--json", str(out), *extra]) == 0
        fits[name] = json.loads(out.read_text())
    capsys.readouterr()
    assert fits["where"]["alpha"]["value"] == fits["alone"]["alpha"]["value"]
    assert fits["where"]["n_points"] == len(N)
    base = ["fit", str(both), "--params", "params", "--tokens", "tokens", "--loss", "loss", "--bootstrap", "0"]
    assert main([*base, "--where", "arch=c"]) == 2
    assert "no row has --where arch=c" in capsys.readouterr().err
    assert main([*base, "--where", "family=a"]) == 2
    assert "no column --where 'family'" in capsys.readouterr().err
    assert main([*base, "--where", "arch"]) == 2
    assert "--where 'arch': give COL=VALUE" in capsys.readouterr().err


# --- the public functions name a bad argument -------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: law.scaling_law([1e6, 0.0], 1e8, 1.8, 400, 400, 0.3, 0.3),
            r"scaling_law: N\[1\] = 0.0; it must be pos",
        ),
        (lambda: law.scaling_law(1e6, -1e8, 1.8, 400, 400, 0.3, 0.3), r"scaling_law: D = -100000000.0; it must be pos"),
        (
            lambda: law.scaling_law(1e6, 1e8, 1.8, 400, 400, math.nan, 0.3),
            r"scaling_law: alpha = nan; it must be a num",
        ),
        (lambda: law.compute_optimal([1e20, -1.0], 1.8, 400, 400, 0.3, 0.3), r"compute_optimal: C\[1\] = -1.0"),
        (
            lambda: law.compute_optimal(1e20, 1.8, -5.0, 400, 0.3, 0.3),
            r"compute_optimal: A = -5.0; it must be positive",
        ),
        (lambda: law.compute_optimal(1e20, math.nan, 400, 400, 0.3, 0.3), r"compute_optimal: E = nan"),
        (lambda: law.compute_optimal([], 1.8, 400, 400, 0.3, 0.3), r"compute_optimal: C is empty"),
        (lambda: law.allocation_exponents(0.0, 0.3), r"allocation_exponents: alpha = 0.0; it must be positive and fin"),
        (lambda: law.allocation_exponents(0.3, [0.3, -0.1]), r"allocation_exponents: beta\[1\] = -0.1"),
        (lambda: law.check_points(*design(), true_loss(*design()), labels=["a"]), r"16 points, 1 labels"),
        (lambda: F.fit_scaling_law(*_noisy(), n_starts=0), r"n_starts must be an integer >= 1 or None, got 0"),
        (lambda: F.fit_scaling_law(*_noisy(), n_starts=2.5), r"n_starts must be an integer >= 1 or None, got 2.5"),
        (lambda: F.fit_scaling_law(*_noisy(), bootstrap_starts=-1), r"bootstrap_starts must be an integer >= 0, got"),
        (lambda: F.fit_scaling_law(*_noisy(), seed=-1), r"seed must be an integer >= 0 or None, got -1"),
        (lambda: F.fit_scaling_law(*_noisy(), groups=[1, 2]), r"groups must give one group per point: 16 points"),
        (lambda: F.fit_scaling_law(*_noisy(), groups=[None] * 16), r"groups holds a missing group"),
        (lambda: F.fit_scaling_law(*_noisy(), strata=[1, 2]), r"strata must give one stratum per point: 16 points"),
        (lambda: F.fit_scaling_law(*_sized()[:3], groups=_sized()[3], strata=list(range(16))), r"in two strata"),
        (lambda: F.fit_scaling_law(*_noisy(), groups=_noisy()[0], strata=_noisy()[0]), r"every stratum holds one"),
    ],
)
def test_the_fitters_public_functions_name_a_bad_argument(no_fitting, call, message):
    with pytest.raises(law.ScalingError, match=message):
        call()


def test_a_point_given_twice_in_a_points_file_is_named(tmp_path):
    """A row repeated in points.csv (two files concatenated) would count one point twice in every fit and gate:
    refused, naming both lines."""
    from zoo.scaling.points import read_points_csv

    rows = ["arch,size,seed,n_params,tokens,flops,loss", "a,s1,1,1000,20000,1.2e11,2.5", "a,s1,1,1000,40000,2.4e11,2.4"]
    (tmp_path / "p.csv").write_text("\n".join([*rows, "a,s1,2,1000,20000,1.2e11,2.51"]) + "\n")
    assert len(read_points_csv(tmp_path / "p.csv")) == 3
    (tmp_path / "p.csv").write_text("\n".join([*rows, rows[1]]) + "\n")
    with pytest.raises(law.ScalingError, match="lines 2 and 4: the same point twice .*remove the copy"):
        read_points_csv(tmp_path / "p.csv")
