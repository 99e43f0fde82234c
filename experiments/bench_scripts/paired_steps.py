"""zoo against ONE peer, training step by training step (the session-4 paired runs in BENCHMARKS.md).

    python experiments/bench_scripts/paired_steps.py lm gpt2-small "HF GPT2LMHeadModel" --reps 7
    python experiments/bench_scripts/paired_steps.py lm gpt2-small "HF GPT2LMHeadModel" --peer-first
    python experiments/bench_scripts/paired_steps.py lm gpt2-small "HF GPT2LMHeadModel" --build-all --reps 9
    python experiments/bench_scripts/paired_steps.py seq2seq base "HF MarianMTModel" --reps 9

Builds zoo and the named peer (with --build-all: every contender of the benchmark, so memory holds what
`python -m zoo.bench` holds, while only the two are timed), zoo first unless --peer-first, and times their
training steps with zoo.bench's own pieces (training_steps, interleaved, wins). Prints the medians (ms), the
ratio peer / zoo (> 1 = zoo faster) and the repetitions zoo won.
"""

import argparse
import statistics

import torch

from zoo.bench.comparison import comparison
from zoo.bench.contenders import training_steps
from zoo.bench.report import wins
from zoo.bench.timing import interleaved


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["lm", "seq2seq"])
    p.add_argument("shape", help="a name from zoo.bench.shapes (LM_SHAPES or SEQ2SEQ_SHAPES)")
    p.add_argument("peer", help='a contender name, e.g. "HF GPT2LMHeadModel"')
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--peer-first", action="store_true", help="build the peer before zoo")
    p.add_argument("--build-all", action="store_true", help="build every contender, time only zoo and the peer")
    args = p.parse_args()
    try:
        s, contenders, inputs, targets = comparison(args.kind, args.shape)
    except ValueError as e:
        p.error(str(e))
    zoo = contenders[0].name
    if args.peer == zoo or args.peer not in [c.name for c in contenders]:
        p.error(f"unknown peer {args.peer!r}; choose from {[c.name for c in contenders[1:]]}")
    if not args.build_all:
        contenders = [c for c in contenders if c.name in (zoo, args.peer)]
    if args.peer_first:
        contenders = contenders[::-1]
    steps, _, _, missing = training_steps(contenders, inputs, targets, "fp32", "cpu")
    if args.peer in missing:
        p.error(f"{args.peer}: {missing[args.peer]}")
    times = interleaved({n: steps[n] for n in (zoo, args.peer)}, args.reps, args.warmup)
    z, q = statistics.median(times[zoo]), statistics.median(times[args.peer])
    print(
        f"{s.name}: {zoo} {1e3 * z:,.0f} ms, {args.peer} {1e3 * q:,.0f} ms, zoo/peer {q / z:.2f} "
        f"(zoo won {wins(times[zoo], times[args.peer])}); built {'all' if args.build_all else 'two'}, "
        f"{'peer' if args.peer_first else 'zoo'} first; torch threads {torch.get_num_threads()}"
    )


if __name__ == "__main__":
    main()
