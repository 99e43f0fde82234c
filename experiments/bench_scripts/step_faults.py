"""Wall, user and system seconds and minor page faults of one contender's training step (session 5 in BENCHMARKS.md).

    python experiments/bench_scripts/step_faults.py lm gpt2-small "zoo DecoderOnly"
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=1073741824 \\
        python experiments/bench_scripts/step_faults.py lm gpt2-small "zoo DecoderOnly"

Builds the named contender of zoo.bench at the shape, runs --warmup untimed steps, then --steps timed ones,
each inside getrusage (this process: user and system CPU seconds, minor page faults), and prints the medians
and the peak resident memory. Run it with and without the allocator setting in separate processes: the
allocator is process-wide.
"""

import argparse
import resource
import statistics
import time

from zoo.bench.comparison import comparison
from zoo.bench.contenders import training_steps


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["lm", "seq2seq"])
    p.add_argument("shape", help="a name from zoo.bench.shapes (LM_SHAPES or SEQ2SEQ_SHAPES)")
    p.add_argument("contender", help='a contender name, e.g. "zoo DecoderOnly" or "HF GPT2LMHeadModel"')
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    try:
        s, contenders, inputs, targets = comparison(args.kind, args.shape)
    except ValueError as e:
        p.error(str(e))
    chosen = [c for c in contenders if c.name == args.contender]
    if not chosen:
        p.error(f"unknown contender {args.contender!r}; choose from {[c.name for c in contenders]}")
    steps, _, _, missing = training_steps(chosen, inputs, targets, "fp32", "cpu")
    if args.contender in missing:
        p.error(f"{args.contender}: {missing[args.contender]}")
    step = steps[args.contender]
    for _ in range(args.warmup):
        step()
    rows = []
    for _ in range(args.steps):
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        step()
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        rows.append((t1 - t0, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt))
    wall, user, system, faults = (statistics.median(c) for c in zip(*rows))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB -> GiB
    print(
        f"{s.name} {args.contender}: median of {args.steps} steps: wall {wall:.2f} s, user {user:.2f} s, "
        f"system {system:.2f} s, {faults:,.0f} minor page faults; peak RSS {peak:.2f} GiB"
    )


if __name__ == "__main__":
    main()
