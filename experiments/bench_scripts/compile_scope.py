"""zoo's own training step (task.training_loss + backward + AdamW) eager and under both model.compile scopes
(the compile_scope measurements in BENCHMARKS.md).

    python experiments/bench_scripts/compile_scope.py gpt2-small --reps 7

Builds zoo.tasks.lm.LanguageModeling three times at a zoo.bench LM shape (the benchmark's GPT config, from
torch.manual_seed(0)): eager, model.compile=true with compile_scope=layers, and with compile_scope=model.
Prints each one's first step (which compiles, seconds), then the medians of the interleaved repetitions and
the repetitions each won against `layers`.
"""

import argparse
import dataclasses
import statistics
import time

import torch

from zoo.bench.lm_contenders import zoo_lm_config
from zoo.bench.report import wins
from zoo.bench.shapes import LM_SHAPES
from zoo.bench.steps import random_tokens
from zoo.bench.timing import interleaved
from zoo.tasks.lm import LanguageModeling
from zoo.training.optim import adamw


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shape", choices=list(LM_SHAPES))
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    s = LM_SHAPES[args.shape]
    cfg = dataclasses.asdict(zoo_lm_config(s))
    batch = (
        random_tokens((s.batch, s.block), s.vocab, "cpu", seed=1),
        random_tokens((s.batch, s.block), s.vocab, "cpu", seed=2),
    )
    steps = {}
    for name in ("eager", "layers", "model"):
        torch.manual_seed(0)
        model = {**cfg, "compile": name != "eager", "compile_scope": "layers" if name == "eager" else name}
        task = LanguageModeling("decoder_only", model, {"chars": "abc"}, {"lr": 1e-4}, {"warmup_steps": 1})
        task.configure_model()
        task.train()
        opt = adamw(task.model, lr=1e-4)

        def step(task=task, opt=opt):
            task.training_loss(batch).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        t0 = time.perf_counter()
        step()
        print(f"{name}: first step {time.perf_counter() - t0:.1f} s", flush=True)
        steps[name] = step
    times = interleaved(steps, args.reps, 1)
    for name, ts in times.items():
        print(
            f"{name:7s} median {1e3 * statistics.median(ts):,.0f} ms, min {1e3 * min(ts):,.0f} ms, "
            f"won against layers {wins(ts, times['layers'])}"
        )


if __name__ == "__main__":
    main()
