"""Benchmark: achieved FLOP/s of zoo's training step against this machine's own matmul limit.

The limit is measured in the same run: square (n x n) @ (n x n) matmuls, 2 n^3 FLOPs, at sizes large enough to
keep every core busy, in fp32 and in bf16; the fastest size is the limit. The step is zoo's decoder-only LM
training step at each shape as zoo trains it (forward to the final states, the chunked LM head + cross-entropy
of zoo.model.loss.chunked_ce, backward, AdamW), and its encoder-decoder step at seq2seq_step's shape, fp32 and
under bf16 autocast (Lightning's precision=bf16-mixed). Its FLOPs are zoo.model.cost's: 3 x the forward FLOPs
of the batch (backward = 2 x forward; Kaplan et al. 2020, sec. 2.1). The fraction = achieved FLOP/s / the
matmul FLOP/s of the same precision: how close the step comes to what the machine's GEMMs reach.
"""

import statistics
import time

import torch

from zoo.bench.contenders import training_steps
from zoo.bench.lm_contenders import lm_batch, zoo_lm_config
from zoo.bench.options import Options
from zoo.bench.report import fmt, markdown_table, progress
from zoo.bench.seq2seq_contenders import seq2seq_batch, seq2seq_contenders, zoo_seq2seq_config
from zoo.bench.shapes import SEQ2SEQ_SHAPES, default_lm_shapes
from zoo.bench.steps import autocast
from zoo.bench.timing import interleaved
from zoo.model import DecoderOnly, EncoderDecoder
from zoo.model.cost import forward_flops
from zoo.model.loss.chunked_ce import lm_head_cross_entropy
from zoo.training.optim import adamw

PRECISIONS = ("fp32", "bf16")


def matmul_flops_per_second(n: int, dtype: torch.dtype, reps: int, device: str = "cpu") -> float:
    """Median FLOP/s of an (n x n) @ (n x n) matmul (2 n^3 FLOPs) in `dtype` over `reps` runs after one warm-up."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    times = []
    for r in range(reps + 1):
        t = time.perf_counter()
        a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        if r:
            times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times)


def zoo_step(model: DecoderOnly, idx: torch.Tensor, targets: torch.Tensor, precision: str):
    """zoo's LM training step as a closure: features -> chunked head + CE -> backward -> AdamW -> zero_grad."""
    opt = adamw(model, lr=1e-4)

    def step():
        with autocast(idx.device.type, precision):
            hidden, _ = model.features(idx)
            loss = lm_head_cross_entropy(model.lm_head, hidden, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


ZOO_SEQ2SEQ = "zoo EncoderDecoder"


def peak_row(shape: str, flops: float, seconds: float, precision: str, limit: float) -> list[str]:
    """One row: shape | GFLOP a step | precision | step ms | achieved GFLOP/s | fraction of the matmul limit."""
    rate = flops / seconds
    return [
        shape,
        f"{flops / 1e9:.2f} GFLOP / step",
        precision,
        f"{seconds * 1e3:.1f}",
        fmt(rate / 1e9),
        f"{rate / limit:.3f}",
    ]


def seq2seq_shape(opts: Options):
    """The seq2seq_step shape of the mode: base (quick: base-quick)."""
    return SEQ2SEQ_SHAPES["base-quick" if opts.quick else "base"]


def bench_sizes(opts: Options) -> tuple:
    """The square matmul sizes whose fastest gives the limit (quick: two; full: three up to 3072)."""
    return (1024, 1536) if opts.quick else (1024, 2048, 3072)


def bench_peak(opts: Options) -> str:
    """Achieved training FLOP/s per shape and precision, and its fraction of the same-precision matmul FLOP/s."""
    sizes = bench_sizes(opts)
    progress(f"peak: matmuls of {sizes}")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}
    measured = {(p, n): matmul_flops_per_second(n, dtype[p], opts.reps, opts.device) for p in PRECISIONS for n in sizes}
    limit = {p: max(measured[p, n] for n in sizes) for p in PRECISIONS}  # the best size is the limit
    rows = [
        ["matmul", f"{n} x {n}", p, "", fmt(measured[p, n] / 1e9), f"{measured[p, n] / limit[p]:.3f}"]
        for p in PRECISIONS
        for n in sizes
    ]
    for s in default_lm_shapes(opts):
        progress(f"peak: {s.name}")
        (idx,), targets = lm_batch(s, opts.device)
        torch.manual_seed(0)
        model = DecoderOnly(zoo_lm_config(s)).to(opts.device).train()
        flops = 3 * forward_flops(model, s.batch, s.block)["total"]
        times = interleaved(
            {p: zoo_step(model, idx, targets, p) for p in PRECISIONS}, opts.reps, opts.warmup, opts.device
        )
        for p in PRECISIONS:
            rows.append(peak_row(s.name, flops, statistics.median(times[p]), p, limit[p]))
        del model, times
    s = seq2seq_shape(opts)
    progress(f"peak: seq2seq {s.name}")
    inputs, targets = seq2seq_batch(s, opts.device)
    zoo = [c for c in seq2seq_contenders(s, peers=False) if c.name == ZOO_SEQ2SEQ]
    with torch.device("meta"):  # counted from the config and layer count; no weights allocated
        flops = 3 * forward_flops(EncoderDecoder(zoo_seq2seq_config(s)), s.batch, s.tgt_len, s.src_len)["total"]
    steps = {p: training_steps(zoo, inputs, targets, p, opts.device)[0][ZOO_SEQ2SEQ] for p in PRECISIONS}
    times = interleaved(steps, opts.reps, opts.warmup, opts.device)
    rows += [peak_row(f"seq2seq {s.name}", flops, statistics.median(times[p]), p, limit[p]) for p in PRECISIONS]
    return "\n".join(
        [
            "## peak: achieved FLOP/s against the machine's matmul limit",
            "",
            f"The limit: per precision, the fastest of square n x n matmuls (2 n^3 FLOPs; n in {sizes}; median of "
            f"{opts.reps} each) in this run. "
            "The step: zoo's decoder-only LM training step (features, chunked LM head + cross-entropy, backward, "
            "AdamW) and its encoder-decoder step at the seq2seq_step shape (teacher forcing, the same loss), "
            "fp32 and bf16 autocast, interleaved; training FLOPs = 3 x zoo.model.cost forward FLOPs.",
            "",
            markdown_table(
                ["shape", "work", "precision", "step ms (median)", "GFLOP/s", "fraction of matmul"],
                rows,
                label_columns=3,
            ),
        ]
    )
