"""Benchmarks of zoo's models against their PyTorch and third-party peers.

    python -m zoo.bench [--quick] [--only NAME,...] [--device cpu|cuda] [--precision fp32|bf16]
                        [--shapes NAME,...] [--reps N] [--warmup N] [--threads N] [--compile] [--out FILE.md]

Benchmarks (names for --only; default: all, in this order; one module each in zoo/bench/):

  train_step    decoder-only LM training step (forward + cross-entropy + backward + AdamW step +
                zero_grad(set_to_none=True)): zoo DecoderOnly vs a GPT built from nn.TransformerEncoder,
                Hugging Face GPT2LMHeadModel and x-transformers TransformerWrapper(Decoder). tokens/s.
  seq2seq_step  encoder-decoder training step at the paper's base shape: zoo EncoderDecoder vs
                nn.Transformer with embeddings and a tied head, and Hugging Face MarianMTModel.
                target tokens/s.
  generate      greedy decoding: zoo with its KV cache vs Hugging Face generate (cache on) vs zoo
                re-running the prefix; whole generations and the time per new token at 64 and 512
                tokens of context.
  memory        peak memory (MB) of one forward + backward as the sequence grows: zoo DecoderOnly
                (is_causal, no N x N mask) vs nn.TransformerEncoder with an explicit float causal mask
                vs zoo with explicit attention (return_attention=True, N x N scores stored), next to the
                analytic activation_memory formula (zoo.model.cost).
  overhead      the nanoGPT CPU recipe for K steps: a plain PyTorch loop vs the same under a minimal
                Lightning Trainer (zoo.tasks.lm.LanguageModeling). Wall seconds and overhead %.
  precision     zoo's train_step in fp32 vs under bf16 autocast (tokens/s), and the recipe's training /
                validation loss after K steps in each.
  loss          the output projection + cross-entropy alone (forward + backward) at GPT-2 small's head
                (N = 8 x 256, d 768, V 50,257): full logits + F.cross_entropy vs the fused, chunked
                zoo.model.loss.chunked_ce.linear_cross_entropy; time ratio and peak memory of each.
  peak          achieved FLOP/s of zoo's training step against this machine's own measured matmul
                FLOP/s, fp32 and bf16.
  throughput    experiment=scaling's training loop per size and architecture: the study's own Trainer
                (loggers, callbacks) vs a plain PyTorch loop over the same model, loss, optimizer and
                schedule; tokens/s and their ratio. Then torch.compile (both scopes) at each size: its
                compile cost, speed-up and the steps after which it pays. CPU only.

Third-party peers come with the optional extra: pip install -e ".[bench]" (pinned transformers and
x-transformers). Without it their rows say "not installed" and everything else runs.

Method (every timing comparison): all contenders live in ONE process, are warmed up first, then run
repetition by repetition in an order that alternates and rotates (A B C, C B A, B C A, ...; see
zoo.bench.timing.order) so that machine-load drifts hit them alike; the table reports the median of the
repetitions (>= 5). Seeds are fixed (torch.manual_seed). Ratio columns are zoo / peer throughput, > 1 =
zoo faster, followed by the number of repetitions zoo won against that peer (its time below the peer's
in the same repetition), e.g. '1.03 (9/11)'. `memory` is the exception: each length runs in its own
fresh `python -c` subprocess (peak memory is per process).

--compile runs train_step and seq2seq_step with every contender compiled alike: torch.compile(model),
zoo's model included (its whole forward; the shared loss stays eager).

--quick uses smaller shapes and fewer steps (GPT-2 small is skipped on CPU): see QUICK in each benchmark's
docstring. It leaves out throughput (experiment=scaling's grid, many minutes) unless --only names it.
CPU timings need a quiet machine: with other processes running, torch's worker threads wait for each other
and steps get many times slower (the header shows the load average at the start and warns when it is
high). Every run prints one header line (torch and peer versions, CPU / GPU name, threads) and one Markdown
section per benchmark; --out also writes them to a file. On a GPU: --device cuda (timings synchronise the
GPU; memory uses torch.cuda.max_memory_allocated).
"""

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from zoo.bench.generate import bench_generate
from zoo.bench.loss import bench_loss
from zoo.bench.memory import bench_memory
from zoo.bench.options import Options
from zoo.bench.overhead import bench_overhead
from zoo.bench.peak import bench_peak
from zoo.bench.precision import bench_precision
from zoo.bench.report import header
from zoo.bench.seq2seq_step import bench_seq2seq_step
from zoo.bench.shapes import LM_SHAPES, default_lm_shapes
from zoo.bench.throughput import bench_throughput
from zoo.bench.train_step import bench_train_step

