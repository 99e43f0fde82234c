"""The command line of zoo.bench: argument checks, the header, one section per benchmark."""

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
    """The command line (see zoo/bench/__init__.py); argv None = sys.argv[1:]."""
    doc = sys.modules["zoo.bench"].__doc__
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
