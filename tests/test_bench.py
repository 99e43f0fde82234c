"""zoo.bench runs end to end on a tiny shape and prints its Markdown table (no timing is asserted)."""
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_quick_train_step_prints_table_with_ratio(tmp_path):
    out_file = tmp_path / "bench.md"
    # one thread: the test must not depend on (or fight over) the machine's cores
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-m", "zoo.bench", "--quick", "--only", "train_step", "--shapes", "tiny",
                          "--out", str(out_file)], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    header = out.splitlines()[2]
    assert header.startswith(f"torch {__import__('torch').__version__} | CPU: ") and "threads 1" in header
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert "zoo/peer" in table[0] and "tokens/s" in table[0]
    rows = {cells[2]: cells for cells in ([c.strip() for c in line.split("|")] for line in table[2:])}
    assert rows["zoo DecoderOnly"][1] == "tiny" and rows["zoo DecoderOnly"][-2] == "1.00 (ref)"
    assert re.fullmatch(r"\d+\.\d\d", rows["torch TransformerEncoder"][-2])  # the zoo/peer ratio
    assert float(rows["torch TransformerEncoder"][5].replace(",", "")) > 0  # tokens/s
    for peer in ("HF GPT2LMHeadModel", "x-transformers TransformerWrapper"):  # installed or a 'not installed' row
        assert peer in rows
    assert out_file.read_text().strip().splitlines()[2] == header


def test_bad_arguments_exit_2():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for args in (["--only", "nope"], ["--reps", "3"], ["--shapes", "nope"]):
        res = subprocess.run([sys.executable, "-m", "zoo.bench", *args], capture_output=True, text=True, cwd=REPO,
                             env=env, timeout=60)
        assert res.returncode == 2 and res.stderr, args