BENCHMARKS: dict[str, Callable[[Options], str]] = {
    "train_step": bench_train_step,
    "seq2seq_step": bench_seq2seq_step,
    "generate": bench_generate,
    "memory": bench_memory,
    "overhead": bench_overhead,
    "precision": bench_precision,
    "loss": bench_loss,
    "peak": bench_peak,
    "throughput": bench_throughput,
}
# left out of --quick unless --only names them: throughput trains experiment=scaling's grid (sizes x architectures
# x three loops, then torch.compile), many minutes even at --quick's two sizes
FULL_ONLY = ("throughput",)


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (this module's docstring is its help); argv None = sys.argv[1:]."""
    doc = __doc__
    p = argparse.ArgumentParser(
        prog="python -m zoo.bench",
        description=doc.split("\n\n")[0],
        epilog=doc.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small shapes, 5 repetitions; leaves out {', '.join(FULL_ONLY)} (give it with --only to run it)",
    )
    p.add_argument(
        "--only",
        default=None,
        help=f"comma-separated subset of: {', '.join(BENCHMARKS)} "
        f"(default: all; --quick: all but {', '.join(FULL_ONLY)})",
    )
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16"],
        help="train_step: run the forward passes under bf16 autocast; loss: the projections",
    )
    p.add_argument(
        "--shapes", default=None, help=f"train_step / precision shapes, comma-separated among: {', '.join(LM_SHAPES)}"
    )
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (>= 5; default 5 quick, 7 full)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up rounds (default 1 quick, 2 full)")
    p.add_argument(
        "--compile", action="store_true", help="train_step / seq2seq_step: every contender as torch.compile(model)"
    )
    p.add_argument(
        "--no-step-memory",
        action="store_true",
        help="train_step / seq2seq_step: skip each contender's peak memory (a fresh process per contender)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    p.add_argument("--out", default=None, help="also write the Markdown report to this file")
    return p.parse_args(argv)


def options(args) -> tuple[list[str], Options]:
    """The benchmark names (the plan, in order: --only's, else all, but --quick leaves out FULL_ONLY) and Options
    of parsed arguments. Raises ValueError naming a bad argument and its fix, before any benchmark runs."""
    if args.only is not None:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
    else:
        names = [n for n in BENCHMARKS if not (args.quick and n in FULL_ONLY)]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown or not names:
        what = f"unknown benchmark(s) {unknown}" if unknown else "no benchmark named"
        raise ValueError(f"--only {args.only!r}: {what}; choose among: {', '.join(BENCHMARKS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "--device cuda: CUDA is not available to this torch; use --device cpu, or install a CUDA build of "
            "torch on a machine with a GPU"
        )
    reps = args.reps if args.reps is not None else (5 if args.quick else 7)
    if reps < 5:
        raise ValueError(f"--reps {reps}: at least 5 repetitions are needed for a meaningful median")
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    if warmup < 0 or (args.compile and warmup < 1):
        raise ValueError(
            f"--warmup {warmup}: give a count >= 0 (>= 1 with --compile: the first step compiles and must not be timed)"
        )
    if args.threads is not None and args.threads < 1:
        raise ValueError(
            f"--threads {args.threads}: give a positive number of threads (or leave it out for torch's default)"
        )
    if args.out and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out}: is a folder; give a file path such as {Path(args.out) / 'bench.md'}")
    if args.out and not os.access(Path(args.out).resolve().parent, os.W_OK):
        raise ValueError(
            f"--out {args.out}: its folder does not exist or is not writable; create it or pick another path"
        )
    opts = Options(
        quick=args.quick,
        device=args.device,
        precision=args.precision,
        reps=reps,
        warmup=warmup,
        compile=args.compile,
        step_memory=not args.no_step_memory and not args.compile,
        shapes=[s.strip() for s in args.shapes.split(",")] if args.shapes else None,
    )
    if opts.shapes:
        default_lm_shapes(opts)  # ValueError for an unknown shape
    return names, opts


def main(argv=None) -> int:
    """Run the chosen benchmarks, print the Markdown report (and write --out). Returns the exit status:
    0, 1 when a benchmark failed (its section says why; the others still run), 2 for bad arguments."""
    args = parse_args(argv)
    try:
        names, opts = options(args)
    except ValueError as e:
        print(f"zoo.bench: error: {e}", file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    t_start, cpu_start = time.perf_counter(), time.process_time()
    torch.manual_seed(0)
    report = ["# zoo.bench", "", header(opts)]
    left_out = [n for n in BENCHMARKS if n not in names and args.only is None]
    if left_out:
        report += ["", f"--quick leaves out {', '.join(left_out)}: run it with --quick --only {','.join(left_out)}."]
    print("\n".join(report), flush=True)
    status = 0
    for name in names:
        t0, cpu0 = time.perf_counter(), time.process_time()
        try:
            section = BENCHMARKS[name](opts)
        except Exception as e:  # one broken benchmark must not hide the others' results
            status = 1
            traceback.print_exc()
            section = f"## {name}\n\n**failed**: {type(e).__name__}: {e}"
        section += (
            f"\n\n({name}: {time.perf_counter() - t0:.1f} s wall, {time.process_time() - cpu0:.1f} s CPU "
            "in this process)"
        )
        report += ["", section]
        print("\n" + section, flush=True)
    tail = (
        f"Total: {time.perf_counter() - t_start:.1f} s wall, {time.process_time() - cpu_start:.1f} s CPU in "
        "this process (memory's subprocesses not included)."
    )
    report += ["", tail]
    print("\n" + tail, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(report) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
