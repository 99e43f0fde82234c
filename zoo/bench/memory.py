"""Benchmark 4: peak memory of a training forward + backward as the sequence grows, next to the
activation-memory formula l * (34 b N d + 5 b N^2 h) (Korthikanti et al. 2022)."""

import gc
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from zoo.bench.lm_contenders import zoo_lm_config
from zoo.bench.options import Options
from zoo.bench.report import fmt, markdown_table, progress
from zoo.bench.shapes import LMShape
from zoo.bench.steps import random_tokens
from zoo.bench.timing import median
from zoo.bench.torch_models import TorchGPT
from zoo.model import DecoderOnly
from zoo.model.cost import activation_memory

REPO = Path(__file__).resolve().parents[2]
MB = 2**20

MEMORY_SHAPE = dict(d_model=256, n_heads=4, n_layers=2, vocab=65, batch=1)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm_bytes() -> int:
    """Peak resident set size (VmHWM) of this process, bytes (ru_maxrss if /proc lacks it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs). False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_growth(step: Callable[[], object], device: str, repeats: int) -> tuple[float, str]:
    """Peak memory growth (bytes) of step() over the memory in use just before it: the median of `repeats`
    calls (warm step() up first), and how it was measured. CPU: VmHWM after the call minus the RSS before it
    (VmHWM reset through /proc/self/clear_refs; where that fails, ru_maxrss growth, said in the method). Run it
    in a process started with MALLOC_MMAP_THRESHOLD_ low (run_child) so that freed tensors leave the RSS.
    cuda: torch.cuda.max_memory_allocated minus memory_allocated before."""
    peaks = []
    method = "cuda max_memory_allocated" if device == "cuda" else "RSS high-water mark (VmHWM)"
    for _ in range(repeats):
        gc.collect()
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            peaks.append(torch.cuda.max_memory_allocated() - base)
        else:
            base = _rss_bytes()
            if not _reset_hwm():
                method = "ru_maxrss growth (imprecise: VmHWM could not be reset)"
                base = _hwm_bytes()
            step()
            peaks.append(max(0, _hwm_bytes() - base))
    return median(peaks), method


def run_child(code: str, what: str) -> dict:
    """Run `python -c code` in a fresh process with zoo importable and glibc told to return freed blocks of
    >= 64 KB to the OS at once (so the RSS follows the live tensors); returns the JSON of its stdout's last
    line. Raises RuntimeError naming `what` (with the end of its stderr) if it fails."""
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=pythonpath, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="131072")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(REPO))
    if res.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


MEMORY_CONTENDERS = {
    "zoo": "zoo (is_causal)",
    "peer": "torch float mask",
    "zoo-explicit": "zoo return_attention",
}


def measure_peak(kind: str, seq_len: int, device: str, repeats: int = 3) -> tuple[float, str]:
    """Peak memory growth (bytes) of one training forward + backward of contender `kind` at batch 1 and
    `seq_len` tokens (MEMORY_SHAPE, fp32), measured in this process:
      zoo: DecoderOnly, causal through SDPA's is_causal (no N x N tensor);
      peer: TorchGPT with the float causal mask built in each forward and is_causal=False;
      zoo-explicit: DecoderOnly with return_attention=True (explicit softmax(QK^T) V: stores the
        N x N scores of every head, the path the formula's 5bN^2h term describes).
    One warm-up step first (allocates .grad, which zero_grad(set_to_none=False) keeps, and one-time kernel
    buffers), then `repeats` measured steps; returns (median growth in bytes, method).
    CPU: VmHWM after the step minus RSS before (run_memory_child sets MALLOC_MMAP_THRESHOLD_ so that freed
    tensors go back to the OS); cuda: torch.cuda.max_memory_allocated minus memory_allocated before."""
    m = MEMORY_SHAPE
    torch.manual_seed(0)
    if kind in ("zoo", "zoo-explicit"):
        model = DecoderOnly(
            zoo_lm_config(LMShape(kind, m["n_layers"], m["n_heads"], m["d_model"], seq_len, m["batch"], m["vocab"]))
        )
        forward = (lambda x: model(x, return_attention=True)[0]) if kind == "zoo-explicit" else model
    elif kind == "peer":
        model = TorchGPT(
            m["vocab"], m["d_model"], m["n_heads"], m["n_layers"], seq_len, is_causal=False, cache_mask=False
        )
        forward = model
    else:
        raise ValueError(f"memory contender {kind!r} is unknown; known: {', '.join(MEMORY_CONTENDERS)}")
    model.to(device).train()
    idx = random_tokens((m["batch"], seq_len), m["vocab"], device, seed=1)
    targets = random_tokens((m["batch"], seq_len), m["vocab"], device, seed=2)

    def step():
        loss = F.cross_entropy(forward(idx).flatten(0, 1), targets.flatten())
        loss.backward()
        model.zero_grad(set_to_none=False)

    step()
    return peak_growth(step, device, repeats)


def memory_child(seq_len: int, device: str, kinds: Sequence[str], threads: int | None = None) -> dict:
    """Runs inside the fresh subprocess of one length: measure_peak for each contender in `kinds`, one
    after the other (each model is freed before the next is built). threads: torch.set_num_threads
    (None = torch's default). Prints and returns {"peak_bytes": {kind: bytes}, "method": str}."""
    if threads:
        torch.set_num_threads(threads)
    out = {"peak_bytes": {}, "method": ""}
    for kind in kinds:
        out["peak_bytes"][kind], out["method"] = measure_peak(kind, seq_len, device)
        gc.collect()
    print(json.dumps(out))
    return out


def run_memory_child(seq_len: int, device: str, kinds: Sequence[str]) -> dict:
    """memory_child in a fresh `python -c` subprocess (stdout's last line is its JSON)."""
    code = (
        f"from zoo.bench.memory import memory_child; "
        f"memory_child({seq_len}, {device!r}, {list(kinds)!r}, threads={torch.get_num_threads()})"
    )
    return run_child(code, f"memory child (N={seq_len})")


def bench_memory(opts: Options) -> str:
    """Peak memory (MB) of one training forward + backward at batch 1 as the sequence grows:
    N = 256, 1024, 4096 (QUICK: 256, 512, 1024); d_model 256, 4 heads, 2 layers, vocab 65, fp32.

    zoo DecoderOnly (causal via SDPA's is_causal: no N x N tensor) vs TorchGPT with an explicit float
    causal mask built in every forward (is_causal=False: the N x N float mask is materialised and attention
    takes the masked path; SDPA's fused kernels accept the mask, so the N x N scores are still not stored),
    and zoo with return_attention=True (explicit attention: N x N scores per head, kept for backward).
    Next to them: zoo.model.cost.activation_memory = l * (34*b*N*d + 5*b*N^2*h) bytes (Korthikanti et al.
    2022: 16-bit activations incl. dropout masks and the N x N attention scores/softmax; fp32 doubles it).
    Growth columns: memory at N / memory at the previous N (linear = the length factor).
    Measured in a fresh subprocess per length (memory_child; the contenders one after the other, each
    model freed before the next); the measurement is the growth of the process's peak over its steady
    state (parameters and their .grad excluded).
    """
    lengths = (256, 512, 1024) if opts.quick else (256, 1024, 4096)
    m = MEMORY_SHAPE
    probe = DecoderOnly(
        zoo_lm_config(LMShape("probe", m["n_layers"], m["n_heads"], m["d_model"], max(lengths), m["batch"], m["vocab"]))
    )
    series, method = _measured_series(lengths, opts.device)
    series["formula"] = {N: activation_memory(probe, m["batch"], N) / MB for N in lengths}
    headers, rows = _memory_table(series, lengths)
    return "\n".join(
        [
            "## memory: peak memory of one training forward + backward vs sequence length",
            "",
            f"Batch 1, d_model {m['d_model']}, {m['n_heads']} heads, {m['n_layers']} layers, vocab {m['vocab']}, fp32. "
            f"Measured: {method}, growth over the steady state in a fresh subprocess per length (median of 3 steps "
            "after a warm-up), MB = 2^20 bytes. Contenders: zoo (is_causal) = DecoderOnly, no N x N tensor; "
            "torch float mask = nn.TransformerEncoder given generate_square_subsequent_mask(N) with is_causal=False "
            "(the N x N mask is materialised; SDPA's fused kernel takes it, so no N x N scores); zoo "
            "return_attention = explicit softmax(QK^T)V storing N x N scores per head. Formula: activation_memory "
            "= l(34bNd + 5bN^2h) bytes for 16-bit activations (fp32 column = 2x): it assumes stored N x N scores "
            "and dropout masks, and ignores embeddings / logits / loss.",
            "",
            markdown_table(headers, rows),
        ]
    )


def _measured_series(lengths: Sequence[int], device: str) -> tuple[dict[str, dict[int, float]], str]:
    """Peak growth in MB per contender and length, one memory_child subprocess per length; returns
    ({kind: {N: MB}}, the measuring method of the last child)."""
    series: dict[str, dict[int, float]] = {kind: {} for kind in MEMORY_CONTENDERS}
    method = ""
    for N in lengths:
        progress(f"memory N={N}")
        res = run_memory_child(N, device, list(MEMORY_CONTENDERS))
        for kind, peak in res["peak_bytes"].items():
            series[kind][N] = peak / MB
        method = res["method"]
    return series, method


def _growth(values: dict[int, float], N: int, prev: int | None) -> str:
    """ "x1.23": memory at N over memory at prev; "—" for the first length or a zero before."""
    return f"x{values[N] / values[prev]:.2f}" if prev is not None and values[prev] > 0 else "—"


def _memory_table(series: dict[str, dict[int, float]], lengths: Sequence[int]) -> tuple[list[str], list[list]]:
    """(headers, rows) of the memory table: per length the MB of each contender and of the formula (16-bit
    and fp32), the length growth and each series' growth over the previous length."""
    rows = []
    for i, N in enumerate(lengths):
        prev = lengths[i - 1] if i else None
        rows.append(
            [N]
            + [fmt(series[k][N]) for k in MEMORY_CONTENDERS]
            + [fmt(series["formula"][N]), fmt(2 * series["formula"][N]), f"x{N / prev:g}" if prev else "—"]
            + [_growth(series[k], N, prev) for k in list(MEMORY_CONTENDERS) + ["formula"]]
        )
    labels = list(MEMORY_CONTENDERS.values())
    headers = (
        ["N (tokens)"]
        + [f"{label} MB" for label in labels]
        + ["formula 16-bit MB", "formula fp32 MB"]
        + ["length growth"]
        + [f"{label} growth" for label in labels + ["formula"]]
    )
    return headers, rows
