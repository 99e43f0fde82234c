"""Benchmark 7: the output projection + cross-entropy alone, plain (full logits) vs fused and chunked
(zoo.model.loss.chunked_ce.linear_cross_entropy): time of forward + backward, and peak memory."""

import gc
import json
from collections.abc import Callable

import torch
import torch.nn.functional as F

from zoo.bench.memory import peak_growth, run_child
from zoo.bench.options import Options
from zoo.bench.report import fmt, markdown_table, progress, ratio, wins
from zoo.bench.steps import autocast, random_tokens
from zoo.bench.timing import interleaved, median
from zoo.model.loss.chunked_ce import auto_chunk_size, linear_cross_entropy

MB = 2**20
LOSS_KINDS = {"plain": "plain (full logits, F.cross_entropy)", "chunked": "fused chunked (linear_cross_entropy)"}
# (rows N = batch x block, d_model, vocab): GPT-2 small's head at batch 8 x 256 tokens; QUICK: a smaller N and d
FULL_SHAPE = (8 * 256, 768, 50257)
QUICK_SHAPE = (2 * 256, 256, 50257)


def loss_inputs(n: int, d: int, vocab: int, device: str = "cpu", seed: int = 0):
    """h (n, d) and the head weight W (vocab, d), both leaves requiring grad (W at GPT-2's init scale 0.02), and
    targets (n,) uniform in [0, vocab), all from fixed seeds."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g).to(device).requires_grad_()
    w = (0.02 * torch.randn(vocab, d, generator=g)).to(device).requires_grad_()
    return h, w, random_tokens((n,), vocab, device, seed=seed + 1)


def loss_step(
    kind: str,
    h: torch.Tensor,
    w: torch.Tensor,
    target: torch.Tensor,
    precision: str = "fp32",
    label_smoothing: float = 0.0,
) -> Callable[[], float]:
    """One forward + backward of the loss as a closure (returns the loss): plain = F.linear under autocast (if
    bf16), .float(), F.cross_entropy, as the tasks compute it; chunked = linear_cross_entropy with the automatic
    chunk. The gradients are set to None after each call (like zero_grad(set_to_none=True))."""
    if kind not in LOSS_KINDS:
        raise ValueError(f"loss contender {kind!r} is unknown; known: {', '.join(LOSS_KINDS)}")
    device = h.device.type

    def step():
        with autocast(device, precision):
            if kind == "plain":
                loss = F.cross_entropy(F.linear(h, w).float(), target, label_smoothing=label_smoothing)
            else:
                loss = linear_cross_entropy(h, w, target, label_smoothing=label_smoothing)
        loss.backward()
        h.grad = w.grad = None
        return loss.item()

    return step


def loss_peak(
    kind: str, n: int, d: int, vocab: int, device: str = "cpu", precision: str = "fp32", repeats: int = 2
) -> tuple[float, str]:
    """Peak memory growth (bytes) of one loss forward + backward (loss_step) over the steady state (inputs
    allocated, one warm-up step done): the median of `repeats` steps, measured by zoo.bench.memory.peak_growth.
    CPU: VmHWM after the step minus the RSS before it (VmHWM reset through /proc/self/clear_refs; run it in a
    process started with MALLOC_MMAP_THRESHOLD_ low, as run_loss_peak_child does, so that freed tensors leave
    the RSS); cuda: max_memory_allocated minus memory_allocated before. Returns (bytes, method)."""
    h, w, target = loss_inputs(n, d, vocab, device)
    step = loss_step(kind, h, w, target, precision)
    step()
    return peak_growth(step, device, repeats)


def loss_peak_child(
    kind: str, n: int, d: int, vocab: int, device: str = "cpu", precision: str = "fp32", threads: int = 0
) -> dict:
    """loss_peak inside a fresh process; prints and returns {"peak_bytes": bytes, "method": str}."""
    if threads:
        torch.set_num_threads(threads)
    peak, method = loss_peak(kind, n, d, vocab, device, precision)
    out = {"peak_bytes": peak, "method": method}
    print(json.dumps(out))
    return out


def run_loss_peak_child(
    kind: str, n: int, d: int, vocab: int, device: str = "cpu", precision: str = "fp32", threads: int = 0
) -> dict:
    """loss_peak_child in a fresh `python -c` subprocess (zoo.bench.memory.run_child: glibc told to return freed
    blocks of >= 64 KB to the OS at once, so the RSS follows the live tensors)."""
    code = (
        f"from zoo.bench.loss import loss_peak_child; "
        f"loss_peak_child({kind!r}, {n}, {d}, {vocab}, {device!r}, {precision!r}, {threads})"
    )
    return run_child(code, f"loss memory child ({kind})")


def _loss_peaks(opts: Options, n: int, d: int, vocab: int) -> tuple[dict[str, int], str]:
    """Peak memory growth in bytes of one step of each LOSS_KINDS contender, each in a fresh subprocess
    (run_loss_peak_child); returns ({kind: bytes}, the measuring method of the last child)."""
    peaks, method = {}, ""
    for kind in LOSS_KINDS:
        progress(f"loss N={n}: peak memory of {kind}")
        res = run_loss_peak_child(kind, n, d, vocab, opts.device, opts.precision, torch.get_num_threads())
        peaks[kind], method = res["peak_bytes"], res["method"]
    return peaks, method


def _loss_rows(losses: dict[str, float], times: dict[str, list[float]], peaks: dict[str, int]) -> list[list[str]]:
    """The table rows: per contender its loss, median and range of ms, speed vs plain (with the repetitions it
    won), peak MB and the peak ratio to plain. times: seconds per repetition; peaks: bytes."""
    base = median(times["plain"])
    rows = []
    for kind, label in LOSS_KINDS.items():
        ts = times[kind]
        rows.append(
            [
                label,
                f"{losses[kind]:.6f}",
                fmt(1e3 * median(ts)),
                f"{fmt(1e3 * min(ts))}–{fmt(1e3 * max(ts))}",
                "1.00 (ref)" if kind == "plain" else f"{ratio(base, median(ts))} ({wins(ts, times['plain'])})",
                fmt(peaks[kind] / MB),
                "1.00 (ref)" if kind == "plain" else ratio(peaks[kind], peaks["plain"]),
            ]
        )
    return rows


def bench_loss(opts: Options) -> str:
    """Output projection + cross-entropy alone, forward + backward (gradients wrt h and W), plain vs fused
    chunked: N = 8 x 256 rows, d_model 768, vocab 50,257 (GPT-2 small's head; QUICK: N 512, d 256).
    plain = F.cross_entropy(F.linear(h, W).float(), y): the full (N, V) logits, their log-softmax and
    gradient; chunked = zoo.model.loss.chunked_ce.linear_cross_entropy with the automatic chunk size. Under
    --precision bf16 both run their projections under bf16 autocast (chunked keeps its logits in fp32 before the
    softmax: on CUDA the GEMM's fp32 output, on the CPU an fp32 GEMM of the bf16 operands). Times: interleaved
    in this process (zoo.bench.timing.interleaved), median of --reps; chunked/plain = plain time / chunked time
    (> 1 = chunked faster), with the repetitions chunked won. Peak memory: growth of the peak over the steady
    state of one step, each contender in a fresh subprocess (loss_peak).
    """
    n, d, vocab = QUICK_SHAPE if opts.quick else FULL_SHAPE
    progress(f"loss N={n} d={d} V={vocab}: timing")
    h, w, target = loss_inputs(n, d, vocab, opts.device)
    steps: dict[str, Callable[[], float]] = {k: loss_step(k, h, w, target, opts.precision) for k in LOSS_KINDS}
    losses = {k: step() for k, step in steps.items()}
    times = interleaved(steps, opts.reps, opts.warmup, opts.device)
    del steps, h, w, target
    gc.collect()
    peaks, method = _loss_peaks(opts, n, d, vocab)
    rows = _loss_rows(losses, times, peaks)
    chunk = auto_chunk_size(n, vocab)
    return "\n".join(
        [
            "## loss: output projection + cross-entropy, plain vs fused chunked (forward + backward)",
            "",
            f"N = {n} rows (tokens), d_model {d}, vocab {vocab}, precision {opts.precision}; gradients wrt h and W. "
            f"plain = F.cross_entropy(F.linear(h, W).float(), y) (one (N, V) fp32 logits tensor = "
            f"{fmt(n * vocab * 4 / MB)} MB, plus its log-softmax and gradient); chunked = "
            f"zoo.model.loss.chunked_ce.linear_cross_entropy, automatic chunk = {chunk} rows "
            f"({fmt(chunk * vocab * 4 / MB)} MB of fp32 logits). speed = plain ms / chunked ms (> 1 = chunked "
            "faster; in parentheses the repetitions chunked won); peak = growth of the memory peak over the steady "
            "state in one step "
            f"({method}, a fresh subprocess per contender), MB = 2^20 bytes; peak ratio = contender / plain.",
            "",
            markdown_table(
                ["contender", "loss", "ms (median)", "ms (min–max)", "speed vs plain", "peak MB", "peak ratio"], rows
            ),
        ]
    )
