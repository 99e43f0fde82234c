"""zoo.bench runs end to end on tiny shapes and prints its Markdown tables (no timing is asserted: the
numbers depend on the machine). Peers (transformers, x-transformers) are optional: every test here runs
without them, and the parameter-count check of the peers runs where they are installed."""

import os
import re
import subprocess
import sys

import pytest
import torch
from zoo_run import REPO

from zoo.bench import contenders as contenders_module
from zoo.bench import main
from zoo.bench.cli import options, parse_args
from zoo.bench.contenders import count_params
from zoo.bench.generate import bench_generate
from zoo.bench.lm_contenders import lm_contenders
from zoo.bench.options import Options
from zoo.bench.report import NOT_INSTALLED, throughput_rows, wins
from zoo.bench.seq2seq_contenders import seq2seq_contenders
from zoo.bench.seq2seq_step import bench_seq2seq_step
from zoo.bench.shapes import LM_SHAPES, SEQ2SEQ_SHAPES, LMShape
from zoo.bench.timing import interleaved, order
from zoo.bench.train_step import bench_train_step

PEERS = all(contenders_module.import_error(m) is None for m in ("transformers", "x_transformers"))
HF = contenders_module.import_error("transformers") is None  # the .[hf] extra, in dev: CI has it
FAST = Options(quick=True, reps=5, warmup=0)
# one torch thread (conftest): these tests time nothing, and on a busy machine several threads wait for each other
# (a tiny generate benchmark takes 5x longer with 2 threads than with 1)
pytestmark = pytest.mark.usefixtures("one_thread")


