"""Share of one contender's training step spent in matrix multiplies, by torch.profiler (BENCHMARKS.md).

    python experiments/bench_scripts/gemm_share.py seq2seq base "zoo EncoderDecoder" "HF MarianMTModel"
    python experiments/bench_scripts/gemm_share.py lm gpt2-small "zoo DecoderOnly" "HF GPT2LMHeadModel"

Builds each named contender of zoo.bench at the shape, runs --warmup untimed steps, then profiles --steps steps
(CPU self time of every aten op) and prints, per contender: the step's wall ms, the self time of the GEMM ops
(mm, addmm, bmm, baddbmm, matmul's kernels, linear's, the SDPA kernels) and of everything else, and the top
non-GEMM ops. Two implementations that run the same GEMMs differ only in the rest: if the rest is r of the step,
no change outside the GEMMs can make a step faster than 1 / (1 - r) of itself.
"""

import argparse
import time

from torch.profiler import ProfilerActivity, profile

from zoo.bench.comparison import comparison
from zoo.bench.contenders import training_steps

GEMM = (
    "aten::mm",
    "aten::addmm",
    "aten::addmm_",
    "aten::bmm",
    "aten::baddbmm",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_flash_attention_forward",
)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["lm", "seq2seq"])
    p.add_argument("shape", help="a name from zoo.bench.shapes (LM_SHAPES or SEQ2SEQ_SHAPES)")
    p.add_argument("contenders", nargs="+", help='contender names, e.g. "zoo EncoderDecoder" "HF MarianMTModel"')
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args()
    try:
        _, contenders, inputs, targets = comparison(args.kind, args.shape)
    except ValueError as e:
        p.error(str(e))
    for name in args.contenders:
        chosen = [c for c in contenders if c.name == name]
        if not chosen:
            p.error(f"unknown contender {name!r}; choose from {[c.name for c in contenders]}")
        steps, _, _, missing = training_steps(chosen, inputs, targets, "fp32", "cpu")
        if name in missing:
            p.error(f"{name}: {missing[name]}")
        step = steps[name]
        for _ in range(args.warmup):
            step()
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                step()
        wall = (time.perf_counter() - t0) / args.steps
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        gemm = sum(e.self_cpu_time_total for e in events if e.key in GEMM)
        rest = sorted((e for e in events if e.key not in GEMM), key=lambda e: -e.self_cpu_time_total)[:8]
        print(
            f"{name}: {1e3 * wall:.0f} ms a step (profiled); GEMM self time {100 * gemm / total:.1f}% of the "
            f"profiled CPU time, the rest {100 * (1 - gemm / total):.1f}%"
        )
        for e in rest:
            print(f"    {e.key}: {100 * e.self_cpu_time_total / total:.1f}%")
        del steps, step


if __name__ == "__main__":
    main()
