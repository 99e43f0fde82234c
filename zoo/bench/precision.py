"""Benchmark 6: fp32 vs bf16 autocast (Lightning's precision='bf16-mixed'), for speed and for loss."""

import gc
import statistics

import torch

from zoo.bench.lm_contenders import zoo_lm_config
from zoo.bench.options import Options
from zoo.bench.recipe import BATCH, BLOCK, plain_run, shakespeare, val_loss
from zoo.bench.report import fmt, markdown_table, progress, ratio
from zoo.bench.shapes import default_lm_shapes
from zoo.bench.steps import random_tokens, train_step
from zoo.bench.timing import interleaved, median
from zoo.model import DecoderOnly

LAST = 10  # training loss = mean of the last LAST steps


def bench_precision(opts: Options) -> str:
    """(a) speed: zoo DecoderOnly training step (as train_step) in fp32 vs with its forward under
    torch.autocast(bfloat16) (loss in fp32, weights and AdamW in fp32: what Lightning's precision=
    'bf16-mixed' does). tokens/s; bf16/fp32 > 1 = bf16 faster. Two copies of the same initial model,
    interleaved. Shapes as train_step (QUICK on CPU: nanogpt).
    (b) loss: the nanoGPT recipe (zoo.bench.recipe.plain_run) for K steps (QUICK: 60, full: 500) on
    TinyShakespeare, fp32 and bf16, from the same seed and the same batches; the training loss (mean of the
    last LAST steps) and the validation loss (fp32 evaluation of the first 8 fixed validation batches).
    The wall time of these single runs is shown too (one run each, not a median).
    Raises DataError (before any timing) when Tiny Shakespeare cannot be found (set ZOO_DATA_MIRROR).
    """
    prepared = shakespeare()
    rows = _speed_rows(opts)
    K = 60 if opts.quick else 500
    progress(f"precision loss: {K} recipe steps in fp32 and bf16")
    loss_rows, d_train, d_val = _loss_rows(prepared, K, opts.device)
    return "\n".join(
        [
            "## precision: zoo, fp32 vs bf16 autocast (precision=bf16-mixed)",
            "",
            "(a) train_step speed. Forward under torch.autocast(dtype=bfloat16), loss / weights / AdamW in fp32. "
            "bf16/fp32 = tokens/s ratio (> 1 = bf16 faster; on CPUs without AVX512-BF16 / AMX bf16 can be slower).",
            "",
            markdown_table(["shape", "fp32 ms", "bf16 ms", "fp32 tokens/s", "bf16 tokens/s", "bf16/fp32"], rows),
            "",
            f"(b) loss: the nanoGPT CPU recipe, {K} steps on TinyShakespeare (block {BLOCK}, batch {BATCH}) from the "
            f"same seed and batches. train loss = mean of the last {LAST} steps; val loss = fp32 evaluation on the "
            "first 8 fixed validation batches (nats/token). Wall s: one run each (not a median).",
            "",
            markdown_table(["precision", "step-0 loss", "train loss", "val loss", "wall s", "tokens/s"], loss_rows),
            "",
            f"bf16 - fp32: train loss {round(d_train, 4) + 0.0:+.4f}, val loss {round(d_val, 4) + 0.0:+.4f}.",
        ]
    )


def _speed_rows(opts: Options) -> list[list[str]]:
    """Table (a): per shape (default_lm_shapes), median ms per train_step and tokens/s in fp32 and bf16, and
    the bf16/fp32 tokens/s ratio; the two copies of one initial model are timed interleaved."""
    rows = []
    for s in default_lm_shapes(opts):
        progress(f"precision speed {s.name}")
        idx = random_tokens((s.batch, s.block), s.vocab, opts.device, seed=1)
        targets = random_tokens((s.batch, s.block), s.vocab, opts.device, seed=2)
        steps = {}
        for p in ("fp32", "bf16"):
            torch.manual_seed(0)
            model = DecoderOnly(zoo_lm_config(s)).to(opts.device).train()
            steps[f"zoo {p}"] = train_step(model, lambda m: m(idx), targets, p)
        times = interleaved(steps, opts.reps, opts.warmup, opts.device)
        tokens = s.batch * s.block
        tps = {k: tokens / median(v) for k, v in times.items()}
        rows.append(
            [
                s.name,
                fmt(1e3 * median(times["zoo fp32"])),
                fmt(1e3 * median(times["zoo bf16"])),
                fmt(tps["zoo fp32"]),
                fmt(tps["zoo bf16"]),
                ratio(tps["zoo bf16"], tps["zoo fp32"]),
            ]
        )
        del steps
        gc.collect()
    return rows


def _loss_rows(prepared, K: int, device) -> tuple[list[list[str]], float, float]:
    """Table (b): the nanoGPT recipe for K steps in fp32 and bf16 (plain_run); per precision the step-0 loss,
    train loss (mean of the last LAST steps), val loss (val_loss, nats/token), wall s and tokens/s. Returns
    (rows, bf16 - fp32 train loss, bf16 - fp32 val loss)."""
    loss_rows, final = [], {}
    for p in ("fp32", "bf16"):
        seconds, losses, model = plain_run(prepared, K, device, p, record_losses=True)
        train = statistics.fmean(losses[-LAST:])
        val = val_loss(model, prepared, device)
        final[p] = (train, val)
        loss_rows.append(
            [p, f"{losses[0]:.3f}", f"{train:.4f}", f"{val:.4f}", fmt(seconds), fmt(K * BATCH * BLOCK / seconds)]
        )
    d_train, d_val = (final["bf16"][i] - final["fp32"][i] for i in (0, 1))
    return loss_rows, d_train, d_val