def table_rows(text: str, header_start: str):
    """The rows (lists of stripped cells) of the Markdown table whose header row starts with header_start."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def gpt_params(s: LMShape) -> int:
    """Closed-form parameter count of zoo's GPT (no biases, tied head): token + position tables,
    per layer 4 d^2 (attention) + 8 d^2 (feed-forward x4) + 2 d (two LayerNorm gains), final LayerNorm d."""
    d = s.d_model
    return s.vocab * d + s.block * d + s.n_layers * (12 * d * d + 2 * d) + d


@pytest.fixture
def no_peers(monkeypatch):
    """Make the third-party peers look uninstalled, whatever is installed."""
    monkeypatch.setattr(
        contenders_module, "_IMPORT_ERRORS", {"transformers": NOT_INSTALLED, "x_transformers": NOT_INSTALLED}
    )


@pytest.mark.slow
@pytest.mark.e2e
def test_quick_train_step_prints_table_with_ratio(tmp_path):
    out_file = tmp_path / "bench.md"
    # one thread: the test must not depend on (or fight over) the machine's cores
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "zoo.bench",
            "--quick",
            "--only",
            "train_step",
            "--shapes",
            "tiny",
            "--out",
            str(out_file),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout
    header = out.splitlines()[2]
    assert header.startswith(f"torch {torch.__version__} | CPU: ") and "threads 1" in header
    assert "transformers" in header and "x-transformers" in header  # peer versions (or 'not installed')
    rows = {r[1]: r for r in table_rows(out, "| shape")}
    zoo = rows["zoo DecoderOnly"]
    ratio = 7  # THROUGHPUT_HEADERS' zoo/peer; the step-memory columns (PEAK_HEADERS) follow it
    assert zoo[0] == "tiny" and zoo[ratio] == "1.00 (ref)" and zoo[-1] == "1.00 (ref)"
    assert int(zoo[2].replace(",", "")) == gpt_params(LM_SHAPES["tiny"]) == 27328
    assert rows["torch TransformerEncoder"][2] == zoo[2]  # the same model, built from nn.TransformerEncoder
    assert re.fullmatch(r"\d+\.\d\d \([0-5]/5\)", rows["torch TransformerEncoder"][ratio])  # ratio (reps won)
    assert float(zoo[-2].replace(",", "")) > float(zoo[-3].replace(",", "")) > 0  # process peak > step peak, MB
    assert float(rows["torch TransformerEncoder"][6].replace(",", "")) > 0  # tokens/s
    for name in ("zoo DecoderOnly", "torch TransformerEncoder"):  # freshly initialised: loss ~ ln(65) = 4.17
        assert abs(float(rows[name][3]) - 4.174) < 0.15, rows[name]
    for peer in ("HF GPT2LMHeadModel", "x-transformers TransformerWrapper"):  # measured, or a 'not installed' row
        assert re.fullmatch(r"\d+\.\d\d \([0-5]/5\)", rows[peer][ratio]) or rows[peer][2] == NOT_INSTALLED, rows[peer]
    assert out_file.read_text().strip().splitlines()[2] == header


def test_bad_arguments_exit_2(capsys, tmp_path):
    for args, why in (
        (["--out", str(tmp_path)], "is a folder; give a file path"),
        (["--only", "nope"], "unknown benchmark"),
        (["--reps", "3"], "at least 5 repetitions"),
        (["--shapes", "nope"], "unknown shapes"),
        (["--only", ","], "no benchmark"),
        (["--warmup", "-1"], "give a count >= 0"),
        (["--compile", "--warmup", "0"], ">= 1 with --compile"),
        (["--threads", "0"], "positive number of threads"),
        (["--out", "/nonexistent-dir/x.md"], "does not exist or is not writable"),
    ):
        assert main(args) == 2, args
        captured = capsys.readouterr()
        assert captured.err.startswith("zoo.bench: error: ") and why in captured.err and not captured.out, args


@pytest.mark.e2e
def test_missing_peers_get_not_installed_rows(no_peers):
    opts = Options(quick=True, reps=5, warmup=0, shapes=["tiny"])
    rows = {r[1]: r for r in table_rows(bench_train_step(opts), "| shape")}
    assert rows["HF GPT2LMHeadModel"][2] == rows["x-transformers TransformerWrapper"][2] == NOT_INSTALLED
    assert re.fullmatch(r"\d+\.\d\d \([0-5]/5\)", rows["torch TransformerEncoder"][-1])
    rows = {r[1]: r for r in table_rows(bench_seq2seq_step(FAST, SEQ2SEQ_SHAPES["tiny"]), "| shape")}
    assert rows["HF MarianMTModel"][2] == NOT_INSTALLED
    assert rows["zoo EncoderDecoder"][2] == rows["torch nn.Transformer"][2]  # same parameter count
    assert abs(float(rows["zoo EncoderDecoder"][3]) - 4.575) < 0.3  # ln(97): vocab 97


@pytest.mark.e2e
def test_generate_tables_tiny():
    shape = LMShape("tiny-gen", 2, 2, 32, 64, 1, 65)
    text = bench_generate(FAST, shape, new=8, contexts=(8, 32))
    rows = table_rows(text, "| batch")
    assert [r[0] for r in rows] == ["batch 1"] * 3 + ["batch 16"] * 3
    for r in rows:
        if r[1] == "zoo KV cache":
            assert r[-1] == "1.00 (ref)"
        elif r[1] == "HF GPT2 generate" and not HF:
            assert r[2] == NOT_INSTALLED
        else:
            assert re.fullmatch(r"\d+\.\d\d \([0-5]/5\)", r[-1]), r
    per_token = table_rows(text, "| context")
    assert [r[0] for r in per_token] == ["8", "32"]
    assert all(float(r[1]) > 0 and float(r[3]) > 0 for r in per_token)  # zoo ms/token, cached and not
    assert "32 vs 8 tokens of context" in text


@pytest.mark.skipif(not PEERS, reason="optional peers not installed (pip install -e .[bench])")
def test_peers_do_the_same_work_as_zoo():
    """The peers are built at zoo's shape: the parameter counts agree exactly, up to the documented
    differences (GPT-2's biases, Marian's missing final LayerNorms), i.e. within 3 %."""
    for name in ("tiny", "nanogpt"):
        s = LM_SHAPES[name]
        built = {c.name: c.build() for c in lm_contenders(s)}
        n = {k: count_params(m) for k, m in built.items()}
        zoo = n["zoo DecoderOnly"]
        assert zoo == gpt_params(s)
        assert n["torch TransformerEncoder"] == n["x-transformers TransformerWrapper"] == zoo
        assert n["HF GPT2LMHeadModel"] - zoo == 11 * s.d_model * s.n_layers + s.d_model  # biases
        assert abs(n["HF GPT2LMHeadModel"] / zoo - 1) < 0.03
        idx = torch.randint(0, s.vocab, (2, s.block))
        for c in lm_contenders(s):
            assert c.forward(built[c.name], idx).shape == (2, s.block, s.vocab), c.name
    s = SEQ2SEQ_SHAPES["tiny"]
    n = {c.name: count_params(c.build()) for c in seq2seq_contenders(s)}
    assert n["torch nn.Transformer"] == n["zoo EncoderDecoder"]
    assert n["zoo EncoderDecoder"] - n["HF MarianMTModel"] == 4 * s.d_model  # two final LayerNorms
    assert abs(n["HF MarianMTModel"] / n["zoo EncoderDecoder"] - 1) < 0.03


def test_wins_counts_the_repetitions_zoo_was_faster_in():
    # pairs by repetition: zoo faster in reps 0 and 2, slower in 1, tied in 3 (a tie is not a win)
    assert wins([1.0, 3.0, 2.0, 4.0], [2.0, 2.0, 2.5, 4.0]) == "2/4"
    rows = {
        r[1]: r
        for r in throughput_rows(
            "s",
            {"zoo": [1.0, 1.0, 1.0, 1.0, 1.0], "peer": [2.0, 0.5, 2.0, 2.0, 2.0]},
            100,
            "zoo",
            {"zoo": 1, "peer": 1},
            {"zoo": 0.0, "peer": 0.0},
        )
    }
    assert rows["zoo"][-1] == "1.00 (ref)" and rows["peer"][-1] == "2.00 (4/5)"  # median 2.0 s vs 1.0 s


@pytest.mark.slow  # inductor compiles two models: about a minute on a cold cache
def test_compile_runs_every_contender_compiled(no_peers):
    """--compile: every contender compiled (inductor, C++ on the CPU), its row named '(compiled)'."""
    opts = Options(quick=True, reps=5, warmup=1, shapes=["tiny"], compile=True)
    rows = {r[1]: r for r in table_rows(bench_train_step(opts), "| shape")}
    zoo, torch_gpt = rows["zoo DecoderOnly (compiled)"], rows["torch TransformerEncoder (compiled)"]
    assert zoo[-1] == "1.00 (ref)" and re.fullmatch(r"\d+\.\d\d \([0-5]/5\)", torch_gpt[-1])
    assert int(zoo[2].replace(",", "")) == gpt_params(LM_SHAPES["tiny"])
    assert abs(float(zoo[3]) - 4.174) < 0.15  # loss₀ ~ ln(65): the same initialised model as in eager mode
    assert rows["HF GPT2LMHeadModel (compiled)"][2] == NOT_INSTALLED


def test_interleaved_order_alternates_and_rotates():
    names = ["A", "B", "C"]
    assert [order(names, r) for r in range(4)] == [["A", "B", "C"], ["C", "B", "A"], ["B", "C", "A"], ["A", "C", "B"]]
    firsts = [order(names, r)[0] for r in range(12)]
    assert sorted(firsts.count(n) for n in names) == [4, 4, 4]  # each contender is timed first equally often
    runs = []
    times = interleaved({n: (lambda n=n: runs.append(n)) for n in names}, reps=4, warmup=1)
    assert runs == names + sum((order(names, r) for r in range(4)), [])  # warm-up round, then the 4 orders
    assert all(len(t) == 4 and all(x >= 0 for x in t) for t in times.values())


@pytest.mark.e2e
@pytest.mark.slow
def test_bench_scripts_run_at_the_tiny_shape():
    """paired_steps.py and step_faults.py, behind BENCHMARKS.md's session 4 and 5 numbers, run (tiny shape,
    one thread) and print what they measure: paired_steps the two medians and the repetitions zoo won of 5;
    step_faults the medians of 3 steps, a page-fault count and a peak RSS above torch's own size. Slow (four
    processes, about 25 s): these experiment scripts are not zoo's code, and `pytest -m slow` runs it."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    scripts = REPO / "experiments" / "bench_scripts"

    def script(*args):
        res = subprocess.run(
            [sys.executable, *map(str, args)], capture_output=True, text=True, cwd=REPO, env=env, timeout=120
        )
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout.strip().splitlines()[-1]

    out = script(scripts / "paired_steps.py", "lm", "tiny", "torch TransformerEncoder", "--reps", "5", "--warmup", "1")
    assert re.fullmatch(
        r"tiny: zoo DecoderOnly [\d,]+ ms, torch TransformerEncoder [\d,]+ ms, zoo/peer \d+\.\d\d "
        r"\(zoo won [0-5]/5\); built two, zoo first; torch threads 1",
        out,
    ), out
    out = script(scripts / "step_faults.py", "seq2seq", "tiny", "zoo EncoderDecoder", "--steps", "3", "--warmup", "1")
    m = re.fullmatch(
        r"tiny zoo EncoderDecoder: median of 3 steps: wall (\d+\.\d\d) s, user \d+\.\d\d s, system "
        r"\d+\.\d\d s, ([\d,]+) minor page faults; peak RSS (\d+\.\d\d) GiB",
        out,
    )
    assert m, out
    assert float(m.group(3)) > 0.1  # torch alone takes more than 100 MiB
    res = subprocess.run(
        [sys.executable, str(scripts / "step_faults.py"), "lm", "tiny", "nope"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2 and "unknown contender 'nope'" in res.stderr
    res = subprocess.run(
        [sys.executable, str(scripts / "paired_steps.py"), "lm", "base", "x"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2 and "unknown shape 'base'; known: tiny, nanogpt" in res.stderr


@pytest.mark.e2e
@pytest.mark.slow  # times real bf16 and fp32 steps: about 75 s on 2 cores
def test_peak_reports_the_fraction_of_the_matmul_limit(monkeypatch):
    """bench_peak: the fastest matmul size of each precision is the limit (fraction 1.000), and each step row's
    fraction is its GFLOP/s over that limit, with zoo.model.cost's 3 x forward FLOPs as the work."""
    from zoo.bench import peak
    from zoo.bench.lm_contenders import zoo_lm_config
    from zoo.bench.shapes import LM_SHAPES
    from zoo.model import DecoderOnly
    from zoo.model.cost import forward_flops

    rates = {256: 10e9, 384: 20e9}
    monkeypatch.setattr(
        peak,
        "matmul_flops_per_second",
        lambda n, dtype, reps, device="cpu": rates[n] * (1 if dtype == torch.float32 else 4),
    )
    monkeypatch.setattr(peak, "bench_sizes", lambda opts: (256, 384))
    out = peak.bench_peak(Options(quick=True, reps=5, warmup=0, shapes=["tiny"]))
    rows = {
        tuple(c.strip() for c in line.strip("|").split("|")[:3]): [c.strip() for c in line.strip("|").split("|")]
        for line in out.splitlines()
        if line.startswith("| ")
    }
    assert rows[("matmul", "384 x 384", "fp32")][5] == "1.000" and rows[("matmul", "256 x 256", "fp32")][5] == "0.500"
    s = LM_SHAPES["tiny"]
    gflop = 3 * forward_flops(DecoderOnly(zoo_lm_config(s)), s.batch, s.block)["total"] / 1e9
    step = rows[("tiny", f"{gflop:.2f} GFLOP / step", "fp32")]
    rate = float(step[4].replace(",", ""))
    assert float(step[5]) == pytest.approx(rate / 20.0, rel=0.02, abs=2e-3)
    bf16 = rows[("tiny", f"{gflop:.2f} GFLOP / step", "bf16")]
    assert float(bf16[5]) == pytest.approx(float(bf16[4].replace(",", "")) / 80.0, rel=0.02, abs=2e-3)


@pytest.mark.e2e
def test_step_peaks_cover_the_gradients_and_adamw_state():
    """zoo.bench.step_memory: a contender's training step, measured alone in a fresh process, grows the memory by
    at least its fp32 gradients (zero_grad(set_to_none=True) frees them between steps), and the process holds at
    least the weights plus AdamW's two moments (3 x 4 bytes a parameter)."""
    from zoo.bench.step_memory import step_peaks

    s = LM_SHAPES["nanogpt"]
    peaks = step_peaks("lm", "nanogpt", ["zoo DecoderOnly"])["zoo DecoderOnly"]
    n = gpt_params(s)
    assert peaks["peak_bytes"] >= 4 * n, peaks
    assert peaks["process_bytes"] >= 12 * n + peaks["peak_bytes"], peaks
    zoo, peer = "zoo DecoderOnly", "a peer"
    half = {"peak_bytes": 2 * peaks["peak_bytes"], "process_bytes": peaks["process_bytes"]}
    rows = throughput_rows(
        "nanogpt",
        {zoo: [1.0], peer: [1.0]},
        768,
        zoo,
        {zoo: n, peer: n},
        {zoo: 4.2, peer: 4.2},
        None,
        {zoo: peaks, peer: half},
    )
    mb = float(rows[0][-3].replace(",", ""))
    assert abs(mb - peaks["peak_bytes"] / 2**20) <= 0.01 * mb
    assert (rows[0][-1], rows[1][-1]) == ("1.00 (ref)", "0.50")  # zoo's step peak / the peer's


def test_quick_plan_leaves_out_the_scaling_throughput_grid():
    """--quick runs every section but throughput (experiment=scaling's grid, many minutes); --only still picks it,
    and the full run keeps it."""
    quick, _ = options(parse_args(["--quick"]))
    assert quick == ["train_step", "seq2seq_step", "generate", "memory", "overhead", "precision", "loss", "peak"]
    assert options(parse_args([]))[0] == [*quick, "throughput"]
    names, opts = options(parse_args(["--quick", "--only", "throughput"]))
    assert names == ["throughput"] and opts.quick
